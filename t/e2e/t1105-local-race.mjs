// A file tool racing a symlink swap inside a local sandbox never touches
// the host: while a loop in the sandbox swaps a directory for a link to a
// host directory and back, writes, reads and listings through that name run
// (inside the jail, where the host directory does not exist), and the host
// directory stays as it was.  Then kill_sandbox removes the sandbox with
// such links left in it, deep down too, and removes none of what they point
// to (sandgate removes the tree from the host side, as root, without
// following a link).
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, tmpdir, trackSandbox, SPARE_DEFAULT } from '../lib/sg.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];

t.run(async () => {
  await preflight({ docker: false });
  const canary = path.join(tmpdir(), 'canary');
  fs.mkdirSync(canary, { mode: 0o777 });
  fs.chmodSync(canary, 0o777); // writable by anyone: only the jail keeps the sandbox out
  fs.writeFileSync(path.join(canary, 'keep.txt'), 'host file\n');
  const before = () => fs.readdirSync(canary).sort().join(',');
  const snapshot = before();

  const srv = await sdkClient(LOCAL, SPARE_DEFAULT);
  const sb = await srv.tool('create_sandbox', {});
  trackSandbox(sb.sandbox_id);
  const dir = sb.url.replace(/^file:\/\//, '');
  const swap = `end=$(($(date +%s) + 20)); while [ $(date +%s) -lt $end ]; do
    rm -rf d; mkdir d; rm -rf d; ln -sfn ${canary} d; done >/dev/null 2>&1 & echo $!`;
  const loop = (await srv.tool('run_command', { command: swap })).stdout.trim();
  t.like(loop, /^\d+$/, `the swap loop runs in the sandbox (pid ${loop})`);

  let ok = 0, refused = 0;
  const writes = [];
  for (let i = 0; i < 150; i++) {
    writes.push(srv.call('write_file', { path: `d/x${i}.txt`, content: `race ${i}\n` }));
    writes.push(srv.call('sandbox_file_write', { path: `d/y${i}.txt`, content: `race ${i}\n` }));
    if (i % 10 === 0) {
      writes.push(srv.call('read_file', { path: 'd/keep.txt' }));
      writes.push(srv.call('list_files', { path: 'd' }));
    }
    if (writes.length >= 16) {
      for (const r of await Promise.all(writes.splice(0))) r.isError ? refused++ : ok++;
    }
  }
  for (const r of await Promise.all(writes)) r.isError ? refused++ : ok++;
  t.diag(`${ok} calls went through (into the sandbox's own d), ${refused} were refused`);
  t.is(before(), snapshot, `the host directory the link names is untouched after ${ok + refused} racing file calls`);
  t.ok(!fs.readdirSync(dir).some((n) => n === 'keep.txt'), '... and its file never showed up in the sandbox either');
  await srv.tool('run_command', { command: `kill ${loop}; wait ${loop} 2>/dev/null; true` });

  // links to the host left behind, as the last thing the sandbox does
  await srv.tool('run_command', { command: `rm -rf d; ln -s ${canary} top; mkdir -p deep/er; ln -s ${canary} deep/er/link;
    ln -s ${canary}/keep.txt filelink; ln -s / rootlink; mkdir ro; touch ro/f; chmod 500 ro` });
  t.ok(fs.lstatSync(path.join(dir, 'top')).isSymbolicLink(), 'the sandbox left links to the host directory in its workspace');
  await srv.tool('kill_sandbox', {});
  t.ok(!fs.existsSync(dir), 'kill_sandbox removed the sandbox directory (an unwritable subdirectory too)');
  t.is(before(), snapshot, '... and nothing the links point to');
  t.is(fs.readFileSync(path.join(canary, 'keep.txt'), 'utf8'), 'host file\n', '... the host file is intact');
  t.ok(fs.existsSync('/usr/bin') && fs.existsSync('/etc/passwd'), '... and neither is / (rootlink)');
  await srv.close();
}, { timeout: 240 });
