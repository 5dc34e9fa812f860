// [server] session_idle_ttl: a session idle past the TTL is reaped with its
// containers (later requests get 404); a call in flight keeps its session
// alive, and so do requests.
import { preflight, sleep, waitFor } from '../lib/sg.mjs';
import { t, startHttp, connect, request, containersOfSid } from '../http/lib.mjs';

t.run(async () => {
  await preflight();
  const srv = await startHttp({ set: { session_idle_ttl: 2 } });

  const idle = await connect(srv.url, { name: 'idle', quiet: true });
  const busy = await connect(srv.url, { name: 'busy', quiet: true });
  const chatty = await connect(srv.url, { name: 'chatty', quiet: true });
  // chatty: a ping every 700 ms from the start (creating the containers
  // below can take longer than the TTL on a loaded host)
  let pinging = true;
  const pings = (async () => {
    let n = 0;
    while (pinging) {
      await chatty.client.ping();
      n++;
      await sleep(700);
    }
    return n;
  })();
  await Promise.all([
    idle.tool('run_command', { command: 'true' }),
    busy.tool('run_command', { command: 'true' }),
  ]);
  t.is((await containersOfSid(idle.sessionId)).length, 1, 'the idle session has a container');

  // busy: one call longer than the TTL
  const t0 = Date.now();
  const long = busy.tool('run_command', { command: 'sleep 4; echo done' }, { timeout: 60000 });

  const gone = await waitFor(async () => (await containersOfSid(idle.sessionId)).length === 0, 8000);
  const took = Date.now() - t0;
  t.ok(gone, 'the idle session\'s container is removed after the TTL', { ms: took });
  t.cmp(took, '>=', 1500, 'not before the TTL');
  const r = await request(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'ping' }, sid: idle.sessionId, version: '2025-11-25' });
  t.is(r.status, 404, 'the reaped session answers 404');

  const res = await long;
  t.is(res.stdout, 'done\n', 'the 4 s call outlived the 2 s TTL and returned');
  t.cmp(Date.now() - t0, '>=', 4000, '(it ran for 4 s)');
  pinging = false;
  t.cmp(await pings, '>=', 5, 'the chatty session pinged all along');
  const alive = await request(srv.url, { body: { jsonrpc: '2.0', id: 2, method: 'ping' }, sid: chatty.sessionId, version: '2025-11-25' });
  t.is(alive.status, 200, 'a session with regular requests is not reaped');

  // after its call, the busy session goes idle and is reaped too
  const busyGone = await waitFor(async () => (await containersOfSid(busy.sessionId)).length === 0, 8000);
  t.ok(busyGone, 'once its call returned, the busy session is reaped after the TTL');
  t.like(srv.stderr(), /idle for 2 s/, 'the log says why the sessions ended');

  for (const c of [idle, busy, chatty]) await c.close();
  const stop = await srv.stop();
  t.ok(stop?.code === 0, 'SIGTERM: exit 0', stop);
}, { timeout: 120 });
