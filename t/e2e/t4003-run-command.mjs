// run_command: stdout, stderr, exit_code, timed_out; envs, cwd, explicit
// sandbox_id; quoting and UTF-8 survive; an unknown sandbox_id is an isError.
import { t, preflight, sdkClient, errorText, checkResultShape } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const res = await srv.call('run_command', { command: 'echo hello' });
  checkResultShape(res, 'run_command');
  t.hasFields(res.structuredContent, { stdout: 'hello\n', stderr: '', exit_code: 0, timed_out: false },
    'echo hello: stdout, stderr, exit_code 0, timed_out false');

  const nz = await srv.call('run_command', { command: 'echo out; echo err >&2; exit 7' });
  t.ok(!nz.isError, 'a non-zero exit is not an isError');
  t.hasFields(nz.structuredContent, { stdout: 'out\n', stderr: 'err\n', exit_code: 7, timed_out: false }, 'exit 7 with both streams');

  const env = await srv.tool('run_command', { command: 'printf "%s" "$FOO"', envs: { FOO: 'bar baz "q" $HOME' } });
  t.is(env.stdout, 'bar baz "q" $HOME', 'envs are passed verbatim');

  const cwd = await srv.tool('run_command', { command: 'pwd', cwd: '/tmp' });
  t.is(cwd.stdout, '/tmp\n', 'cwd /tmp');

  const pipe = await srv.tool('run_command', { command: "printf 'a\\nb\\nc\\n' | wc -l && test -n \"$PATH\"" });
  t.is(pipe.stdout.trim(), '3', 'pipes and && work (a shell runs the command)');

  const quote = await srv.tool('run_command', { command: `printf '%s' 'héllo "wörld" ✓ $x \`y\`'` });
  t.is(quote.stdout, 'héllo "wörld" ✓ $x `y`', 'quoting and UTF-8 survive');

  const big = await srv.tool('run_command', { command: "head -c 300000 /dev/zero | tr '\\0' a" });
  t.hasFields(big.cut?.stdout ?? {}, { total_bytes: 300000, kept_bytes: 81920 }, '300000 bytes of stdout: the result keeps 81920 ([server] max_result_bytes)');
  const whole = await srv.tool('read_file', { path: big.cut?.stdout?.path, limit: 300000 });
  t.ok(whole.content.length === 300000 && /^a+$/.test(whole.content), '... and the saved file holds all of it, intact');

  const empty = await srv.tool('run_command', { command: 'true' });
  t.hasFields(empty, { stdout: '', stderr: '', exit_code: 0 }, 'a silent command');

  const sig = await srv.tool('run_command', { command: 'kill -9 $$' });
  t.isnt(sig.exit_code, 0, `a command killed by a signal has a non-zero exit_code (${sig.exit_code})`);

  const other = await srv.tool('create_sandbox', {});
  const mark = await srv.tool('run_command', { command: 'echo there > /tmp/where; hostname', sandbox_id: other.sandbox_id });
  t.is(mark.sandbox_id, other.sandbox_id, 'explicit sandbox_id: the result names it');
  const check = await srv.tool('run_command', { command: 'cat /tmp/where', sandbox_id: other.sandbox_id });
  t.is(check.stdout, 'there\n', 'explicit sandbox_id: the command ran in that sandbox');

  const missing = await srv.call('run_command', { command: 'true', sandbox_id: 'no-such-sandbox-e2e' });
  t.ok(missing.isError, 'an unknown sandbox_id is an isError');
  t.like(errorText(missing), /no-such-sandbox-e2e/, 'the error names the unknown sandbox_id', { text: errorText(missing) });

  await srv.close();
}, { timeout: 150 });
