// The first call without sandbox_id lazily creates the default sandbox
// (sandbox_created: true); later calls without sandbox_id reuse it.
import { t, preflight, sdkClient, containersOfServer } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  t.is((await containersOfServer(srv.pid)).length, 0, 'a fresh session has no sandbox before its first call');
  const first = await srv.tool('run_command', { command: 'echo one' });
  t.is(first.sandbox_created, true, 'the first call without sandbox_id reports sandbox_created: true');
  t.like(first.sandbox_id, /\S/, 'it names the new sandbox');
  t.is(first.stdout, 'one\n', 'and runs the command there');
  let mine = await containersOfServer(srv.pid);
  t.is(mine.length, 1, 'exactly one container exists for this server');

  const calls = [
    ['run_command', { command: 'echo two' }],
    ['write_file', { path: '/workspace/f', content: 'x' }],
    ['read_file', { path: '/workspace/f' }],
    ['list_files', {}],
    ['run_code', { code: 'print(1)' }],
  ];
  for (const [tool, args] of calls) {
    const r = await srv.tool(tool, args);
    t.is(r.sandbox_id, first.sandbox_id, `${tool} without sandbox_id uses the default sandbox`);
    t.ok(r.sandbox_created !== true, `${tool}: no sandbox_created on reuse`);
  }
  mine = await containersOfServer(srv.pid);
  t.is(mine.length, 1, 'still exactly one container after six calls');

  // lazy creation also happens for a tool whose first call is read-only
  const s2 = await sdkClient();
  const l = await s2.tool('list_files', {});
  t.is(l.sandbox_created, true, 'list_files as the first call lazily creates the default too');
  t.is(l.path, '/workspace', '... and lists the workspace');
  await s2.close();
  await srv.close();
}, { timeout: 120 });
