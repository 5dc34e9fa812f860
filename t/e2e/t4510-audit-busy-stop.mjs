// Audit queries from 16 concurrent clients for 60 s, then a stop: stdin EOF
// ends the stdio server within 2 s, SIGTERM the HTTP server within its
// grace period.  16 callers on one stdio session and 16 HTTP sessions run
// at the same time, each alternating a sandbox_env help, a run_command (on
// the fake backend that works, t/plugins/fake.c) and a sandbox_audit_query,
// so rows are queued while batches are written and queries flush them.
import { t, preflight, sdkClient, fakeBackendArgs } from '../lib/sg.mjs';
import { startHttp, connect } from '../http/lib.mjs';

const CLIENTS = 16;
const SECONDS = Number(process.env.SG_BUSY_SECONDS ?? 60);
const GRACE_S = 10;

async function busy(call, until, stats, who) {
  let n = 0;
  while (Date.now() < until) {
    await call('sandbox_env', { action: 'help' });
    const r = await call('run_command', { command: `echo ${who}-${n}` });
    if (r.stdout !== `ok\n`) throw new Error(`${who}: run_command said ${JSON.stringify(r)}`);
    const q = await call('sandbox_audit_query', { tail: 3 });
    if (!Array.isArray(q.records) || q.records.length === 0) throw new Error(`${who}: the query found no rows`);
    stats.queries++;
    n++;
  }
}

t.run(async () => {
  await preflight({ docker: false });
  const fake = await fakeBackendArgs();
  const stdio = await sdkClient(fake, {}, { name: 'stdio' });
  const http = await startHttp({ args: fake, set: { shutdown_grace: GRACE_S } });
  const sessions = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => connect(http.url, { name: `busy-${i}`, quiet: true })));

  const until = Date.now() + SECONDS * 1000;
  const s1 = { queries: 0 };
  const s2 = { queries: 0 };
  const opts = { timeout: 10000 };
  const errors = [];
  await Promise.all([
    ...Array.from({ length: CLIENTS }, (_, i) => busy((tool, a) => stdio.tool(tool, a, opts), until, s1, `stdio-${i}`)
      .catch((e) => errors.push(e.message))),
    ...sessions.map((c, i) => busy((tool, a) => c.tool(tool, a, opts), until, s2, `http-${i}`)
      .catch((e) => errors.push(e.message))),
  ]);
  t.deepEqual(errors, [], `${CLIENTS} callers on stdio and ${CLIENTS} HTTP sessions for ${SECONDS} s: every call answered within 10 s`);
  t.cmp(s1.queries, '>', CLIENTS, `stdio: ${s1.queries} audit queries answered`);
  t.cmp(s2.queries, '>', CLIENTS, `HTTP: ${s2.queries} audit queries answered`);

  const r = await stdio.close(2000);
  t.cmp(r.ms, '<', 2000, `then stdin EOF ends the stdio server within 2 s (${r.ms} ms)`);
  const t0 = Date.now();
  const st = await http.stop('SIGTERM', (GRACE_S + 5) * 1000);
  t.is(st?.code, 0, 'SIGTERM ends the HTTP server with status 0', st);
  t.cmp(Date.now() - t0, '<', GRACE_S * 1000, `within its grace period of ${GRACE_S} s (${Date.now() - t0} ms)`);
  for (const c of sessions) await c.close();
}, { timeout: 240 });
