// The official SDK client over Streamable HTTP runs every cloud tool on
// Docker; two sessions in parallel cannot see each other's sandboxes ("not
// found"); progress and log notifications arrive over SSE during the call;
// DELETE removes the session's containers (and only those); SIGTERM ends the
// rest and exits 0.
import { preflight, errorText, containerOf, CLOUD_TOOLS } from '../lib/sg.mjs';
import { t, startHttp, connect, containersOfSid, httpSdkLoad } from '../http/lib.mjs';

t.run(async () => {
  await preflight();
  const { types } = await httpSdkLoad();
  const srv = await startHttp({ fixtures: true });
  const [a, b] = await Promise.all([connect(srv.url, { name: 'client A' }), connect(srv.url, { name: 'client B' })]);
  t.isnt(a.sessionId, b.sessionId, 'two clients get two sessions');

  const names = (await a.client.listTools()).tools.map((x) => x.name);
  for (const n of CLOUD_TOOLS) t.ok(names.includes(n), `tools/list over HTTP has ${n}`);

  // ---- every cloud tool, client A, while B works in parallel
  const progress = [];
  let resultAt = 0;
  const created = await a.client.callTool({ name: 'create_sandbox', arguments: {} }, undefined, {
    timeout: 120000, onprogress: (p) => progress.push({ ...p, at: Date.now() }),
  });
  resultAt = Date.now();
  const sa = created.structuredContent?.sandbox_id;
  t.ok(!created.isError && sa, 'A: create_sandbox', created);
  t.cmp(progress.length, '>=', 1, 'A: create_sandbox progress reaches the client over SSE', progress);
  t.ok(progress.every((p) => p.at <= resultAt), 'A: the progress came before the result');

  const [code, bDefault] = await Promise.all([
    a.tool('run_code', { code: 'print(6*7)' }),
    b.tool('run_command', { command: 'echo b-was-here > /workspace/b.txt; hostname' }),
  ]);
  t.like(code.stdout, /^42\s*$/, 'A: run_code prints 42');
  const sb = bDefault.sandbox_id;
  t.ok(sb && sb !== sa, 'B: run_command made its own default sandbox');
  const cmd = await a.tool('run_command', { command: 'echo out; echo err >&2; exit 3' });
  t.hasFields(cmd, { stdout: 'out\n', stderr: 'err\n', exit_code: 3 }, 'A: run_command output and exit code');
  const w = await a.tool('write_file', { path: '/workspace/a.txt', content: 'hello over http\n' });
  t.is(w.bytes_written, 16, 'A: write_file');
  const r = await a.tool('read_file', { path: '/workspace/a.txt' });
  t.is(r.content, 'hello over http\n', 'A: read_file');
  const l = await a.tool('list_files', {});
  t.ok((l.files ?? []).some((f) => f.name === 'a.txt'), 'A: list_files shows a.txt');
  t.is(cmd.sandbox_id, sa, 'A: calls without sandbox_id use the created default');

  // ---- isolation: each session sees only its own sandboxes
  for (const [tool, args] of [['run_command', { command: 'true' }], ['read_file', { path: '/workspace/b.txt' }],
    ['list_files', {}], ['kill_sandbox', {}]]) {
    const x = await a.call(tool, { ...args, sandbox_id: sb });
    t.ok(x.isError && /not found/i.test(errorText(x)), `A cannot ${tool} B's sandbox: "not found"`, { text: errorText(x) });
  }
  const y = await b.call('run_command', { command: 'true', sandbox_id: sa });
  t.ok(y.isError && /not found/i.test(errorText(y)), 'B cannot use A\'s sandbox: "not found"', { text: errorText(y) });
  t.ok((await containerOf(sb))?.running, "B's sandbox survived A's attempts");

  // ---- log notifications during a call (fixture tool, ~100 ms)
  const logs = [];
  a.client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => logs.push({ ...n.params, at: Date.now() }));
  await a.client.setLoggingLevel('debug');
  const lr = await a.call('test_tool_with_logging', {});
  const lat = Date.now();
  t.ok(!lr.isError, 'A: a tool that logs completes');
  t.is(logs.length, 3, 'A: its three log notifications reached the client', logs);
  t.ok(logs.every((x) => x.at <= lat && x.level === 'info'), 'A: they came at level info, before the result');
  t.is(lr.content?.[0]?.type, 'text', 'fixture results are plain content blocks');

  const k = await a.tool('create_sandbox', {});
  const kill = await a.tool('kill_sandbox', { sandbox_id: k.sandbox_id });
  t.is(kill.success, true, 'A: kill_sandbox');

  // ---- DELETE ends A's session with its sandboxes, B is untouched
  const before = await containersOfSid(a.sessionId);
  t.is(before.length, 1, "A's session has one container (the killed one is gone)", before.map((c) => c.id));
  await a.terminate();
  t.deepEqual((await containersOfSid(a.sessionId)).map((c) => c.id), [], 'after DELETE returns, no container carries A\'s session label');
  t.ok((await containerOf(sb))?.running, "B's sandbox is still running");
  const after = await b.tool('run_command', { command: 'cat /workspace/b.txt' });
  t.is(after.stdout, 'b-was-here\n', 'B still works');
  await a.close();

  // ---- SIGTERM ends B's session too
  const stop = await srv.stop('SIGTERM', 60000);
  t.ok(stop?.code === 0 && stop.signal === null, 'SIGTERM: exit 0', stop);
  t.deepEqual((await containersOfSid(b.sessionId)).map((c) => c.id), [], "shutdown removed B's containers");
  await b.close();
}, { timeout: 240 });
