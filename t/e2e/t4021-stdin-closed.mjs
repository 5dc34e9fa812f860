// Commands run with stdin closed: `cat; echo rc=$?` returns at once with
// rc=0, and a ping sent right after it is answered.
import { t, preflight, rawServer, sdkClient } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await rawServer();
  await srv.initialize();
  await srv.tool('run_command', { command: 'true' }); // make the default sandbox first
  const t0 = Date.now();
  const id = srv.sendRequest('tools/call', { name: 'run_command', arguments: { command: 'cat; echo rc=$?' } });
  const pingId = srv.sendRequest('ping');
  const pong = await srv.response(pingId, 5000);
  t.ok(pong, `a ping sent right after the command is answered (${Date.now() - t0} ms)`);
  t.deepEqual(pong?.msg.result, {}, 'the ping result is {}');
  const res = await srv.response(id, 15000);
  const took = Date.now() - t0;
  t.ok(res, 'cat; echo rc=$? returns');
  t.cmp(took, '<', 10000, `... quickly (${took} ms)`);
  const d = res?.msg.result?.structuredContent;
  t.is(d?.stdout, 'rc=0\n', 'cat saw EOF at once: rc=0');
  t.is(d?.timed_out, false, 'not timed out');

  // readers of stdin of every kind see EOF
  const r2 = await srv.tool('run_command', { command: 'read x; echo "read=$?"; python3 -c "import sys; print(len(sys.stdin.read()))"; head -c 10; echo done', timeout: 20 });
  t.is(r2.stdout, 'read=1\n0\ndone\n', 'read, python and head all see EOF on stdin');
  await srv.close();

  const s = await sdkClient();
  const r3 = await s.tool('run_code', { code: 'import sys\nprint(repr(sys.stdin.read()))', timeout: 20 });
  t.is(r3.stdout, "''\n", 'run_code: stdin is empty and closed');
  await s.close();
}, { timeout: 90 });
