// SIGTERM: no new connections; calls in flight finish within [server]
// shutdown_grace (their responses still reach the client), longer ones are
// cancelled; every session's containers are removed; exit status 0.  SIGINT
// does the same.
import { preflight, sleep } from '../lib/sg.mjs';
import { t, startHttp, connect, request, containersOfSid, initSession } from '../http/lib.mjs';

const V = '2025-11-25';

t.run(async () => {
  await preflight();

  // ---- a call shorter than the grace period completes
  const srv = await startHttp();
  const a = await connect(srv.url, { quiet: true });
  const b = await connect(srv.url, { quiet: true });
  await b.tool('run_command', { command: 'true' });
  const call = a.tool('run_command', { command: 'sleep 3; echo finished' }, { timeout: 60000 });
  await sleep(1500); // the sandbox exists and the command runs
  const t0 = Date.now();
  const stopping = srv.stop('SIGTERM', 60000);
  await sleep(300);
  const refused = await request(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'ping' } }).then((r) => r.status, (e) => e.cause?.code ?? e.message);
  t.ok(refused === 'ECONNREFUSED' || refused === 503, 'after SIGTERM a new connection is refused', { got: refused });
  const res = await call.catch((e) => ({ error: e.message }));
  t.is(res.stdout, 'finished\n', 'the call in flight finished and its response reached the client', res);
  const st = await stopping;
  t.ok(st?.code === 0 && st.signal === null, 'exit status 0', st);
  t.cmp(Date.now() - t0, '<', 15000, 'the server exited soon after the call', { ms: Date.now() - t0 });
  for (const c of [a, b]) {
    t.deepEqual((await containersOfSid(c.sessionId)).map((x) => x.id), [], `session ${c.sessionId.slice(0, 8)}: no container left`);
    await c.close();
  }

  // ---- a call longer than the grace period is cancelled
  const quick = await startHttp({ set: { shutdown_grace: 1 } });
  const sid = await initSession(quick.url);
  const r0 = await request(quick.url, { body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'true' } } }, sid, version: V });
  const m0 = r0.json ?? r0.events?.find((e) => e.msg?.id === 1)?.msg;
  t.ok(m0?.result && !m0.result.isError, 'the session has a sandbox', r0);
  const long = request(quick.url, {
    body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'sleep 120' } } }, sid, version: V,
  }).catch((e) => ({ error: e.message }));
  await sleep(1000);
  const t1 = Date.now();
  const st2 = await quick.stop('SIGTERM', 60000);
  t.ok(st2?.code === 0, 'with a 120 s call and shutdown_grace 1: exit 0', st2);
  t.cmp(Date.now() - t1, '<', 20000, 'within the grace period plus cancellation', { ms: Date.now() - t1 });
  const lr = await long;
  t.ok(!lr.events?.some((e) => e.msg?.id === 2), 'the cancelled call got no response (its stream just ended)', lr);
  t.deepEqual((await containersOfSid(sid)).map((x) => x.id), [], 'no container left');

  // ---- SIGINT (Ctrl-C) is the same
  const ctrlc = await startHttp();
  await initSession(ctrlc.url);
  const st3 = await ctrlc.stop('SIGINT', 30000);
  t.ok(st3?.code === 0 && st3.signal === null, 'SIGINT: exit 0', st3);
  t.like(ctrlc.stderr(), /signal 2 received/, 'the log names the signal');
}, { timeout: 180 });
