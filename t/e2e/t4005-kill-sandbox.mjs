// kill_sandbox with an explicit id destroys exactly that sandbox.
import { t, preflight, sdkClient, containerOf, errorText, waitFor } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const a = await srv.tool('create_sandbox', {});
  const b = await srv.tool('create_sandbox', {});
  const ca = await containerOf(a.sandbox_id);
  t.ok(ca?.running, 'sandbox A is running');

  const res = await srv.call('kill_sandbox', { sandbox_id: a.sandbox_id });
  t.ok(!res.isError, 'kill_sandbox A succeeds', { result: res });
  t.hasFields(res.structuredContent, { success: true, sandbox_id: a.sandbox_id }, 'result: success true and the id');
  const gone = await waitFor(async () => !(await containerOf(a.sandbox_id)), 10000);
  t.ok(gone, 'the container of A is removed');
  t.ok((await containerOf(b.sandbox_id))?.running, 'sandbox B is untouched');

  const use = await srv.call('run_command', { command: 'true', sandbox_id: a.sandbox_id });
  t.ok(use.isError, 'using the killed sandbox_id is an isError');
  t.like(errorText(use), new RegExp(a.sandbox_id.slice(0, 12)), 'the error names the sandbox', { text: errorText(use) });

  const unknown = await srv.call('kill_sandbox', { sandbox_id: 'no-such-sandbox-e2e' });
  t.ok(unknown.isError, 'kill_sandbox of an id that never existed is an isError');
  t.like(errorText(unknown), /no-such-sandbox-e2e/, 'the error names the id', { text: errorText(unknown) });

  const still = await srv.tool('run_command', { command: 'echo b' });
  t.is(still.sandbox_id, b.sandbox_id, 'B (the last created) is still the default');
  await srv.close();
}, { timeout: 120 });
