// sandgate call on a terminal shows the progress notifications a tool sends
// (here: docker.so's four steps of creating a container) on one line of
// stderr, and clears it before the result; with stdout or stderr not a
// terminal it shows nothing.  The terminal is a pty from script(1).
import { spawn } from 'node:child_process';
import { t, preflight, runCli, serverEnv, tmpdir, containersOfServer } from '../lib/sg.mjs';

const CLEAR = '\r\x1b[K';
const shq = (s) => `'${s.replace(/'/g, "'\\''")}'`;

/** Runs argv under script(1): stdin, stdout and stderr are one pty.  Resolves {code, out}. */
function onPty(argv, env) {
  return new Promise((resolve) => {
    const child = spawn('script', ['-qefc', argv.map(shq).join(' '), '/dev/null'],
      { env: serverEnv(env), cwd: tmpdir(), stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => out.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out: Buffer.concat(out).toString('utf8') }); });
  });
}

t.run(async () => {
  await preflight();
  const args = [process.env.SANDGATE_BIN, '--set', 'log.level=warning', 'call', 'run_command', '{"command":"echo progress-ok"}'];
  const p = await onPty(args);
  t.is(p.code, 0, 'call on a terminal exits 0', { out: p.out });
  const steps = [...p.out.matchAll(/\r\x1b\[Ksandgate: \[ *(\d+)%\] ([^\r]*)\r/g)].map((m) => `${m[1]}% ${m[2]}`);
  t.deepEqual(steps, ['0% creating container', '33% starting container', '67% inspecting container', '100% container ready'],
    'the progress line shows each step of the creation, each replacing the one before', { out: JSON.stringify(p.out) });
  const last = p.out.lastIndexOf('container ready\r');
  const clear = p.out.indexOf(CLEAR, last);
  const result = p.out.indexOf('"stdout": "progress-ok\\n"');
  t.ok(last >= 0 && clear > last && result > clear, 'the line is cleared before the result is printed', { out: JSON.stringify(p.out) });

  const q = await runCli(['--set', 'log.level=warning', 'call', 'run_command', '{"command":"echo quiet-ok"}']);
  t.is(q.code, 0, 'call with stdout and stderr on pipes exits 0');
  t.is(JSON.parse(q.stdout).stdout, 'quiet-ok\n', '... stdout is the result only');
  t.ok(!q.stderr.includes('sandgate: [') && !q.stderr.includes('\x1b['), '... and stderr has no progress line', { stderr: q.stderr });
  t.is((await containersOfServer(q.pid)).length, 0, 'no container is left');
}, { timeout: 240 });
