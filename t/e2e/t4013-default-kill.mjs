// kill_sandbox without sandbox_id kills the default, and is an isError when
// there is none; the next call without sandbox_id makes a new default.
import { t, preflight, sdkClient, containerOf, containersOfServer, errorText, waitFor } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const none = await srv.call('kill_sandbox', {});
  t.ok(none.isError === true, 'kill_sandbox without id in a fresh session: isError', { result: none });
  t.like(errorText(none), /default|sandbox_id/, 'the error explains there is no default sandbox', { text: errorText(none) });
  t.is((await containersOfServer(srv.pid)).length, 0, 'kill_sandbox without a default did not create a sandbox');

  const a = await srv.tool('run_command', { command: 'true' });
  const k = await srv.call('kill_sandbox', {});
  t.ok(!k.isError, 'kill_sandbox without id kills the default', { result: k });
  t.hasFields(k.structuredContent, { success: true, sandbox_id: a.sandbox_id }, 'result names the default sandbox');
  t.ok(await waitFor(async () => !(await containerOf(a.sandbox_id)), 10000), 'its container is removed');

  const again = await srv.call('kill_sandbox', {});
  t.ok(again.isError === true, 'a second kill_sandbox without id: isError (no default any more)');

  const b = await srv.tool('run_command', { command: 'true' });
  t.isnt(b.sandbox_id, a.sandbox_id, 'the next call without sandbox_id makes a new default');
  t.is(b.sandbox_created, true, '... and reports sandbox_created');

  // killing the default by its explicit id also leaves no default
  const c = await srv.tool('create_sandbox', {});
  await srv.tool('kill_sandbox', { sandbox_id: c.sandbox_id });
  const d = await srv.tool('run_command', { command: 'true' });
  t.isnt(d.sandbox_id, c.sandbox_id, 'after the default was killed by id, calls do not use the dead sandbox');
  t.ok((await containerOf(b.sandbox_id))?.running, 'the earlier sandbox is untouched');
  await srv.close();
}, { timeout: 120 });
