// Every slot of ssh.so, including those no MCP tool reaches (streams with
// stdin and merged stderr, status-fd streams, exec argv and env, stat,
// mkdir, remove, attach, list, named targets, SG_E_GONE), driven by
// t/ssh/ssh-slots (the plugin's code with a fake host API) against a real
// sshd, twice: through the built sandgate-runner and with [ssh] runner =
// false; under valgrind when it is installed (SG_TEST_VALGRIND=0 turns that
// off), so the plugin is also checked for leaks and memory errors.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, tmpdir } from '../lib/sg.mjs';
import { startSshd } from '../ssh/sshd.mjs';

t.run(async () => {
  const build = process.env.SG_TEST_BUILDDIR || path.dirname(process.env.SANDGATE_BIN || '.');
  const driver = path.join(build, 't', 'ssh', 'ssh-slots');
  if (!fs.existsSync(driver)) await t.bailOut(`${driver} is missing: build it with "make check" (or make t/ssh/ssh-slots)`);
  const s = await startSshd();
  const state = path.join(tmpdir(), 'state');
  const labRoot = path.join(s.dir, 'lab-root');
  // the named target "lab" is localhost: its key must be known under that name
  fs.appendFileSync(s.knownHosts, `[localhost]:${s.port} ${fs.readFileSync(s.knownHosts, 'utf8').split(' ').slice(1).join(' ')}`);
  // A sanitizer build checks itself (LeakSanitizer); valgrind cannot run it.
  const asan = fs.readFileSync(driver).includes('__asan_init');
  const vg = !asan && process.env.SG_TEST_VALGRIND !== '0' && spawnSync('valgrind', ['--version']).status === 0;
  const cmd = vg ? 'valgrind' : driver;
  const args = vg ? ['--leak-check=full', '--errors-for-leak-kinds=definite,indirect',
    '--show-leak-kinds=definite,indirect', '--error-exitcode=99', driver] : [];
  t.diag(vg ? 'running ssh-slots under valgrind' : asan ? 'running ssh-slots (sanitizer build)' : 'running ssh-slots (no valgrind)');
  const runner = path.join(build, 'sandgate-runner');
  if (!fs.existsSync(runner)) await t.bailOut(`${runner} is missing: build it with "make"`);
  for (const mode of ['runner', 'plain']) {
    const env = { ...process.env, SST_PORT: String(s.port), SST_USER: s.user, SST_KEY: s.key, SST_KNOWN_HOSTS: s.knownHosts,
      SST_ROOT: s.root, SST_LAB_ROOT: labRoot, SST_STATE: state, HOME: path.join(tmpdir(), 'home'),
      SST_RUNNER: runner, SST_RUNNER_ON: mode === 'runner' ? 'true' : 'false' };
    delete env.SSH_AUTH_SOCK;
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const code = await new Promise((r) => child.on('close', (c) => r(c)));
    let n = 0;
    for (const line of out.split('\n')) {
      const m = /^(ok|not ok) \d+ - (.*)$/.exec(line);
      if (m) { n++; t.ok(m[1] === 'ok', `ssh-slots (${mode}): ${m[2]}`); } else if (/^Bail out!/.test(line)) await t.bailOut(`ssh-slots: ${line}`);
    }
    t.cmp(n, '>=', 48, `ssh-slots (${mode}) ran its steps (${n})`);
    t.ok(code === 0, `ssh-slots (${mode}) exited 0${vg ? ' (valgrind: no errors, no definite or indirect leaks)' : asan ? ' (no sanitizer report)' : ''}`,
      { code, stderr: err.split('\n').filter((l) => /==\d+==|runtime error/.test(l)).slice(-40).join('\n') });
    const started = /\[ssh\] \d+: runner \S+ on /.test(err);
    t.is(started, mode === 'runner', mode === 'runner' ? 'the runner started' : 'no runner started', { log: err.split('\n').filter((l) => /runner/.test(l)).slice(0, 5) });
    const left = fs.readdirSync(s.root).concat(fs.existsSync(labRoot) ? fs.readdirSync(labRoot) : []);
    t.deepEqual(left, [], `ssh-slots (${mode}) left no sandbox directory behind`);
    t.deepEqual(fs.existsSync(path.join(s.xdg, 'sandgate')) ? fs.readdirSync(path.join(s.xdg, 'sandgate')) : [], [],
      `ssh-slots (${mode}) left no runner file on the host (fini removed it)`);
  }
}, { timeout: 300 });
