// A runner that stops answering (SIGSTOP, sent from the host: a command
// cannot, the runner being its pid namespace's init, t1102):
// each command times out and is answered within its timeout and a second,
// and once no end came long after the runner's own timer (grace + slack),
// the next call replaces the stuck runner, as one whose connection broke:
// commands work again, and the calls in between left no descriptor behind.
import fs from 'node:fs';
import { t, preflight, sdkClient, sleep, errorText } from '../lib/sg.mjs';

const NO_DOCKER = { SANDGATE_DOCKER_HOST: 'unix:///nonexistent/docker.sock', DOCKER_HOST: undefined };
// the server's descriptors but the audit database's (opened by the writer
// when its first batch goes out, at any time)
const fds = (pid) => fs.readdirSync(`/proc/${pid}/fd`).filter((f) => {
  try { return !/audit\.db/.test(fs.readlinkSync(`/proc/${pid}/fd/${f}`)); } catch { return false; }
}).length;

/** The pid of a process on this host whose parent is ppid and whose program (argv[0]) ends with `name`. */
function childOf(ppid, name) {
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === ppid && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0].endsWith(name)) return Number(p);
    } catch { /* gone */ }
  }
  return null;
}

t.run(async () => {
  await preflight({ docker: false });
  const srv = await sdkClient(['--set', 'sandbox.default_backend=local', '--set', 'log.level=info'], NO_DOCKER);
  t.is((await srv.tool('run_command', { command: 'echo up' })).stdout, 'up\n', 'a command runs');
  const before = fds(srv.pid);

  // the runner (the jail's pid 1, a child of the jail's bwrap, a child of
  // the server) is stopped a moment into the command, so it has said it
  // started it (on a loaded machine it may not have: then the call says
  // the command did not start within its timeout)
  const bwrap = childOf(srv.pid, 'bwrap');
  const runner = bwrap && childOf(bwrap, '/.sandgate-runner');
  t.ok(runner, `the runner is found on the host (pid ${runner}, under bwrap ${bwrap})`);
  const t0 = Date.now();
  setTimeout(() => process.kill(runner, 'SIGSTOP'), 200);
  const r = await srv.call('run_command', { command: 'sleep 120', timeout: 1 });
  const took = Date.now() - t0;
  t.ok(r.structuredContent?.timed_out === true || /did not start the command within its timeout/.test(errorText(r)),
    'the command that stopped its runner times out', errorText(r));
  t.cmp(took, '<', 3000, `... answered within its timeout and a second or two (${took} ms)`);
  for (let i = 0; i < 3; i++) {
    const x = await srv.call('run_command', { command: 'echo never', timeout: 1 });
    t.ok(x.structuredContent?.timed_out || /did not start the command within its timeout/.test(errorText(x)),
      `call ${i + 1} on the stopped runner: timed out, not hung`, errorText(x));
  }
  // the answer came 0.7 s after the 1 s timeout; overdue 6 s (grace 1 s +
  // slack 5 s) after that answer
  await sleep(Math.max(0, 9000 - (Date.now() - t0)));
  const back = await srv.tool('run_command', { command: 'echo back', timeout: 20 });
  t.is(back.stdout, 'back\n', 'once the runner is overdue, the next call gets a new runner');
  t.like(fs.readFileSync(srv.stderrPath, 'utf8'), /runner [^\n]* stuck: no end of a timed-out command 6000 ms after its timeout[^\n]*: starting a new one/,
    'the log says the runner was stuck and replaced');
  // the stuck runner's teardown (its jail reaped, its pipes closed) may
  // still be going on as the new one answers: a leak stays, that settles
  let after = fds(srv.pid);
  for (let i = 0; i < 50 && after !== before; i++) {
    await sleep(100);
    after = fds(srv.pid);
  }
  t.is(after, before, `descriptors: ${before} before, ${after} after (the stuck runner's were freed)`);

  // run_code on a stuck runner: answered once its timeout, the kernel's
  // graces (2 s, 8 s for a slow one), 5 s and a ping unanswered in 2 s have
  // passed, never left waiting for good
  t.is((await srv.tool('run_code', { code: 'print(6 * 7)' })).stdout, '42\n', 'run_code runs');
  // a call queued behind a long one on the same kernel is not taken for a
  // stuck runner: its 1 s timeout and graces (16 s) pass before it starts,
  // and the runner answers the ping
  const long = srv.call('run_code', { code: 'import time; time.sleep(19); print("long")', timeout: 30 });
  await sleep(300);
  const queued = await srv.call('run_code', { code: 'print("queued")', timeout: 1 });
  t.is((await long).structuredContent?.stdout, 'long\n', 'a long call ends');
  t.is(queued.structuredContent?.stdout, 'queued\n', 'the call queued behind it runs after it, on the same runner', errorText(queued));
  const bw2 = childOf(srv.pid, 'bwrap');
  const runner2 = bw2 && childOf(bw2, '/.sandgate-runner');
  t.ok(runner2 && runner2 !== runner, `the new runner is found (pid ${runner2})`);
  process.kill(runner2, 'SIGSTOP');
  const k0 = Date.now();
  const stuck = await srv.call('run_code', { code: 'print(1)', timeout: 2 });
  const kTook = Date.now() - k0;
  t.ok(stuck.isError && /went away \(stuck: no end of a kernel call long after its timeout, no answer to a ping\)[^]*the next call starts a new one/.test(errorText(stuck)),
    'run_code on a stopped runner fails, saying it is stuck', errorText(stuck));
  t.cmp(kTook, '<', 30000, `... in ${kTook} ms (2 s timeout, 17 s more)`);
  t.is((await srv.tool('run_code', { code: 'print(7)' })).stdout, '7\n', 'the next run_code gets a new runner');
  await srv.close();
}, { timeout: 90 });
