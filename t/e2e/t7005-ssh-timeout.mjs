// A timed-out command on SSH: the result comes back (timed_out, exit_code
// 124, the partial output) and its whole process group is gone from the host
// (pgrep), including children that ignore SIGTERM.  A cancelled call kills
// the same way.  A command flooding its output still times out on time,
// with the output capped and flagged.
import { t, preflight, sdkClient, sleep, waitFor } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sh, procPattern as pat, hostProcs as procs } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const srv = await sdkClient(sshArgs(s, { 'log.level': process.env.SG_SSH_LOG ?? 'info' }), sshEnv());
  const tag = `sgmark${process.pid}x${Date.now()}`;
  // a script whose name pgrep can find; its sleep is in the same group
  await srv.tool('write_file', { path: `${tag}.sh`, content: 'sleep 300\n' });

  const t0 = Date.now();
  const res = await srv.tool('run_command', {
    command: `echo started; sh ./${tag}.sh & (trap '' TERM; exec sh ./${tag}.sh) & sh ./${tag}.sh`,
    timeout: 2,
  });
  const took = Date.now() - t0;
  t.hasFields(res, { timed_out: true, exit_code: 124, stdout: 'started\n' }, 'timeout: timed_out, exit_code 124 and the partial output');
  t.cmp(took, '<', 8000, `the result came back soon after the 2 s timeout (${took} ms)`);
  const left = await waitFor(async () => (await procs(tag)).length === 0, 5000);
  t.ok(left, 'no process of the timed-out command is left on the host (pgrep), TERM-ignoring ones included',
    { left: await sh(`pgrep -af '${pat(tag)}' || true`) });

  // cancellation: notifications/cancelled from the SDK's AbortSignal
  const ac = new AbortController();
  const pending = srv.call('run_command', { command: `sh ./${tag}.sh`, timeout: 120 }, { signal: ac.signal });
  pending.catch(() => {});
  await waitFor(async () => (await procs(tag)).length > 0, 5000, 100);
  t.ok((await procs(tag)).length > 0, 'the command to cancel is running');
  ac.abort('test cancels');
  await pending.then(() => t.fail('the cancelled call rejects on the client'), () => t.pass('the cancelled call rejects on the client'));
  const gone = await waitFor(async () => (await procs(tag)).length === 0, 8000);
  t.ok(gone, 'cancellation killed the process group on the host', { left: await sh(`pgrep -af '${pat(tag)}' || true`) });

  // a flood: capped, flagged, and still on time
  const f0 = Date.now();
  const flood = await srv.tool('run_command', { command: `yes flood-${tag}`, timeout: 2 });
  t.ok(flood.timed_out && flood.truncated === true && flood.cut?.stdout?.output_cap_hit === true
    && flood.cut?.stdout?.total_bytes === 16 * 1024 * 1024 && flood.stdout.startsWith(`flood-${tag}\n`),
    'a flood of output: timed out, stdout capped at [sandbox] output_cap (16 MiB) and said so',
    { timed_out: flood.timed_out, cut: flood.cut, len: flood.stdout.length });
  t.cmp(Date.now() - f0, '<', 8000, 'the flood did not hold the timeout off');
  t.ok(await waitFor(async () => (await procs(`yes flood-${tag}`)).length === 0, 3000), 'no yes process is left');

  // the connection still works after all that
  t.is((await srv.tool('run_command', { command: 'echo fine' })).stdout, 'fine\n', 'the sandbox still runs commands');
  await sleep(100);
  await srv.close();
}, { timeout: 120 });
