// sandbox_shell_exec / sandbox_shell_read / shell_interrupt: exact output
// (no final newline, exit codes, stderr merged), persistence, stdin-readers
// and broken quoting that cannot swallow the protocol, a command that prints
// a fake marker, busy shells, timeouts followed by incremental reads,
// interrupts (a child, a builtin loop, MCP cancellation), a dead shell
// replaced with previous_shell, head/tail truncation at UTF-8 boundaries.
//
// The body is a function of the backend: SG_TEST_BACKEND=docker (default),
// ssh, fc, local or example (the plugin template).  It runs once per completion mode the backend has: on Docker
// with the runner (the end marker on the shell's fd 3, "status_fd") and
// with SANDGATE_DOCKER_RUNNER=false (markers in the output, "in_band");
// SSH likewise once ssh.so has its runner, else in-band; FC is in-band.
// Each run asserts its mode in shell_list and status.
import { t, preflight, sdkClient, errorText, checkResultShape, waitFor, sleep } from '../lib/sg.mjs';
import { backends as base } from '../lib/backends.mjs';

// setup() starts what the backend needs and gives sandgate's arguments.
// modes: one run of the body each, with extra server environment.
const IN_BAND = [{ completion: 'in_band', env: {} }];
// The shared backends, each with the completion modes its shells run in.
const backends = {
  docker: {
    ...base.docker,
    // Both explicit, so `make check-fallback` (runner off for all) runs both too.
    modes: [
      { completion: 'status_fd', env: { SANDGATE_DOCKER_RUNNER: 'true' } },
      { completion: 'in_band', env: { SANDGATE_DOCKER_RUNNER: 'false' } },
    ],
  },
  ssh: {
    ...base.ssh,
    modes: IN_BAND,
    setup: async () => {
      const sshd = await import('../ssh/sshd.mjs');
      const started = await base.ssh.setup();
      // With its runner (sshd.mjs then has sshRunnerOn) ssh.so offers a
      // status fd like Docker; without it SSH shells are in-band.
      const modes = typeof sshd.sshRunnerOn === 'function' && sshd.sshRunnerOn()
        ? [{ completion: 'status_fd', env: { SANDGATE_SSH_RUNNER: 'true' } },
          { completion: 'in_band', env: { SANDGATE_SSH_RUNNER: 'false' } }]
        : IN_BAND;
      return { ...started, modes };
    },
  },
  fc: { ...base.fc, modes: IN_BAND },
  example: { ...base.example, modes: IN_BAND },
  // local's runner is its jail's first process: there is no other way in;
  // so is a jailed SSH sandbox's
  local: { ...base.local, modes: [{ completion: 'status_fd', env: {} }] },
  sshjail: { ...base.sshjail, modes: [{ completion: 'status_fd', env: {} }] },
};

const MARKER = /[0-9a-f]{32}:[SEJB]/;

// A marker-like line: the old in-band form (\037 first) and the bare form
// the status channel carries, with a made-up nonce.
const FAKE_NONCE = '0123456789abcdef0123456789abcdef';

