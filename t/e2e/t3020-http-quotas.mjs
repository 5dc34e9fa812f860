// Quotas per credential over HTTP, two tokens: A at each quota (sessions,
// calls in flight, sandboxes, shells; each set to 2) is refused with the
// quota's key and count, while B's requests succeed; freeing one lets A go
// on.  Concurrent creations never pass a quota.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, tmpdir, errorText, waitFor, runCli } from '../lib/sg.mjs';
import { startHttp, connect, request, INIT } from '../http/lib.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];
const LOCAL_ENV = { SANDGATE_SANDBOX_DEFAULT_BACKEND: 'local' };
const hostDir = (sb) => sb.url.replace(/^file:\/\//, '');
const env = async (c, action, params = {}) => c.call('sandbox_env', { action, params });

t.run(async () => {
  await preflight({ docker: false });
  const tokens = path.join(tmpdir(), 'tokens');
  const TA = `token-a-${'a'.repeat(40)}`, TB = `token-b-${'b'.repeat(40)}`;
  fs.writeFileSync(tokens, `${TA}\n${TB}\n`, { mode: 0o600 });
  const http = await startHttp({
    args: LOCAL,
    set: { auth_tokens_file: tokens, quota_sessions: 2, quota_calls: 2, quota_sandboxes: 2, quota_shells: 2 },
  });
  const init = (token) => request(http.url, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }, token });

  // ---- sessions
  const a1 = await connect(http.url, { token: TA, name: 'A1' });
  const a2 = await connect(http.url, { token: TA, name: 'A2' });
  const r = await init(TA);
  t.is(r.status, 429, 'A\'s third session: HTTP 429');
  t.like(r.text, /credential at its session quota \(2 of 2, \[server\] quota_sessions\): end one/, 'the refusal names the quota, the count and the fix');
  const b1 = await connect(http.url, { token: TB, name: 'B1' });
  t.ok(b1.sessionId, 'B starts a session while A is at its quota');
  await a2.terminate();
  await a2.close();
  const a3 = await connect(http.url, { token: TA, name: 'A3' });
  t.ok(a3.sessionId, 'A ended one: its next session starts');

  // ---- calls in flight
  const sa = (await a1.tool('create_sandbox', {}));
  const dir = hostDir(sa);
  const slow = [1, 2].map((i) => a1.tool('run_command', { command: `touch started-${i}; sleep 4`, sandbox_id: sa.sandbox_id }));
  await waitFor(() => fs.existsSync(path.join(dir, 'started-1')) && fs.existsSync(path.join(dir, 'started-2')), 20000);
  let refusal = '';
  try { await a3.call('run_command', { command: 'true', sandbox_id: sa.sandbox_id }); } catch (e) { refusal = e.message; }
  t.like(refusal, /credential at its calls-in-flight quota \(2 of 2, \[server\] quota_calls\): wait for one to finish/, 'A\'s third call in flight is refused with the quota and the count');
  const bcall = await b1.tool('run_command', { command: 'echo from-b' });
  t.is(bcall.stdout, 'from-b\n', 'B\'s call runs while A has 2 calls in flight');
  t.ok(fs.existsSync(path.join(dir, 'started-1')) && !(await Promise.race([Promise.all(slow).then(() => true), new Promise((res) => setTimeout(() => res(false), 10))])), 'A\'s calls were still in flight then');
  await Promise.all(slow);
  t.is((await a1.tool('run_command', { command: 'echo again', sandbox_id: sa.sandbox_id })).stdout, 'again\n', 'A\'s calls ended: its next call runs');

  // ---- sandboxes (A holds one: sa)
  const sa2 = await a1.tool('create_sandbox', {});
  const third = await a1.call('create_sandbox', {});
  t.ok(third.isError, 'A\'s third sandbox is refused');
  t.like(errorText(third), /credential at its sandbox quota \(2 of 2, \[server\] quota_sandboxes\): kill_sandbox one/, 'the refusal names the quota, the count and the fix');
  const sb = await b1.tool('create_sandbox', {});
  t.like(sb.sandbox_id, /\S/, 'B creates a sandbox while A is at its quota');
  await a1.tool('kill_sandbox', { sandbox_id: sa2.sandbox_id });
  const sa3 = await a1.tool('create_sandbox', {});
  t.like(sa3.sandbox_id, /\S/, 'A killed one: its next sandbox is created');

  // ---- shells
  const shells = [];
  for (let i = 0; i < 2; i++) {
    const s = await env(a1, 'shell_new', { machine: sa.sandbox_id, purpose: `s${i}` });
    t.ok(!s.isError, `A's shell ${i + 1} opens`, errorText(s));
    shells.push(s.structuredContent.shell_id);
  }
  const s3 = await env(a1, 'shell_new', { machine: sa.sandbox_id });
  t.like(errorText(s3), /credential at its shell quota \(2 of 2, \[server\] quota_shells\): remove one/, 'A\'s third shell is refused with the quota and the count');
  const bs = await env(b1, 'shell_new', { machine: sb.sandbox_id });
  t.ok(!bs.isError, 'B opens a shell while A is at its quota', errorText(bs));
  await env(a1, 'shell_remove', { shell_id: shells.pop() });
  // two at once (the calls quota) for the one free shell: exactly one gets it
  const race = await Promise.all([0, 1].map(() => env(a1, 'shell_new', { machine: sa.sandbox_id })));
  t.is(race.filter((x) => !x.isError).length, 1, 'two concurrent shell_new for one free shell: exactly one opens');
  t.is(race.filter((x) => /\(2 of 2, \[server\] quota_shells\)/.test(errorText(x))).length, 1, 'the other names the quota');

  // ---- sandgate status: each credential's use, by its hash (the server writes it once a second)
  const want = (c) => c.sessions === 2 && c.sandboxes === 2 && c.shells === 2;
  let st, mine;
  await waitFor(async () => {
    st = await runCli(['status', '--json'], LOCAL_ENV);
    mine = JSON.parse(st.stdout).servers?.find((x) => x.pid === http.pid);
    return mine?.credentials?.some(want);
  }, 10000);
  t.ok(mine?.credentials?.some(want), 'status --json: A holds 2 sessions, 2 sandboxes, 2 shells', mine);
  t.ok(mine?.credentials?.length === 2 && mine.credentials.every((c) => /^[0-9a-f]{16}$/.test(c.credential)), 'status: two credentials, each by a 16-digit hash', mine);
  const text = await runCli(['status'], LOCAL_ENV);
  t.like(text.stdout, /credential [0-9a-f]{16}: 2 sessions, 0 calls, 2 sandboxes, 2 shells/, 'status (text) shows A\'s use');
  t.ok(![TA, TB].some((tok) => st.stdout.includes(tok) || text.stdout.includes(tok)), 'status never shows a token');
  // ---- a session's end gives its sandboxes back to the quota
  await a1.terminate();
  const after = [await a3.call('create_sandbox', {}), await a3.call('create_sandbox', {})];
  t.ok(after.every((x) => !x.isError), 'A\'s session ended: its sandboxes no longer count (two more are created)', after.map(errorText));
  await b1.close(); await a1.close(); await a3.close();
});
