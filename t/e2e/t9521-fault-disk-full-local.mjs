// Fault: the disk fills up during a write on local (the bwrap jail,
// doc/faults.md).  `[local] root` is a small tmpfs (256 KiB), so the
// sandbox's directory, the jail's /workspace, is on it; the runner in the
// jail writes there.  write_file and sandbox_file_write of 1 MiB each fail
// naming the cause (No space left on device), the file keeps its old
// content, no temporary file is left, and the space is given back: the next
// small write works.  Needs root (mount), as CI runs.  A few seconds: one
// server, one jail.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, tmpdir } from '../lib/sg.mjs';
import { tempNames } from '../lib/faults.mjs';

const SIZE = '256k';
const BIG = 'F'.repeat(1 << 20);
const NO_DOCKER = { SANDGATE_DOCKER_HOST: 'unix:///nonexistent/docker.sock', DOCKER_HOST: undefined };

t.run(async () => {
  await preflight({ docker: false });
  if (process.getuid() !== 0) await t.bailOut('t9521 mounts a tmpfs: run it as root (CI does)');
  const root = path.join(tmpdir(), 'local-root');
  fs.mkdirSync(root, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE},mode=0700`, 'sg-t9521', root]);
  t.onCleanup(() => { try { execFileSync('umount', ['-l', root], { stdio: 'ignore' }); } catch { /* gone */ } });

  const srv = await sdkClient(['--set', 'sandbox.default_backend=local', '--set', `local.root=${root}`], NO_DOCKER);
  const sb = await srv.tool('create_sandbox', {});
  const dirs = fs.readdirSync(root).filter((n) => /^sg-[0-9a-f]{12}$/.test(n));
  t.is(dirs.length, 1, `the sandbox's directory is on the tmpfs ([local] root = ${root})`, { ls: fs.readdirSync(root), sb });
  const dir = path.join(root, dirs[0]);

  const tools = [
    ['write_file', (p, content) => srv.call('write_file', { path: p, content })],
    ['sandbox_file_write', (p, content) => srv.call('sandbox_file_write', { path: `/workspace/${p}`, content })],
  ];
  for (const [label, write] of tools) {
    const name = `${label}.txt`;
    const ok = await write(name, 'old content');
    t.ok(!ok.isError, `${label}: a small write fits`, { text: errorText(ok) });
    const full = await write(name, BIG);
    t.ok(full.isError, `${label}: a write of 1 MiB into ${SIZE} fails`);
    t.like(errorText(full), /No space left on device/, `${label}: ... naming the cause`, { text: errorText(full) });
    t.is(fs.readFileSync(path.join(dir, name), 'utf8'), 'old content', `${label}: the file keeps its old content`);
    t.deepEqual(tempNames(fs.readdirSync(dir)), [], `${label}: no temporary file is left`, { ls: fs.readdirSync(dir) });
    const again = await write(name, 'new content');
    t.ok(!again.isError, `${label}: the space is given back: the next small write works`, { text: errorText(again) });
    t.is(fs.readFileSync(path.join(dir, name), 'utf8'), 'new content', `${label}: ... and is whole`);
  }
  const r = await srv.tool('run_command', { command: 'echo still here' });
  t.is(r.stdout, 'still here\n', 'the sandbox still runs commands');
  await srv.close();
  t.deepEqual(fs.readdirSync(root).filter((n) => n.startsWith('sg-')), [], 'the session end removed the sandbox directory');
}, { timeout: 60 });
