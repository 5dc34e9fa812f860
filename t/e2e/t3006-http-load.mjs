// Load, bounded and on loopback only: 200 SDK clients at once ([server]
// max_sessions raised to 250), each making 20 ping and 20 tools/list calls;
// 20 of them also make 10 run_command calls each in their own Docker
// sandbox.  Zero errors, every session deleted, zero containers left.
import { preflight, listManaged, ownerPid } from '../lib/sg.mjs';
import { t, startHttp, connect } from '../http/lib.mjs';

const SESSIONS = 200;
const WITH_DOCKER = 20;
const ROUNDS = 20;
const COMMANDS = 10;

t.run(async () => {
  await preflight();
  // one credential (auth none) opens them all: its quotas (t3020) are lifted
  const srv = await startHttp({ set: { max_sessions: 250, quota_sessions: 0, quota_calls: 0, quota_sandboxes: 0 } });
  const errors = [];
  const t0 = Date.now();

  const clients = await Promise.all(Array.from({ length: SESSIONS }, (_, i) => connect(srv.url, { name: `load-${i}`, quiet: true })
    .then((c) => { c.client.onerror = (e) => errors.push(`client ${i}: ${e?.message ?? e}`); return c; })
    .catch((e) => { errors.push(`connect ${i}: ${e.message}`); return null; })));
  const live = clients.filter(Boolean);
  t.is(live.length, SESSIONS, `${SESSIONS} sessions connected at once`);
  t.is(new Set(live.map((c) => c.sessionId)).size, live.length, 'every session id is distinct');

  let pings = 0;
  let lists = 0;
  let commands = 0;
  const sandboxes = new Set();
  await Promise.all(live.map(async (c, i) => {
    try {
      for (let k = 0; k < ROUNDS; k++) {
        if (!isEmpty(await c.client.ping())) throw new Error('ping did not return {}');
        pings++;
        if ((await c.client.listTools()).tools.length < 7) throw new Error('tools/list is short');
        lists++;
      }
      if (i < WITH_DOCKER) {
        for (let k = 0; k < COMMANDS; k++) {
          const r = await c.tool('run_command', { command: `echo ${i}-${k}` });
          if (r.stdout !== `${i}-${k}\n`) throw new Error(`run_command printed ${JSON.stringify(r.stdout)}`);
          sandboxes.add(r.sandbox_id);
          commands++;
        }
      }
    } catch (e) {
      errors.push(`session ${i}: ${e.message}`);
    }
  }));
  const secs = (Date.now() - t0) / 1000;
  t.diag(`${pings} pings, ${lists} tools/list, ${commands} run_command in ${secs.toFixed(1)} s`);
  t.is(pings, SESSIONS * ROUNDS, `${SESSIONS * ROUNDS} pings answered`);
  t.is(lists, SESSIONS * ROUNDS, `${SESSIONS * ROUNDS} tools/list answered`);
  t.is(commands, WITH_DOCKER * COMMANDS, `${WITH_DOCKER * COMMANDS} run_command answered`);
  t.is(sandboxes.size, WITH_DOCKER, `each of the ${WITH_DOCKER} Docker sessions used its own sandbox`);
  const mine = (await listManaged()).filter((c) => ownerPid(c) === srv.pid);
  t.is(mine.length, WITH_DOCKER, `${WITH_DOCKER} containers while the sessions live`);

  // Each client is closed as soon as its DELETE is answered, as an agent
  // would: a client left open would reopen its GET stream (the SDK does
  // after the stream's retry: interval) without a session, and get a 400.
  const ended = await Promise.all(live.map((c) => c.terminate()
    .then(() => true, (e) => { errors.push(`DELETE: ${e.message}`); return false; })
    .finally(() => { c.client.onerror = null; return c.close(); }))); // its own abort is no error
  t.ok(ended.every(Boolean), `all ${SESSIONS} sessions deleted`);
  t.deepEqual(errors, [], 'zero errors');
  const left = (await listManaged()).filter((c) => ownerPid(c) === srv.pid);
  t.deepEqual(left.map((c) => c.id), [], 'zero containers left after the DELETEs');
  const st = await srv.stop();
  t.ok(st?.code === 0, 'SIGTERM: exit 0', st);
}, { timeout: 300 });

function isEmpty(o) {
  return o && typeof o === 'object' && Object.keys(o).length === 0;
}
