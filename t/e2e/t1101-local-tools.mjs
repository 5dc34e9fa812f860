// Every cloud tool on the local backend, a bubblewrap jail per sandbox:
// create_sandbox (a 0700 directory owned by the sandbox user, seen as
// /workspace, its isolation and limits in details), run_command (exit codes,
// signals, cwd, envs, exact bytes, no pty, stdin closed, timeouts),
// run_code in python, javascript and shell with the host's interpreters,
// read_file / write_file / list_files (mode kept, parents, all 256 bytes),
// kill_sandbox removing the directory; the default backend when nothing
// else answers (docker's engine pointed nowhere) is local, said in the log
// and by `sandgate config`; another sandgate process attaches to a kept
// sandbox with a fresh jail over its directory.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, errorText, checkResultShape, runCli, trackSandbox, SPARE_DEFAULT, waitFor } from '../lib/sg.mjs';

const execFileP = promisify(execFile);
const LOCAL = ['--set', 'sandbox.default_backend=local'];
// Docker pointed nowhere: the default must come from the probes.
const NO_DOCKER = { SANDGATE_DOCKER_HOST: 'unix:///nonexistent/docker.sock', DOCKER_HOST: undefined, ...SPARE_DEFAULT };

const hostDir = (sb) => sb.url.replace(/^file:\/\//, '');
const MARK = `300.${process.pid}`; // sleep's argument: a process this test started

/** Host processes whose command line holds text (pid and args). */
async function hostProcs(text) {
  const { stdout } = await execFileP('ps', ['-eo', 'pid=,args=']);
  return stdout.split('\n').filter((l) => l.includes(text)).map((l) => l.trim());
}

t.run(async () => {
  await preflight({ docker: false });
  // results whole: the bytes of the transport are the point here, not the cut (t4036)
  const srv = await sdkClient(['--set', 'server.max_result_bytes=8388608'], NO_DOCKER);

  // ---- create_sandbox: the default backend with docker down is local
  const cr = await srv.call('create_sandbox', {});
  checkResultShape(cr, 'create_sandbox');
  const sb = cr.structuredContent;
  trackSandbox(sb.sandbox_id);
  t.like(sb.sandbox_id, /^local-[0-9a-f]{12}$/, 'sandbox_id is local-<random>');
  t.hasFields(sb, { status: 'running', backend: 'local', workspace: '/workspace', template: 'default' },
    'create_sandbox: docker down, the default backend is local; the workspace is /workspace');
  const dir = hostDir(sb);
  t.like(dir, /\/local\/sandboxes\/sg-[0-9a-f]{12}$/, 'url is file://<the sandbox directory on this host>', { url: sb.url });
  const st = fs.statSync(dir);
  const root = process.getuid() === 0;
  t.ok(st.isDirectory() && (st.mode & 0o777) === 0o700, 'the directory exists with mode 0700', { mode: (st.mode & 0o777).toString(8) });
  if (root) t.isnt(st.uid, 0, `as root, the directory belongs to the unprivileged sandbox user (uid ${st.uid})`);
  t.hasFields(sb.details ?? {}, { isolation: 'bwrap', network: 'none', workspace: '/workspace' }, 'details: isolation bwrap, network none');
  t.hasFields(sb.details?.limits ?? {}, { pids: 512, cpu_seconds: 3600, address_space_mb: 16384, open_files: 4096 },
    'details: the configured limits (defaults)', sb.details);
  t.ok(['v1', 'v2', 'none'].includes(sb.details?.limits?.cgroup), `details: cgroup ${sb.details?.limits?.cgroup}`);
  const chosen = /default backend: local \(chosen by probe[^)]*\); not usable: docker/;
  const log = await waitFor(() => { const l = fs.readFileSync(srv.stderrPath, 'utf8'); return chosen.test(l) && l; }, 5000) ||
    fs.readFileSync(srv.stderrPath, 'utf8');
  t.like(log, /default backend: local \(chosen by probe[^)]*\); not usable: docker/, 'the log says the default is local and why docker is not');

  // ---- run_command
  const rc = await srv.call('run_command', { command: 'echo hello; echo err >&2; exit 3' });
  checkResultShape(rc, 'run_command');
  t.hasFields(rc.structuredContent, { stdout: 'hello\n', stderr: 'err\n', exit_code: 3, timed_out: false, sandbox_id: sb.sandbox_id },
    'run_command: stdout, stderr, exit_code 3');
  t.is((await srv.tool('run_command', { command: 'pwd' })).stdout, '/workspace\n', 'the default cwd is /workspace');
  t.is((await srv.tool('run_command', { command: 'pwd', cwd: '/tmp' })).stdout, '/tmp\n', 'cwd /tmp');
  const badCwd = await srv.call('run_command', { command: 'true', cwd: '/no/such/dir' });
  t.ok(badCwd.isError && /no\/such\/dir.*does not exist/.test(errorText(badCwd)), 'a missing cwd is an error naming it', { text: errorText(badCwd) });
  const envs = { FOO: `bar baz "q" $HOME 'x' \\n`, LC_SG: 'ü' };
  t.is((await srv.tool('run_command', { command: 'printf "%s|%s" "$FOO" "$LC_SG"', envs })).stdout, `${envs.FOO}|ü`, 'envs arrive verbatim');
  t.is((await srv.tool('run_command', { command: 'printf "%s %s %s" "$HOME" "$USER" "$(id -u)"' })).stdout.split(' ')[0], '/workspace',
    'HOME is /workspace');
  t.is((await srv.tool('run_command', { command: 'test -t 0 || test -t 1 || echo no-pty' })).stdout, 'no-pty\n', 'no pty');
  t.is((await srv.tool('run_command', { command: 'cat; echo eof' })).stdout, 'eof\n', 'stdin is closed at once');
  t.is((await srv.tool('run_command', { command: 'echo $0' })).stdout, '/bin/sh\n', 'commands run under /bin/sh -c');
  const sig = await srv.tool('run_command', { command: 'kill -9 $$' });
  t.hasFields(sig, { exit_code: 137, signal: 9 }, 'a command killed by SIGKILL: 137, signal 9');
  const N = 200 * 1024;
  const big = await srv.tool('run_command', { command: `head -c ${N} /dev/zero | tr '\\0' o; head -c ${N} /dev/zero | tr '\\0' e >&2` });
  t.ok(big.stdout === 'o'.repeat(N) && big.stderr === 'e'.repeat(N), '200 KB on each stream: exact bytes');
  const missingProg = await srv.tool('run_command', { command: 'no-such-program-sg' });
  t.is(missingProg.exit_code, 127, 'a missing program: exit 127');
  const to = await srv.tool('run_command', { command: 'echo before; sleep 30; echo after', timeout: 1 });
  t.hasFields(to, { stdout: 'before\n', timed_out: true, exit_code: 124 }, 'a timeout: partial output, timed_out, 124');

  // ---- run_code with the host's interpreters
  const code = await srv.call('run_code', { code: 'import sys\nprint(6*7)\nprint("e", file=sys.stderr)\nopen("made.txt","w").write("x")' });
  t.hasFields(code.structuredContent ?? {}, { stdout: '42\n', stderr: 'e\n', exit_code: 0, language: 'python' }, 'run_code python', { text: errorText(code) });
  t.ok((code.structuredContent?.output_files ?? []).some((f) => f.name === 'made.txt'), 'run_code reports the file it made');
  t.is(fs.readFileSync(path.join(dir, 'made.txt'), 'utf8'), 'x', '... which is in the sandbox directory on the host');
  const js = await srv.call('run_code', { code: 'console.log(6*7)', language: 'javascript' });
  t.is(js.structuredContent?.stdout, '42\n', 'run_code javascript (node)', { text: errorText(js) });
  t.is((await srv.tool('run_code', { code: 'echo "$((6*7))"', language: 'shell' })).stdout, '42\n', 'run_code shell');

  // ---- files
  const w = await srv.call('write_file', { path: 'notes/a.txt', content: 'hello file\n' });
  checkResultShape(w, 'write_file');
  t.hasFields(w.structuredContent, { success: true, path: '/workspace/notes/a.txt', bytes_written: 11 }, 'write_file (parents made)');
  t.is(fs.readFileSync(path.join(dir, 'notes/a.txt'), 'utf8'), 'hello file\n', 'the file is in the directory on the host');
  if (root) t.is(fs.statSync(path.join(dir, 'notes/a.txt')).uid, st.uid, '... owned by the sandbox user');
  const r = await srv.call('read_file', { path: 'notes/a.txt' });
  checkResultShape(r, 'read_file');
  t.hasFields(r.structuredContent, { path: '/workspace/notes/a.txt', content: 'hello file\n', encoding: 'utf-8', size: 11 }, 'read_file');
  await srv.tool('run_command', { command: 'chmod 751 notes/a.txt' });
  await srv.tool('write_file', { path: 'notes/a.txt', content: 'replaced' });
  t.is(fs.readFileSync(path.join(dir, 'notes/a.txt'), 'utf8'), 'replaced', 'write_file replaces an existing file');
  t.is((fs.statSync(path.join(dir, 'notes/a.txt')).mode & 0o7777).toString(8), '751', '... and keeps its mode');
  t.deepEqual(fs.readdirSync(path.join(dir, 'notes')), ['a.txt'], 'no temporary file is left behind');
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  await srv.tool('write_file', { path: 'bin/all.bin', content: all.toString('base64'), encoding: 'base64' });
  const rb = await srv.tool('read_file', { path: 'bin/all.bin', encoding: 'base64' });
  t.ok(Buffer.from(rb.content, 'base64').equals(all) && rb.size === 256, 'all 256 byte values both ways');
  const large = 'x'.repeat(3 * 1024 * 1024 + 7);
  await srv.tool('write_file', { path: 'large.txt', content: large });
  t.is((await srv.tool('read_file', { path: 'large.txt' })).content.length, large.length, 'a 3 MB file both ways (several chunks)');
  const ls = await srv.call('list_files', {});
  checkResultShape(ls, 'list_files');
  const byName = Object.fromEntries(ls.structuredContent.files.map((f) => [f.name, f]));
  t.is(ls.structuredContent.path, '/workspace', 'list_files lists /workspace');
  t.hasFields(byName['large.txt'] ?? {}, { path: '/workspace/large.txt', type: 'file', size: large.length }, 'a file entry');
  t.hasFields(byName.notes ?? {}, { type: 'dir' }, 'a directory entry');
  await srv.tool('run_command', { command: 'ln -s large.txt link' });
  t.is((await srv.tool('list_files', {})).files.find((f) => f.name === 'link')?.type, 'symlink', 'a symlink is listed as symlink');
  const missing = await srv.call('read_file', { path: 'nope.txt' });
  t.ok(missing.isError && /no such file/i.test(errorText(missing)), 'read_file of a missing file is an error', { text: errorText(missing) });
  const isdir = await srv.call('read_file', { path: 'notes' });
  t.ok(isdir.isError && /directory|regular/i.test(errorText(isdir)), 'read_file of a directory is an error', { text: errorText(isdir) });

  // ---- a kept sandbox, attached from other sandgate processes: each starts
  // a fresh jail over its directory; its processes never outlive their sandgate
  const keep = await runCli([...LOCAL, 'call', '--keep', 'run_command',
    JSON.stringify({ command: `echo still here > kept.txt; sleep ${MARK} & echo started` })], NO_DOCKER);
  const kid = JSON.parse(keep.stdout || '{}').sandbox_id;
  trackSandbox(kid);
  t.ok(keep.code === 0 && /^local-/.test(kid), 'sandgate call --keep leaves a local sandbox', { stderr: keep.stderr.slice(-600) });
  t.deepEqual(await hostProcs(MARK), [], 'the background job of that call ended with its sandgate (none on the host)');
  const again = await runCli([...LOCAL, 'call', '--sandbox-id', kid, 'run_command',
    JSON.stringify({ command: 'cat kept.txt' })], NO_DOCKER);
  t.is(again.code, 0, 'sandgate call --sandbox-id attaches to it', { stderr: again.stderr.slice(-600) });
  t.is(JSON.parse(again.stdout || '{}').stdout, 'still here\n', '... its directory holds the file');
  t.like(again.stderr, /runner \/\.sandgate-runner in local-[0-9a-f]{12}: pid \d+/, '... in a jail it started itself');
  const kk = await runCli([...LOCAL, 'call', 'kill_sandbox', JSON.stringify({ sandbox_id: kid })], NO_DOCKER);
  t.is(kk.code, 0, 'and kill_sandbox from yet another process removes it', { stderr: kk.stderr.slice(-600) });

  // ---- kill_sandbox
  const k = await srv.call('kill_sandbox', { sandbox_id: sb.sandbox_id });
  checkResultShape(k, 'kill_sandbox');
  t.hasFields(k.structuredContent, { success: true, sandbox_id: sb.sandbox_id }, 'kill_sandbox');
  t.ok(!fs.existsSync(dir), 'kill_sandbox removed the directory');
  t.ok((await srv.call('run_command', { command: 'true', sandbox_id: sb.sandbox_id })).isError, 'the killed sandbox is gone');
  await srv.close();

  // ---- sandgate config names the choice
  const conf = await runCli(['config'], NO_DOCKER);
  t.like(conf.stdout, /; default backend: local \(chosen by probe/, 'sandgate config: the default backend is local', { out: conf.stdout.slice(-600) });
  t.like(conf.stdout, /; local [^\n]*: usable, preference 30/, 'sandgate config: local is usable, preference 30');
  const withDocker = await runCli(['config'], {});
  t.like(withDocker.stdout, /; default backend: docker \(chosen by probe/, 'with the Docker engine up, docker ranks above local');
}, { timeout: 240 });
