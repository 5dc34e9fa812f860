// kill -9 of sandgate with two sandboxes alive, then a restart: the old
// sandboxes are adopted (still addressable by explicit sandbox_id, labels
// intact) and are reaped once their lifetime passes; none is left behind.
import { t, preflight, sdkClient, containerOf, waitFor, sleep, docker, inspect, IMAGE,
  LABEL_MANAGED, LABEL_OWNER, LABEL_SESSION, LABEL_LIFETIME } from '../lib/sg.mjs';

const LIFE = 12; // seconds

t.run(async () => {
  await preflight();
  const since = Math.floor(Date.now() / 1000) - 1;
  const a = await sdkClient([], {}, { name: 'first sandgate' });
  const s1 = await a.tool('create_sandbox', { timeout: LIFE });
  const s2 = await a.tool('create_sandbox', { timeout: LIFE });
  await a.tool('write_file', { path: '/workspace/mark', content: 'made by the first sandgate', sandbox_id: s1.sandbox_id });
  const before = { s1: await containerOf(s1.sandbox_id), s2: await containerOf(s2.sandbox_id) };
  await a.kill('SIGKILL');
  t.pass(`killed the first sandgate (pid ${a.pid}) with SIGKILL`);
  t.ok((await containerOf(s1.sandbox_id))?.running && (await containerOf(s2.sandbox_id))?.running,
    'both sandboxes outlive a kill -9 (nothing could clean up)');

  const b = await sdkClient([], {}, { name: 'restarted sandgate' });
  const tUse = Date.now();
  const rf = await b.call('read_file', { path: '/workspace/mark', sandbox_id: s1.sandbox_id });
  t.ok(!rf.isError, 'after the restart, the old sandbox is addressable by explicit sandbox_id', { result: rf });
  t.is(rf.structuredContent?.content, 'made by the first sandgate', '... and it is the same machine');
  const rc = await b.call('run_command', { command: 'echo adopted', sandbox_id: s2.sandbox_id });
  t.is(rc.structuredContent?.stdout, 'adopted\n', 'the second old sandbox runs commands too', { result: rc });

  for (const [name, sb] of [['s1', s1], ['s2', s2]]) {
    const c = await containerOf(sb.sandbox_id);
    t.is(c?.id, before[name].id, `${name}: the same container (not recreated)`);
    t.is(c?.labels[LABEL_MANAGED], '1', `${name}: still labelled ${LABEL_MANAGED}=1`);
    t.ok(c?.labels[LABEL_OWNER] && c?.labels[LABEL_SESSION] && c?.labels[LABEL_LIFETIME],
      `${name}: owner, session and lifetime labels intact`, { labels: c?.labels });
  }

  // addressable by id, but no session's own: status and machine_list leave them out
  const st = await b.tool('sandbox_env', { action: 'status' });
  const listedIds = (st.machines ?? []).map((m) => m.sandbox_id);
  t.ok(!listedIds.includes(s1.sandbox_id) && !listedIds.includes(s2.sandbox_id),
    'adopted sandboxes are not listed as the new session\'s machines', { listed: listedIds });

  const own = await b.tool('run_command', { command: 'true' });
  t.ok(own.sandbox_id !== s1.sandbox_id && own.sandbox_id !== s2.sandbox_id,
    'the new session does not take an adopted sandbox as its default');
  t.is(own.sandbox_created, true, 'the new session lazily creates its own default');

  // expiry: nothing of the first sandgate may run past its lifetime
  await sleep(3000);
  t.ok((await containerOf(s1.sandbox_id))?.running, 'an adopted sandbox is not reaped before its lifetime passed');
  const deadline = LIFE * 1000 + 20000 - (Date.now() - tUse);
  const gone = await waitFor(async () => !(await containerOf(s1.sandbox_id)) && !(await containerOf(s2.sandbox_id)), deadline, 1000);
  t.ok(gone, `both adopted sandboxes are reaped once their ${LIFE} s lifetime passed (within 20 s after it)`,
    { s1: await containerOf(s1.sandbox_id), s2: await containerOf(s2.sandbox_id) });

  // nothing unlabelled was left behind by either sandgate
  const ids = (await docker(['ps', '-a', '-q', '--no-trunc', '--filter', `ancestor=${IMAGE}`])).split('\n').filter(Boolean);
  const stray = (await inspect(ids)).filter((c) => Date.parse(c.created) / 1000 >= since && c.labels[LABEL_MANAGED] !== '1');
  if (process.env.CI) {
    t.deepEqual(stray.map((c) => c.id), [], `no unlabelled ${IMAGE} container was made during the test`);
  } else if (stray.length) {
    // on a shared development machine someone else may run the image by hand
    t.diag(`note: unlabelled ${IMAGE} containers appeared during the test (checked only under CI): ${stray.map((c) => c.id.slice(0, 12)).join(' ')}`);
  }
  t.ok((await containerOf(own.sandbox_id))?.running, "the restarted sandgate's own sandbox is still running");
  await b.close();
}, { timeout: 150 });
