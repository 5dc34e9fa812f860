// Injected faults on fc.so: idempotent requests (get, list, file read,
// ListDir, Stat, set timeout) are retried after 429 (honouring Retry-After
// within [fc] retry_after_max), 502 and 503 and a dropped connection, then
// succeed; when retries run out, or the Retry-After is too long, the error
// names the HTTP status and the server's message.  Non-idempotent requests
// (create, file write, process start, /execute) are never re-sent: the
// emulator counts them as they arrive.
import fs from 'node:fs';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { startEmulator, noSecrets } from '../fc/emu.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const emu = await startEmulator();
  const srv = await sdkClient(emu.args(['--set', 'log.level=debug', '--set', 'fc.retry_after_max=5']), emu.env());
  const outputs = [];
  const call = async (tool, args) => {
    const res = await srv.call(tool, args);
    outputs.push(JSON.stringify(res));
    return res;
  };
  const ops = async (op) => (await emu.state()).log.filter((l) => l.op === op);
  const counts = async () => (await emu.state()).counts;

  const made = await call('create_sandbox', {});
  const sid = made.structuredContent.sandbox_id;
  await call('write_file', { path: '/home/user/f.txt', content: 'data' });

  // ---- idempotent: retry, then success ----
  let before = (await ops('listdir')).length;
  await emu.faults([{ op: 'listdir', status: 503, message: 'busy', times: 2 }]);
  let res = await call('list_files', {});
  t.ok(!res.isError, 'list_files after two 503s: success');
  t.is((await ops('listdir')).length - before, 3, 'ListDir was sent three times');

  before = (await ops('files.read')).length;
  await emu.faults([{ op: 'files.read', status: 429, retryAfter: 1, message: 'slow down' }]);
  let t0 = Date.now();
  res = await call('read_file', { path: '/home/user/f.txt' });
  t.ok(!res.isError && res.structuredContent.content === 'data', 'read_file after a 429: success');
  t.cmp(Date.now() - t0, '>=', 950, 'read_file waited out Retry-After: 1');
  t.is((await ops('files.read')).length - before, 2, 'the read was sent twice');

  before = (await ops('get')).length;
  await emu.faults([{ op: 'files.read', status: 502, message: 'bad gateway' }]);
  res = await call('read_file', { path: '/home/user/f.txt' });
  t.ok(!res.isError, 'read_file after a 502: success');
  t.is((await ops('get')).length - before, 1, 'a data-plane 502 was first checked with GET /sandboxes/{id}');

  await emu.faults([{ op: 'stat', reset: true }]);
  res = await call('read_file', { path: '/home/user/f.txt' });
  t.ok(!res.isError, 'a dropped connection on an idempotent request is retried');

  // ---- idempotent: retries run out, the error says what the server said ----
  before = (await ops('listdir')).length;
  await emu.faults([{ op: 'listdir', status: 503, message: 'backend overloaded', times: 10 }]);
  res = await call('list_files', {});
  t.ok(res.isError, 'list_files with 503 for good: isError');
  t.like(errorText(res), /HTTP 503/, 'the error names the status', { text: errorText(res) });
  t.like(errorText(res), /backend overloaded/, 'the error quotes the server\'s message');
  t.is((await ops('listdir')).length - before, 4, 'one try and [fc] retries (3) more');
  await emu.clearFaults();

  before = (await ops('files.read')).length;
  await emu.faults([{ op: 'files.read', status: 429, retryAfter: 60, message: 'quota exceeded' }]);
  t0 = Date.now();
  res = await call('read_file', { path: '/home/user/f.txt' });
  t.ok(res.isError && /HTTP 429/.test(errorText(res)) && /quota exceeded/.test(errorText(res)),
    'a Retry-After past retry_after_max is not waited: HTTP 429 and the message', { text: errorText(res) });
  t.cmp(Date.now() - t0, '<', 3000, 'and it fails at once');
  t.is((await ops('files.read')).length - before, 1, 'the read was not re-sent');

  // ---- non-idempotent: never re-sent ----
  // run_code's first Python call gives the kernel its output_files hook
  // (an /execute of its own): done here, so each fault below meets the call's.
  t.ok(!(await call('run_code', { code: '1' })).isError, 'run_code works before the faults');
  const nonIdem = [
    ['create', 'create_sandbox', {}, { status: 503, message: 'no capacity' }, /HTTP 503.*no capacity/],
    ['create', 'create_sandbox', {}, { status: 429, retryAfter: 1, message: 'too many' }, /HTTP 429.*too many/],
    ['create', 'create_sandbox', {}, { reset: true }, /create sandbox: .*(not re-sent|connection failed)/],
    ['files.write', 'write_file', { path: '/home/user/g.txt', content: 'x' }, { status: 503, message: 'disk busy' }, /HTTP 503.*disk busy/],
    ['files.write', 'write_file', { path: '/home/user/g.txt', content: 'x' }, { status: 502, message: 'gw' }, /HTTP 502/],
    ['start', 'run_command', { command: 'echo x' }, { status: 503, message: 'envd busy' }, /HTTP 503.*envd busy/],
    ['start', 'run_command', { command: 'echo x' }, { status: 500, text: true, message: 'fork/exec /bin/bash: no such file or directory' },
      /HTTP 500.*fork\/exec/],
    ['start', 'run_command', { command: 'echo x' }, { reset: true }, /start process: .*(not re-sent|connection failed)/],
    ['start', 'run_command', { command: 'echo partial; sleep 0.2' }, { drop: true }, /without an end event/],
    ['execute', 'run_code', { code: 'print(1)' }, { status: 500, message: 'kernel died' }, /HTTP 500.*kernel died/],
    ['execute', 'run_code', { code: 'print(1)' }, { drop: true }, /end_of_execution/],
  ];
  for (const [op, tool, args, fault, re] of nonIdem) {
    const n0 = (await counts())[op] ?? 0;
    await emu.faults([{ op, ...fault }]);
    const r = await call(tool, args);
    const n1 = (await counts())[op] ?? 0;
    const what = `${tool} with ${JSON.stringify(fault)}`;
    t.ok(r.isError && re.test(errorText(r)), `${what}: isError ${re}`, { text: errorText(r) });
    t.is(n1 - n0, 1, `${what}: ${op} arrived exactly once`);
    await emu.clearFaults();
  }
  res = await call('run_command', { command: 'echo still fine' });
  t.ok(!res.isError && res.structuredContent.sandbox_id === sid, 'the sandbox still works after the faults');

  // ---- keepalive failures are logged, not fatal ----
  await emu.faults([{ op: 'timeout', status: 500, message: 'keepalive broken', times: 20 }]);
  await new Promise((r) => setTimeout(r, 10500)); // past keepalive_interval
  res = await call('run_command', { command: 'echo ok' });
  t.ok(!res.isError, 'a call whose keepalive fails still succeeds');
  await new Promise((r) => setTimeout(r, 1500));
  await emu.clearFaults();
  const stderr0 = fs.readFileSync(srv.stderrPath, 'utf8');
  t.like(stderr0, /keepalive of sandbox sbx-[^ ]+ failed: fc: set sandbox timeout: HTTP 500: keepalive broken/,
    'the keepalive failure is logged with the status and message');

  await srv.close();
  noSecrets({ stderr: fs.readFileSync(srv.stderrPath, 'utf8'), outputs: outputs.join('\n') }, await emu.secrets(),
    'no API key or access token in stderr or results');

  // ---- a wrong key: 401, named, and the key is not in the message ----
  const bad = await sdkClient(emu.args(), emu.env({ ABX_SANDBOX_API_KEY: 'sk-wrong-key-0123456789' }));
  const r401 = await bad.call('run_command', { command: 'true' });
  t.ok(r401.isError && /HTTP 401/.test(errorText(r401)) && /api_key/.test(errorText(r401)),
    'a wrong key: HTTP 401 and a hint to check [fc] api_key', { text: errorText(r401) });
  t.unlike(errorText(r401), /sk-wrong-key/, 'the wrong key is not echoed');
  await bad.close();
  t.unlike(fs.readFileSync(bad.stderrPath, 'utf8'), /sk-wrong-key/, 'nor logged');
}, { timeout: 180 });
