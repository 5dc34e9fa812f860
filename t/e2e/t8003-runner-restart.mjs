// A runner killed from inside the sandbox is started again on the next call,
// with a clear log line; a command in flight when the runner died outright
// (SIGKILL) fails, and its process group is killed, not left running.  The
// killing is done with `docker exec` from the test: a run_command would
// itself run under the runner it kills.
import fs from 'node:fs';
import { t, preflight, sdkClient, containerOf, psArgs, docker, waitFor, sleep } from '../lib/sg.mjs';

// The runner is what this test is about: on even in `make check-fallback`.
const RUNNER_ON = { SANDGATE_DOCKER_RUNNER: 'true' };

const isRunner = (p) => /\.sandgate-runner-[0-9a-f]{16} --stdio( --dial \/run\/sandgate\/runner\.sock)?$/.test(p);
const restarts = (srv) => fs.readFileSync(srv.stderrPath, 'utf8').split('\n')
  .filter((l) => /runner in container [0-9a-f]{64} ended \(.*\): starting a new one/.test(l));

t.run(async () => {
  await preflight();
  const srv = await sdkClient([], RUNNER_ON);
  const first = await srv.tool('run_command', { command: 'echo one' });
  const c = await containerOf(first.sandbox_id);
  const before = (await psArgs(c.id)).filter(isRunner);
  t.is(before.length, 1, 'a runner runs in the container');

  // 1. pkill (SIGTERM) from inside the container
  await docker(['exec', c.id, 'pkill', '-f', 'sandgate-runner']);
  const gone = await waitFor(async () => !(await psArgs(c.id)).some(isRunner), 5000);
  t.ok(gone, 'pkill -f sandgate-runner ended it');
  const r1 = await srv.tool('run_command', { command: 'echo two' });
  t.is(r1.stdout, 'two\n', 'the next call works');
  t.is((await psArgs(c.id)).filter(isRunner).length, 1, 'a new runner runs');
  await srv.proc.flushStderr?.();
  await sleep(200);
  t.is(restarts(srv).length, 1, 'one log line says the runner ended and is restarted', { lines: restarts(srv) });

  // 2. SIGKILL while a command runs: that call fails, its group is killed
  const p = srv.call('run_command', { command: 'sleep 307; echo never' });
  const started = await waitFor(async () => (await psArgs(c.id)).some((a) => /sleep 307$/.test(a)), 10000);
  t.ok(started, 'sleep 307 runs');
  await docker(['exec', c.id, 'pkill', '-KILL', '-f', 'sandgate-runner']);
  const res = await p;
  t.ok(res.isError, 'the call in flight fails when its runner is killed outright', { result: res });
  t.like(res.content?.[0]?.text ?? '', /runner/, 'and says the runner connection broke');
  const clean = await waitFor(async () => !(await psArgs(c.id)).some((a) => /sleep 307$/.test(a)), 5000);
  t.ok(clean, 'its sleep 307 does not stay behind', clean ? undefined : { ps: await psArgs(c.id) });
  const r2 = await srv.tool('run_command', { command: 'echo three' });
  t.is(r2.stdout, 'three\n', 'the call after that works on a new runner');
  await sleep(200);
  t.is(restarts(srv).length, 2, 'a second restart line');

  // 3. a quiet kill between calls is noticed even before anything is sent
  for (let i = 0; i < 3; i++) {
    await docker(['exec', c.id, 'pkill', '-f', 'sandgate-runner']);
    const r = await srv.tool('run_command', { command: `echo again${i}` });
    t.is(r.stdout, `again${i}\n`, `kill ${i + 1} of 3 in a row: the next call still works`);
  }
  t.is((await psArgs(c.id)).filter(isRunner).length, 1, 'and exactly one runner is left');
  await srv.close();
}, { timeout: 120 });
