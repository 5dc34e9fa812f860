// How stdio takes its input: reading passes between threads (the one that
// reads a tools/call runs it), so these check that nothing is lost, doubled
// or reordered when many messages arrive in one write (calls and pings
// interleaved: the calls hand the rest of the buffer on), and that a
// regular file as stdin (which epoll cannot watch) is read to its end,
// unterminated last line included, and that the session ends only after
// the last line (calls early in a file once ended it early: the call's
// thread met the end of the file while later lines were still buffered).
// SIGTERM in the middle of a burst ends the session cleanly: no call
// starts after the session's end (one did, after the drain).  A line over
// [server] max_message_bytes gets one error, however many reads it spans
// (it got one per read), with the id its first bytes hold.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, rawServer, runCli, tmpdir, resultData, checkSanitizer } from '../lib/sg.mjs';

const ROUNDS = 12;

t.run(async () => {
  await preflight({ docker: false });

  // One write: ROUNDS x (tools/call, ping, unknown-id cancel).
  const srv = await rawServer();
  await srv.initialize();
  let burst = '';
  for (let k = 0; k < ROUNDS; k++) {
    burst += `${JSON.stringify({ jsonrpc: '2.0', id: `c${k}`, method: 'tools/call', params: { name: 'sandbox_env', arguments: { action: 'help' } } })}\n`;
    burst += `${JSON.stringify({ jsonrpc: '2.0', id: `p${k}`, method: 'ping' })}\n`;
    burst += `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: `none${k}` } })}\n`;
  }
  srv.sendRaw(burst);
  const calls = [];
  for (let k = 0; k < ROUNDS; k++) calls.push(await srv.response(`c${k}`, 30000));
  const pings = [];
  for (let k = 0; k < ROUNDS; k++) pings.push(await srv.response(`p${k}`, 30000));
  t.is(calls.filter((r) => r && Array.isArray(resultData(r.msg.result)?.default_actions)).length, ROUNDS,
    `all ${ROUNDS} tools/call in one write are answered with the sandbox_env help`);
  t.is(pings.filter((r) => r && r.msg.result && Object.keys(r.msg.result).length === 0).length, ROUNDS,
    `all ${ROUNDS} pings in the same write are answered`);
  const order = srv.messages().filter((m) => typeof m.id === 'string' && m.id.startsWith('p')).map((m) => m.id);
  t.deepEqual(order, Array.from({ length: ROUNDS }, (_, k) => `p${k}`), 'the pings are answered in the order they came');
  const ids = srv.messages().filter((m) => 'id' in m).map((m) => m.id);
  t.is(ids.length, new Set(ids).size, 'no response is sent twice', { ids });
  t.is(srv.queue.length, 0, 'nothing else was sent (no reply to the cancel notifications)',
    { extra: srv.queue.map((r) => r.text.slice(0, 200)) });
  await srv.close();

  // A regular file as stdin.
  const file = path.join(tmpdir(), 't2050-input.jsonl');
  const lines = [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't2050', version: '1' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'sandbox_env', arguments: { action: 'help' } } },
    { jsonrpc: '2.0', id: 3, method: 'ping' },
    { jsonrpc: '2.0', id: 4, method: 'tools/list' },
  ].map((m) => JSON.stringify(m)).join('\n');
  fs.writeFileSync(file, `${lines}\n${JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'sandbox_env', arguments: { action: 'help' } } })}`);
  const r = await runCli(['stdio'], {}, { stdinFile: file, timeout: 60000 });
  t.is(r.code, 0, 'with a regular file as stdin, sandgate exits with status 0 at its end', { stderr: r.stderr.slice(-2000) });
  const out = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  t.deepEqual(out.map((m) => m.id).sort(), [1, 2, 3, 4, 5], 'every request of the file is answered once, the unterminated last line too',
    { ids: out.map((m) => m.id) });
  const last = out.find((m) => m.id === 5);
  t.ok(Array.isArray(resultData(last?.result)?.default_actions), 'the last, unterminated tools/call gets its result');
  t.deepEqual(out.filter((m) => m.id !== 2 && m.id !== 5).map((m) => m.id), [1, 3, 4],
    'requests answered on the reading thread keep their order');

  // A file whose calls come early and whose last call comes after many
  // pings, every line terminated.
  const PINGS = 3000;
  const many = [lines];
  for (let k = 0; k < 3; k++) many.push(JSON.stringify({ jsonrpc: '2.0', id: `early${k}`, method: 'tools/call', params: { name: 'sandbox_env', arguments: { action: 'help' } } }));
  for (let k = 0; k < PINGS; k++) many.push(JSON.stringify({ jsonrpc: '2.0', id: `ping${k}`, method: 'ping' }));
  many.push(JSON.stringify({ jsonrpc: '2.0', id: 'late', method: 'tools/call', params: { name: 'sandbox_env', arguments: { action: 'help' } } }));
  fs.writeFileSync(file, `${many.join('\n')}\n`);
  const r2 = await runCli(['stdio'], {}, { stdinFile: file, timeout: 60000 });
  t.is(r2.code, 0, 'a file with calls early and late: exit status 0', { stderr: r2.stderr.slice(-2000) });
  const out2 = r2.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const late = out2.find((m) => m.id === 'late');
  t.ok(Array.isArray(resultData(late?.result)?.default_actions), `the call after the ${PINGS} pings is answered with its result`,
    { late, stderr: r2.stderr.slice(-1000) });
  t.is(out2.filter((m) => typeof m.id === 'string' && m.id.startsWith('ping')).length, PINGS, `all ${PINGS} pings are answered`);
  t.is(out2.length, 4 + 3 + PINGS + 1, 'every request is answered exactly once', { n: out2.length });

  // Lines over [server] max_message_bytes (64 KiB here): one error each,
  // however many reads they take, and the lines around them are answered.
  const init = lines.split('\n')[0];
  const pad = (n) => 'x'.repeat(n);
  const over = [
    init,
    JSON.stringify({ jsonrpc: '2.0', id: 'before', method: 'ping' }),
    JSON.stringify({ jsonrpc: '2.0', id: 4242, method: 'ping', params: { pad: pad(5 << 20) } }),
    JSON.stringify({ jsonrpc: '2.0', id: 'between', method: 'ping' }),
    JSON.stringify({ jsonrpc: '2.0', id: 4343, method: 'ping', params: { pad: pad(70000) } }),
    JSON.stringify({ jsonrpc: '2.0', id: 'after', method: 'ping' }),
  ].join('\n');
  const r3 = await runCli(['--set', 'server.max_message_bytes=65536', 'stdio'], {},
    { input: `${over}\n${JSON.stringify({ jsonrpc: '2.0', id: 'cut', method: 'ping', params: { pad: pad(1 << 20) } })}`, timeout: 60000 });
  t.is(r3.code, 0, 'oversized lines: exit status 0', { stderr: r3.stderr.slice(-2000) });
  const out3 = r3.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const tooBig = out3.filter((m) => /larger than 65536 bytes/.test(m.error?.message ?? ''));
  t.is(tooBig.length, 3, 'one error for each of the three oversized lines (5 MiB, 70 kB, 1 MiB unterminated)',
    { errors: tooBig.length, first: out3.slice(0, 6).map((m) => JSON.stringify(m).slice(0, 200)) });
  t.deepEqual(tooBig.map((m) => m.id), [4242, 4343, 'cut'], 'each error carries the id read from the line\'s first bytes');
  t.deepEqual(out3.filter((m) => m.result && m.id !== 1).map((m) => m.id), ['before', 'between', 'after'],
    'the lines around them are answered, in order');

  // SIGTERM while a burst is being handled.
  const srv2 = await rawServer();
  await srv2.initialize();
  let big = '';
  for (let k = 0; k < 400; k++) {
    big += `${JSON.stringify({ jsonrpc: '2.0', id: `b${k}`, method: 'tools/call', params: { name: 'sandbox_env', arguments: { action: 'help' } } })}\n`;
    big += `${JSON.stringify({ jsonrpc: '2.0', id: `q${k}`, method: 'ping' })}\n`;
  }
  srv2.sendRaw(big);
  await srv2.response('b0', 30000);
  const exit = await srv2.kill('SIGTERM');
  t.ok(exit.code === 0 && exit.signal === null, 'SIGTERM in the middle of a burst: exit status 0', exit);
  srv2.checkAllJson('server after SIGTERM');
  await srv2.proc.flushed();
  checkSanitizer(srv2.proc);
}, { timeout: 120 });
