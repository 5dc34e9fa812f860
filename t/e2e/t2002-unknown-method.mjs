// An unknown method gets -32601 with the request's id, before and after
// initialize (clients probe with server/discover first).
import { t, preflight, rawServer } from '../lib/sg.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const srv = await rawServer();

  // a dual-era client probes before initialize; the answer must come promptly
  const t0 = Date.now();
  const probe = await srv.request('server/discover', {}, { id: 'server-discover-probe-1', timeout: 10000 });
  t.is(probe.error?.code, -32601, 'server/discover before initialize: -32601', probe);
  t.cmp(Date.now() - t0, '<', 5000, 'the probe is answered promptly');
  t.is(probe.id, 'server-discover-probe-1', 'the probe response carries the string id');

  await srv.initialize();
  const r = await srv.request('no/such/method', { x: 1 }, { id: 99, timeout: 10000 });
  t.is(r.error?.code, -32601, 'unknown method: -32601', r);
  t.is(r.id, 99, 'unknown method: same id');
  t.like(r.error?.message, /\S/, 'unknown method: has a message');
  t.ok(!('result' in r), 'unknown method: no result next to the error');

  const r2 = await srv.request('tools/nosuch', undefined, { id: 'x-1', timeout: 10000 });
  t.is(r2.error?.code, -32601, 'unknown method under a known prefix: -32601', r2);

  const ping = await srv.request('ping', undefined, { timeout: 10000 });
  t.deepEqual(ping.result, {}, 'ping after the errors is answered');
  await srv.close();
}, { timeout: 60 });
