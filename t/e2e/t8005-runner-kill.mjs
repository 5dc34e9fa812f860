// Under the runner: a timeout and a cancellation kill the command's whole
// process group (TERM, then KILL for what ignores TERM) and leave no process
// behind; a command that exits by itself leaves its background children
// running and returns at once; orphans are reaped (no zombies).
import { t, preflight, sdkClient, containerOf, docker, psArgs, waitFor } from '../lib/sg.mjs';

// The runner is what this test is about: on even in `make check-fallback`.
const RUNNER_ON = { SANDGATE_DOCKER_RUNNER: 'true' };

async function procs(cid) {
  const out = await docker(['exec', cid, 'ps', '-eo', 'stat,args'], { timeout: 30000 });
  return out.split('\n').slice(1).map((l) => l.trim()).filter(Boolean);
}

t.run(async () => {
  await preflight();
  const srv = await sdkClient([], RUNNER_ON);
  const warm = await srv.tool('run_command', { command: 'true' });
  const c = await containerOf(warm.sandbox_id);

  // timeout: a group that ignores TERM still dies (KILL after the grace)
  const t0 = Date.now();
  const r = await srv.tool('run_command', { command: "trap '' TERM; sleep 309 & sleep 309 & wait", timeout: 1 });
  const took = Date.now() - t0;
  t.is(r.timed_out, true, 'a TERM-proof command times out');
  t.cmp(took, '<', 5000, `and the result comes within 5 s (${took} ms)`);
  const clean = await waitFor(async () => !(await psArgs(c.id)).some((a) => /sleep 309$/.test(a)), 3000);
  t.ok(clean, 'no sleep 309 is left', clean ? undefined : { ps: await psArgs(c.id) });

  // cancellation with the SDK's AbortSignal
  const ac = new AbortController();
  const p = srv.client.callTool({ name: 'run_command', arguments: { command: 'sleep 310 & sleep 310' } },
    undefined, { signal: ac.signal });
  const running = await waitFor(async () => (await psArgs(c.id)).some((a) => /sleep 310$/.test(a)), 10000);
  t.ok(running, 'sleep 310 runs');
  const tc = Date.now();
  ac.abort('e2e');
  await t.rejects(() => p, 'the aborted call rejects');
  const gone = await waitFor(async () => !(await psArgs(c.id)).some((a) => /sleep 310$/.test(a)), 5000);
  t.ok(gone, `no sleep 310 is left within 5 s of the cancellation (${Date.now() - tc} ms)`);

  // a normal exit leaves background children alone, and does not wait for them
  const t1 = Date.now();
  const bg = await srv.tool('run_command', { command: 'sleep 311 & echo started' });
  t.is(bg.stdout, 'started\n', 'a command with a background child returns its output');
  t.cmp(Date.now() - t1, '<', 1500, `without waiting for the child (${Date.now() - t1} ms)`);
  t.ok((await psArgs(c.id)).some((a) => /sleep 311$/.test(a)), 'the background child still runs');

  // orphans are reaped by the runner (it is a subreaper): no zombies
  await srv.tool('run_command', { command: "sh -c 'sleep 0.2 & exit 0'; sh -c '(sleep 0.3 &) ; exit 0'" });
  const noZombie = await waitFor(async () => !(await procs(c.id)).some((l) => /^Z/.test(l)), 3000);
  t.ok(noZombie, 'no zombie processes in the container', noZombie ? undefined : { ps: await procs(c.id) });

  const after = await srv.tool('run_command', { command: 'echo fine' });
  t.is(after.stdout, 'fine\n', 'the sandbox still works');
  await srv.close();
}, { timeout: 120 });
