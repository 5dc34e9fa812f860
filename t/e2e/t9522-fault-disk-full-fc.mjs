// Fault: the disk fills up in an FC sandbox during a write (doc/faults.md).
// A small tmpfs (256 KiB) is mounted on a folder of the emulator's sandbox
// (its file area on this host).  The emulator answers a full disk as envd
// does: 507 with {code, message} (ref. 4.2), and leaves what it wrote
// before the error, as envd does.  fc.so uploads to a temporary name beside
// the file and moves it over the file: the write of 1 MiB fails naming the
// status and the cause, the file keeps its old content, the temporary file
// (partly written) is removed, and the space is given back: the next small
// write works.  Needs root (mount), as CI runs.  A few seconds.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { backendFixture } from '../lib/faults.mjs';

const SIZE = '256k';
const BIG = 'F'.repeat(1 << 20);

t.run(async () => {
  await preflight({ docker: false });
  if (process.getuid() !== 0) await t.bailOut('t9522 mounts a tmpfs: run it as root (CI does)');
  const fx = await backendFixture('fc');
  const srv = await sdkClient(fx.args(), fx.env());
  const sb = await srv.tool('create_sandbox', {});
  const sid = sb.sandbox_id;
  const made = await srv.call('write_file', { path: 'full/keep.txt', content: 'made' });
  t.ok(!made.isError, 'a first write makes the folder the tmpfs goes on', { text: errorText(made) });
  const root = (await fx.emu.state()).sandboxes.find((x) => x.id === sid).root;
  const dir = path.join(root, 'home/user/full');
  fs.rmSync(path.join(dir, 'keep.txt'), { force: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE},mode=0777`, 'sg-t9522', dir]);
  let mounted = true;
  const unmount = () => { if (mounted) { try { execFileSync('umount', ['-l', dir], { stdio: 'ignore' }); } catch { /* gone */ } mounted = false; } };
  t.onCleanup(unmount);

  const write = (content) => srv.call('write_file', { path: 'full/keep.txt', content });
  const ok = await write('old content');
  t.ok(!ok.isError, 'a small write fits', { text: errorText(ok) });
  const uploads = (await fx.emu.state()).counts['files.write'] ?? 0;
  const full = await write(BIG);
  t.ok(full.isError, `a write of 1 MiB into ${SIZE} fails`);
  t.like(errorText(full), /HTTP 507/, '... naming the status', { text: errorText(full) });
  t.like(errorText(full), /no space left on device/, '... and the cause', { text: errorText(full) });
  t.is((await fx.emu.state()).counts['files.write'] - uploads, 1, 'the upload was sent once (never re-sent)');
  t.is(fs.readFileSync(path.join(dir, 'keep.txt'), 'utf8'), 'old content', 'the file keeps its old content');
  await fx.noTemp(sid, '/home/user/full', 'after the full disk');
  const again = await write('new content');
  t.ok(!again.isError, 'the space is given back: the next small write works', { text: errorText(again) });
  t.is(fs.readFileSync(path.join(dir, 'keep.txt'), 'utf8'), 'new content', '... and is whole');
  const r = await srv.tool('run_command', { command: 'echo still here' });
  t.is(r.stdout, 'still here\n', 'the sandbox still runs commands');
  unmount();
  await srv.close();
  await fx.noMachineOf(srv.pid, 'session end');
}, { timeout: 60 });
