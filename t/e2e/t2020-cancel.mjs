// notifications/cancelled for a running run_command: no response is ever sent
// for that id, the server keeps answering, and the command is killed in the
// container within 5 s.
import { t, preflight, rawServer, sdkClient, containerOf, psArgs, waitFor, sleep } from '../lib/sg.mjs';

const isSleep = (secs) => (a) => new RegExp(`(^|\\s)sleep ${secs}$`).test(a);

t.run(async () => {
  await preflight();
  const srv = await rawServer();
  await srv.initialize();
  const warm = await srv.tool('run_command', { command: 'true' });
  const c = await containerOf(warm.sandbox_id);
  if (!c) await t.bailOut(`no container found for sandbox_id ${warm.sandbox_id}`);

  srv.sendRequest('tools/call', { name: 'run_command', arguments: { command: 'sleep 30' } }, 'to-cancel');
  const running = await waitFor(async () => (await psArgs(c.id)).some(isSleep(30)), 15000);
  t.ok(running, 'sleep 30 is running in the container');
  const tc = Date.now();
  srv.notify('notifications/cancelled', { requestId: 'to-cancel', reason: 'e2e test' });

  const ping = await srv.request('ping', undefined, { timeout: 5000 });
  t.deepEqual(ping.result, {}, 'a ping right after the cancellation is answered');
  t.cmp(Date.now() - tc, '<', 2000, 'the ping is answered promptly (ms)');

  const gone = await waitFor(async () => !(await psArgs(c.id)).some(isSleep(30)), 5000 - (Date.now() - tc));
  t.ok(gone, `no sleep 30 remains in the container within 5 s (${Date.now() - tc} ms)`,
    gone ? undefined : { processes: await psArgs(c.id) });

  const late = await srv.response('to-cancel', Math.max(500, 5000 - (Date.now() - tc)));
  t.ok(!late, 'no response is sent for the cancelled request (waited 5 s)', late ? { line: late.text } : undefined);

  const after = await srv.tool('run_command', { command: 'echo still-alive' });
  t.is(after.stdout, 'still-alive\n', 'the sandbox still runs commands after the cancellation');

  // cancelling an unknown or finished request is ignored silently
  srv.notify('notifications/cancelled', { requestId: 'to-cancel' });
  srv.notify('notifications/cancelled', { requestId: 12345 });
  const ping2 = await srv.request('ping', undefined, { timeout: 5000 });
  t.deepEqual(ping2.result, {}, 'stale cancellations are ignored');
  await srv.close();
  t.ok(!srv.messages().some((m) => m.id === 'to-cancel'), 'the cancelled id never got a response, to the end');

  // the official client cancels with an AbortSignal (numeric ids)
  const s = await sdkClient();
  const w = await s.tool('run_command', { command: 'true' });
  const c2 = await containerOf(w.sandbox_id);
  const ac = new AbortController();
  const p = s.client.callTool({ name: 'run_command', arguments: { command: 'sleep 31' } }, undefined, { signal: ac.signal });
  const running2 = await waitFor(async () => (await psArgs(c2.id)).some(isSleep(31)), 15000);
  t.ok(running2, 'SDK: sleep 31 is running');
  const t2 = Date.now();
  ac.abort('e2e');
  await t.rejects(() => p, 'SDK: the aborted call rejects');
  const gone2 = await waitFor(async () => !(await psArgs(c2.id)).some(isSleep(31)), 5000);
  t.ok(gone2, `SDK: no sleep 31 remains within 5 s (${Date.now() - t2} ms)`);
  await sleep(500);
  await s.client.ping();
  t.pass('SDK: the server answers after the cancellation');
  await s.close();
}, { timeout: 150 });
