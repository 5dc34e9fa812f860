// A stdio session of sandgate under valgrind (make check-valgrind, not make
// check: it takes a while): initialize, the tool list, a docker sandbox with
// run_command, write_file, read_file, list_files and a timeout, a call
// cancelled mid-run, kill_sandbox, then stdin EOF.  valgrind's
// --error-exitcode turns any memory error and any definite or indirect leak
// into exit status 99, which the close asserts is 0.  A sanitizer build
// checks itself and valgrind cannot run it: Bail out! with the fix.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { t, preflight, rawServer, tmpdir } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const real = process.env.SANDGATE_BIN;
  if (fs.readFileSync(real).includes('__asan_init')) await t.bailOut('a sanitizer build: valgrind cannot run it; run make check-valgrind in a build configured without --enable-sanitizer');
  if (spawnSync('valgrind', ['--version']).status !== 0) await t.bailOut('valgrind is not installed: apt-get install valgrind (etc/setup.sh installs it)');
  const wrap = path.join(tmpdir(), 'vg-sandgate');
  fs.writeFileSync(wrap, '#!/bin/sh\nexec valgrind -q --error-exitcode=99 --leak-check=full '
    + '--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect '
    + `--num-callers=30 '${real}' "$@"\n`, { mode: 0o755 });
  process.env.SANDGATE_BIN = wrap;
  const srv = await rawServer(['--set', 'sandbox.default_backend=docker'], {}, { name: 'sandgate under valgrind' });
  const init = await srv.initialize();
  t.is(init.serverInfo?.name, 'sandgate', 'initialize answers');
  // read once it answered: the wrapper has exec'd valgrind by then
  const exe = fs.readlinkSync(`/proc/${srv.pid}/exe`);
  t.like(exe, /memcheck/, `sandgate runs under valgrind's memcheck (${exe})`);
  const list = await srv.request('tools/list', {});
  t.ok(list.result?.tools?.some((x) => x.name === 'run_command'), 'tools/list has run_command');
  const sb = await srv.tool('create_sandbox', {}, { timeout: 120000 });
  const sid = sb.sandbox_id;
  t.is((await srv.tool('run_command', { command: 'echo valgrind' }, { timeout: 120000 })).stdout, 'valgrind\n', 'run_command');
  await srv.tool('write_file', { path: 'a.txt', content: 'memcheck\n' }, { timeout: 120000 });
  t.is((await srv.tool('read_file', { path: 'a.txt' }, { timeout: 120000 })).content, 'memcheck\n', 'write_file then read_file');
  const ls = await srv.tool('list_files', { path: '.' }, { timeout: 120000 });
  t.ok(ls.files?.some((f) => f.name === 'a.txt'), 'list_files', { ls });
  const slow = await srv.callTool('run_command', { command: 'sleep 30', timeout: 1 }, { timeout: 120000 });
  t.ok(slow.isError || slow.structuredContent?.timed_out === true, 'a command past its timeout ends', { slow });
  const id = srv.sendRequest('tools/call', { name: 'run_command', arguments: { command: 'sleep 30' } });
  await new Promise((r) => setTimeout(r, 2000));
  srv.notify('notifications/cancelled', { requestId: id, reason: 'test' });
  await srv.tool('kill_sandbox', { sandbox_id: sid }, { timeout: 120000 });
  t.pass(`kill_sandbox ${sid}`);
  const st = await srv.close(120000);
  t.ok(st.code === 0, 'stdin EOF: exit status 0 (valgrind: no error, no definite or indirect leak)', st);
}, { timeout: 600 });
