// The cloud tools behave the same with the in-sandbox runner and without it:
// representative calls of every tool, once with the runner (the default),
// once with the fallback forced by [docker] runner = false (through
// SANDGATE_DOCKER_RUNNER), and once where the runner cannot run at all (a
// "runner" that is not an executable of this machine: like another CPU
// architecture), which falls back by itself and says so once in the log.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, containerOf, psArgs, tmpdir } from '../lib/sg.mjs';

const logOf = (srv) => fs.readFileSync(srv.stderrPath, 'utf8');

async function representative(srv, mode) {
  const r1 = await srv.tool('run_command', { command: 'echo out; echo err >&2; exit 3' });
  t.hasFields(r1, { stdout: 'out\n', stderr: 'err\n', exit_code: 3, timed_out: false },
    `${mode}: run_command output and exit code`);
  const r2 = await srv.tool('run_command', { command: 'printf "%s|%s" "$A" "$(pwd)"', envs: { A: 'x y' }, cwd: '/tmp' });
  t.is(r2.stdout, 'x y|/tmp', `${mode}: envs and cwd`);
  const r3 = await srv.tool('run_command', { command: 'pwd' });
  t.is(r3.stdout, '/workspace\n', `${mode}: the default cwd is the workspace`);
  const missing = await srv.call('run_command', { command: 'true', cwd: '/no/such/dir' });
  t.ok(missing.isError, `${mode}: a missing cwd is an error`, { result: missing });
  t.like(missing.content?.[0]?.text ?? '', /does not exist/, `${mode}: and says the directory does not exist`);
  const r4 = await srv.tool('run_command', { command: 'echo a; sleep 30; echo b', timeout: 1 });
  t.hasFields(r4, { stdout: 'a\n', timed_out: true, exit_code: 124 }, `${mode}: timeout`);
  const r5 = await srv.tool('run_command', { command: 'kill -9 $$' });
  t.is(r5.exit_code, 137, `${mode}: a signal is 128 + its number`);
  const r6 = await srv.tool('run_command', { command: 'head -c 2000000 /dev/zero | tr "\\0" y' });
  t.ok(r6.truncated === true && r6.cut?.stdout?.total_bytes === 2000000 && r6.stdout.length <= 81920 + 200,
    `${mode}: output past the result budget is cut and said (${r6.stdout.length} bytes)`, r6.cut);
  const code = await srv.tool('run_code', { code: 'import sys\nprint(6*7)\nprint("e", file=sys.stderr)' });
  t.ok(JSON.stringify(code).includes('42'), `${mode}: run_code prints`, { result: code });
  await srv.tool('write_file', { path: 'dir/f.txt', content: `hello ${mode}\n` });
  const rf = await srv.tool('read_file', { path: '/workspace/dir/f.txt' });
  t.is(rf.content, `hello ${mode}\n`, `${mode}: write_file then read_file`);
  const lf = await srv.tool('list_files', { path: 'dir' });
  t.ok(JSON.stringify(lf).includes('f.txt'), `${mode}: list_files sees it`);
  return r1.sandbox_id;
}

t.run(async () => {
  await preflight();

  // 1. with the runner
  const a = await sdkClient([], { SANDGATE_DOCKER_RUNNER: 'true' });
  const sa = await representative(a, 'runner');
  const ca = await containerOf(sa);
  t.ok((await psArgs(ca.id)).some((p) => /\.sandgate-runner-[0-9a-f]{16} --stdio( --dial \/run\/sandgate\/runner\.sock)?$/.test(p)),
    'runner: one sandgate-runner runs in the container');
  t.like(logOf(a), /runner \/tmp\/\.sandgate-runner-[0-9a-f]{16} in container/, 'runner: the log says where it started');
  await a.tool('kill_sandbox', {});
  await a.close();

  // 2. fallback forced by the config key
  const b = await sdkClient([], { SANDGATE_DOCKER_RUNNER: 'false' });
  const sb = await representative(b, 'fallback');
  const cb = await containerOf(sb);
  t.ok(!(await psArgs(cb.id)).some((p) => /sandgate-runner/.test(p)), 'fallback: no runner in the container');
  t.like(logOf(b), /runner = false/, 'fallback: the log says the runner is off');
  await b.tool('kill_sandbox', {});
  await b.close();

  // 3. a runner that cannot run there: the plugin falls back by itself
  const fake = path.join(tmpdir(), 'not-a-runner');
  fs.writeFileSync(fake, Buffer.from('\x7fELF but not really an executable of any machine\n'), { mode: 0o755 });
  const c = await sdkClient([], { SANDGATE_DOCKER_RUNNER: 'true', SANDGATE_RUNNER: fake });
  await representative(c, 'cannot run');
  await c.tool('run_command', { command: 'true' });
  const log = logOf(c);
  const notes = log.split('\n').filter((l) => /the runner cannot run in container/.test(l));
  t.is(notes.length, 1, 'cannot run: said once in the log', { log: notes });
  t.like(notes[0] ?? '', /exec format error|no HELLO/i, 'cannot run: with the reason');
  await c.tool('kill_sandbox', {});
  await c.close();
}, { timeout: 240 });
