// Many calls at once on one SSH target whose sshd allows 4 sessions per
// connection (MaxSessions 4): 15 concurrent run_command calls all succeed
// with exact outputs, and concurrent file writes and reads (SFTP sessions
// count against the limit too) stay exact.  On plain exec each command is a
// channel: refused channels move to more connections.  With the runner (the
// default) the 15 share its one channel; the channel spreading is then
// checked on a second server with [ssh] runner = false.
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sshRunnerOn } from '../ssh/sshd.mjs';

const N = 15;
// Each command waits (up to 10 s by the clock) until all N have started: so
// the N are running at once however slowly the calls arrive (valgrind, a
// loaded machine), and on plain exec they need N channels, at least N/4
// logins.  Calls run one after another would each wait out the 10 s: the
// burst's time check below fails, within the test's timeout.
const barrier = (dir, i) => `mkdir -p ${dir}; : > ${dir}/${i}; end=$(($(date +%s) + 10)); ` +
  `while [ "$(ls ${dir} | wc -l)" -lt ${N} ] && [ "$(date +%s)" -lt $end ]; do sleep 0.05; done`;
const cmd = (i, dir) => `printf 'call-%s\\n' ${i}; head -c ${i * 5000} /dev/zero | tr '\\0' x; ${barrier(dir, i)}; printf 'err-%s' ${i} >&2; exit ${i}`;

// N concurrent commands, each with its own output and exit status.
async function burst(srv, s, mode, plain) {
  const before = (s.log().match(/Accepted publickey/g) ?? []).length;
  const t0 = Date.now();
  const dir = `barrier-${mode.replace(/\W+/g, '-')}`;
  const results = await Promise.all(Array.from({ length: N }, (_, i) => srv.call('run_command', { command: cmd(i + 1, dir) })));
  const took = Date.now() - t0;
  const bad = [];
  results.forEach((r, i) => {
    const n = i + 1;
    const sc = r.structuredContent ?? {};
    if (r.isError || sc.stdout !== `call-${n}\n${'x'.repeat(n * 5000)}` || sc.stderr !== `err-${n}` || sc.exit_code !== n) {
      bad.push({ n, isError: r.isError, text: r.isError ? errorText(r) : undefined, stdoutLen: sc.stdout?.length, stderr: sc.stderr, exit: sc.exit_code });
    }
  });
  t.deepEqual(bad, [], `${mode}: ${N} concurrent run_command calls with MaxSessions 4: all succeed with exact output (${took} ms)`);
  t.cmp(took, '<', 15000, `${mode}: they ran concurrently (each waits for all ${N} to start)`);
  const conns = (s.log().match(/Accepted publickey/g) ?? []).length - before;
  if (plain) {
    t.cmp(conns + before, '>=', Math.ceil(N / 4), `${mode}: the refused channels opened more connections (${conns + before} logins)`);
  } else {
    t.cmp(conns, '<=', 1, `${mode}: the ${N} commands shared the runner's channel (${conns} new logins)`);
  }
  const refused = (s.log().match(/no more sessions/g) ?? []).length;
  t.diag(`${mode}: sshd refused ${refused} channel(s) with "no more sessions" so far`);
}

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd({ maxSessions: 4 });
  const srv = await sdkClient(sshArgs(s), sshEnv());
  await srv.tool('create_sandbox', {});
  await burst(srv, s, sshRunnerOn() ? 'runner' : 'plain exec', !sshRunnerOn());

  // files: concurrent writes then reads, exact
  const M = 10;
  const body = (i) => `file ${i} `.repeat(1000 + i * 100);
  const writes = await Promise.all(Array.from({ length: M }, (_, i) => srv.call('write_file', { path: `c/f${i}.txt`, content: body(i) })));
  t.deepEqual(writes.map((w, i) => (w.isError ? `${i}: ${errorText(w)}` : null)).filter(Boolean), [], `${M} concurrent write_file calls succeed`);
  const reads = await Promise.all(Array.from({ length: M }, (_, i) => srv.call('read_file', { path: `c/f${i}.txt` })));
  t.deepEqual(reads.map((r, i) => (r.isError || r.structuredContent?.content !== body(i) ? i : null)).filter((x) => x !== null), [],
    `${M} concurrent read_file calls return exactly what was written`);

  // mixed: commands and files together
  const mixed = await Promise.all([
    ...Array.from({ length: 6 }, (_, i) => srv.call('run_command', { command: `echo mixed-${i}` })),
    ...Array.from({ length: 6 }, (_, i) => srv.call('read_file', { path: `c/f${i}.txt` })),
    srv.call('list_files', { path: 'c' }),
  ]);
  t.ok(mixed.every((r) => !r.isError), 'commands, reads and a listing at once all succeed',
    mixed.filter((r) => r.isError).map(errorText));
  t.deepEqual(mixed.slice(0, 6).map((r) => r.structuredContent?.stdout), Array.from({ length: 6 }, (_, i) => `mixed-${i}\n`), '... with exact outputs');
  t.is(mixed[12].structuredContent?.files?.length, M, '... and the listing sees every file');
  await srv.close();

  if (sshRunnerOn()) {
    const s2 = await startSshd({ maxSessions: 4 });
    const plain = await sdkClient(sshArgs(s2, { 'ssh.runner': 'false' }), sshEnv(), { name: 'runner = false' });
    await plain.tool('create_sandbox', {});
    await burst(plain, s2, 'runner = false', true);
    await plain.close();
  }
}, { timeout: 180 });
