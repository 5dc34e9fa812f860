// Streamable HTTP at the wire (MCP 2025-11-25 basic/transports): session ids,
// 202/400/403/404/405/406/413/415 answers, protocol-version header, JSON or
// SSE replies, priming events, resumption with Last-Event-ID, batches,
// DELETE, and the session cap (503 beyond [server] max_sessions).
import { preflight, sleep } from '../lib/sg.mjs';
import { t, startHttp, request, rawHttp, initSession, parseSse, INIT } from '../http/lib.mjs';

const V = '2025-11-25';
const rpc = (id, method, params) => ({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });

/** Reads an SSE response incrementally; resolves {status, headers, next(pred, ms), abort()}. */
async function openSse(url, init) {
  const ac = new AbortController();
  const res = await fetch(url, { ...init, signal: ac.signal });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const events = [];
  let done = false;
  (async () => {
    try {
      for (;;) {
        const { value, done: d } = await reader.read();
        if (d) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          events.push(...parseSse(buf.slice(0, i + 2)));
          buf = buf.slice(i + 2);
        }
      }
    } catch { /* aborted */ }
    done = true;
  })();
  return {
    status: res.status,
    headers: res.headers,
    events,
    ended: () => done,
    async waitFor(pred, ms = 5000) {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        const e = events.find(pred);
        if (e) return e;
        if (done) break;
        await sleep(10);
      }
      return events.find(pred);
    },
    abort() { ac.abort(); },
  };
}

