// Twenty commands in flight at once on one sandbox, all through its one
// runner connection: each call's stdout, stderr and exit code are exactly
// its own, the calls overlap in time, and the container runs one runner.
import { t, preflight, sdkClient, containerOf, psArgs } from '../lib/sg.mjs';

// The runner is what this test is about: on even in `make check-fallback`.
const RUNNER_ON = { SANDGATE_DOCKER_RUNNER: 'true' };

const N = 20;

// Interleaved output: every call prints 40 numbered lines with short sleeps.
const cmd = (k) => `for i in $(seq 1 40); do echo call${k}-line$i; `
  + `if [ $((i % 10)) = 0 ]; then echo call${k}-err$i >&2; sleep 0.05; fi; done; exit ${k % 7}`;

function expected(k) {
  let out = '';
  let err = '';
  for (let i = 1; i <= 40; i++) {
    out += `call${k}-line${i}\n`;
    if (i % 10 === 0) err += `call${k}-err${i}\n`;
  }
  return { out, err };
}

t.run(async () => {
  await preflight();
  const srv = await sdkClient([], RUNNER_ON);
  const warm = await srv.tool('run_command', { command: 'true' });
  const sid = warm.sandbox_id;

  for (const round of [1, 2]) {
    const t0 = Date.now();
    const results = await Promise.all(Array.from({ length: N }, (_, k) =>
      srv.tool('run_command', { command: cmd(k), sandbox_id: sid })));
    const took = Date.now() - t0;
    let exact = 0;
    results.forEach((r, k) => {
      const want = expected(k);
      if (r.stdout === want.out && r.stderr === want.err && r.exit_code === k % 7) exact++;
      else t.fail(`round ${round}: call ${k} got someone else's output or lost some`, { got: r, want });
    });
    t.is(exact, N, `round ${round}: all ${N} results are exact and attributed to their own call`);
    // each call sleeps 4 x 50 ms: run one after another that is >= 4 s
    t.cmp(took, '<', 4000, `round ${round}: the ${N} calls ran concurrently (${took} ms)`);
  }

  // one runner for the container, however many calls
  const c = await containerOf(sid);
  const runners = (await psArgs(c.id)).filter((p) => /\.sandgate-runner-[0-9a-f]{16}/.test(p));
  t.is(runners.length, 1, 'one sandgate-runner process in the container', { runners });

  // concurrent calls of other tools go through the same runner too
  const mixed = await Promise.all([
    srv.tool('write_file', { path: 'c/a.txt', content: 'A', sandbox_id: sid }),
    srv.tool('write_file', { path: 'c/b.txt', content: 'B', sandbox_id: sid }),
    srv.tool('run_command', { command: 'echo mixed', sandbox_id: sid }),
    srv.tool('run_code', { code: 'print("code")', sandbox_id: sid }),
  ]);
  t.is(mixed[2].stdout, 'mixed\n', 'mixed tools: run_command result');
  const a = await srv.tool('read_file', { path: 'c/a.txt', sandbox_id: sid });
  const b = await srv.tool('read_file', { path: 'c/b.txt', sandbox_id: sid });
  t.is(a.content + b.content, 'AB', 'mixed tools: both writes landed');
  await srv.close();
}, { timeout: 120 });
