// A truncated or corrupt frame from the runner makes sandgate drop the stream
// and start a new runner, never crash.  The runner has a hidden test switch
// (--fault, passed when sandgate runs with SANDGATE_RUNNER_FAULTS=1) that
// breaks the first output frame of a command whose text holds
// "sandgate-fault:<kind>": a bad header, a frame cut short by the runner's
// exit, a length over the cap, a request id sandgate never used.
import fs from 'node:fs';
import { t, preflight, sdkClient, containerOf, psArgs, sleep } from '../lib/sg.mjs';

const KINDS = [
  ['corrupt', /bad frame header/],
  ['truncate', /truncated|EOF/],
  ['huge', /bad frame header/],
  ['badid', /not running/],
];

t.run(async () => {
  await preflight();
  const srv = await sdkClient([], { SANDGATE_RUNNER_FAULTS: '1', SANDGATE_DOCKER_RUNNER: 'true' });
  const warm = await srv.tool('run_command', { command: 'echo warm' });
  const c = await containerOf(warm.sandbox_id);

  for (const [kind, why] of KINDS) {
    // a command in flight on the same connection goes down with it
    const bystander = srv.call('run_command', { command: 'sleep 308' });
    await sleep(300);
    const bad = await srv.call('run_command', { command: `echo sandgate-fault:${kind}` });
    t.ok(bad.isError, `${kind}: the call whose frame broke fails`, { result: bad });
    t.like(bad.content?.[0]?.text ?? '', why, `${kind}: and says why`);
    const by = await bystander;
    t.ok(by.isError, `${kind}: the command in flight beside it fails too`);
    const ok = await srv.tool('run_command', { command: `echo after-${kind}` });
    t.is(ok.stdout, `after-${kind}\n`, `${kind}: the next call works on a new runner`);
    const ps = await psArgs(c.id);
    t.ok(!ps.some((a) => /sleep 308$/.test(a)), `${kind}: no process of the dropped stream is left`, { ps });
  }
  const log = fs.readFileSync(srv.stderrPath, 'utf8');
  t.is(log.split('\n').filter((l) => /ended \(.*\): starting a new one/.test(l)).length, KINDS.length,
    'one restart line per broken stream');
  t.unlike(log, /AddressSanitizer|runtime error:/, 'no sanitizer report');
  await srv.close();
}, { timeout: 120 });
