// Every cloud tool on the SSH backend against a real sshd: create_sandbox
// makes a 0700 working directory under [ssh] root, run_command (exit codes,
// signals, cwd, envs through setenv and the env(1) fallback, quoting, no pty,
// stdin closed, exact bytes of 200 KB on one stream then the other),
// run_code python, read_file / write_file (text, all 256 byte values, a name
// with spaces, quotes and non-ASCII letters, mode kept, parents created),
// list_files, kill_sandbox removing the directory.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, checkResultShape } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sshRunnerOn } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  // results whole: the bytes of the transport are the point here, not the cut (t4035)
  const srv = await sdkClient([...sshArgs(s), '--set', 'server.max_result_bytes=8388608'], sshEnv());

  // ---- create_sandbox
  const cr = await srv.call('create_sandbox', { backend: 'ssh' });
  checkResultShape(cr, 'create_sandbox');
  const sb = cr.structuredContent;
  t.like(sb.sandbox_id, /^ssh-default-[0-9a-f]{12}$/, 'sandbox_id is ssh-<target>-<random>');
  t.hasFields(sb, { status: 'running', backend: 'ssh', url: `ssh://${s.user}@127.0.0.1:${s.port}`, template: 'default' },
    'create_sandbox: status, backend, url ssh://user@host:port, template = target');
  t.like(sb.workspace, new RegExp(`^${s.root}/sg-[0-9a-f]{12}$`), 'the workspace is a directory under [ssh] root');
  const st = fs.statSync(sb.workspace);
  t.ok(st.isDirectory() && (st.mode & 0o777) === 0o700, 'the workspace exists with mode 0700', { mode: (st.mode & 0o777).toString(8) });
  const id = sb.sandbox_id;

  // ---- run_command
  const rc = await srv.call('run_command', { command: 'echo hello; echo err >&2; exit 3' });
  checkResultShape(rc, 'run_command');
  t.hasFields(rc.structuredContent, { stdout: 'hello\n', stderr: 'err\n', exit_code: 3, timed_out: false, sandbox_id: id },
    'run_command: stdout, stderr, exit_code 3, timed_out, sandbox_id');
  t.is((await srv.tool('run_command', { command: 'pwd' })).stdout, `${sb.workspace}\n`, 'the default cwd is the workspace');
  t.is((await srv.tool('run_command', { command: 'pwd', cwd: '/tmp' })).stdout, '/tmp\n', 'cwd /tmp');
  const badCwd = await srv.call('run_command', { command: 'true', cwd: '/no/such/dir' });
  t.ok(badCwd.isError && /no\/such\/dir/.test(errorText(badCwd)), 'a missing cwd is an error naming it', { text: errorText(badCwd) });

  const envs = { FOO: `bar baz "q" $HOME 'x' \\n`, SG_ACCEPTED_ONE: 'via setenv', LC_SG: 'ü' };
  const env = await srv.tool('run_command', { command: 'printf "%s|%s|%s" "$FOO" "$SG_ACCEPTED_ONE" "$LC_SG"', envs });
  t.is(env.stdout, `${envs.FOO}|via setenv|ü`, 'envs arrive verbatim (setenv where sshd accepts, env(1) where it refuses)');
  const env2 = await srv.tool('run_command', { command: 'printf "%s" "$FOO"', envs: { FOO: 'again' } });
  t.is(env2.stdout, 'again', 'envs on a later call on the same connection');

  const bq = '`', bs = '\\';
  const quoted = `printf '%s' 'héllo "wörld" ✓ $x ${bq}y${bq} ${bs} ${bs}${bs}'"'"'q'; printf '|%s' "a  b" '${bs}${bs}'`;
  t.is((await srv.tool('run_command', { command: quoted })).stdout, `héllo "wörld" ✓ $x ${bq}y${bq} ${bs} ${bs}${bs}'q|a  b|${bs}${bs}`,
    'quotes, backslashes and UTF-8 in the command survive (quoted exactly once, never re-split)');
  t.is((await srv.tool('run_command', { command: "printf 'a\\r\\nb\\n'" })).stdout, 'a\r\nb\n', 'bytes are exact: no CRLF rewriting');
  t.is((await srv.tool('run_command', { command: 'test -t 0 || test -t 1 || echo no-pty' })).stdout, 'no-pty\n', 'no pty');
  t.is((await srv.tool('run_command', { command: 'cat; echo eof' })).stdout, 'eof\n', 'stdin is closed at once (cat sees EOF)');
  t.is((await srv.tool('run_command', { command: 'echo $0' })).stdout, '/bin/sh\n', 'commands run under /bin/sh -c');
  const sig = await srv.tool('run_command', { command: 'kill -9 $$' });
  t.is(sig.exit_code, 137, 'a command killed by SIGKILL: exit_code 128+9');
  t.is(sig.signal, 9, '... and signal 9');
  t.is((await srv.tool('run_command', { command: 'true' })).stdout, '', 'a silent command has empty stdout (the wrapper line is stripped)');

  const N = 200 * 1024;
  const outThenErr = await srv.tool('run_command', { command: `head -c ${N} /dev/zero | tr '\\0' o; head -c ${N} /dev/zero | tr '\\0' e >&2` });
  t.ok(outThenErr.stdout === 'o'.repeat(N) && outThenErr.stderr === 'e'.repeat(N),
    '200 KB on stdout followed by 200 KB on stderr: exact bytes',
    { stdout: outThenErr.stdout.length, stderr: outThenErr.stderr.length });
  const errThenOut = await srv.tool('run_command', { command: `head -c ${N} /dev/zero | tr '\\0' E >&2; head -c ${N} /dev/zero | tr '\\0' O` });
  t.ok(errThenOut.stdout === 'O'.repeat(N) && errThenOut.stderr === 'E'.repeat(N),
    '200 KB on stderr followed by 200 KB on stdout: exact bytes',
    { stdout: errThenOut.stdout.length, stderr: errThenOut.stderr.length });
  const lines = await srv.tool('run_command', { command: 'seq 1 40000; seq 1 40000 >&2' });
  const expect = Array.from({ length: 40000 }, (_, i) => `${i + 1}\n`).join('');
  t.ok(lines.stdout === expect && lines.stderr === expect, 'seq 1 40000 on both streams: exact');

  // ---- run_code
  const code = await srv.call('run_code', { code: 'import sys\nprint(6*7)\nprint("e", file=sys.stderr)\nopen("made.txt","w").write("x")', language: 'python' });
  t.ok(!code.isError, 'run_code python runs', { text: errorText(code) });
  t.hasFields(code.structuredContent, { stdout: '42\n', stderr: 'e\n', exit_code: 0, language: 'python' }, 'run_code python: output and exit code');
  t.like(code.structuredContent?.interpreter, /python/, `the interpreter is python (${code.structuredContent?.interpreter})`);
  t.ok((code.structuredContent?.output_files ?? []).some((f) => f.name === 'made.txt'),
    'run_code reports the file it made (find -printf and /tmp work on the host)', { files: code.structuredContent?.output_files });
  const sh = await srv.tool('run_code', { code: 'echo "$((6*7))"', language: 'shell' });
  t.is(sh.stdout, '42\n', 'run_code shell');

  // ---- files
  const w = await srv.call('write_file', { path: 'notes/a.txt', content: 'hello file\n' });
  checkResultShape(w, 'write_file');
  t.hasFields(w.structuredContent, { success: true, path: `${sb.workspace}/notes/a.txt`, bytes_written: 11 },
    'write_file: success, absolute path, bytes_written (parents created)');
  t.is(fs.readFileSync(`${sb.workspace}/notes/a.txt`, 'utf8'), 'hello file\n', 'the file is on the host');
  const r = await srv.call('read_file', { path: 'notes/a.txt' });
  checkResultShape(r, 'read_file');
  t.hasFields(r.structuredContent, { path: `${sb.workspace}/notes/a.txt`, content: 'hello file\n', encoding: 'utf-8', size: 11 },
    'read_file: path, content, encoding, size');
  fs.chmodSync(`${sb.workspace}/notes/a.txt`, 0o751);
  await srv.tool('write_file', { path: 'notes/a.txt', content: 'replaced' });
  t.is(fs.readFileSync(`${sb.workspace}/notes/a.txt`, 'utf8'), 'replaced', 'write_file replaces an existing file');
  t.is((fs.statSync(`${sb.workspace}/notes/a.txt`).mode & 0o7777).toString(8), '751', '... and keeps its mode');
  t.deepEqual(fs.readdirSync(`${sb.workspace}/notes`), ['a.txt'], 'no temporary file is left behind');
  await srv.tool('write_file', { path: '/tmp/../' + sb.workspace.slice(1) + '/abs.txt', content: 'abs' });
  t.is(fs.readFileSync(`${sb.workspace}/abs.txt`, 'utf8'), 'abs', 'an absolute path works');

  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const wb = await srv.tool('write_file', { path: 'bin/all.bin', content: all.toString('base64'), encoding: 'base64' });
  t.is(wb.bytes_written, 256, 'write_file base64: 256 bytes written');
  t.ok(fs.readFileSync(`${sb.workspace}/bin/all.bin`).equals(all), 'the file on the host holds all 256 byte values');
  const rb = await srv.tool('read_file', { path: 'bin/all.bin', encoding: 'base64' });
  t.ok(rb.encoding === 'base64' && Buffer.from(rb.content, 'base64').equals(all) && rb.size === 256,
    'read_file base64 returns the same 256 bytes');
  const auto = await srv.tool('read_file', { path: 'bin/all.bin' });
  t.is(auto.encoding, 'base64', 'non-UTF-8 content comes back as base64 on its own');

  const odd = `dir with space/it's "quoted" — ünïcødé ✓.txt`;
  await srv.tool('write_file', { path: odd, content: 'odd name' });
  t.is(fs.readFileSync(path.join(sb.workspace, odd), 'utf8'), 'odd name', 'write_file: a name with spaces, quotes and non-ASCII letters');
  t.is((await srv.tool('read_file', { path: odd })).content, 'odd name', 'read_file of that name');
  const catOdd = await srv.tool('run_command', { command: `cat "dir with space/it's \\"quoted\\" — ünïcødé ✓.txt"` });
  t.is(catOdd.stdout, 'odd name', 'run_command reaches it through the shell');
  const lsOdd = await srv.tool('list_files', { path: 'dir with space' });
  t.deepEqual(lsOdd.files.map((f) => f.name), [`it's "quoted" — ünïcødé ✓.txt`], 'list_files shows the name exactly');

  const ls = await srv.call('list_files', {});
  checkResultShape(ls, 'list_files');
  const files = ls.structuredContent.files;
  t.is(ls.structuredContent.path, sb.workspace, 'list_files without a path lists the workspace');
  const byName = Object.fromEntries(files.map((f) => [f.name, f]));
  t.hasFields(byName['abs.txt'] ?? {}, { path: `${sb.workspace}/abs.txt`, type: 'file', size: 3 }, 'a file entry: path, type, size');
  t.hasFields(byName.notes ?? {}, { type: 'dir' }, 'a directory entry');
  t.ok(Number.isInteger(byName['abs.txt']?.mode) && byName['abs.txt'].mtime > 1.6e9, 'entries have mode and mtime', byName['abs.txt']);
  fs.symlinkSync('abs.txt', `${sb.workspace}/link`);
  t.is((await srv.tool('list_files', {})).files.find((f) => f.name === 'link')?.type, 'symlink', 'a symlink is listed as symlink');
  t.deepEqual(files.map((f) => f.name), [...files.map((f) => f.name)].sort(), 'entries are sorted by name');

  const missing = await srv.call('read_file', { path: 'nope.txt' });
  t.ok(missing.isError && /no such file/i.test(errorText(missing)), 'read_file of a missing file is an error', { text: errorText(missing) });
  const isdir = await srv.call('read_file', { path: 'notes' });
  t.ok(isdir.isError && /directory/.test(errorText(isdir)), 'read_file of a directory is an error', { text: errorText(isdir) });
  const lsfile = await srv.call('list_files', { path: 'abs.txt' });
  t.ok(lsfile.isError && /not a directory/.test(errorText(lsfile)), 'list_files of a file is an error', { text: errorText(lsfile) });

  // ---- a second sandbox, explicit ids, kill_sandbox
  const other = await srv.tool('create_sandbox', {});
  t.isnt(other.sandbox_id, id, 'a second sandbox has its own id');
  t.isnt(other.workspace, sb.workspace, '... and its own directory');
  t.is((await srv.tool('run_command', { command: 'pwd', sandbox_id: id })).stdout, `${sb.workspace}\n`, 'explicit sandbox_id reaches the first one');
  const k = await srv.call('kill_sandbox', { sandbox_id: id });
  checkResultShape(k, 'kill_sandbox');
  t.hasFields(k.structuredContent, { success: true, sandbox_id: id }, 'kill_sandbox: success, sandbox_id');
  t.ok(!fs.existsSync(sb.workspace), 'kill_sandbox removed the working directory');
  const gone = await srv.call('run_command', { command: 'true', sandbox_id: id });
  t.ok(gone.isError, 'the killed sandbox is gone');
  await srv.tool('kill_sandbox', {});
  t.ok(!fs.existsSync(other.workspace), 'kill_sandbox without id removes the default sandbox directory');

  // the state directory keeps nothing of killed sandboxes
  const stateDir = path.join(path.dirname(srv.stderrPath), 'state', 'sandgate', 'ssh');
  t.deepEqual(fs.existsSync(stateDir) ? fs.readdirSync(stateDir) : [], [], 'no state file is left for killed sandboxes');
  await srv.close();

  // a login shell that prints before every command (a chatty rc file)
  const noisy = await startSshd({ loginNoise: true });
  const ns = await sdkClient(sshArgs(noisy), sshEnv(), { name: 'chatty login shell' });
  const clean = await ns.tool('run_command', { command: 'printf clean' });
  t.is(clean.stdout, 'clean', 'what a chatty login shell prints on stdout before the command is dropped');
  if (sshRunnerOn()) {
    // the login shell ran once, for the runner: its noise is in the log, not in any command's stderr
    t.is(clean.stderr, '', '... and with the runner its stderr is not in the command\'s either (the login shell ran once, for the runner)');
  } else {
    t.like(clean.stderr, /login-noise-stderr/, '... (its stderr cannot be told apart and stays)');
  }
  const nc = await ns.tool('run_code', { code: 'print("py")', language: 'python' });
  t.is(nc.stdout, 'py\n', 'run_code is not confused by it either');
  await ns.close();
}, { timeout: 180 });
