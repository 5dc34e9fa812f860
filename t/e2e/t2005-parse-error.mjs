// Malformed JSON gets -32700 with id null, and the server keeps serving.
import { t, preflight, rawServer } from '../lib/sg.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const srv = await rawServer();
  await srv.initialize();
  const bad = [
    ['truncated object', '{"jsonrpc":"2.0","id":5,"method":"ping"'],
    ['plain text', 'this is not json'],
    ['trailing comma', '{"jsonrpc":"2.0","id":6,"method":"ping",}'],
    ['trailing garbage', '{"jsonrpc":"2.0","id":7,"method":"ping"}}'],
  ];
  for (const [what, line] of bad) {
    srv.send(line);
    const rec = await srv.next((m) => 'error' in m || 'result' in m, 10000);
    if (!t.ok(rec, `${what}: gets a response`, { line })) continue;
    t.is(rec.msg.error?.code, -32700, `${what}: -32700 parse error`, rec.msg);
    t.ok('id' in rec.msg && rec.msg.id === null, `${what}: id null`, rec.msg);
    const ping = await srv.request('ping', undefined, { timeout: 10000 });
    t.deepEqual(ping.result, {}, `${what}: the next ping is answered`);
  }
  const tools = await srv.request('tools/list', undefined, { timeout: 10000 });
  t.ok(Array.isArray(tools.result?.tools), 'tools/list still works after the parse errors');
  await srv.close();
}, { timeout: 60 });
