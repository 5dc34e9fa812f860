// Fault: the disk fills up in the sandbox during a write (doc/faults.md).
// A small tmpfs (256 KiB) is where the file lives:
//   docker: a named machine whose workspace, work_home/<name> on this host,
//           is the tmpfs before docker_run binds it at /workspace: the
//           runner writes into it, and with [docker] runner = false the
//           engine's archive upload does (it sees binds, where a mount made
//           inside the container would be hidden from it);
//   ssh:    a folder of the sandbox's workspace on the loopback host, with
//           the runner and with plain exec (SFTP).
// Each time a write of 1 MiB fails naming the cause (No space left on
// device), the file keeps its old content, no temporary file is left, and
// the space it took is given back: the next small write works.  Needs root
// (mount), as CI runs.  About 70 s on 2 loaded CPUs: four servers, two
// named machines (docker_run) and an sshd; each part is a few seconds.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, resultData, tmpdir, docker } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat } from '../lib/docker.mjs';
import { backendFixture, tempNames } from '../lib/faults.mjs';

const SIZE = '256k';
const BIG = 'F'.repeat(1 << 20);
const mounted = [];

function tmpfs(dir) {
  fs.mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE},mode=0777`, 'sg-t9520', dir]);
  mounted.push(dir);
}

function unmount(dir) {
  try { execFileSync('umount', ['-l', dir], { stdio: 'ignore' }); } catch { /* already gone */ }
  const i = mounted.indexOf(dir);
  if (i >= 0) mounted.splice(i, 1);
}

/** The checks after a write that did not fit: write(p, content) is the tool call, dir the host folder. */
async function fullDisk(label, write, dir, name) {
  const ok = await write(name, 'old content');
  t.ok(!ok.isError, `${label}: a small write fits`, { text: errorText(ok) });
  const full = await write(name, BIG);
  t.ok(full.isError, `${label}: a write of 1 MiB into ${SIZE} fails`);
  t.like(errorText(full), /no space left on device/i, `${label}: ... naming the cause`, { text: errorText(full) });
  t.is(fs.readFileSync(path.join(dir, name), 'utf8'), 'old content', `${label}: the file keeps its old content`);
  t.deepEqual(tempNames(fs.readdirSync(dir)), [], `${label}: no temporary file is left`, { ls: fs.readdirSync(dir) });
  const again = await write(name, 'new content');
  t.ok(!again.isError, `${label}: the space is given back: the next small write works`, { text: errorText(again) });
  t.is(fs.readFileSync(path.join(dir, name), 'utf8'), 'new content', `${label}: ... and is whole`);
}

t.run(async () => {
  await preflight();
  if (process.getuid() !== 0) await t.bailOut('t9520 mounts a tmpfs: run it as root (CI does)');
  t.onCleanup(() => { for (const d of [...mounted]) unmount(d); });

  // ---- docker: with the runner, then with the engine's archive upload
  const work = path.join(tmpdir(), 'work');
  const names = [];
  t.onCleanup(async () => {
    for (const n of names) await docker(['rm', '-f', `sandgate-${n}`]).catch(() => {});
  });
  for (const [mode, runner] of [['docker runner', 'true'], ['docker runner=false', 'false']]) {
    const name = uniq(`t9520${runner === 'true' ? 'r' : 'a'}`);
    names.push(name);
    tmpfs(path.join(work, name));
    const srv = await sdkClient(dockerArgs({ 'docker.runner': runner }), {}, { name: mode });
    const run = await envFlat(srv, 'docker_run', { name });
    t.is(resultData(run).status, 'running', `${mode}: docker_run ${name} on a tmpfs workspace`, { text: errorText(run) });
    const write = (p, content) => srv.call('sandbox_file_write', { machine: name, path: `/workspace/${p}`, content });
    await fullDisk(mode, write, path.join(work, name), 'keep.txt');
    await srv.close();
    await docker(['rm', '-f', `sandgate-${name}`]).catch(() => {});
    unmount(path.join(work, name));
  }

  // ---- ssh: with the runner, then with SFTP
  const fx = await backendFixture('ssh');
  for (const [mode, runner] of [['ssh runner', 'true'], ['ssh plain exec', 'false']]) {
    const srv = await sdkClient(fx.args(['--set', `ssh.runner=${runner}`]), fx.env(), { name: mode });
    const sb = await srv.tool('create_sandbox', {});
    const dir = path.join(sb.workspace, 'full');
    tmpfs(dir);
    const write = (p, content) => srv.call('write_file', { path: `full/${p}`, content });
    await fullDisk(mode, write, dir, 'keep.txt');
    unmount(dir);
    await srv.close();
    await fx.noMachineOf(srv.pid, `${mode}: session end`);
  }
}, { timeout: 120 });
