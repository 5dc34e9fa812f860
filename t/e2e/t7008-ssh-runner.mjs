// sandgate-runner on SSH hosts (ssh.so): put into $XDG_RUNTIME_DIR/sandgate
// (mode 0700, file 0755; other builds removed) on the first command and
// started once on one channel, so later commands open no channel; 20
// concurrent commands exact and attributed, each a child of the runner; a
// timeout and a cancellation leave no process of the command's group on the
// host (pgrep); the runner killed from outside (pkill -f, TERM or KILL) is
// started again on the next call with a log line, a command in flight then
// fails and its group is killed; corrupt frames (the runner's --fault hook)
// drop the stream, never sandgate; the runner dies with its stream (sandgate
// killed); its file is removed when sandgate ends; ~/.cache/sandgate without
// XDG_RUNTIME_DIR; [ssh] runner = false, a runner that cannot run and no
// writable place all fall back to plain exec, the last two said once.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, waitFor, sleep, tmpdir } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';

// The runner is what this test is about: on even when the suite runs with
// SANDGATE_SSH_RUNNER=false.
const ON = { 'ssh.runner': 'true', 'log.level': 'info' };
const FILE = /^sandgate-runner-[0-9a-f]{16}$/;

const reEsc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const logOf = (srv) => fs.readFileSync(srv.stderrPath, 'utf8');
const lines = (srv, re) => logOf(srv).split('\n').filter((l) => re.test(l));

/** pgrep -af PATTERN (run directly: no shell whose own command line would match). */
function pgrep(pattern) {
  return new Promise((resolve) => {
    execFile('pgrep', ['-af', pattern], (err, stdout) => {
      resolve(stdout.split('\n').filter(Boolean).map((l) => {
        const i = l.indexOf(' ');
        return { pid: Number(l.slice(0, i)), args: l.slice(i + 1) };
      }));
    });
  });
}

function pkill(sig, pattern) {
  return new Promise((resolve) => execFile('pkill', [`-${sig}`, '-f', pattern], () => resolve()));
}

