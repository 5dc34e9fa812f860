// Limits and process tracking of local sandboxes with sandgate running as
// root (as CI and the Quick start do; the kernel never limits root's process
// count, so the jail must run as another user): a fork bomb and a memory hog
// are stopped by the limits, /tmp and /dev/shm hold their sizes, while a second sandbox keeps answering and the
// server keeps serving; a timed-out command and a `sleep &` leave no process
// on the host after kill_sandbox, and none after kill -9 of sandgate.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, errorText, sleep, trackSandbox, waitFor, SPARE_DEFAULT } from '../lib/sg.mjs';

const execFileP = promisify(execFile);
const LIMITS = ['--set', 'sandbox.default_backend=local', '--set', 'local.pids=64', '--set', 'local.memory_mb=256',
  '--set', 'local.tmp_mb=8', '--set', 'local.shm_mb=4'];
const MARK = `${process.pid}`; // in sleep's argument: processes this test started

/** Host processes whose command line holds text. */
async function hostProcs(text) {
  const { stdout } = await execFileP('ps', ['-eo', 'pid=,user=,args=']);
  return stdout.split('\n').filter((l) => l.includes(text) && !l.includes('ps -eo')).map((l) => l.trim());
}

/** Host pids in the cgroups of sandbox sid (its jails' cgroups are named after it). */
function cgroupProcs(sid) {
  const pids = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (fs.readFileSync(`/proc/${p}/cgroup`, 'utf8').includes(`/sandgate-local/${sid}.`)) pids.push(Number(p));
    } catch { /* gone */ }
  }
  return pids;
}

