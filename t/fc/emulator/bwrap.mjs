// Commands in a sandbox: bubblewrap with the sandbox's directory bound over
// / and the host's /usr and /etc read-only on top.

import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { bwrap } from './state.mjs';

function bwrapArgs(sbx, cwd, extra = []) {
  const a = ['--bind', sbx.root, '/', '--ro-bind', '/usr', '/usr', '--ro-bind', '/etc', '/etc'];
  for (const d of ['bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32']) {
    try { if (!fs.lstatSync(`/${d}`).isSymbolicLink()) a.push('--ro-bind', `/${d}`, `/${d}`); } catch { /* absent */ }
  }
  a.push('--proc', '/proc', '--dev', '/dev', '--die-with-parent', '--chdir', cwd, ...extra);
  return a;
}

export function baseEnv(sbx, envs) {
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: '/home/user', USER: 'user', LANG: 'C.UTF-8', TERM: 'xterm',
    E2B_SANDBOX: 'true', E2B_SANDBOX_ID: sbx.id,
    ...sbx.envVars,
    ...(envs && typeof envs === 'object' ? envs : {}),
  };
}

export function killGroup(p, sig) {
  try { process.kill(-p.child.pid, sig); } catch { /* gone */ }
}

export function spawnIn(sbx, argv, cwd, env, stdio, extraBwrap = []) {
  return spawn(bwrap, [...bwrapArgs(sbx, cwd, extraBwrap), '--', ...argv], { env, detached: true, stdio });
}
