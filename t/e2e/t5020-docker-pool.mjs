// The warm pool ([docker] pool): create_sandbox takes a container that ran
// before the call; a used one never goes back; create-time envs reach a
// pooled sandbox; a clean exit removes the pool, a kill -9 leaves it to the
// next server, which removes it; pool = 0 makes no pool.  About 30 s on a
// loaded 2-core host: five containers made and started (three servers at
// once to overlap them).
import fs from 'node:fs';
import { t, preflight, sdkClient, listManaged, ownerPid, waitFor, inspect, removeContainers, runCli }
  from '../lib/sg.mjs';

const LABEL_POOL = 'org.sandgate.pool';

async function poolOf(pid) {
  return (await listManaged({ [LABEL_POOL]: undefined }))
    .filter((c) => ownerPid(c) === pid && c.name.startsWith('sandgate-pool-') && c.running);
}

// The members of srv's pool that are ready (its runner started): the log
// says "pool: container ID12 of template T ready", and it is still listed.
async function readyOf(srv) {
  const said = new Set([...fs.readFileSync(srv.stderrPath, 'utf8')
    .matchAll(/pool: container ([0-9a-f]{12}) of template \S+ ready/g)].map((m) => m[1]));
  return (await poolOf(srv.pid)).filter((c) => said.has(c.id.slice(0, 12)));
}

t.run(async () => {
  await preflight();
  const made = [];
  // Three servers at once: a pooled one, one to kill -9, one without a pool.
  const [a, b, c] = await Promise.all([
    sdkClient([], { SANDGATE_DOCKER_POOL: '1' }, { name: 'pooled sandgate' }),
    sdkClient([], { SANDGATE_DOCKER_POOL: '1' }, { name: 'killed sandgate' }),
    sdkClient([], { SANDGATE_DOCKER_POOL: '0' }, { name: 'server without a pool' })]);
  let ready = [];
  await waitFor(async () => (ready = await readyOf(a)).length === 1, 30000);
  t.is(ready.length, 1, 'pool = 1 under stdio: one container is made ahead');
  const member = ready[0];
  made.push(member.id);
  const st = await runCli(['status', '--json'], { SANDGATE_DOCKER_POOL: '1' });
  const find = (o) => (o && typeof o === 'object'
    ? (o.pool?.templates ? o.pool : Object.values(o).map(find).find(Boolean)) : null);
  let facts = null;
  try { facts = find(JSON.parse(st.stdout)); } catch { /* said below */ }
  t.is(facts?.templates?.base, 1, 'sandgate status shows the configured pool size', { stdout: st.stdout.slice(0, 2000) });
  t.cmp(facts?.members_on_engine ?? -1, '>=', 1, 'sandgate status counts the pool members on the engine');
  const before = Date.now();
  const d1 = await a.tool('create_sandbox', {});
  t.ok(member.id.startsWith(d1.sandbox_id) || d1.sandbox_id === member.id,
    'create_sandbox hands out the container listed as a pool member before the call',
    { sandbox_id: d1.sandbox_id, member: member.id });
  const [c1] = await inspect([member.id]);
  t.ok(c1 && Date.parse(c1.startedAt) < before, 'that container was running before the call',
    { startedAt: c1?.startedAt, call: new Date(before).toISOString() });
  const renamed = await waitFor(async () => (await inspect([member.id]))[0]?.name === `sandgate-sb-${member.id.slice(0, 16)}`, 20000);
  t.ok(renamed, 'a handed-out container leaves the pool (renamed sandgate-sb-ID, in the background)');

  // The refill, and create-time envs in a pooled sandbox.
  await waitFor(async () => (ready = await readyOf(a)).length === 1, 30000);
  t.is((await poolOf(a.pid)).length, 1, 'the pool refills in the background, to its size and no more');
  made.push(...ready.map((c) => c.id));
  const d2 = await a.tool('create_sandbox', { envs: { SG_POOL_VAR: 'from the request' } });
  t.ok(ready[0] && ready[0].id.startsWith(d2.sandbox_id), 'the second create is a pool hit too');
  const env = await a.tool('run_command', { command: 'printf %s "$SG_POOL_VAR"', sandbox_id: d2.sandbox_id });
  t.is(env.stdout, 'from the request', 'create-time envs reach commands in a pooled sandbox');
  t.ok(d2.sandbox_id !== d1.sandbox_id, 'a container handed to a caller is never handed out again');
  await waitFor(async () => (ready = await readyOf(a)).length === 1, 30000);
  made.push(...ready.map((c) => c.id));
  await a.close();
  t.is((await inspect(made.slice(-1))).length, 0, 'a clean exit removes the pool');

  // kill -9: the next server removes the dead one's pool.
  await waitFor(async () => (ready = await readyOf(b)).length === 1, 30000);
  const orphan = ready[0]?.id;
  if (orphan) made.push(orphan);
  await b.kill('SIGKILL');
  const c2 = await sdkClient([], { SANDGATE_DOCKER_POOL: '1' }, { name: 'next pooled server' });
  const [gone, d4] = await Promise.all([
    waitFor(async () => (await inspect([orphan])).length === 0, 30000),
    c.tool('create_sandbox', {})]);
  t.ok(orphan && gone, 'after kill -9, the next pooled server removes the old pool', { orphan });
  t.like(fs.readFileSync(c2.stderrPath, 'utf8'), new RegExp(`pool: removed container ${orphan?.slice(0, 12)} of the pool of a sandgate that is gone`),
    'its log says so');
  const [c4] = (await listManaged()).filter((x) => x.id.startsWith(d4.sandbox_id));
  t.ok(c4 && !c4.labels[LABEL_POOL], 'pool = 0: create_sandbox makes its own container', { name: c4?.name });
  t.is((await poolOf(c.pid)).length, 0, 'pool = 0: no container is made ahead');
  await c.close();
  await c2.close();
  await removeContainers(made);
}, { timeout: 150 });