t.run(async () => {
  await preflight({ docker: false });
  if (process.getuid() !== 0) await t.bailOut('these tests check the limits of a sandgate running as root: run them as root, as CI does');
  const srv = await sdkClient(LIMITS, SPARE_DEFAULT);
  const a = await srv.tool('create_sandbox', {});
  const b = await srv.tool('create_sandbox', {});
  trackSandbox(a.sandbox_id);
  trackSandbox(b.sandbox_id);
  const lim = a.details?.limits ?? {};
  t.hasFields(lim, { pids: 64, memory_mb: 256 }, 'the limits are in create_sandbox\'s details', a.details);
  t.ok(lim.cgroup === 'v1' || lim.cgroup === 'v2', `root may make cgroups here (${lim.cgroup})`, a.details);
  const user = (await srv.tool('run_command', { command: 'id -un; id -u', sandbox_id: a.sandbox_id })).stdout.split('\n');
  t.isnt(user[1], '0', `the jail runs as an unprivileged user (${user[0]}, uid ${user[1]})`);
  t.cmp(cgroupProcs(a.sandbox_id).length, '>=', 2, 'the jail\'s processes are in its cgroups (bwrap, the runner: the namespace\'s init)');

  // ---- /tmp and /dev/shm are tmpfs (memory) of the sizes set
  t.hasFields(lim, { tmp_mb: 8, shm_mb: 4 }, 'their sizes are in the details', a.details);
  const fill = await srv.tool('run_command', { sandbox_id: a.sandbox_id, command:
    'for d in /tmp /dev/shm; do dd if=/dev/zero of=$d/fill bs=1M count=20 2>&1 | grep -o "No space left on device"; ' +
    'echo "$d $(du -m $d/fill | cut -f1)"; rm -f $d/fill; done' });
  t.is(fill.stdout, 'No space left on device\n/tmp 8\nNo space left on device\n/dev/shm 4\n',
    '20 MiB fill /tmp at 8 MiB and /dev/shm at 4', fill);

  // ---- a fork bomb in A; B answers meanwhile; the server serves
  const bomb = srv.call('run_command', { command: 'f() { f | f & }; f; sleep 6; echo survived', sandbox_id: a.sandbox_id, timeout: 10 });
  await sleep(2500);
  const t0 = Date.now();
  const alive = await srv.tool('run_command', { command: 'echo alive', sandbox_id: b.sandbox_id });
  t.is(alive.stdout, 'alive\n', `B answers while A's fork bomb runs (${Date.now() - t0} ms)`);
  const inA = cgroupProcs(a.sandbox_id).length;
  t.cmp(inA, '<=', 64 + 3, `A holds at most pids.max processes (${inA})`);
  const st = await srv.call('sandbox_env', { action: 'status' });
  t.ok(!st.isError && st.structuredContent, 'the server keeps serving', { text: errorText(st) });
  const br = await bomb;
  t.ok(!br.isError, 'the bomb\'s call ends (its limit and its timeout hold)', { text: errorText(br) });
  await srv.tool('kill_sandbox', { sandbox_id: a.sandbox_id });
  t.ok(await waitFor(async () => cgroupProcs(a.sandbox_id).length === 0, 5000), 'after kill_sandbox no process of the bomb is left');
  t.is((await srv.tool('run_command', { command: 'echo still', sandbox_id: b.sandbox_id })).stdout, 'still\n', 'B is untouched');

  // ---- a memory hog in C; B answers
  const c = await srv.tool('create_sandbox', {});
  trackSandbox(c.sandbox_id);
  const hog = await srv.tool('run_command', {
    command: 'python3 -c "a = []\nwhile True: a.append(bytearray(1 << 20))"', sandbox_id: c.sandbox_id, timeout: 60,
  });
  t.ok(hog.exit_code === 137 || /MemoryError/.test(hog.stderr), `the memory hog is stopped (exit ${hog.exit_code}, signal ${hog.signal ?? 0})`, hog);
  t.is(hog.timed_out, false, '... by the memory limit, not the timeout');
  t.is((await srv.tool('run_command', { command: 'echo fine', sandbox_id: c.sandbox_id })).stdout, 'fine\n', 'the sandbox itself goes on');
  t.is((await srv.tool('run_command', { command: 'echo fine', sandbox_id: b.sandbox_id })).stdout, 'fine\n', 'and so does B');

  // ---- a timed-out command and a background job: nothing left after kill_sandbox
  const to = await srv.tool('run_command', { command: `sleep 301.${MARK}`, sandbox_id: c.sandbox_id, timeout: 1 });
  t.is(to.timed_out, true, 'a command times out');
  await srv.tool('run_command', { command: `sleep 300.${MARK} & echo started`, sandbox_id: c.sandbox_id });
  await srv.tool('sandbox_shell_exec', { command: `sleep 303.${MARK} &`, machine: c.sandbox_id });
  t.cmp((await hostProcs(`300.${MARK}`)).length, '>=', 1, 'a background job runs on the host (in the jail)');
  await srv.tool('kill_sandbox', { sandbox_id: c.sandbox_id });
  t.ok(await waitFor(async () => (await hostProcs(`.${MARK}`)).length === 0, 5000),
    'after kill_sandbox no process of the sandbox is left: the timed-out one, the background job, the shell\'s', await hostProcs(`.${MARK}`));

  // ---- kill -9 of sandgate: nothing left either
  const d = await srv.tool('create_sandbox', {});
  trackSandbox(d.sandbox_id);
  await srv.tool('run_command', { command: `sleep 302.${MARK} & echo started`, sandbox_id: d.sandbox_id });
  const running = srv.call('run_command', { command: `sleep 304.${MARK}`, sandbox_id: d.sandbox_id, timeout: 120 });
  await srv.tool('sandbox_shell_exec', { command: `sleep 305.${MARK} &`, machine: d.sandbox_id });
  t.cmp((await hostProcs(`.${MARK}`)).length, '>=', 3, 'processes of D run (a background job, a command, a shell\'s job)');
  const jail = cgroupProcs(d.sandbox_id);
  srv.proc.killNow('SIGKILL');
  await running.catch(() => {});
  t.ok(await waitFor(async () => (await hostProcs(`.${MARK}`)).length === 0, 5000),
    'after kill -9 of sandgate no process of its sandboxes is left', await hostProcs(`.${MARK}`));
  t.ok(await waitFor(async () => jail.every((p) => !fs.existsSync(`/proc/${p}`)), 5000), '... not even its jail (bwrap, the runner)');
}, { timeout: 240 });
