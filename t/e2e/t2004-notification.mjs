// Notifications never get a reply, known or unknown, even one that names a
// request method.
import { t, preflight, rawServer, sleep } from '../lib/sg.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const srv = await rawServer();
  await srv.initialize();
  const before = srv.lines.length;
  srv.notify('notifications/initialized');          // a second one
  srv.notify('notifications/no-such-notification', { a: 1 });
  srv.notify('ping');                                // a request method without id is a notification
  srv.notify('tools/list');
  srv.notify('notifications/cancelled', { requestId: 'never-sent', reason: 'test' });
  srv.notify('notifications/progress', { progressToken: 'x', progress: 1 });
  await sleep(1500);
  const ping = await srv.request('ping', undefined, { id: 'after-notes', timeout: 10000 });
  t.deepEqual(ping.result, {}, 'ping after the notifications is answered');
  const extra = srv.lines.slice(before).filter((l) => !(l.msg && l.msg.id === 'after-notes'));
  t.is(extra.length, 0, 'no line was written for any of the six notifications',
    { lines: extra.map((l) => l.text) });
  await srv.close();
}, { timeout: 60 });
