// kill -9 of sandgate with two short-lived sandboxes, then a restart after
// their lifetime passed: the restarted sandgate reaps them.
import { t, preflight, sdkClient, containerOf, containersOfServer, waitFor, sleep } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const a = await sdkClient([], {}, { name: 'first sandgate' });
  // 15 s: long enough that the first sandgate's own reaper does not take s1
  // while s2 is made on a loaded machine (1.5 s seen, ASan beside other
  // tests slower still), before the kill.
  const s1 = await a.tool('create_sandbox', { timeout: 15 });
  const s2 = await a.tool('create_sandbox', { timeout: 15 });
  const lazy = await a.tool('run_command', { command: 'true' }); // the default is s2 here
  t.is(lazy.sandbox_id, s2.sandbox_id, 'the last created sandbox is the default');
  await a.kill('SIGKILL');
  t.is((await containersOfServer(a.pid)).length, 2, 'two sandboxes are left by the killed sandgate');
  await sleep(16000); // their 15 s lifetime passes while no sandgate runs

  const t0 = Date.now();
  const b = await sdkClient([], {}, { name: 'restarted sandgate' });
  const gone = await waitFor(async () => (await containersOfServer(a.pid)).length === 0, 15000, 500);
  t.ok(gone, `the restarted sandgate reaps the expired sandboxes (${Date.now() - t0} ms)`,
    { left: (await containersOfServer(a.pid)).map((c) => c.id) });
  const use = await b.call('run_command', { command: 'true', sandbox_id: s1.sandbox_id });
  t.ok(use.isError, 'an expired, reaped sandbox is no longer addressable');
  t.ok(!(await containerOf(s2.sandbox_id)), 'the expired default is gone too');
  await b.close();

  // an expired sandbox whose sandgate was killed is reaped even when a
  // sandgate is started only for a `tools` listing... or at least by the next
  // server: check that a plain restart with no calls reaps as well
  const c = await sdkClient([], {}, { name: 'third sandgate' });
  const s3 = await c.tool('create_sandbox', { timeout: 2 });
  await c.kill('SIGKILL');
  await sleep(3500);
  const d = await sdkClient([], {}, { name: 'fourth sandgate (no calls)' });
  const gone3 = await waitFor(async () => !(await containerOf(s3.sandbox_id)), 15000, 500);
  t.ok(gone3, 'a restarted sandgate that gets no tool call still reaps expired orphans');
  await d.close();
}, { timeout: 120 });
