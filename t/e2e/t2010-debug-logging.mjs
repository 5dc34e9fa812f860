// With the most verbose logging (--set log.level=debug and logging/setLevel
// debug), stdout still carries nothing but JSON-RPC lines: logs go to stderr
// or into notifications/message.
import fs from 'node:fs';
import { t, preflight, rawServer, errorText } from '../lib/sg.mjs';

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

async function exercise(srv, label) {
  const lv = await srv.request('logging/setLevel', { level: 'debug' }, { timeout: 10000 });
  t.deepEqual(lv.result, {}, `${label}: logging/setLevel debug returns {}`);
  await srv.request('tools/list', undefined, { timeout: 10000 });
  const r = await srv.tool('run_command', {
    command: 'printf \'line1\\nline2\\r\\n{"jsonrpc":"2.0","id":1}\\n\\033[31mred\\033[0m\\t\\001\\n\'; printf \'\\377\\376\' >&2; echo to-stderr >&2; exit 3',
  });
  t.is(r.exit_code, 3, `${label}: run_command with awkward output ran`);
  await srv.tool('write_file', { path: '/workspace/log-test.txt', content: 'a\nb\n' });
  await srv.tool('read_file', { path: '/workspace/log-test.txt' });
  await srv.tool('list_files', {});
  await srv.tool('run_code', { code: 'import sys\nprint("out")\nprint("err", file=sys.stderr)' });
  const bad = await srv.callTool('read_file', { path: '/no/such/file' });
  t.ok(bad.isError, `${label}: a failing tool call is an isError result`, { text: errorText(bad) });
  const inval = await srv.callTool('run_command', { command: 1 });
  t.ok(inval.isError, `${label}: an invalid call is an isError result`);
  const unk = await srv.request('tools/call', { name: 'nope', arguments: {} });
  t.ok(unk.error, `${label}: an unknown tool is a JSON-RPC error`);
  srv.send('{"broken json');
  await srv.next((m) => m.error?.code === -32700, 10000);
  const k = await srv.tool('kill_sandbox', {});
  t.is(k.success, true, `${label}: kill_sandbox of the default works`);
}

t.run(async () => {
  await preflight();

  // 1. --set after the subcommand, plus logging/setLevel debug
  const a = await rawServer(['--set', 'log.level=debug'], {}, { name: 'debug after subcommand' });
  await a.initialize();
  await exercise(a, 'stdio --set log.level=debug');
  await a.close(); // asserts every stdout line is a JSON-RPC object
  const notes = a.messages().filter((m) => m.method === 'notifications/message');
  t.diag(`notifications/message received: ${notes.length}`);
  t.ok(notes.every((n) => LEVELS.includes(n.params?.level) && 'data' in n.params),
    'every notifications/message has a valid level and data', { bad: notes.filter((n) => !LEVELS.includes(n.params?.level) || !('data' in n.params)).slice(0, 3) });
  t.ok(!notes.some((n) => 'id' in n), 'no notifications/message carries an id');
  const err = fs.readFileSync(a.stderrPath, 'utf8');
  t.cmp(err.length, '>', 0, 'debug logging writes to stderr');

  // 2. --set before the subcommand
  const b = await rawServer([], {}, { name: 'debug before subcommand', preArgs: ['--set', 'log.level=debug'] });
  await b.initialize();
  await exercise(b, '--set log.level=debug stdio');
  await b.close();

  // 3. the environment form of the same setting
  const c = await rawServer([], { SANDGATE_LOG_LEVEL: 'debug' }, { name: 'SANDGATE_LOG_LEVEL=debug' });
  await c.initialize();
  await exercise(c, 'SANDGATE_LOG_LEVEL=debug');
  await c.close();
}, { timeout: 180 });