t.run(async () => {
  await preflight({ docker: false });
  const srv = await startHttp({ fixtures: true });
  const U = srv.url;

  // ---- initialize and the session id
  const init = await request(U, { body: rpc(1, 'initialize', INIT) });
  t.is(init.status, 200, 'initialize: 200');
  t.like(init.headers.get('content-type'), /^application\/json/, 'initialize is answered as application/json');
  const sid = init.headers.get('mcp-session-id');
  t.like(sid, /^[\x21-\x7e]{32,}$/, 'Mcp-Session-Id is 32+ visible ASCII characters');
  t.is(init.json?.result?.protocolVersion, V, 'the requested version is negotiated');
  const sid2 = await initSession(U);
  t.isnt(sid2, sid, 'each initialize makes a new session id');

  // ---- messages on a session
  const n = await request(U, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, sid, version: V });
  t.is(n.status, 202, 'a notification gets 202');
  t.is(n.text, '', '202 has no body');
  const nu = await request(U, { body: { jsonrpc: '2.0', method: 'notifications/no-such-thing' }, sid, version: V });
  t.is(nu.status, 202, 'an unknown notification gets 202 too');
  const resp = await request(U, { body: { jsonrpc: '2.0', id: 77, result: {} }, sid, version: V });
  t.is(resp.status, 202, 'a JSON-RPC response from the client gets 202');
  const ping = await request(U, { body: rpc('p-1', 'ping'), sid, version: V });
  t.is(ping.status, 200, 'ping: 200');
  t.deepEqual(ping.json, { jsonrpc: '2.0', id: 'p-1', result: {} }, 'ping: {} with the string id echoed');
  const list = await request(U, { body: rpc(2, 'tools/list'), sid, version: V });
  t.ok(Array.isArray(list.json?.result?.tools) && list.json.result.tools.some((x) => x.name === 'run_command'),
    'tools/list answers with the tools', list.json);
  const parse = await request(U, { body: '{bad json', sid, version: V });
  t.is(parse.json?.error?.code, -32700, 'invalid JSON gets -32700');
  const unk = await request(U, { body: rpc(3, 'no/such/method'), sid, version: V });
  t.is(unk.json?.error?.code, -32601, 'an unknown method gets -32601');

  // ---- session header errors
  const miss = await request(U, { body: rpc(4, 'ping') });
  t.is(miss.status, 400, 'no Mcp-Session-Id on a non-initialize request: 400');
  t.is(miss.json?.error?.code, -32000, '400 carries a JSON-RPC error without id');
  const unknown = await request(U, { body: rpc(5, 'ping'), sid: 'f'.repeat(64) });
  t.is(unknown.status, 404, 'an unknown session id: 404');
  const junk = await request(U, { body: rpc(5, 'ping'), sid: 'nope' });
  t.is(junk.status, 404, 'a malformed session id: 404');
  t.is((await request(U, { method: 'GET', headers: { 'Content-Type': undefined } })).status, 400, 'GET without a session: 400');
  t.is((await request(U, { method: 'DELETE' })).status, 400, 'DELETE without a session: 400');

  // ---- protocol version header
  for (const v of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
    const r = await request(U, { body: rpc(6, 'ping'), sid, version: v });
    t.is(r.status, 200, `MCP-Protocol-Version ${v} is accepted on a ${V} session`);
  }
  const badv = await request(U, { body: rpc(7, 'ping'), sid, version: '1999-01-01' });
  t.is(badv.status, 400, 'an unsupported MCP-Protocol-Version: 400');
  t.like(badv.json?.error?.message ?? '', /1999-01-01/, 'the 400 names the version');

  // ---- Host and Origin (DNS rebinding)
  const good = [`http://localhost:${srv.port}`, 'http://127.0.0.1:9999', 'http://[::1]:3000', 'https://LOCALHOST'];
  for (const o of good) {
    const r = await request(U, { body: rpc(8, 'ping'), sid, version: V, headers: { Origin: o } });
    t.is(r.status, 200, `Origin ${o} is accepted`);
  }
  for (const o of ['http://evil.example.com', 'null', 'http://localhost.evil.example.com:80']) {
    const r = await request(U, { body: rpc(9, 'ping'), sid, version: V, headers: { Origin: o } });
    t.is(r.status, 403, `Origin ${o}: 403`);
  }
  const badHost = await rawHttp(U, { body: rpc(1, 'initialize', INIT), headers: { Host: 'evil.example.com' } });
  t.is(badHost.status, 403, 'Host evil.example.com: 403');
  t.is(badHost.headers['mcp-session-id'], undefined, 'no session is made for a refused Host');
  const badHostPort = await rawHttp(U, { body: rpc(1, 'initialize', INIT), headers: { Host: `evil.example.com:${srv.port}` } });
  t.is(badHostPort.status, 403, 'Host evil.example.com:PORT: 403');
  for (const h of [`127.0.0.1:${srv.port}`, `[::1]:${srv.port}`, 'localhost', `LocalHost:${srv.port}`]) {
    const r = await rawHttp(U, { body: rpc(10, 'ping'), headers: { Host: h, 'Mcp-Session-Id': sid } });
    t.is(r.status, 200, `Host ${h} is accepted`);
  }

  // ---- method, path, media types, size
  const put = await request(U, { method: 'PUT', body: rpc(11, 'ping'), sid });
  t.is(put.status, 405, 'PUT: 405');
  t.like(put.headers.get('allow') ?? '', /POST/, '405 lists the allowed methods');
  const other = await request(U.replace(/\/mcp$/, '/other'), { body: rpc(12, 'ping'), sid });
  t.is(other.status, 404, 'another path: 404');
  const acc = await request(U, { body: rpc(13, 'ping'), sid, version: V, headers: { Accept: 'text/plain' } });
  t.is(acc.status, 406, 'Accept text/plain: 406');
  const ct = await request(U, { body: rpc(14, 'ping'), sid, version: V, headers: { 'Content-Type': 'text/plain' } });
  t.is(ct.status, 415, 'Content-Type text/plain: 415');

  // ---- replies: JSON when ready, SSE while a call runs
  const call = rpc(20, 'tools/call', { name: 'test_tool_with_progress', _meta: { progressToken: 'tok-1' } });
  const sse = await request(U, { body: call, sid, version: V });
  t.like(sse.headers.get('content-type') ?? '', /^text\/event-stream/, 'tools/call of a running tool is answered as an event stream');
  const ev = sse.events ?? [];
  t.ok(ev[0] && ev[0].id && !ev[0].data && ev[0].retry > 0, 'the stream starts with a priming event: an id, empty data and retry:', ev[0]);
  const prog = ev.filter((e) => e.msg?.method === 'notifications/progress');
  t.deepEqual(prog.map((e) => e.msg.params.progress), [0, 50, 100], 'progress 0, 50, 100 arrive on the stream');
  t.ok(prog.every((e) => e.msg.params.progressToken === 'tok-1' && e.msg.params.total === 100), 'progress echoes the string token, total 100');
  t.is(ev.at(-1)?.msg?.id, 20, 'the response is the last event');
  t.is(new Set(ev.map((e) => e.id)).size, ev.length, 'event ids are unique');
  const jsonOnly = await request(U, { body: { ...call, id: 21 }, sid, version: V, headers: { Accept: 'application/json' } });
  t.like(jsonOnly.headers.get('content-type') ?? '', /^application\/json/, 'Accept application/json only: the call is answered as JSON');
  t.is(jsonOnly.json?.id, 21, 'the JSON answer is the response');
  const sseOnly = await request(U, { body: rpc(22, 'ping'), sid, version: V, headers: { Accept: 'text/event-stream' } });
  t.is(parseSse(sseOnly.text).find((e) => e.msg)?.msg?.id, 22, 'Accept text/event-stream only: even ping comes as an event');
  const sseInit = await request(U, { body: rpc(1, 'initialize', INIT), headers: { Accept: 'text/event-stream' } });
  const sseSid = sseInit.headers.get('mcp-session-id') ?? '';
  t.ok(/^[0-9a-f]{64}$/.test(sseSid) && parseSse(sseInit.text).find((e) => e.msg)?.msg?.result?.protocolVersion,
    'an initialize answered as events carries Mcp-Session-Id', { headers: [...sseInit.headers], text: sseInit.text.slice(0, 300) });
  t.is((await request(U, { method: 'DELETE', sid: sseSid, version: V })).status, 200, '... and that session can be ended');
  const ev2 = (await request(U, { body: { ...call, id: 23 }, sid, version: V })).events ?? [];
  t.ok(ev2.every((e) => !ev.some((f) => f.id === e.id)), 'event ids differ between the streams of a session');
  const old = await initSession(U); // a 2025-06-18 session gets no priming event
  const o = await request(U, { body: rpc(1, 'initialize', { ...INIT, protocolVersion: '2025-06-18' }) });
  const osid = o.headers.get('mcp-session-id');
  const oev = (await request(U, { body: { ...call, id: 24 }, sid: osid, version: '2025-06-18' })).events ?? [];
  t.ok(oev.length > 0 && oev.every((e) => e.data), 'a 2025-06-18 session gets no priming event', oev);
  void old;

  // ---- GET: a standalone stream
  const get = await openSse(U, { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': V } });
  t.is(get.status, 200, 'GET opens a stream');
  t.like(get.headers.get('content-type') ?? '', /^text\/event-stream/, 'GET: text/event-stream');
  const prime = await get.waitFor((e) => e.id !== undefined);
  t.ok(prime && !prime.data && prime.retry > 0, 'GET: a priming event first', prime);
  const get2 = await openSse(U, { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
  t.is(get2.status, 200, 'a second GET replaces the first');
  for (let i = 0; i < 100 && !get.ended(); i++) await sleep(20);
  t.ok(get.ended(), 'the replaced GET stream ends');
  get2.abort();

  // ---- resumption: the POST stream breaks, GET with Last-Event-ID replays it
  const slow = await openSse(U, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': V },
    body: JSON.stringify(rpc(30, 'tools/call', { name: 'test_tool_with_logging' })),
  });
  const p0 = await slow.waitFor((e) => e.id !== undefined);
  t.ok(p0?.id, 'the POST stream primes with an id', p0);
  slow.abort();
  const resumed = await openSse(U, { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': p0?.id ?? '' } });
  t.is(resumed.status, 200, 'GET with Last-Event-ID: 200');
  const result = await resumed.waitFor((e) => e.msg?.id === 30, 5000);
  t.ok(result?.msg?.result, 'the resumed stream delivers the response', resumed.events);
  const logs = resumed.events.filter((e) => e.msg?.method === 'notifications/message');
  t.is(logs.length, 3, 'and the three log notifications, once each', resumed.events);
  t.ok(!resumed.events.some((e) => e.id === p0?.id), 'nothing up to Last-Event-ID is repeated');
  for (let i = 0; i < 100 && !resumed.ended(); i++) await sleep(20);
  t.ok(resumed.ended(), 'the resumed stream ends after the response');

  // ---- batches: 2025-03-26 only
  const b = await request(U, { body: rpc(1, 'initialize', { ...INIT, protocolVersion: '2025-03-26' }) });
  const bsid = b.headers.get('mcp-session-id');
  const batch = await request(U, { body: [rpc(1, 'ping'), rpc(2, 'ping'), { jsonrpc: '2.0', method: 'notifications/x' }], sid: bsid });
  t.ok(Array.isArray(batch.json) && batch.json.length === 2, 'a batch on a 2025-03-26 session gets an array of two responses', batch.json);
  const nbatch = await request(U, { body: [{ jsonrpc: '2.0', method: 'notifications/x' }], sid: bsid });
  t.is(nbatch.status, 202, 'a batch of notifications gets 202');
  // each element's reply is held to the batch's end: [server] max_batch (100)
  const full = await request(U, { body: Array.from({ length: 100 }, (_, i) => rpc(i + 1, 'ping')), sid: bsid });
  t.is(full.json?.length, 100, 'a batch of 100 gets 100 responses');
  const tooMany = await request(U, { body: Array.from({ length: 101 }, (_, i) => rpc(i + 1, 'tools/list')), sid: bsid });
  t.is(tooMany.json?.error?.code, -32600, 'a batch of 101 is refused whole: -32600', tooMany.json);
  t.is(tooMany.json?.error?.message, 'a batch of 101 messages: [server] max_batch allows 100; send them in smaller batches',
    '... naming [server] max_batch and the fix');
  const nob = await request(U, { body: [rpc(1, 'ping')], sid, version: V });
  t.is(nob.json?.error?.code, -32600, 'a batch on a 2025-11-25 session gets -32600');

  // ---- DELETE
  const del = await request(U, { method: 'DELETE', sid: sid2, version: V });
  t.is(del.status, 200, 'DELETE: 200');
  t.is((await request(U, { body: rpc(40, 'ping'), sid: sid2, version: V })).status, 404, 'the deleted session: 404');
  t.is((await request(U, { method: 'DELETE', sid: sid2 })).status, 404, 'DELETE again: 404');

  t.ok((await srv.stop()).code === 0, 'sandgate http exits 0 on SIGTERM');

  // ---- a body over [server] max_message_bytes, and the session cap
  // one credential fills the server: its quota (t3020) is lifted to see the server-wide cap
  const small = await startHttp({ set: { max_message_bytes: 2000, quota_sessions: 0 } });
  const ssid = await initSession(small.url);
  const big = await request(small.url, { body: rpc(1, 'tools/call', { name: 'x', arguments: { a: 'y'.repeat(5000) } }), sid: ssid, version: V });
  t.is(big.status, 413, 'a message over max_message_bytes: 413');
  const sids = [];
  for (let i = 1; i < 100; i++) sids.push(await initSession(small.url));
  t.is(sids.length + 1, 100, '100 sessions at the default cap');
  const over = await request(small.url, { body: rpc(1, 'initialize', INIT) });
  t.is(over.status, 503, 'the 101st session: 503');
  t.like(over.json?.error?.message ?? '', /max_sessions/, 'the 503 names [server] max_sessions');
  t.is((await request(small.url, { body: rpc(2, 'ping'), sid: sids[5], version: V })).status, 200, 'existing sessions still work at the cap');
  t.is((await request(small.url, { method: 'DELETE', sid: sids[0] })).status, 200, 'one session is deleted');
  t.ok(!!(await initSession(small.url)), 'then a new session fits');
  const st = await small.stop();
  t.ok(st?.code === 0, 'SIGTERM with 100 open sessions: exit 0', st);
}, { timeout: 120 });
