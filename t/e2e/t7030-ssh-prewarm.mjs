// [ssh] prewarm = true: a server makes the default target ready before the
// first call: the sandbox root exists and the target's runner runs before
// any tool is called (seen on the host, not timed), and the log says so;
// without prewarm nothing is done before the first call.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { t, preflight, sdkClient, waitFor } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sshRunnerOn } from '../ssh/sshd.mjs';

function runnersUnder(dir) {
  try {
    return execFileSync('pgrep', ['-f', dir], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch { return []; }
}

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const root = path.join(s.dir, 'prewarmed-root');
  const srv = await sdkClient(sshArgs(s, { 'ssh.prewarm': 'true', 'ssh.root': root }), sshEnv());
  const log = () => fs.readFileSync(srv.stderrPath, 'utf8');
  const line = await waitFor(() => /prewarmed target default in \d+ ms: connected, sandbox root (\S+) ready, runner (\S+)/.exec(log()), 20000);
  t.ok(line, 'the log says the default target was prewarmed, before any call', { log: log().slice(-2000) });
  t.is(line?.[1], root, 'the line names the sandbox root');
  const st = fs.statSync(root, { throwIfNoEntry: false });
  t.ok(st?.isDirectory() && (st.mode & 0o777) === 0o700, 'the sandbox root exists (0700) before the first call',
    { mode: st ? (st.mode & 0o777).toString(8) : null });
  if (sshRunnerOn()) {
    t.is(line?.[2], 'active', 'the runner is active before the first call');
    t.ok(s.xdg && runnersUnder(s.xdg).length >= 1, 'a runner process runs on the target before the first call', { xdg: s.xdg });
  } else {
    t.is(line?.[2], 'off', 'with the runner off the line says so');
  }
  const sb = await srv.tool('create_sandbox', { backend: 'ssh' });
  t.ok(sb.workspace.startsWith(`${root}/sg-`), 'create_sandbox makes its directory under the prewarmed root');
  t.is((await srv.tool('run_command', { command: 'echo warm' })).stdout, 'warm\n', 'the first command runs');
  t.is((log().match(/prewarmed target/g) || []).length, 1, 'prewarmed once');
  await srv.close();

  const cold = await sdkClient(sshArgs(s, { 'ssh.root': path.join(s.dir, 'cold-root') }), sshEnv());
  await cold.tool('create_sandbox', { backend: 'ssh' });
  t.ok(!/prewarm/.test(fs.readFileSync(cold.stderrPath, 'utf8')), 'prewarm unset: nothing is prewarmed');
  await cold.close();
}, { timeout: 90 });
