// Fault: the FC service drops a stream or a connection mid-call
// (doc/faults.md):
//   run_command whose process stream is cut while the command runs: the
//     call fails saying the stream ended without an end event, and the
//     command is killed (SendSignal), not left running in the sandbox;
//   cut after the command ended, before the end event: the same error,
//     nothing runs;
//   run_code whose /execute stream is cut: the call fails, the kernel's
//     state survives;
//   write_file whose upload connection is dropped: never re-sent, the call
//     fails, the old content is intact, no temporary file; read_file: the
//     dropped request is retried and succeeds.
// Every time: no sanitizer report, no process left, and at the session's
// end no sandbox.
import { t, preflight, sdkClient, errorText, waitFor } from '../lib/sg.mjs';
import { backendFixture } from '../lib/faults.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const fx = await backendFixture('fc');
  const emu = fx.emu;
  const srv = await sdkClient(fx.args(), fx.env());
  const sb = await srv.tool('create_sandbox', {});
  const sid = sb.sandbox_id;
  await srv.tool('write_file', { path: 'keep.txt', content: 'old content' });

  // the stream cut while the command runs
  await emu.faults([{ op: 'start', dropAfterMs: 800 }]);
  const t0 = Date.now();
  let r = await srv.call('run_command', { command: 'echo started; sleep 3175; echo never' });
  t.ok(r.isError && /without an end event/.test(errorText(r)), 'a stream cut while the command runs: the call fails saying so',
    { text: errorText(r) });
  t.cmp(Date.now() - t0, '<', 20000, 'and it does not wait for the command');
  await fx.noProcess(sid, /^sleep 3175$/, 'a stream cut while the command runs');
  t.deepEqual(await fx.execs(sid), [], 'the emulator lists no process of the sandbox');

  // the stream cut after the command ended
  await emu.faults([{ op: 'start', drop: true }]);
  r = await srv.call('run_command', { command: 'echo partial; sleep 0.2' });
  t.ok(r.isError && /without an end event/.test(errorText(r)), 'a stream cut before the end event: the call fails saying so',
    { text: errorText(r) });
  t.deepEqual(await fx.execs(sid), [], 'nothing runs');

  // run_code's /execute cut
  t.ok(!(await srv.call('run_code', { code: 'x = 41' })).isError, 'run_code sets x');
  await emu.faults([{ op: 'execute', drop: true }]);
  r = await srv.call('run_code', { code: 'print(x)' });
  t.ok(r.isError, 'run_code whose stream is cut fails', { text: errorText(r) });
  r = await srv.call('run_code', { code: 'print(x + 1)' });
  t.like(JSON.stringify(r.structuredContent ?? errorText(r)), /42/, 'the kernel kept its state');

  // write_file: the upload's connection dropped
  await emu.faults([{ op: 'files.write', reset: true }]);
  r = await srv.call('write_file', { path: 'keep.txt', content: 'new content' });
  t.ok(r.isError, 'write_file whose upload connection dropped fails (never re-sent)', { text: errorText(r) });
  t.is(await fx.read(sid, '/home/user/keep.txt'), 'old content', '... the old content is intact');
  await fx.noTemp(sid, '/home/user', 'upload connection dropped');
  await emu.faults([{ op: 'files.read', reset: true }]);
  r = await srv.call('read_file', { path: 'keep.txt' });
  t.is(r.structuredContent?.content, 'old content', 'read_file whose connection dropped is retried and succeeds');

  t.ok(!(await srv.call('run_command', { command: 'true' })).isError, 'the sandbox still works');
  await srv.close();
  await fx.noMachineOf(srv.pid, 'session end');
  t.ok(await waitFor(async () => (await fx.procs(sid, /sleep 3175/)).length === 0, 1000), 'no sleep 3175 anywhere');
}, { timeout: 120 });
