// Docker sandboxes are contained: every container gets [docker] pids_limit,
// memory (swap included), cpus, no-new-privileges and a reduced capability
// set, a template may override them, create_sandbox reports them as the
// engine holds them; a fork bomb and a memory hog meet the limits while a
// second sandbox keeps answering; a bad value ends the start naming its key.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, runCli, docker, containerOf, resultData, tmpdir } from '../lib/sg.mjs';

const DROP = ['NET_RAW', 'MKNOD', 'SYS_CHROOT', 'AUDIT_WRITE', 'SETFCAP'];

async function hostConfig(sid) {
  const c = await containerOf(sid);
  return JSON.parse(await docker(['inspect', '--type', 'container', c.id]))[0].HostConfig;
}

t.run(async () => {
  await preflight();
  // the defaults
  const def = await sdkClient();
  const d = resultData(await def.call('create_sandbox', {}));
  let hc = await hostConfig(d.sandbox_id);
  t.is(hc.PidsLimit, 512, 'default PidsLimit 512');
  t.is(hc.Memory, 2 * 1024 ** 3, 'default Memory 2 GiB');
  t.is(hc.MemorySwap, 2 * 1024 ** 3, 'swap counts in the memory limit');
  t.is(hc.NanoCpus, 2e9, 'default 2 CPUs');
  t.deepEqual(hc.SecurityOpt, ['no-new-privileges:true'], 'no-new-privileges');
  t.deepEqual(hc.CapDrop, DROP, 'the default capabilities dropped');
  t.deepEqual(d.details, { isolation: 'container', pids_limit: 512, memory_bytes: 2 * 1024 ** 3, cpus: 2,
    no_new_privileges: true, cap_drop: DROP, cap_add: [] }, 'create_sandbox reports the limits');
  const caps = await def.tool('run_command', { command: 'grep -E "^(CapBnd|NoNewPrivs)" /proc/self/status', sandbox_id: d.sandbox_id });
  t.like(caps.stdout, /NoNewPrivs:\s+1\n/, 'the kernel holds no-new-privileges inside');
  // CAP_NET_RAW is bit 13, CAP_MKNOD 27: not in the bounding set
  const bnd = BigInt('0x' + /CapBnd:\s+([0-9a-f]+)/.exec(caps.stdout)[1]);
  t.is((bnd >> 13n) & 1n, 0n, 'NET_RAW not in the bounding set');
  t.is((bnd >> 27n) & 1n, 0n, 'MKNOD not in the bounding set');
  await def.close();

  // configured small, and a template overriding some
  const ini = path.join(tmpdir(), 'limits.ini');
  fs.writeFileSync(ini, '[docker]\npids_limit = 64\nmemory_mb = 96\ncpus = 1.5\ncap_drop = cap_net_raw, mknod\n' +
    'cap_add = SYS_PTRACE\ntemplate.big = sandgate/base:1\ntemplate.big.pids_limit = 100\n' +
    'template.big.memory_mb = 0\ntemplate.big.no_new_privileges = false\n');
  const srv = await sdkClient(['--config', ini]);
  const a = resultData(await srv.call('create_sandbox', {}));
  hc = await hostConfig(a.sandbox_id);
  t.is(hc.PidsLimit, 64, 'PidsLimit = [docker] pids_limit');
  t.is(hc.Memory, 96 * 1024 ** 2, 'Memory = [docker] memory_mb 96 in bytes');
  t.is(hc.NanoCpus, 1.5e9, 'NanoCpus = [docker] cpus 1.5');
  t.deepEqual(hc.CapDrop, ['NET_RAW', 'MKNOD'], 'cap_drop written as the engine spells it');
  t.deepEqual(hc.CapAdd, ['SYS_PTRACE'], 'cap_add');
  const big = resultData(await srv.call('create_sandbox', { template: 'big' }));
  const hb = await hostConfig(big.sandbox_id);
  t.is(hb.PidsLimit, 100, 'the template overrides pids_limit');
  t.is(hb.Memory, 0, 'and memory (0: none)');
  t.is(hb.NanoCpus, 1.5e9, 'and keeps the rest');
  t.ok(!(hb.SecurityOpt ?? []).includes('no-new-privileges:true'), 'no_new_privileges off for the template');

  // a fork bomb stops at the pids limit, a hog at the memory limit; the other sandbox answers
  const bomb = srv.tool('run_command', { sandbox_id: big.sandbox_id, timeout: 30, command:
    'python3 -c "import os\nr, w = os.pipe()\nn = 0\ntry:\n  while n < 5000:\n    if os.fork() == 0:\n' +
    '      os.close(w); os.read(r, 1); os._exit(0)\n    n += 1\nexcept OSError as e:\n  print(n < 100, e.errno)\n"; echo done' });
  const other = await srv.tool('run_command', { sandbox_id: a.sandbox_id, command: 'echo alive' });
  t.is(other.stdout, 'alive\n', 'the second sandbox answers beside the bomb');
  const b = await bomb;
  t.is(b.stdout, 'True 11\ndone\n', 'fork fails with EAGAIN (11) below 100 processes');
  const hog = await srv.tool('run_command', { sandbox_id: a.sandbox_id, timeout: 30,
    command: 'python3 -c "b = b\'x\' * (400 << 20); print(len(b))"' });
  t.is(hog.exit_code, 137, 'a 400 MB hog is killed (137) by the 96 MiB limit', { hog });
  t.is(hog.stdout, '', 'it never got its memory');
  const after = await srv.tool('run_command', { sandbox_id: a.sandbox_id, command: 'echo still' });
  t.is(after.stdout, 'still\n', 'the sandbox serves after the hog');
  await srv.close();

  // bad values: the core's check ends the start; the plugin's names the key when it is skipped
  let bad = await runCli(['--set', 'docker.memory_mb=lots', 'tools']);
  t.is(bad.code, 3, 'a bad memory_mb is a configuration error');
  t.like(bad.stderr, /\[docker\] memory_mb = 'lots' is not valid: expected a whole number/, 'naming memory_mb');
  bad = await runCli(['--set', 'docker.cpus=1.2345', 'tools']);
  t.like(bad.stderr, /docker\.so: plugin 'docker': init failed: \[docker\] cpus = '1\.2345' is not valid: expected a number of CPUs such as 2 or 1\.5/,
    'a bad cpus names the key');
  fs.writeFileSync(ini, '[docker]\ntemplate.x.cap_drop = NET-RAW\n');
  bad = await runCli(['--config', ini, 'tools']);
  t.like(bad.stderr, /\[docker\] template\.x\.cap_drop = 'NET-RAW' is not valid: expected capability names/,
    'a bad template override names it');
}, { timeout: 60 });
