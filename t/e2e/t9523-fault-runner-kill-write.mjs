// Fault: the runner is killed (SIGKILL, from outside, as t8003 kills it)
// during a large write_file (doc/faults.md), on docker and on local (the
// bwrap jail).  The runner writes into a temporary file beside the target
// and renames it at the end; the test kills it as soon as that temporary
// file appears (seen from this host through /proc/<runner>/root), that is
// while the bytes are on their way.
//
// What the user sees: the write broke before it could have replaced the
// file, so the client sends it again, whole, to a new runner (rfiles.c):
// the call succeeds and the file holds the whole new content, never a mix;
// no temporary file is left (the dead runner's is removed by the new one,
// RN_FFLAG_SWEEP); one runner runs; the next calls work.
//
// 8 MiB; 4 MiB under ThreadSanitizer (TSAN_OPTIONS set, as make
// check-tsan sets it), where large writes took longer than the test's time
// (doc/faults.md).
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, waitFor, sleep } from '../lib/sg.mjs';
import { backendFixture, tempNames } from '../lib/faults.mjs';

const BIG = 'N'.repeat((process.env.TSAN_OPTIONS ? 4 : 8) << 20);
const NO_DOCKER = { SANDGATE_DOCKER_HOST: 'unix:///nonexistent/docker.sock', DOCKER_HOST: undefined };

/** pid -> { ppid, args } of every process on this host. */
function procs() {
  const out = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const args = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ').trim();
      out.set(Number(d), { ppid, args, state: stat.slice(stat.lastIndexOf(')') + 2)[0] });
    } catch { /* gone */ }
  }
  return out;
}

const isRunner = (a) => /^\S*sandgate-runner(-[0-9a-f]{16})? --stdio( --dial \/run\/sandgate\/runner\.sock)?$/.test(a); // not bwrap, whose arguments end so

/** Host pids of the live runners that belong to `mine(pid, table)`. */
function runners(mine) {
  const table = procs();
  return [...table].filter(([pid, p]) => isRunner(p.args) && p.state !== 'Z' && mine(pid, table)).map(([pid]) => pid);
}

/** Local: a descendant of sandgate `top`. */
const descendantOf = (top) => (pid, table) => {
  for (let p = table.get(pid)?.ppid, n = 0; p && n < 64; p = table.get(p)?.ppid, n++) if (p === top) return true;
  return false;
};

/** Docker: in the container `cid`'s cgroup. */
const inContainer = (cid) => (pid) => {
  try { return fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(cid); } catch { return false; }
};

/** Kills runner `pid` as soon as a temporary file of a write shows in its /workspace; resolves true once it did. */
async function killer(pid, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    let names;
    try { names = fs.readdirSync(`/proc/${pid}/root/workspace`); } catch { return false; }
    if (tempNames(names).length) {
      process.kill(pid, 'SIGKILL');
      return true;
    }
    await sleep(1);
  }
  return false;
}

async function part(label, srv, mine, list, read) {
  const ok = await srv.call('write_file', { path: 'big.txt', content: 'old content' });
  t.ok(!ok.isError, `${label}: a small write`, { text: errorText(ok) });
  t.is(runners(mine).length, 1, `${label}: one runner runs`);

  // one kill: the write is sent again to a new runner
  const [pid] = runners(mine);
  const k = killer(pid);
  const r = await srv.call('write_file', { path: 'big.txt', content: BIG }, { timeout: 120000 });
  t.ok(await k, `${label}: the runner was killed while the bytes were on their way`);
  t.ok(!r.isError, `${label}: the write is sent again, whole, to a new runner: the call succeeds`, { text: errorText(r) });
  const content = await read('big.txt');
  t.ok(content === BIG, `${label}: the file holds the whole new content`, { length: content?.length });
  t.deepEqual(tempNames(await list()), [], `${label}: no temporary file is left (the dead runner's is removed)`,
    { ls: await list() });
  t.ok(await waitFor(async () => runners(mine).length === 1, 5000), `${label}: one runner runs`, { runners: runners(mine) });
  const next = await srv.call('write_file', { path: 'small.txt', content: 'next' });
  t.ok(!next.isError, `${label}: the next write works`, { text: errorText(next) });
  const cmd = await srv.tool('run_command', { command: 'cat small.txt' });
  t.is(cmd.stdout, 'next', `${label}: commands run`);
}

t.run(async () => {
  await preflight();

  // ---- docker, with the runner
  const fx = await backendFixture('docker');
  let srv = await sdkClient([], { SANDGATE_DOCKER_RUNNER: 'true' }, { name: 'docker' });
  const first = await srv.tool('run_command', { command: 'echo up' });
  const cid = await fx.containerId(first.sandbox_id);
  await part('docker', srv, inContainer(cid), () => fx.list(first.sandbox_id, '/workspace'),
    (p) => fx.read(first.sandbox_id, `/workspace/${p}`));
  await srv.close();
  await fx.noMachineOf(srv.pid, 'docker: session end');

  // ---- local (bwrap jail)
  srv = await sdkClient(['--set', 'sandbox.default_backend=local'], NO_DOCKER, { name: 'local' });
  const sb = await srv.tool('create_sandbox', {});
  const dir = new URL(sb.url ?? `file://${sb.details?.directory}`).pathname;
  t.ok(fs.existsSync(dir), `local: the sandbox directory ${dir} is on this host`, { sb });
  await part('local', srv, descendantOf(srv.pid), () => fs.readdirSync(dir),
    (p) => { try { return fs.readFileSync(path.join(dir, p), 'utf8'); } catch { return null; } });
  await srv.close();
  t.ok(!fs.existsSync(dir), 'local: the session end removed the sandbox directory');
}, { timeout: 240 });
