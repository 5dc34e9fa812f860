// Another sandgate starting up (same user, same state directory) never
// touches the sandboxes of a sandgate that is still alive, while it does
// reap the expired orphans of a dead one.
import { t, preflight, sdkClient, containerOf, waitFor, sleep } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const live = await sdkClient([], {}, { name: 'live sandgate' });
  const lazyMade = await live.tool('run_command', { command: 'echo live > /tmp/who' });
  t.is(lazyMade.sandbox_created, true, 'the live sandgate lazily made its default');
  const mine = await live.tool('create_sandbox', { timeout: 300 });
  const short = await live.tool('create_sandbox', { timeout: 300 }); // the default from here on
  const before = await Promise.all([mine, lazyMade, short].map((s) => containerOf(s.sandbox_id)));

  // an orphan of a dead sandgate, expired: proof that the newcomers' reaper ran
  const dead = await sdkClient([], {}, { name: 'dead sandgate' });
  const orphan = await dead.tool('create_sandbox', { timeout: 2 });
  await dead.kill('SIGKILL');
  await sleep(3000);

  const second = await sdkClient([], {}, { name: 'second sandgate' });
  const reaped = await waitFor(async () => !(await containerOf(orphan.sandbox_id)), 15000, 500);
  t.ok(reaped, "the second sandgate reaped the dead sandgate's expired orphan");
  const other = await second.tool('run_command', { command: 'echo second' });
  t.ok(![mine, lazyMade, short].some((s) => s.sandbox_id === other.sandbox_id), 'the second sandgate made its own sandbox');
  await second.close();

  // and a third one, started and killed, for good measure
  const third = await sdkClient([], {}, { name: 'third sandgate' });
  await sleep(2000);
  await third.kill('SIGKILL');

  for (const [i, s] of [mine, lazyMade, short].entries()) {
    const c = await containerOf(s.sandbox_id);
    t.ok(c?.running, `live sandbox ${i + 1} is still running`);
    t.is(c?.id, before[i]?.id, `live sandbox ${i + 1} is the same container`);
    t.is(c?.startedAt, before[i]?.startedAt, `live sandbox ${i + 1} was not restarted`);
  }
  const r = await live.tool('run_command', { command: 'cat /tmp/who', sandbox_id: lazyMade.sandbox_id });
  t.is(r.stdout, 'live\n', "the live sandgate's lazily made sandbox still works");
  const d = await live.tool('run_command', { command: 'true' });
  t.is(d.sandbox_id, short.sandbox_id, "the live sandgate's default is unchanged");
  const r2 = await live.tool('run_command', { command: 'echo ok', sandbox_id: mine.sandbox_id });
  t.is(r2.stdout, 'ok\n', "the live sandgate's explicit sandbox still works");
  await live.close();
}, { timeout: 120 });
