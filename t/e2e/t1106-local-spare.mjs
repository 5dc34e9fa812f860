// [local] spare: a server makes a sandbox ahead, its jail and runner up,
// and create_sandbox hands it out: its jail's first process started before
// the call (clock ticks since boot, the same clock inside the jail and
// out), its hostname and directory are those the spare had; commands,
// files and create-time envs work in it; the refill is a new sandbox; a
// clean exit leaves no spare.  With spare = 0 the jail starts in the call.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, sleep, tmpdir, trackSandbox, waitFor, SPARE_DEFAULT } from '../lib/sg.mjs';

const execFileP = promisify(execFile);
const LOCAL = ['--set', 'sandbox.default_backend=local'];
const JAIL_START = 'cut -d" " -f22 /proc/1/stat'; // the jail's pid 1: bwrap's

/** The spares a server's log says are ready, in order: {id, dir}. */
const readies = (text) => [...text.matchAll(/spare: (local-[0-9a-f]{12}) ready in (\S+) \(/g)]
  .map((m) => ({ id: m[1], dir: m[2] }));

/** Now, in clock ticks since boot: the start time of a process made now. */
async function ticksNow() {
  return Number((await execFileP('cut', ['-d', ' ', '-f22', '/proc/self/stat'])).stdout);
}

t.run(async () => {
  await preflight({ docker: false });
  const srv = await sdkClient(LOCAL, SPARE_DEFAULT);
  const log = () => fs.readFileSync(srv.stderrPath, 'utf8');
  t.ok(await waitFor(() => readies(log()).length >= 1, 30000), 'the server made a spare (the log says it is ready)');
  const spare = readies(log())[0];
  t.ok(fs.statSync(spare.dir).isDirectory(), 'its directory exists before any call');
  await sleep(200); // clock ticks are 10 ms: the call comes well after the spare's start
  const before = await ticksNow();
  const sb = await srv.tool('create_sandbox', { envs: { SPARE_ENV: 'from create' } });
  trackSandbox(sb.sandbox_id);
  t.hasFields(sb, { sandbox_id: spare.id, url: `file://${spare.dir}`, backend: 'local', workspace: '/workspace' },
    'create_sandbox handed out the spare: its id and directory');
  t.hasFields(sb.details ?? {}, { isolation: 'bwrap', network: 'none' }, 'details as for any local sandbox');
  const r = await srv.tool('run_command', { command: `${JAIL_START}; hostname; printf %s "$SPARE_ENV"` });
  const [start, host, env] = r.stdout.split('\n');
  t.ok(Number(start) > 0 && Number(start) < before, `its jail started before the call (${start} < ${before} ticks since boot)`, r);
  t.is(host, spare.id, 'its hostname is the id chosen ahead');
  t.is(env, 'from create', 'create-time envs reach its commands');
  await srv.tool('write_file', { path: 'notes/a.txt', content: 'in the spare\n' });
  t.is((await srv.tool('read_file', { path: 'notes/a.txt' })).content, 'in the spare\n', 'files work in it');
  t.is(fs.readFileSync(path.join(spare.dir, 'notes/a.txt'), 'utf8'), 'in the spare\n', '... in its directory on the host');
  t.like(log(), new RegExp(`spare: handed out ${spare.id} in \\S+ \\(spare hit 1\\)`), 'the log says the hit');
  const tags = path.join(tmpdir(), 'state', 'sandgate', 'local');
  t.ok(fs.existsSync(path.join(tags, 'owners', `${spare.id}.json`)) && !fs.existsSync(path.join(tags, 'spares', `${spare.id}.json`)),
    'its owner tag is an ordinary one now');
  t.ok(await waitFor(() => readies(log()).length >= 2, 30000), 'a refill follows in the background');
  const next = readies(log())[1];
  t.isnt(next.id, spare.id, '... a new sandbox');
  t.is((await srv.tool('run_command', { command: 'cat notes/a.txt' })).stdout, 'in the spare\n', 'the session keeps its sandbox');
  await srv.close();
  t.ok(!fs.existsSync(next.dir) && !fs.existsSync(spare.dir), 'a clean exit removed the spare and the session\'s sandbox');
  t.deepEqual(fs.readdirSync(path.join(tags, 'spares')), [], '... and the spare\'s tag');
  t.like(log(), /spare: 1 hits, 0 misses, 2 made/, 'the log sums the spares up at exit');

  // ---- spare = 0: the jail starts in the call
  const off = await sdkClient(LOCAL, { SANDGATE_LOCAL_SPARE: '0' });
  const before0 = await ticksNow();
  const sb0 = await off.tool('create_sandbox', {});
  trackSandbox(sb0.sandbox_id);
  const start0 = Number((await off.tool('run_command', { command: JAIL_START })).stdout);
  t.ok(start0 >= before0, `spare = 0: the jail started in the call (${start0} >= ${before0})`);
  t.unlike(fs.readFileSync(off.stderrPath, 'utf8'), /spare:/, '... and no spare was made');
  await off.close();
}, { timeout: 120 });
