// The request checks of transports/http_check.c on the wire: Host and Origin
// compared whole with [server] allowed_hosts (a loopback name followed by
// more text is another host: 403, before and after initialize), and the
// framing refusals: a header that may appear once sent twice, Content-Length
// twice (equal or not), Content-Length beside Transfer-Encoding, and a
// Content-Length that is not a number: 400, with the connection closed.  An
// allowed_hosts entry that is not a host stops the server at startup.
import net from 'node:net';
import { preflight, runCli } from '../lib/sg.mjs';
import { t, startHttp, request, rawHttp, INIT } from '../http/lib.mjs';

const V = '2025-11-25';
const rpc = (id, method, params) => ({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });

/** Sends raw request text on a new connection; resolves {status, text, closed}. */
function rawSend(port, text) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    let timer = null;
    sock.setEncoding('latin1');
    sock.on('data', (c) => { data += c; });
    sock.on('error', reject);
    sock.on('close', () => {
      clearTimeout(timer);
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data);
      resolve({ status: m ? Number(m[1]) : 0, text: data, closed: true });
    });
    // a server that keeps the connection open would leave us waiting
    timer = setTimeout(() => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data);
      sock.destroy();
      resolve({ status: m ? Number(m[1]) : 0, text: data, closed: false });
    }, 5000);
    sock.write(text);
  });
}

t.run(async () => {
  await preflight({ docker: false });
  const srv = await startHttp();
  const U = srv.url;
  const P = srv.port;

  const init = await request(U, { body: rpc(1, 'initialize', INIT) });
  t.is(init.status, 200, 'initialize: 200');
  const sid = init.headers.get('mcp-session-id');

  // ---- Host and Origin: the whole host, never a prefix (issue 19)
  const badHosts = ['[::1].evil.com', '[::1]evil', `[::1].evil.com:${P}`, '127.0.0.1.evil.com',
    `localhost.evil.com:${P}`, 'localhost:80x', 'localhost:', `localhost:${P}:${P}`, '[::1', '[::1]]',
    'local host', '[fe80::1%25lo]', `127.0.0.1:${P}/x`, '127.0.0.1@evil.com'];
  for (const h of badHosts) {
    const before = await rawHttp(U, { body: rpc(2, 'initialize', INIT), headers: { Host: h } });
    t.is(before.status, 403, `Host ${h} on initialize: 403`);
    t.is(before.headers['mcp-session-id'], undefined, `Host ${h}: no session is made`);
    const after = await rawHttp(U, { body: rpc(3, 'ping'), headers: { Host: h, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': V } });
    t.is(after.status, 403, `Host ${h} on a session: 403`);
  }
  const badOrigins = ['http://[::1].evil.com', 'http://127.0.0.1.evil.com', 'http://[::1]evil',
    `http://localhost:${P}/`, `http://localhost:${P}/path`, 'http://user@localhost', 'localhost',
    '//localhost', 'http:/localhost', 'http://', '1http://localhost', `http://localhost:${P}.evil.com`];
  for (const o of badOrigins) {
    const r = await request(U, { body: rpc(4, 'ping'), sid, version: V, headers: { Origin: o } });
    t.is(r.status, 403, `Origin ${o}: 403`);
  }
  const goodOrigins = [`http://localhost:${P}`, 'http://[0:0:0:0:0:0:0:1]:3000', 'https://127.0.0.1', 'HTTP://LOCALHOST'];
  for (const o of goodOrigins) {
    const r = await request(U, { body: rpc(5, 'ping'), sid, version: V, headers: { Origin: o } });
    t.is(r.status, 200, `Origin ${o} is accepted`);
  }
  const goodHost = await rawHttp(U, { body: rpc(6, 'ping'), headers: { Host: `[0::1]:${P}`, 'Mcp-Session-Id': sid } });
  t.is(goodHost.status, 200, 'Host [0::1] is [::1]: accepted');

  // ---- one reading of each header (raw requests: clients refuse to send these)
  const body = JSON.stringify(rpc(7, 'ping'));
  const head = (extra) => `POST /mcp HTTP/1.1\r\nHost: localhost:${P}\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nMcp-Session-Id: ${sid}\r\n${extra}\r\n`;
  const ok = await rawSend(P, head(`Content-Length: ${body.length}\r\nConnection: close\r\n`) + body);
  t.is(ok.status, 200, 'the raw request itself is fine: 200');
  const cases = [
    ['two different Content-Length headers', `Content-Length: ${body.length}\r\nContent-Length: 5\r\n`, /Content-Length/],
    ['two equal Content-Length headers', `Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n`, /Content-Length/],
    ['Content-Length and Transfer-Encoding', `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n`, /Transfer-Encoding/],
    ['a Content-Length that is not a number', `Content-Length: +${body.length}\r\n`, /Content-Length/],
    ['two Host headers', `Host: localhost\r\nContent-Length: ${body.length}\r\n`, /Host/],
    ['two Origin headers', `Origin: http://localhost\r\nOrigin: http://evil.com\r\nContent-Length: ${body.length}\r\n`, /Origin/],
    ['two Mcp-Session-Id headers', `Mcp-Session-Id: ${sid}\r\nContent-Length: ${body.length}\r\n`, /Mcp-Session-Id/],
  ];
  for (const [what, extra, re] of cases) {
    const r = await rawSend(P, head(extra) + body);
    t.is(r.status, 400, `${what}: 400`, { text: r.text.slice(0, 400) });
    t.like(r.text, re, `${what}: the message names the header`);
  }
  const alive = await request(U, { body: rpc(8, 'ping'), sid, version: V });
  t.is(alive.status, 200, 'the server still serves after the refusals');

  // ---- an allowed_hosts entry that is not a host: a configuration error
  const bad = await runCli(['--set', 'server.port=0', '--set', 'server.allowed_hosts=localhost,evil.com/x', 'http'], {}, { timeout: 20000 });
  t.is(bad.code, 3, 'allowed_hosts with a bad entry: exit 3 (configuration error)', bad);
  t.like(bad.stderr, /allowed_hosts: 'evil\.com\/x' is not a host name/, 'the message names the entry');
  t.unlike(bad.stderr, /listening/, 'the server never listened');

  const st = await srv.stop('SIGTERM');
  t.is(st?.code, 0, 'sandgate http exits 0 on SIGTERM');
});
