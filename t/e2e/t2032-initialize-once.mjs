// A session is initialized once.  A second initialize (stdio, or HTTP with
// the session's Mcp-Session-Id) is refused with -32600 and leaves the
// negotiated version as it was: a session that chose 2025-11-25 and then
// asked for 2025-03-26 still refuses batches (only 2025-03-26 has them).
import { t, preflight, rawServer } from '../lib/sg.mjs';
import { startHttp, request, initSession, INIT } from '../http/lib.mjs';

const AGAIN = /initialize was already answered in this session \(protocol 2025-11-25\)/;
const NO_BATCH = /batches are only part of MCP 2025-03-26/;
const init = (id, v) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { ...INIT, protocolVersion: v } });

t.run(async () => {
  await preflight({ docker: false });

  // ---- stdio
  const r = await rawServer([], {}, { name: 'stdio' });
  t.is((await r.initialize('2025-11-25')).protocolVersion, '2025-11-25', 'stdio: the first initialize is answered');
  const again = await r.request('initialize', init(0, '2025-03-26').params);
  t.is(again.error?.code, -32600, 'stdio: a second initialize is an invalid request', again);
  t.like(again.error?.message ?? '', AGAIN, 'stdio: the error names the version in force', again);
  t.ok(!again.result, 'stdio: and has no result', again);
  r.send([{ jsonrpc: '2.0', id: 'b1', method: 'ping' }]);
  const batch = await r.next((m) => m.error && m.id === null, 10000);
  t.like(batch?.msg?.error?.message ?? '', NO_BATCH, 'stdio: the session still follows 2025-11-25 (a batch is refused)', batch?.msg);
  t.deepEqual((await r.request('ping')).result, {}, 'stdio: the session still answers');
  await r.close();

  // a failed initialize (no protocolVersion) does not count: the next one is answered
  const f = await rawServer([], {}, { name: 'stdio, retry' });
  const bad = await f.request('initialize', { capabilities: {} });
  t.is(bad.error?.code, -32602, 'stdio: an initialize without protocolVersion fails', bad);
  t.is((await f.initialize('2025-06-18')).protocolVersion, '2025-06-18', 'stdio: and the retry is answered');
  await f.close();

  // ---- HTTP
  const srv = await startHttp();
  const sid = await initSession(srv.url);
  const h = await request(srv.url, { body: init(2, '2025-03-26'), sid, version: '2025-11-25' });
  t.is(h.status, 200, 'HTTP: the second initialize gets a JSON-RPC answer', h.text);
  const msg = h.json ?? h.events?.find((e) => e.msg?.id === 2)?.msg;
  t.is(msg?.error?.code, -32600, 'HTTP: a second initialize is an invalid request', msg);
  t.like(msg?.error?.message ?? '', AGAIN, 'HTTP: the error names the version in force', msg);
  const b = await request(srv.url, { body: [{ jsonrpc: '2.0', id: 3, method: 'ping' }], sid, version: '2025-11-25' });
  const bm = b.json ?? b.events?.[0]?.msg;
  t.like(JSON.stringify(bm ?? b.text), NO_BATCH, 'HTTP: the session still follows 2025-11-25 (a batch is refused)', b.text);
  const p = await request(srv.url, { body: { jsonrpc: '2.0', id: 4, method: 'ping' }, sid, version: '2025-11-25' });
  t.deepEqual((p.json ?? p.events?.find((e) => e.msg?.id === 4)?.msg)?.result, {}, 'HTTP: the session still answers');
  const st = await srv.stop('SIGTERM', 20000);
  t.is(st?.code, 0, 'HTTP: the server stops cleanly', st);
}, { timeout: 60 });
