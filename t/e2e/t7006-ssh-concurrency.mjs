// Many calls at once on one SSH target whose sshd allows 4 sessions per
// connection (MaxSessions 4): 15 concurrent run_command calls all succeed
// with exact outputs (refused channels move to more connections), and
// concurrent file writes and reads (SFTP sessions count against the limit
// too) stay exact.
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd({ maxSessions: 4 });
  const srv = await sdkClient(sshArgs(s), sshEnv());
  await srv.tool('create_sandbox', {});

  const N = 15;
  const cmd = (i) => `printf 'call-%s\\n' ${i}; head -c ${i * 5000} /dev/zero | tr '\\0' x; sleep 1; printf 'err-%s' ${i} >&2; exit ${i}`;
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: N }, (_, i) => srv.call('run_command', { command: cmd(i + 1) })));
  const took = Date.now() - t0;
  const bad = [];
  results.forEach((r, i) => {
    const n = i + 1;
    const sc = r.structuredContent ?? {};
    if (r.isError || sc.stdout !== `call-${n}\n${'x'.repeat(n * 5000)}` || sc.stderr !== `err-${n}` || sc.exit_code !== n) {
      bad.push({ n, isError: r.isError, text: r.isError ? errorText(r) : undefined, stdoutLen: sc.stdout?.length, stderr: sc.stderr, exit: sc.exit_code });
    }
  });
  t.deepEqual(bad, [], `${N} concurrent run_command calls with MaxSessions 4: all succeed with exact output (${took} ms)`);
  t.cmp(took, '<', 15000, 'they ran concurrently (each sleeps 1 s)');
  const conns = (s.log().match(/Accepted publickey/g) ?? []).length;
  t.cmp(conns, '>=', Math.ceil(N / 4), `the refused channels opened more connections (${conns} logins)`);
  const refused = (s.log().match(/no more sessions/g) ?? []).length;
  t.diag(`sshd refused ${refused} channel(s) with "no more sessions"`);

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
}, { timeout: 180 });
