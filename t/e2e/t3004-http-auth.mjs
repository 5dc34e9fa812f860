// Bearer authentication and the startup refusals: a token file readable by
// others stops the server with "chmod 600"; 401 with WWW-Authenticate for a
// missing or wrong token; tokens from the file, SANDGATE_SERVER_AUTH_TOKENS,
// ABX_MCP_AUTH_TOKEN and an ephemeral one; sessions bound to their token;
// non-loopback binding needs allowed_hosts; tokens never logged; a token
// file's line is one token (one with a comma stops the server).
import fs from 'node:fs';
import path from 'node:path';
import { preflight, runCli, tmpdir } from '../lib/sg.mjs';
import { t, startHttp, connect, request, initSession, INIT } from '../http/lib.mjs';

const V = '2025-11-25';
const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };

t.run(async () => {
  await preflight({ docker: false });
  const file = path.join(tmpdir(), 'tokens');
  const T1 = 'tok-file-one-0123456789abcdef';
  const T2 = 'tok-file-two-0123456789abcdef';
  const T3 = 'tok-file,three:0123456789@abc'; // a line is one token, commas and all
  fs.writeFileSync(file, `# sandgate tokens\n${T1}\n\n  ${T2}  \n${T3}\n`, { mode: 0o644 });
  fs.chmodSync(file, 0o644);

  // ---- refusals at startup
  const loose = await runCli(['--set', 'server.port=0', '--set', `server.auth_tokens_file=${file}`, 'http'], {}, { timeout: 20000 });
  t.is(loose.code, 3, 'a token file with mode 0644: exit 3 (configuration error)', loose);
  t.ok(loose.stderr.includes(file) && /chmod 600/.test(loose.stderr), 'the message names the file and chmod 600', { stderr: loose.stderr });
  t.unlike(loose.stderr, /listening/, 'the server never listened');
  const anyHost = await runCli(['--set', 'server.port=0', '--set', 'server.host=0.0.0.0', 'http'],
    { SANDGATE_SERVER_AUTH_TOKENS: 'x-token-1234567890' }, { timeout: 20000 });
  t.is(anyHost.code, 3, 'a non-loopback host without allowed_hosts: exit 3', anyHost);
  t.like(anyHost.stderr, /allowed_hosts/, 'the message names [server] allowed_hosts');
  // (a non-loopback host without a token source gets a generated token: t3009)
  // a line is one token, whole: one with a blank inside stops the server,
  // naming the line without echoing it
  const blanks = path.join(tmpdir(), 'tokens-blank');
  fs.writeFileSync(blanks, `${T1}\nZq8Lm2Vx9Rt4 Wp7Kc3Nd\n`, { mode: 0o600 });
  const split = await runCli(['--set', 'server.port=0', '--set', `server.auth_tokens_file=${blanks}`, 'http'], {}, { timeout: 20000 });
  t.is(split.code, 3, 'a token file line with a blank inside: exit 3', split);
  t.like(split.stderr, /auth_tokens_file '[^']*tokens-blank': line 2 is not a bearer token \(one token a line, visible ASCII: no blank or control character inside\): fix that line/,
    '... naming the file and the line', { stderr: split.stderr });
  t.unlike(split.stderr, /Zq8Lm2Vx9Rt4/, 'the line itself is not in the message');

  // ---- tokens from the file and the environment
  fs.chmodSync(file, 0o600);
  const srv = await startHttp({
    set: { auth_tokens_file: file, 'log.level': 'debug' },
    env: { SANDGATE_SERVER_AUTH_TOKENS: ' env-a-123456789 , env-b-123456789 ', ABX_MCP_AUTH_TOKEN: 'abx-123456789' },
  });
  const U = srv.url;
  const none = await request(U, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT } });
  t.is(none.status, 401, 'no token: 401');
  t.like(none.headers.get('www-authenticate') ?? '', /^Bearer/, '401 carries WWW-Authenticate: Bearer');
  const wrong = await request(U, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }, token: 'nope' });
  t.is(wrong.status, 401, 'a wrong token: 401');
  t.like(wrong.headers.get('www-authenticate') ?? '', /invalid_token/, 'the wrong token is named invalid_token');
  const prefix = await request(U, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }, token: T1.slice(0, -1) });
  t.is(prefix.status, 401, 'a prefix of a valid token: 401');
  const basic = await request(U, { body: ping, headers: { Authorization: `Basic ${T1}` } });
  t.is(basic.status, 401, 'another auth scheme: 401');
  const sids = {};
  const piece = await request(U, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }, token: 'three:0123456789@abc' });
  t.is(piece.status, 401, 'a piece of a token file line after its comma is no token');
  for (const tok of [T1, T2, T3, 'env-a-123456789', 'env-b-123456789', 'abx-123456789']) {
    sids[tok] = await initSession(U, { token: tok }).catch((e) => e.message);
    t.like(sids[tok], /^[0-9a-f]{64}$/, `token ${tok.slice(0, 8)}...: a session`);
  }
  const lower = await request(U, { body: ping, sid: sids[T1], version: V, headers: { Authorization: `bearer ${T1}` } });
  t.is(lower.status, 200, 'the scheme is case-insensitive (RFC 7235)');

  // sessions are bound to their credential
  const own = await request(U, { body: ping, sid: sids[T1], token: T1, version: V });
  t.is(own.status, 200, 'a session answers its own token');
  const other = await request(U, { body: ping, sid: sids[T1], token: T2, version: V });
  t.is(other.status, 404, "another token's session id: 404, as if unknown");
  const noauth = await request(U, { body: ping, sid: sids[T1], version: V });
  t.is(noauth.status, 401, 'a session id without a token: 401');

  // the SDK client with a bearer header
  const c = await connect(U, { token: T2 });
  t.ok((await c.client.listTools()).tools.length >= 7, 'the SDK client works with a bearer token');
  await c.terminate();
  await c.close();

  const stop = await srv.stop();
  t.ok(stop?.code === 0, 'SIGTERM: exit 0', stop);
  const log = srv.stderr();
  for (const tok of [T1, T2, 'env-a-123456789', 'env-b-123456789', 'abx-123456789']) {
    t.ok(!log.includes(tok), `the token ${tok.slice(0, 8)}... never appears in the log (level debug)`);
  }

  // ---- an ephemeral token: printed once, accepted
  const eph = await startHttp({ set: { ephemeral_token: 'true' }, env: { SANDGATE_SERVER_AUTH_TOKENS: undefined, ABX_MCP_AUTH_TOKEN: undefined } });
  const m = [...eph.stderr().matchAll(/ephemeral bearer token[^:]*: (\S+)/g)];
  t.is(m.length, 1, 'the ephemeral token is printed once on stderr');
  const tok = m[0]?.[1] ?? '';
  t.like(tok, /^[0-9a-f]{64}$/, 'it is 256 random bits in hex');
  t.is((await request(eph.url, { body: ping })).status, 401, 'without it: 401');
  t.ok(/^[0-9a-f]{64}$/.test(await initSession(eph.url, { token: tok }).catch(() => '')), 'with it: a session');
  t.ok((await eph.stop())?.code === 0, 'exit 0');

  // ---- any address with a token and allowed_hosts: serves (reached over loopback)
  const wide = await startHttp({ set: { host: '0.0.0.0', allowed_hosts: 'localhost,mcp.example.test' }, env: { ABX_MCP_AUTH_TOKEN: 'abx-wide-123456789' } });
  t.like(wide.stderr(), /listening on http:\/\/0\.0\.0\.0:/, 'host 0.0.0.0 with a token and allowed_hosts: listening');
  const ws = await initSession(wide.url, { token: 'abx-wide-123456789' }).catch((e) => e.message);
  t.like(ws, /^[0-9a-f]{64}$/, 'a session over loopback with the token');
  const bad127 = await request(wide.url.replace('localhost', '127.0.0.1'), { body: ping, sid: ws, token: 'abx-wide-123456789' });
  t.is(bad127.status, 403, 'Host 127.0.0.1 is refused once allowed_hosts is set without it');
  t.ok((await wide.stop())?.code === 0, 'exit 0');
}, { timeout: 120 });
