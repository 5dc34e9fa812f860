// Wrong argument types and missing required fields: an isError tool result
// (not a JSON-RPC error) whose text names the offending field.
import { t, preflight, sdkClient, errorText, containersOfServer } from '../lib/sg.mjs';

const cases = [
  ['run_command', {}, 'command', 'missing required command'],
  ['run_command', { command: 42 }, 'command', 'command is a number'],
  ['run_command', { command: ['ls'] }, 'command', 'command is an array'],
  ['run_command', { command: 'true', timeout: 'soon' }, 'timeout', 'timeout is a string'],
  ['run_command', { command: 'true', cwd: 7 }, 'cwd', 'cwd is a number'],
  ['run_command', { command: 'true', envs: 'A=1' }, 'envs', 'envs is a string'],
  ['run_command', { command: 'true', sandbox_id: 12 }, 'sandbox_id', 'sandbox_id is a number'],
  ['run_code', {}, 'code', 'missing required code'],
  ['run_code', { code: 'print(1)', language: 'cobol' }, 'language', 'unsupported language'],
  ['run_code', { code: 'print(1)', language: 3 }, 'language', 'language is a number'],
  ['read_file', {}, 'path', 'missing required path'],
  ['read_file', { path: 5 }, 'path', 'path is a number'],
  ['read_file', { path: '/etc/hostname', encoding: 'rot13' }, 'encoding', 'unknown encoding'],
  ['write_file', { path: '/tmp/x' }, 'content', 'missing required content'],
  ['write_file', { content: 'x' }, 'path', 'missing required path'],
  ['write_file', { path: '/tmp/x', content: { a: 1 } }, 'content', 'content is an object'],
  ['write_file', { path: '/tmp/x', content: 'x', encoding: 'rot13' }, 'encoding', 'unknown encoding'],
  ['list_files', { path: false }, 'path', 'path is a boolean'],
  ['kill_sandbox', { sandbox_id: 1 }, 'sandbox_id', 'sandbox_id is a number'],
  ['create_sandbox', { timeout: 'long' }, 'timeout', 'timeout is a string'],
  ['create_sandbox', { envs: ['A=1'] }, 'envs', 'envs is an array'],
  ['create_sandbox', { template: 9 }, 'template', 'template is a number'],
];

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  for (const [tool, args, field, what] of cases) {
    let res;
    try {
      res = await srv.call(tool, args, { timeout: 60000 });
    } catch (e) {
      t.fail(`${tool}, ${what}: an isError result, not a JSON-RPC error`, { error: e.message, code: e.code });
      continue;
    }
    t.ok(res.isError === true, `${tool}, ${what}: isError`, { result: res });
    const text = errorText(res);
    t.ok(new RegExp(`\\b${field}\\b`).test(text), `${tool}, ${what}: the message names '${field}'`, { text });
  }
  const made = await containersOfServer(srv.pid);
  if (made.length) t.diag(`note: the invalid calls left ${made.length} sandbox(es) created`);
  const ok = await srv.call('run_command', { command: 'echo fine' });
  t.ok(!ok.isError && ok.structuredContent?.stdout === 'fine\n', 'a valid call after the invalid ones works', { result: ok });
  await srv.close();
}, { timeout: 120 });
