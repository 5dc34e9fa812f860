// tools/call of an unknown tool: JSON-RPC error -32602 "unknown tool 'X'...".
import { t, preflight, rawServer, sdkClient } from '../lib/sg.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const srv = await rawServer();
  await srv.initialize();
  const r = await srv.request('tools/call', { name: 'no_such_tool', arguments: {} }, { id: 5, timeout: 30000 });
  t.is(r.id, 5, 'unknown tool: response has the request id');
  t.is(r.error?.code, -32602, 'unknown tool: error -32602', r);
  t.like(r.error?.message, /unknown tool 'no_such_tool'/, 'unknown tool: the message names the tool', r);
  const ping = await srv.request('ping', undefined, { timeout: 10000 });
  t.deepEqual(ping.result, {}, 'the server keeps serving');
  await srv.close();

  // the official client sees the same error
  const c = await sdkClient();
  await t.rejects(() => c.client.callTool({ name: 'no_such_tool', arguments: {} }),
    'SDK client: calling an unknown tool is rejected',
    (e) => (e.code === -32602 && /unknown tool 'no_such_tool'/.test(e.message)) || `code ${e.code}, message ${e.message}`);
  await c.close();
}, { timeout: 60 });
