// [local] spare after kill -9 of its server: the spare's jail dies with it
// (no process left), its directory stays until the next server's thread
// removes it, and that server never hands it out (its own spare is new).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, tmpdir, waitFor, SPARE_DEFAULT } from '../lib/sg.mjs';
import { startHttp } from '../http/lib.mjs';

const execFileP = promisify(execFile);
const LOCAL = ['--set', 'sandbox.default_backend=local'];
/** The spares a server's log says are ready, in order: {id, dir}. */
const readies = (text) => [...text.matchAll(/spare: (local-[0-9a-f]{12}) ready in (\S+) \(/g)]
  .map((m) => ({ id: m[1], dir: m[2] }));

/** Host processes whose command line holds text (a jail's bwrap holds its hostname). */
async function hostProcs(text) {
  const { stdout } = await execFileP('ps', ['-eo', 'pid=,args=']);
  return stdout.split('\n').filter((l) => l.includes(text)).map((l) => l.trim());
}

t.run(async () => {
  await preflight({ docker: false });
  const first = await startHttp({ args: LOCAL, env: SPARE_DEFAULT });
  t.ok(await waitFor(() => readies(first.stderr()).length >= 1, 30000), 'the first server made a spare');
  const left = readies(first.stderr())[0];
  t.ok((await hostProcs(left.id)).length > 0, 'its jail runs (a bwrap with its hostname)');
  await first.stop('SIGKILL');
  t.ok(fs.existsSync(left.dir), 'kill -9 leaves the spare\'s directory');
  const gone = await waitFor(async () => (await hostProcs(left.id)).length === 0, 10000);
  t.ok(gone, '... but no process: its jail died with its server', { procs: gone ? [] : await hostProcs(left.id) });
  const next = await startHttp({ args: LOCAL, env: SPARE_DEFAULT });
  t.ok(await waitFor(() => next.stderr().includes(`spare: removed ${left.id} of a sandgate that is gone`), 30000),
    'the next server removes it, saying so');
  t.ok(!fs.existsSync(left.dir), '... its directory is gone');
  t.ok(!fs.existsSync(path.join(tmpdir(), 'state', 'sandgate', 'local', 'spares', `${left.id}.json`)), '... and its tag');
  t.ok(await waitFor(() => readies(next.stderr()).length >= 1, 30000), 'the next server makes its own spare');
  t.isnt(readies(next.stderr())[0].id, left.id, '... a new one, never the dead server\'s');
  await next.stop('SIGTERM');
  t.deepEqual(await hostProcs(left.id), [], 'no process of the old spare at the end');
}, { timeout: 120 });
