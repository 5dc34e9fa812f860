// Fault: the Docker engine dies or restarts mid-call (doc/faults.md).  A
// second engine of the test's own (t/lib/engine.mjs) so no other container
// is touched.
//   1. kill -9 of dockerd while run_command runs: the call fails and says
//      the connection to the engine broke; while the engine is down a call
//      fails with "cannot connect to the docker daemon"; once it is back
//      (which stopped the container: no live-restore) the next call starts
//      the container again and works in the same sandbox, files kept, the
//      command gone.
//   2. write_file whose upload the engine did but never answered, then a
//      graceful restart (SIGTERM): the call fails, the file keeps its old
//      content; the temporary file, which could not be removed while the
//      engine was down, is removed by the next exec in the sandbox.
//   3. kill -9 while a large write_file uploads: old or new content, never
//      a mix, no temporary file.
// Every time: no sanitizer report, no running exec, no process of the
// command, and at the session's end no container of this sandgate.
import { t, preflight, sdkClient, errorText, sleep, waitFor } from '../lib/sg.mjs';
import { startEngine } from '../lib/engine.mjs';
import { backendFixture } from '../lib/faults.mjs';

t.run(async () => {
  await preflight();
  const eng = await startEngine();
  const fx = await backendFixture('docker', { engine: eng });
  // The archive path (the runner off): parts 2 and 3 hold and cut its PUT
  // of the archive; the runner's own faults are t8003-t8005's.
  const srv = await sdkClient([...fx.args(), '--set', 'docker.runner=false']);
  const first = await srv.tool('run_command', { command: 'echo ready' });
  const sid = first.sandbox_id;
  await srv.tool('write_file', { path: 'keep.txt', content: 'old content' });

  // ---- 1. kill -9 during run_command
  const running = srv.call('run_command', { command: 'echo started; sleep 3171; echo never' });
  t.ok(await waitFor(async () => (await fx.procs(sid, /^sleep 3171$/)).length > 0, 15000), 'the command runs');
  await eng.kill();
  const cut = await running;
  t.ok(cut.isError, 'kill -9 of the engine: the call in flight fails', { result: cut });
  t.like(errorText(cut), /runner connection broke|docker engine|docker daemon/, '... and says the engine connection broke');
  const down = await srv.call('run_command', { command: 'echo down' });
  t.like(errorText(down), /^cannot connect to the docker daemon at .*dockerd is not running/,
    'while the engine is down: "cannot connect to the docker daemon ... dockerd is not running"');
  await eng.start();
  const back = await srv.call('run_command', { command: 'echo back; cat keep.txt' });
  t.ok(!back.isError, 'after the restart the next call works', { text: errorText(back) });
  t.is(back.structuredContent?.sandbox_id, sid, '... in the same sandbox');
  t.is(back.structuredContent?.stdout, 'back\nold content', '... whose files were kept');
  await fx.noProcess(sid, /^sleep 3171$/, 'kill -9 during run_command');
  t.deepEqual(await fx.execs(sid), [], 'kill -9 during run_command: no exec still runs');

  // ---- 2. the upload done, its answer lost, then a graceful restart
  const hold = eng.holdResponse(/^PUT \/[^ ]*containers\/[0-9a-f]+\/archive/);
  const writing = srv.call('write_file', { path: 'keep.txt', content: 'new content '.repeat(1000) });
  await hold.answered;
  const tmpSeen = (await fx.list(sid, '/workspace')).filter((n) => n.includes('.sg-'));
  t.is(tmpSeen.length, 1, 'the engine wrote the temporary file; its answer is held', { names: tmpSeen });
  const stopping = eng.stop();
  await sleep(300);
  hold.cut();
  const wr = await writing;
  t.ok(wr.isError, 'a write whose upload was never answered fails', { result: wr });
  await stopping;
  await eng.start();
  const rd = await srv.call('read_file', { path: 'keep.txt' });
  t.is(rd.structuredContent?.content, 'old content', 'after the restart the file has its old content');
  const ls = await srv.tool('list_files', { path: '/workspace' });
  t.deepEqual(ls.files.map((x) => x.name).filter((n) => n.includes('.sg-')), [],
    'list_files shows no temporary file (the first exec after the restart removed it)', { ls });
  await fx.noTemp(sid, '/workspace', 'upload answer lost, engine restarted');
  t.ok(!(await srv.call('write_file', { path: 'keep.txt', content: 'written after' })).isError, 'a new write works');

  // ---- 3. kill -9 while a large write uploads
  const big = 'B'.repeat(8 << 20);
  const putting = eng.whenRequest(/^PUT \/[^ ]*containers\/[0-9a-f]+\/archive/);
  const w3 = srv.call('write_file', { path: 'keep.txt', content: big });
  await putting;
  await eng.kill();
  const r3 = await w3;
  t.pass(`kill -9 during an 8 MiB write_file: ${r3.isError ? `failed: ${errorText(r3).slice(0, 120)}` : 'it finished first'}`);
  await eng.start();
  const after = await srv.call('run_command', { command: 'wc -c < keep.txt; head -c 1 keep.txt' });
  t.ok(['13\nw', `${8 << 20}\nB`].includes(after.structuredContent?.stdout),
    'the file holds the old content or the whole new one', { stdout: after.structuredContent?.stdout, text: errorText(after) });
  await fx.noTemp(sid, '/workspace', 'kill -9 during a large write');
  t.deepEqual(await fx.execs(sid), [], 'no exec still runs');

  await srv.close();
  await fx.noMachineOf(srv.pid, 'session end after the faults');
}, { timeout: 300 });
