// Fault: the HTTP client's connection is reset mid-call (doc/faults.md), on
// docker, ssh and fc.  A dropped connection is not a cancellation (MCP
// Streamable HTTP, doc/http.md): the call runs on and its stream can be
// resumed.  What ends a call whose client is gone is its own timeout, the
// session's DELETE, or the session's idle TTL (2 s here), which also
// destroys the session's sandbox.
//   a. reset, then GET with Last-Event-ID: the client gets the response;
//   b. reset, the client never comes back: the command is killed at its
//      timeout, then the session ends after its idle TTL and its sandbox
//      is destroyed;
//   c. reset, then DELETE of the session: the call gets [server]
//      shutdown_grace (1 s here) to finish, then is cancelled: the command is
//      killed and the sandbox destroyed before the DELETE is answered.
// Every time: no sanitizer report (checked when the server stops), no
// process, no sandbox left, and the server still serves.
// The three backends run side by side (each its own server and markers), to
// keep the test's time near the slowest one's.
import http from 'node:http';
import { preflight, waitFor } from '../lib/sg.mjs';
import { t, startHttp, initSession, request, parseSse } from '../http/lib.mjs';
import { backendFixture } from '../lib/faults.mjs';

const V = '2025-11-25';

/** POSTs a tools/call as an SSE stream; resolves {lastId, reset()} once its priming event came. */
function startCall(url, sid, id, args) {
  const u = new URL(url);
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_command', arguments: args } });
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: u.port, path: u.pathname, method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Host: u.host,
        'Mcp-Session-Id': sid, 'MCP-Protocol-Version': V, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
        const ev = parseSse(text).find((e) => e.id);
        if (ev) resolve({ lastId: ev.id, status: res.statusCode, reset: () => req.socket.resetAndDestroy() });
      });
      res.on('error', () => {});
    });
    req.on('error', (e) => { if (e.code !== 'ECONNRESET') reject(e); });
    req.end(body);
  });
}

/** GET with Last-Event-ID: resolves the JSON-RPC message with that id. */
function resume(url, sid, lastId, id) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: u.port, path: u.pathname, method: 'GET',
      headers: { Accept: 'text/event-stream', Host: u.host, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': V, 'Last-Event-ID': lastId },
    }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
        const msg = parseSse(text).map((e) => e.msg).find((m) => m?.id === id);
        if (msg) { resolve(msg); req.destroy(); }
      });
      res.on('end', () => resolve(null));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The three cases on one backend, markers from marker + 1. */
async function matrix(backend, marker) {
  const tb = Date.now();
  const fx = await backendFixture(backend);
  const srv = await startHttp({ args: fx.args(), env: fx.env(), set: { session_idle_ttl: 2, shutdown_grace: 1 } });
  const call = async (sid, id, args) => {
    const r = await request(srv.url, { body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_command', arguments: args } }, sid, version: V });
    return r.json ?? r.events?.map((e) => e.msg).find((m) => m?.id === id);
  };

  // a. reset, then resume
  let sid = await initSession(srv.url);
  const warm = await call(sid, 1, { command: 'true' });
  t.ok(warm?.result?.structuredContent?.sandbox_id, `${backend}: the session has a sandbox`, { warm });
  let c = await startCall(srv.url, sid, 2, { command: 'sleep 1; echo resumed' });
  c.reset();
  const msg = await resume(srv.url, sid, c.lastId, 2);
  t.is(msg?.result?.structuredContent?.stdout, 'resumed\n', `${backend}, a. reset mid-call: the call ran on and its response came on resumption`, { msg });
  await request(srv.url, { method: 'DELETE', sid, version: V });
  await fx.noMachineOf(srv.pid, `${backend}, a. after DELETE`);

  // b. reset, never back
  marker++;
  sid = await initSession(srv.url);
  let sandbox = (await call(sid, 1, { command: 'true' }))?.result?.structuredContent?.sandbox_id;
  let re = new RegExp(`^sleep ${marker}$`);
  c = await startCall(srv.url, sid, 2, { command: `sleep ${marker}`, timeout: 5 });
  t.ok(await waitFor(async () => (await fx.procs(sandbox, re)).length > 0, 15000), `${backend}, b. the command runs`);
  const t0 = Date.now();
  c.reset();
  await fx.noProcess(sandbox, re, `${backend}, b. reset, never back: the command ends at its timeout`, 15000);
  await fx.noMachineOf(srv.pid, `${backend}, b. reset, never back: the session ends after its idle TTL`, 30000);
  t.diag(`${backend}, b.: sandbox destroyed ${Date.now() - t0} ms after the reset`);
  t.like(srv.stderr(), /idle for 2 s \(\[server\] session_idle_ttl\): ending it/, `${backend}, b. the log says the idle session ended`);

  // c. reset, then DELETE
  marker++;
  sid = await initSession(srv.url);
  sandbox = (await call(sid, 1, { command: 'true' }))?.result?.structuredContent?.sandbox_id;
  re = new RegExp(`^sleep ${marker}$`);
  c = await startCall(srv.url, sid, 2, { command: `sleep ${marker}` });
  t.ok(await waitFor(async () => (await fx.procs(sandbox, re)).length > 0, 15000), `${backend}, c. the command runs`);
  c.reset();
  const d0 = Date.now();
  const del = await request(srv.url, { method: 'DELETE', sid, version: V });
  const delMs = Date.now() - d0;
  t.is(del.status, 200, `${backend}, c. DELETE of the session after the reset: 200`);
  t.ok(delMs >= 1000, `${backend}, c. the DELETE was answered after the call's grace of 1 s (${delMs} ms)`);
  await fx.noProcess(sandbox, re, `${backend}, c. reset then DELETE: the command is killed`, 15000);
  await fx.noMachineOf(srv.pid, `${backend}, c. reset then DELETE`, 15000);

  // the server still serves, and stops cleanly
  sid = await initSession(srv.url);
  t.is((await call(sid, 1, { command: 'echo alive' }))?.result?.structuredContent?.stdout, 'alive\n', `${backend}: the server still serves`);
  const st = await srv.stop('SIGTERM', 30000);
  t.ok(st?.code === 0 && st.signal === null, `${backend}: exit status 0 after SIGTERM`, st);
  await fx.noMachineOf(srv.pid, `${backend}: after the server stopped`);
  t.diag(`${backend}: done in ${Date.now() - tb} ms`);
}

t.run(async () => {
  await preflight();
  await Promise.all([matrix('docker', 3190), matrix('ssh', 3193), matrix('fc', 3196)]);
}, { timeout: 180 });
