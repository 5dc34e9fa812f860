// sandgate http is never open by accident: with no token source it
// generates a token, prints it once to stderr and wants it (on loopback and
// on any address); [server] auth = none serves loopback without one, with a
// warning, and is refused for any other host and beside a token source;
// ephemeral_token = true with a missing or empty auth_tokens_file generates
// one; a bad value of a [server] key stops the start before anything
// listens, with the key, the value and the fix.
import fs from 'node:fs';
import path from 'node:path';
import { preflight, runCli, tmpdir } from '../lib/sg.mjs';
import { t, startHttp, request, initSession, INIT } from '../http/lib.mjs';

const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT };
const NO_ENV_TOKENS = { SANDGATE_SERVER_AUTH_TOKENS: undefined, ABX_MCP_AUTH_TOKEN: undefined };

/** The tokens printed on stderr. */
function printed(h) {
  return [...h.stderr().matchAll(/ephemeral bearer token[^:]*: (\S+)/g)].map((m) => m[1]);
}

/** Checks a server that generated its token: printed once, wanted, accepted. */
async function generated(h, what) {
  const toks = printed(h);
  t.is(toks.length, 1, `${what}: one token printed on stderr`, { stderr: h.stderr() });
  t.like(toks[0] ?? '', /^[0-9a-f]{64}$/, `${what}: 256 random bits in hex`);
  t.like(h.stderr(), /listening on http:\/\/[^ ]+ \(bearer tokens required/, `${what}: listening, tokens required`);
  const none = await request(h.url, { body: init });
  t.is(none.status, 401, `${what}: initialize without the token: 401`);
  t.like(await initSession(h.url, { token: toks[0] }).catch((e) => e.message), /^[0-9a-f]{64}$/, `${what}: with it: a session`);
  return toks[0];
}

/** Runs `sandgate --set server.port=0 ... http` expected to refuse at once. */
async function refused(sets, env = {}) {
  const args = ['--set', 'server.port=0'];
  for (const s of sets) args.push('--set', s);
  return runCli([...args, 'http'], { ...NO_ENV_TOKENS, ...env }, { timeout: 20000 });
}

t.run(async () => {
  await preflight({ docker: false });

  // ---- no token source: one is generated, another at each start
  const a = await startHttp({ rawAuth: true, env: NO_ENV_TOKENS });
  t.like(a.stderr(), /no bearer token configured: generating one/, 'no token source: the log says a token is generated');
  const ta = await generated(a, 'no token source');
  t.ok((await a.stop())?.code === 0, 'exit 0 on SIGTERM');
  const b = await startHttp({ rawAuth: true, env: NO_ENV_TOKENS });
  const tb = await generated(b, 'a restart');
  t.ok(ta !== tb, 'a restart generates another token');
  t.is((await request(b.url, { body: init, token: ta })).status, 401, "the previous run's token is refused");
  await b.stop();

  // on any address too (allowed_hosts set: the DNS-rebinding check is another matter)
  const wide = await startHttp({ rawAuth: true, env: NO_ENV_TOKENS, set: { host: '0.0.0.0', allowed_hosts: 'localhost' } });
  t.like(wide.stderr(), /listening on http:\/\/0\.0\.0\.0:/, 'host 0.0.0.0 without a token source: listening');
  await generated(wide, 'host 0.0.0.0');
  await wide.stop();

  // ---- auth = none: loopback only, a warning
  const open = await startHttp({ set: { auth: 'none' }, env: NO_ENV_TOKENS });
  t.like(open.stderr(), /warning: http: \[server\] auth = none: every local user and process can use this server/, 'auth = none: a warning on loopback');
  t.is(printed(open).length, 0, 'auth = none: no token printed');
  t.like(open.stderr(), /no authentication \(\[server\] auth = none\): loopback only/, '... and the listening line says so');
  t.like(await initSession(open.url).catch((e) => e.message), /^[0-9a-f]{64}$/, 'auth = none: a session without a token');
  await open.stop();
  const nonLoop = await refused(['server.auth=none', 'server.host=0.0.0.0', 'server.allowed_hosts=localhost']);
  t.is(nonLoop.code, 3, 'auth = none on host 0.0.0.0: exit 3', nonLoop);
  t.like(nonLoop.stderr, /\[server\] auth = none is refused for host '0\.0\.0\.0', which is not a loopback address: configure bearer tokens/,
    '... naming the key, the host and the fix');
  t.unlike(nonLoop.stderr, /listening/, '... before listening');
  const both = await refused(['server.auth=none'], { SANDGATE_SERVER_AUTH_TOKENS: 'tok-0123456789abcdef' });
  t.is(both.code, 3, 'auth = none beside a token source: exit 3', both);
  t.like(both.stderr, /auth = none, but bearer tokens are configured.*remove them, or unset auth/, '... saying which to drop');
  t.unlike(both.stderr, /tok-0123456789abcdef/, '... without printing the token');

  // ---- ephemeral_token = true with a missing or an empty token file: a token is generated
  const missing = path.join(tmpdir(), 'no-such-tokens');
  const m = await startHttp({ set: { ephemeral_token: 'true', auth_tokens_file: missing }, env: NO_ENV_TOKENS });
  t.like(m.stderr(), /auth_tokens_file '[^']*no-such-tokens' does not exist: only the ephemeral token is accepted/, 'a missing token file is noted');
  await generated(m, 'ephemeral_token with a missing file');
  await m.stop();
  const empty = path.join(tmpdir(), 'empty-tokens');
  fs.writeFileSync(empty, '# nothing yet\n', { mode: 0o600 });
  const e = await startHttp({ set: { ephemeral_token: 'true', auth_tokens_file: empty }, env: NO_ENV_TOKENS });
  t.like(e.stderr(), /holds no token: only the ephemeral token is accepted/, 'an empty token file is noted');
  await generated(e, 'ephemeral_token with an empty file');
  await e.stop();
  // without ephemeral_token an empty file is a mistake to fix
  const emptyOnly = await refused([`server.auth_tokens_file=${empty}`]);
  t.is(emptyOnly.code, 3, 'an empty token file alone: exit 3', emptyOnly);
  t.like(emptyOnly.stderr, /holds no token: write one per line, or set \[server\] ephemeral_token = true/, '... with both fixes');

  // ---- every [server] value checked before anything listens: the key, the value, the fix
  for (const [set, re] of [
    ['server.port=abc', /\[server\] port = 'abc' is not valid: expected a whole number/],
    ['server.port=70000', /\[server\] port = 70000 is not a TCP port: set it to 0 to 65535/],
    ['server.max_sessions=0', /\[server\] max_sessions = 0: set it to 1 or more/],
    ['server.session_idle_ttl=1h', /\[server\] session_idle_ttl = '1h' is not valid: expected a whole number/],
    ['server.ephemeral_token=maybe', /\[server\] ephemeral_token = 'maybe' is not valid: expected true or false/],
    ['server.auth=off', /\[server\] auth = 'off' is not valid: expected token\|none/],
    ['server.allowed_hosts=localhost,evil.com/x', /allowed_hosts/],
  ]) {
    const r = await refused([set]);
    t.is(r.code, 3, `${set}: exit 3`, { stderr: r.stderr });
    t.like(r.stderr, re, `${set}: the message names the key, the value and what is accepted`, { stderr: r.stderr });
    t.unlike(r.stderr, /listening|ephemeral bearer token/, `${set}: nothing listened, no token was made`);
  }
}, { timeout: 120 });