async function body(srv, be, mode) {
  const exec = (args) => srv.call('sandbox_shell_exec', args);
  const run = async (command, extra = {}) => {
    const res = await exec({ command, ...extra });
    if (res.isError) throw new Error(`sandbox_shell_exec ${command}: ${errorText(res)}`);
    return res.structuredContent;
  };
  // processes of the machine, through a one-shot command (any backend)
  const ps = async (sid) => (await srv.tool('run_command', { command: 'ps -eo args', sandbox_id: sid })).stdout;

  const t0 = Date.now();
  const first = await exec({ command: "printf 'no-newline'" });
  checkResultShape(first, 'sandbox_shell_exec');
  const r1 = first.structuredContent;
  t.hasFields(r1, { output: 'no-newline', exit_code: 0, status: 'completed' }, "printf 'no-newline' gives exactly no-newline, exit 0");
  t.like(r1.shell_id, /^sh_[0-9a-f]{12}$/, 'the result carries the shell_id');
  t.ok(Number.isInteger(r1.bash_pid) && r1.bash_pid > 1, `the result carries bash_pid (${r1.bash_pid})`);
  t.ok(typeof r1.sandbox_id === 'string' && r1.sandbox_created === true, 'no machine and no default: a sandbox was created lazily');
  t.cmp(Date.now() - t0, '<', 20000, 'first call (machine + shell start) well inside the timeout');
  const sid = r1.sandbox_id;
  const shell = r1.shell_id;
  const pid = r1.bash_pid;

  // the completion mode is visible, and is the one this run expects
  const sl = await srv.tool('sandbox_env', { action: 'shell_list' });
  t.is(sl.shells.find((x) => x.shell_id === shell)?.completion, mode.completion,
    `shell_list: completion is ${mode.completion}`, sl);
  const st = await srv.tool('sandbox_env', { action: 'status' });
  t.is(st.shells.find((x) => x.shell_id === shell)?.completion, mode.completion, `status: completion is ${mode.completion}`);

  const t1 = Date.now();
  t.hasFields(await run("printf 'x' && false"), { output: 'x', exit_code: 1, status: 'completed' }, "printf 'x' && false gives x, exit 1");
  t.hasFields(await run("printf 'a\\nb' > f; cat f"), { output: 'a\nb', exit_code: 0 }, "printf 'a\\nb' > f; cat f gives a\\nb");
  t.cmp(Date.now() - t1, '<', 3000, `two commands on a warm shell take well under the timeout (${Date.now() - t1} ms)`);

  const run2 = await run('echo out; echo err >&2; echo out2');
  t.is(run2.output, 'out\nerr\nout2\n', 'stderr is merged in order');
  await run('cd /tmp && export SG_FOO="b a r" && greet() { echo "hi $1"; }');
  t.is((await run('pwd; echo "$SG_FOO"; greet you')).output, '/tmp\nb a r\nhi you\n', 'cwd, exports and functions persist');
  await run('cd -');

  const t2 = Date.now();
  t.hasFields(await run('cat; echo after-cat'), { output: 'after-cat\n', exit_code: 0 }, 'cat returns at once (stdin is /dev/null)');
  t.hasFields(await run('read x; echo "rc=$?"'), { output: 'rc=1\n' }, 'read x returns at once');
  t.cmp(Date.now() - t2, '<', 3000, 'stdin readers do not hang');

  const quote = await run("echo 'unterminated");
  t.is(quote.status, 'completed', 'an unterminated quote completes');
  t.isnt(quote.exit_code, 0, `... with a non-zero exit (${quote.exit_code})`);
  t.like(quote.output, /unexpected EOF|unterminated|matching/, '... and the syntax error in the output');
  t.is((await run('cat <<EOF\nhere doc\nEOF')).output, 'here doc\n', 'a heredoc works');
  t.is((await run('cat <<EOF\nnever closed')).status, 'completed', 'an unclosed heredoc cannot swallow the end marker');
  t.is((await run('echo $((6*7))')).output, '42\n', 'the shell still answers');

  const fake = await run("printf '\\n0123456789abcdef0123456789abcdef:E:0\\n'; sleep 0.3; echo real-end");
  t.is(fake.output, '\n0123456789abcdef0123456789abcdef:E:0\nreal-end\n', 'a fake end marker in the output is just output');
  t.is(fake.exit_code, 0, '... and the real end is still found');

  // output that looks exactly like protocol lines, both forms, then stdin
  // readers and no final newline: all of it is output, exact and complete
  const fakes = `\x1f${FAKE_NONCE}:E:0\n${FAKE_NONCE}:E:0\n\x1f${FAKE_NONCE}:S\n${FAKE_NONCE}:J\n`;
  const lookalike = await run(`printf '\\037%s:E:0\\n%s:E:0\\n\\037%s:S\\n%s:J\\n' ${FAKE_NONCE} ${FAKE_NONCE} ${FAKE_NONCE} ${FAKE_NONCE}; `
    + "cat; read x; echo \"read=$?\"; while read -r l; do echo \"got $l\"; done; head -c 5; printf 'tail-no-newline'");
  t.hasFields(lookalike, { output: `${fakes}read=1\ntail-no-newline`, exit_code: 0, status: 'completed' },
    'marker look-alikes (both forms), cat, read and head on stdin: exact output, complete');
  const fd3 = await run('echo fake-status >&3; echo "rc=$?"');
  t.like(fd3.output, /rc=1\n$/, 'a command cannot write on fd 3 (closed for it)', fd3);
  t.is(fd3.exit_code, 0, '... and completes');
  const many = [];
  for (let i = 0; i < 25; i++) many.push((await run(`printf %s ${i}-ok`)).output);
  t.deepEqual(many, Array.from({ length: 25 }, (_, i) => `${i}-ok`), '25 quick commands: each gets exactly its own output');
  const bulk = await run("head -c 300000 /dev/zero | tr '\\0' a", { max_output: 400000 });
  t.is(bulk.output.length, 300000, `300000 bytes of output arrive complete before the end (${bulk.output.length})`);
  t.ok(/^a+$/.test(bulk.output), '... and exact');

  const bin = await run("printf 'a\\377b\\n'");
  t.is(bin.output, 'a\uFFFDb\n', 'invalid UTF-8 becomes U+FFFD');

  // two execs at once on one shell: the first gets its own output, the
  // second a busy error or its own output, never both mixed
  const [a, b] = await Promise.all([
    exec({ command: 'sleep 1; echo first', shell_id: shell }),
    (async () => { await sleep(100); return exec({ command: 'echo second', shell_id: shell }); })(),
  ]);
  t.hasFields(a.structuredContent ?? {}, { output: 'first\n', exit_code: 0 }, 'concurrent execs: the first gets exactly its own output');
  t.ok(b.isError ? /busy/.test(errorText(b)) : b.structuredContent.output === 'second\n',
    'concurrent execs: the second is a busy error or exactly its own output', { b });
  if (b.isError) t.like(errorText(b), /sandbox_shell_read|shell_interrupt/, 'the busy error says what to do');

  // timeout: status running, the command goes on; reads return only what is new
  const t3 = Date.now();
  const slow = await run('echo start; sleep 5; echo done', { timeout: 1 });
  t.cmp(Date.now() - t3, '<', 3000, `timeout 1 answers in time (${Date.now() - t3} ms)`);
  t.hasFields(slow, { status: 'running', exit_code: null }, 'a timed-out exec says status running, exit_code null');
  t.is(slow.output, 'start\n', 'the output so far comes with it');
  const busy = await exec({ command: 'echo no', shell_id: shell });
  t.ok(busy.isError && /busy/.test(errorText(busy)), 'an exec on the running shell is a busy error', { text: errorText(busy) });
  let seen = '';
  let fin = null;
  const reads = await waitFor(async () => {
    const r = await srv.tool('sandbox_shell_read', { shell_id: shell });
    seen += r.output;
    if (r.status === 'completed') fin = r;
    return r.status === 'completed';
  }, 15000, 300);
  t.ok(reads, 'sandbox_shell_read later reports completed');
  t.is(seen, 'done\n', 'the reads return done exactly once (only what is new)');
  t.is(fin?.exit_code, 0, '... with the exit code');
  t.hasFields(await srv.tool('sandbox_shell_read', { machine: sid }), { status: 'idle', output: '' }, 'read by machine: the default shell, now idle');

  // interrupt a child: nothing left behind, the same shell answers.  On SSH
  // and FC the sandbox shares the host's process table with every other
  // test, so the sleeps carry a fraction unique to this run.
  const tag = String(100000 + Math.floor(Math.random() * 899999));
  const bg = await run(`sleep 300.${tag}`, { wait: false });
  t.hasFields(bg, { status: 'running', confirmed: true }, 'wait=false: running and confirmed');
  const t4 = Date.now();
  const intr = await srv.tool('sandbox_env', { action: 'shell_interrupt', params: { shell_id: shell } });
  // promptly: at once here; a bash slow to report on a loaded machine is
  // waited for (up to 10 s after the 3.5 s of signal rounds), not replaced
  t.cmp(Date.now() - t4, '<', 15000, `shell_interrupt returns in time (${Date.now() - t4} ms)`);
  t.is(intr.interrupted, true, 'shell_interrupt: interrupted');
  t.ok(!(await waitFor(async () => !(await ps(sid)).includes(`sleep 300.${tag}`), 3000) === false),
    'no sleep 300 is left behind', { ps: await ps(sid) });
  const after = await run('echo alive');
  t.hasFields(after, { output: 'alive\n', bash_pid: pid }, 'the shell answers the next command (same bash)');

  // a bash that is slow to report (stopped here from outside, as a loaded
  // machine leaves a process unscheduled) is waited for, not replaced: only
  // a busy bash costs the shell.  It is let go 5 s in, after every round of
  // signals has been sent.
  const tag2 = String(100000 + Math.floor(Math.random() * 899999));
  await run(`sleep 300.${tag2}`, { wait: false });
  // stopped once the sleep runs: a bash stopped before it forks would run
  // it only when let go, after every round of signals
  t.ok(await waitFor(async () => (await ps(sid)).includes(`sleep 300.${tag2}`), 5000), 'the sleep runs');
  const stop = await srv.tool('run_command', { command: `kill -STOP ${pid}`, sandbox_id: sid });
  t.is(stop.exit_code, 0, 'bash is stopped from outside');
  const cont = srv.tool('run_command', { command: `sleep 5; kill -CONT ${pid}`, sandbox_id: sid });
  const t6 = Date.now();
  const held = await srv.tool('sandbox_env', { action: 'shell_interrupt', params: { shell_id: shell } });
  const heldMs = Date.now() - t6;
  t.is((await cont).exit_code, 0, 'bash is let go from outside');
  t.hasFields(held, { interrupted: true, status: 'completed', bash_pid: pid },
    'an interrupted bash that is held up is waited for: completed, same bash');
  t.is(held.shell_replaced, undefined, '... and not replaced');
  t.cmp(heldMs, '>=', 3500, `... the interrupt waited until it was let go (${heldMs} ms)`);
  t.ok(!(await waitFor(async () => !(await ps(sid)).includes(`sleep 300.${tag2}`), 3000) === false),
    '... no sleep 300 is left behind', { ps: await ps(sid) });
  t.hasFields(await run('echo alive'), { output: 'alive\n', bash_pid: pid }, '... and the same bash answers the next command');

  // a USR2 that is no interrupt of this command (one of an interrupt's
  // rounds come late, on a slow machine) does not end it: bash's trap
  // returns only for the command the interrupt named
  const late = exec({ command: 'sleep 1; echo fine', shell_id: shell });
  await sleep(300);
  await srv.tool('run_command', { command: `kill -USR2 ${pid}`, sandbox_id: sid });
  t.hasFields((await late).structuredContent ?? {}, { output: 'fine\n', exit_code: 0 },
    'a stray USR2 does not end the command that runs');

  // a builtin loop runs inside bash itself
  await run('while :; do :; done', { wait: false });
  const loop = await srv.tool('sandbox_env', { action: 'shell_interrupt', params: { shell_id: shell } });
  t.is(loop.interrupted, true, 'a builtin loop is interrupted');
  const afterLoop = await run('echo ok');
  t.is(afterLoop.output, 'ok\n', 'the shell answers after a builtin loop');
  if (afterLoop.bash_pid !== pid || loop.shell_replaced) {
    t.ok(loop.previous_shell || afterLoop.previous_shell, 'a replaced shell says so in previous_shell');
  }

  // a builtin loop that ignores the interrupt costs the shell
  await run("trap '' USR2; while :; do :; done", { wait: false });
  const t5 = Date.now();
  const hard = await srv.tool('sandbox_env', { action: 'shell_interrupt', params: { shell_id: shell } });
  t.cmp(Date.now() - t5, '<', 15000, `an unstoppable loop is dealt with in time (${Date.now() - t5} ms)`);
  t.hasFields(hard, { interrupted: true, shell_replaced: true }, 'a loop that ignores the interrupt: the shell is replaced');
  t.hasFields(hard.previous_shell ?? {}, { exit_reason: 'interrupted' }, '... and previous_shell says so');
  t.isnt(hard.bash_pid, afterLoop.bash_pid, '... with a new bash_pid');
  t.is((await run('echo new-shell', { shell_id: shell })).output, 'new-shell\n', 'the replacement answers');

  // MCP cancellation of a waiting exec interrupts the command
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(), 800);
  const cancelled = await srv.call('sandbox_shell_exec', { command: `sleep 301.${tag}`, shell_id: shell, timeout: 60 },
    { signal: ctl.signal }).then(() => false, () => true);
  t.ok(cancelled, 'the client cancelled the waiting exec');
  const calm = await waitFor(async () => {
    const r = await exec({ command: 'echo calm', shell_id: shell });
    return !r.isError && r.structuredContent.output === 'calm\n';
  }, 10000, 300);
  t.ok(calm, 'after a cancellation the shell takes commands again');
  t.ok(!(await ps(sid)).includes(`sleep 301.${tag}`), 'the cancelled command is gone');

  // a dead shell is replaced; the first result after says so, once
  const dead = await run('echo bye; exit 7');
  t.is(dead.status, 'terminated', 'exit 7: status terminated');
  t.is(dead.output, 'bye\n', '... with its output');
  const back = await run('echo back');
  t.is(back.output, 'back\n', 'the next command runs in a fresh shell');
  t.is(back.shell_id, shell, '... under the same shell_id');
  t.isnt(back.bash_pid, dead.bash_pid, '... with a new bash_pid');
  t.hasFields(back.previous_shell ?? {}, { last_command: 'echo bye; exit 7', exit_reason: 'exit', exit_code: 7 },
    'previous_shell: last command, exit reason, exit code');
  t.is(back.previous_shell?.previous_bash_pid, dead.bash_pid, 'previous_shell: the old pid');
  t.is((await run('true')).previous_shell, undefined, 'previous_shell is reported once');

  // head/tail truncation by bytes, at character boundaries
  const big = await run('seq 1 100000', { max_output: 1000 });
  t.like(big.output, /^1\n2\n3\n/, 'truncated output keeps the head');
  t.like(big.output, /\n99999\n100000\n$/, '... and the tail');
  t.like(big.output, /\[sandgate: \d+ bytes dropped from the middle of the output\]/, '... and says how much was dropped');
  t.cmp(Buffer.byteLength(big.output), '<=', 1100, `... and is about max_output bytes (${Buffer.byteLength(big.output)})`);
  t.is(big.dropped_bytes + 1000 >= 588895 - 10, true, `dropped_bytes is reported (${big.dropped_bytes})`);
  const utf = await run("for i in $(seq 1 3000); do printf 'é'; done; echo", { max_output: 101 });
  t.ok(!utf.output.includes('\uFFFD'), 'a cut never splits a UTF-8 character');

  const all = [r1, run2, slow, after, back, big, quote, dead];
  t.ok(all.every((r) => !MARKER.test(r.output)), 'no protocol marker residue in any output');
  return sid;
}

t.run(async () => {
  const be = backends[process.env.SG_TEST_BACKEND || 'docker'];
  if (!be) await t.bailOut(`unknown SG_TEST_BACKEND ${process.env.SG_TEST_BACKEND}`);
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  for (const mode of be.modes) {
    t.diag(`${be.name}: shells with completion ${mode.completion}`);
    const srv = await sdkClient(be.args, { ...be.env, ...mode.env });
    await body(srv, be, mode);
    await srv.close();
  }
}, { timeout: 360 });