const mode = (p) => (fs.statSync(p).mode & 0o7777).toString(8);

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const rdir = path.join(s.xdg, 'sandgate');
  const runnerPat = `${reEsc(rdir)}/sandgate-runner-[0-9a-f]{16} --stdio`;
  const who = `${s.user}@127\\.0\\.0\\.1:${s.port}`;
  const sessions = () => (s.log().match(/Starting session: command/g) ?? []).length;
  // an older build's file: removed when the runner is put there
  fs.mkdirSync(rdir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(rdir, 'sandgate-runner-0123456789abcdef'), 'an older build\n', { mode: 0o755 });

  // ---- where it lives, how it starts
  const srv = await sdkClient(sshArgs(s, ON), sshEnv());
  const first = await srv.tool('run_command', { command: 'echo one' });
  t.is(first.stdout, 'one\n', 'the first command runs (and starts the runner)');
  const files = fs.readdirSync(rdir);
  t.ok(files.length === 1 && FILE.test(files[0]), 'one file in $XDG_RUNTIME_DIR/sandgate: sandgate-runner-<build id>', { files });
  t.is(mode(rdir), '700', 'its directory has mode 0700');
  t.is(mode(path.join(rdir, files[0])), '755', 'the file has mode 0755');
  const runnerPath = path.join(rdir, files[0]);
  t.ok(await waitFor(async () => lines(srv, new RegExp(`runner ${reEsc(runnerPath)} on ${who}: pid \\d+, build [0-9a-f]{16}, started in \\d+ ms$`)).length === 1, 3000),
    'the log says where it started, its pid, build and start time', { log: lines(srv, /runner/) });
  let procs = await pgrep(runnerPat);
  t.is(procs.length, 1, 'one runner runs on the host', { procs });
  const pid1 = procs[0]?.pid;

  const s0 = sessions();
  for (let i = 0; i < 10; i++) await srv.tool('run_command', { command: 'true' });
  t.is(sessions(), s0, '10 more commands opened no channel: all went through the runner\'s');
  const ppid = (await srv.tool('run_command', { command: 'echo $PPID' })).stdout.trim();
  t.is(Number(ppid), pid1, 'a command is a child of the runner');

  // ---- 20 concurrent commands, exact and attributed
  const N = 20;
  const cmd = (i) => `printf 'call-%s\\n' ${i}; head -c ${i * 3000} /dev/zero | tr '\\0' ${String.fromCharCode(97 + i)}; `
    + `sleep 0.${i % 5}; printf 'err-%s' ${i} >&2; exit ${i}`;
  const t0 = Date.now();
  const res = await Promise.all(Array.from({ length: N }, (_, i) => srv.call('run_command', { command: cmd(i + 1) })));
  const took = Date.now() - t0;
  const bad = [];
  res.forEach((r, i) => {
    const n = i + 1;
    const sc = r.structuredContent ?? {};
    if (r.isError || sc.stdout !== `call-${n}\n${String.fromCharCode(97 + n).repeat(n * 3000)}` || sc.stderr !== `err-${n}` || sc.exit_code !== n) {
      bad.push({ n, text: r.isError ? errorText(r) : undefined, out: sc.stdout?.slice(0, 20), len: sc.stdout?.length, err: sc.stderr, exit: sc.exit_code });
    }
  });
  t.deepEqual(bad, [], `${N} concurrent commands: each gets exactly its own stdout, stderr and exit status (${took} ms)`);
  t.cmp(took, '<', 8000, 'they ran at once');
  t.is((await pgrep(runnerPat)).length, 1, 'still one runner');

  // ---- timeout and cancellation kill the whole process group
  const tag = `sgrun${process.pid}x${Date.now()}`;
  const tagged = () => pgrep(`sh \\./${tag}\\.sh`);
  await srv.tool('write_file', { path: `${tag}.sh`, content: 'sleep 300\n' });
  const tt = Date.now();
  const to = await srv.tool('run_command', {
    command: `echo started; sh ./${tag}.sh & (trap '' TERM; exec sh ./${tag}.sh) & sh ./${tag}.sh`, timeout: 1,
  });
  t.hasFields(to, { timed_out: true, exit_code: 124, stdout: 'started\n' }, 'timeout: timed_out, exit_code 124, the partial output');
  t.cmp(Date.now() - tt, '<', 6000, 'the result came soon after the timeout');
  t.ok(await waitFor(async () => (await tagged()).length === 0, 5000), 'no process of the timed-out group is left (TERM-ignoring ones included)',
    { left: await tagged() });

  const ac = new AbortController();
  const pending = srv.call('run_command', { command: `sh ./${tag}.sh`, timeout: 120 }, { signal: ac.signal });
  pending.catch(() => {});
  t.ok(await waitFor(async () => (await tagged()).length > 0, 5000, 100), 'the command to cancel runs');
  ac.abort('test cancels');
  await pending.then(() => t.fail('the cancelled call rejects'), () => t.pass('the cancelled call rejects'));
  t.ok(await waitFor(async () => (await tagged()).length === 0, 5000), 'cancellation killed its process group on the host', { left: await tagged() });

  // ---- killed from outside: restarted on the next call, with a log line
  const restarts = () => lines(srv, new RegExp(`runner on ${who} ended \\(.*\\): starting a new one`));
  await pkill('TERM', runnerPat);
  t.ok(await waitFor(async () => (await pgrep(runnerPat)).length === 0, 5000), 'pkill -f (TERM) on the host ended the runner');
  t.is((await srv.tool('run_command', { command: 'echo two' })).stdout, 'two\n', 'the next call works');
  procs = await pgrep(runnerPat);
  t.ok(procs.length === 1 && procs[0].pid !== pid1, 'on a new runner', { procs, pid1 });
  t.ok(await waitFor(async () => restarts().length === 1, 3000), 'one log line says the runner ended and a new one starts', { lines: restarts() });
  t.like(lines(srv, /started in \d+ ms \(restarted\)/)[0] ?? '', /\(restarted\)/, '... and one that the new one started');

  const inflight = srv.call('run_command', { command: `sh ./${tag}.sh; echo never` });
  t.ok(await waitFor(async () => (await tagged()).length > 0, 5000, 100), 'a command runs');
  await pkill('KILL', runnerPat);
  const cut = await inflight;
  t.ok(cut.isError && /runner/.test(errorText(cut)), 'the call in flight when the runner was SIGKILLed fails, naming the runner', { text: errorText(cut) });
  t.ok(await waitFor(async () => (await tagged()).length === 0, 5000), 'its process group does not stay behind', { left: await tagged() });
  t.is((await srv.tool('run_command', { command: 'echo three' })).stdout, 'three\n', 'the call after that works on a new runner');
  t.ok(await waitFor(async () => restarts().length === 2, 3000), 'a second restart line', { lines: restarts() });

  for (let i = 0; i < 3; i++) {
    await pkill('TERM', runnerPat);
    const r = await srv.tool('run_command', { command: `echo again${i}` });
    t.is(r.stdout, `again${i}\n`, `killed ${i + 1} of 3 times in a row: the next call still works`);
  }
  t.is((await pgrep(runnerPat)).length, 1, 'and exactly one runner is left');

  // ---- the runner dies with its stream
  const pidNow = (await pgrep(runnerPat))[0]?.pid;
  await srv.kill('SIGKILL');
  t.ok(await waitFor(async () => !(await pgrep(runnerPat)).some((p) => p.pid === pidNow), 5000),
    'sandgate killed outright: the runner ends with its stream');
  t.deepEqual(fs.readdirSync(rdir), [files[0]], '... its file stays (nobody could remove it) for the next sandgate to reuse');

  // ---- removed when sandgate ends the connection
  const srv2 = await sdkClient(sshArgs(s, ON), sshEnv(), { name: 'second' });
  const before = sessions();
  t.is((await srv2.tool('run_command', { command: 'echo reuse' })).stdout, 'reuse\n', 'a new sandgate runs commands');
  t.cmp(sessions() - before, '<=', 3, `... starting the runner took a few channels (${sessions() - before}: prepare, create, runner)`);
  t.is((await pgrep(runnerPat)).length, 1, '... on its runner');
  await srv2.close();
  t.deepEqual(fs.readdirSync(rdir), [], 'sandgate ended (stdin EOF): the runner file is removed');
  t.ok(await waitFor(async () => (await pgrep(runnerPat)).length === 0, 3000), '... and the runner ended');

  // ---- corrupt frames drop the stream, never sandgate
  const fs2 = await startSshd();
  const fpat = `${reEsc(path.join(fs2.xdg, 'sandgate'))}/sandgate-runner-[0-9a-f]{16} --fault`;
  const f = await sdkClient(sshArgs(fs2, ON), sshEnv({ SANDGATE_RUNNER_FAULTS: '1' }), { name: 'faults' });
  t.is((await f.tool('run_command', { command: 'echo before' })).stdout, 'before\n', 'a runner with the fault hook runs commands');
  for (const fault of ['corrupt', 'huge', 'badid', 'truncate']) {
    const bad = await f.call('run_command', { command: `echo sandgate-fault:${fault}; sleep 30` });
    t.ok(bad.isError, `a ${fault} frame fails its call`, { text: errorText(bad) });
    const good = await f.call('run_command', { command: 'echo fine' });
    t.ok(!good.isError && good.structuredContent?.stdout === 'fine\n', `... and the next call works on a new runner`, { text: errorText(good) });
  }
  t.ok(f.proc.alive(), 'sandgate is still running');
  t.ok(await waitFor(async () => lines(f, /runner on .* ended \(.*\): starting a new one/).length === 4, 3000),
    'four restart lines, each with the reason', { lines: lines(f, /ended \(/) });
  t.is((await pgrep(fpat)).length, 1, 'one runner left');
  t.ok(await waitFor(async () => (await pgrep('sleep 30$')).filter((p) => p.args === 'sleep 30').length === 0, 5000),
    'no command of a dropped stream is left');
  await f.close();

  // ---- ~/.cache/sandgate when the host has no XDG_RUNTIME_DIR
  const home = path.join(tmpdir(), 'remote-home');
  fs.mkdirSync(home);
  const hs = await startSshd({ noXdg: true, home });
  const h = await sdkClient(sshArgs(hs, ON), sshEnv(), { name: 'no XDG_RUNTIME_DIR' });
  t.is((await h.tool('run_command', { command: 'echo cached' })).stdout, 'cached\n', 'without XDG_RUNTIME_DIR commands run');
  const cdir = path.join(home, '.cache', 'sandgate');
  const cfiles = fs.existsSync(cdir) ? fs.readdirSync(cdir) : [];
  t.ok(cfiles.length === 1 && FILE.test(cfiles[0]), '... and the runner is in ~/.cache/sandgate', { cfiles });
  t.is(fs.existsSync(cdir) ? mode(cdir) : '', '700', '... a 0700 directory');
  await h.close();
  t.deepEqual(fs.readdirSync(cdir), [], '... removed when sandgate ended');

  // ---- plain exec: runner = false, cannot run, no writable place
  async function plain(name, sets, server, env = {}) {
    const p = await sdkClient(sshArgs(server, sets), sshEnv(env), { name });
    const n0 = (server.log().match(/Starting session: command/g) ?? []).length;
    const r1 = await p.tool('run_command', { command: 'echo out; echo err >&2; exit 3' });
    t.hasFields(r1, { stdout: 'out\n', stderr: 'err\n', exit_code: 3 }, `${name}: output and exit status`);
    const r2 = await p.tool('run_command', { command: 'echo a; sleep 30; echo b', timeout: 1 });
    t.hasFields(r2, { stdout: 'a\n', timed_out: true, exit_code: 124 }, `${name}: timeout`);
    const r3 = await p.tool('run_command', { command: 'echo $0' });
    t.is(r3.stdout, '/bin/sh\n', `${name}: /bin/sh -c`);
    const n1 = (server.log().match(/Starting session: command/g) ?? []).length;
    t.cmp(n1 - n0, '>=', 3, `${name}: each command opened a channel (${n1 - n0})`);
    return p;
  }

  const off = await plain('runner = false', { 'ssh.runner': 'false', 'log.level': 'info' }, s);
  t.is((await pgrep(runnerPat)).length, 0, 'runner = false: no runner on the host');
  t.deepEqual(fs.readdirSync(rdir), [], 'runner = false: nothing uploaded');
  t.ok(lines(off, /\[ssh\] runner = false: commands use plain exec/).length === 1, 'runner = false: said in the log');
  await off.close();

  const fake = path.join(tmpdir(), 'not-a-runner');
  fs.writeFileSync(fake, Buffer.from('\x7fELF but not really an executable of any machine\n'), { mode: 0o755 });
  const cr = await plain('cannot run', { ...ON, 'ssh.runner_path': fake }, s);
  await cr.tool('run_command', { command: 'true' });
  const notes = lines(cr, new RegExp(`the runner cannot run on ${who}, so its commands use plain exec \\(slower\\)`));
  t.is(notes.length, 1, 'cannot run: said once in the log', { notes });
  t.like(notes[0] ?? '', /sandgate\/sandgate-runner-[0-9a-f]{16}: .*(HELLO|EOF|format|not found)/, 'cannot run: with the directory tried and the reason');
  t.deepEqual(fs.readdirSync(rdir), [], 'cannot run: the uploaded file was removed again');
  await cr.close();

  const nw = await startSshd({ noXdg: true, home: '/dev/null' });
  const np = await plain('no writable place', ON, nw);
  const nwl = lines(np, /the runner cannot run on .*no writable directory/);
  t.is(nwl.length, 1, 'no writable place (HOME=/dev/null, no XDG_RUNTIME_DIR): said once in the log', { log: lines(np, /runner/) });
  await np.close();
  await sleep(50);
}, { timeout: 240 });
