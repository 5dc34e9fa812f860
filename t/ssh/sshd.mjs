// sshd.mjs - a real OpenSSH server for sandgate's SSH end-to-end tests.
//
//   import { startSshd, sshArgs, sshEnv } from '../ssh/sshd.mjs';
//   const s = await startSshd({ maxSessions: 4 });
//   const srv = await sdkClient(sshArgs(s), sshEnv());
//
// Wraps t/ssh/sshd-fixture.sh (see there for what the server directory
// holds).  The server runs in its own temp directory, outside the test's,
// and is stopped by a cleanup hook however the test ends.  A missing sshd
// fails the test with a "Bail out!" that says how to install it: SSH tests
// never skip.

import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { t } from '../lib/sg.mjs';

const execFileP = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const FIXTURE = path.join(here, 'sshd-fixture.sh');
const servers = [];
let cleanupInstalled = false;

async function fixture(args) {
  try {
    const { stdout } = await execFileP('sh', [FIXTURE, ...args], { timeout: 60000 });
    return stdout;
  } catch (e) {
    throw new Error(`sshd-fixture.sh ${args.join(' ')}: ${(e.stderr || e.message || '').trim()}`);
  }
}

function parseReady(text) {
  const o = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) o[line.slice(0, i)] = line.slice(i + 1);
  }
  return o;
}

function installCleanup() {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  t.onCleanup(async () => {
    for (const s of servers) {
      await fixture(['stop', s.dir]).catch((e) => process.stderr.write(`cleanup: ${e.message}\n`));
      if (!process.env.SG_TEST_KEEP && t.failures() === 0) fs.rmSync(s.dir, { recursive: true, force: true });
      else t.diag(`kept the sshd directory ${s.dir} (sshd.log inside)`);
    }
  });
  t.onFailure(async () => {
    for (const s of servers) t.diag(`sshd.log of ${s.dir}:\n${s.log().split('\n').slice(-30).join('\n')}`);
  });
}

/**
 * Starts sshd; opts.maxSessions (default 10), opts.ecdsa (a second host
 * key), opts.loginNoise (bash prints a line on stdout and stderr before
 * every command, like a chatty rc file), opts.noXdg (no XDG_RUNTIME_DIR in
 * the sessions; by default it is <dir>/xdg, where ssh.so puts its runner),
 * opts.home (HOME of the sessions), opts.noSftp (no `Subsystem sftp`).  Returns the ready values (s.xdg: the
 * sessions' XDG_RUNTIME_DIR or '') plus stop(), kill(), restart(), rekey(),
 * freeze() and thaw() (SIGSTOP / SIGCONT the open connections).
 */
export async function startSshd(opts = {}) {
  if (!fs.existsSync('/usr/sbin/sshd')) {
    await t.bailOut('/usr/sbin/sshd is missing: install it with "apt-get install -y openssh-server" (.ci/run does)');
  }
  for (const tool of ['ssh-keygen', 'pgrep', 'setsid']) {
    try {
      await execFileP('sh', ['-c', `command -v ${tool}`]);
    } catch {
      await t.bailOut(`${tool} is missing: install openssh-client, procps and util-linux`);
    }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sg-sshd-'));
  const s = { dir };
  servers.push(s);
  installCleanup();
  const args = ['start', dir, '--max-sessions', String(opts.maxSessions ?? 10)];
  if (opts.ecdsa) args.push('--ecdsa');
  if (opts.loginNoise) args.push('--login-noise');
  if (opts.noXdg) args.push('--no-xdg');
  if (opts.home) args.push('--home', opts.home);
  if (opts.noSftp) args.push('--no-sftp');
  Object.assign(s, parseReady(await fixture(args)));
  s.port = Number(s.port);
  s.knownHosts = s.known_hosts;
  s.keyEnc = s.key_enc;
  s.wrongKey = s.wrong_key;
  s.hostFp = s.host_fp;
  s.stop = () => fixture(['stop', dir]);
  s.kill = () => fixture(['kill', dir]);
  s.restart = async () => Object.assign(s, parseReady(await fixture(['restart', dir])), {});
  s.rekey = async () => {
    await fixture(['rekey', dir]);
    const { stdout } = await execFileP('ssh-keygen', ['-lf', path.join(dir, 'host_ed25519_key.pub')]);
    return stdout.split(' ')[1];
  };
  s.freeze = () => fixture(['freeze', dir]);
  s.thaw = () => fixture(['thaw', dir]);
  s.log = () => { try { return fs.readFileSync(path.join(dir, 'sshd.log'), 'utf8'); } catch { return ''; } };
  t.diag(`sshd on 127.0.0.1:${s.port} (pid ${s.pid}, MaxSessions ${opts.maxSessions ?? 10}) in ${dir}`);
  return s;
}

/**
 * sandgate arguments for a fixture: its INI, both plugins loaded, ssh the
 * default backend.  Sandboxes are plain directories ([ssh] isolation = none)
 * unless sets names another isolation: the SSH tests look at them on the
 * host; t7010 and the jailed runs of the sandbox_env bodies set
 * 'ssh.isolation': 'auto' or 'bwrap'.
 */
export function sshArgs(s, sets = {}) {
  const args = ['--config', s.ini, '--set', 'plugin.load=docker,ssh', '--set', 'sandbox.default_backend=ssh'];
  for (const [k, v] of Object.entries({ 'ssh.isolation': 'none', ...sets })) args.push('--set', `${k}=${v}`);
  return args;
}

/**
 * Whether ssh.so's runner is on for this run: SANDGATE_SSH_RUNNER=false (the
 * environment form of [ssh] runner) runs the SSH tests on plain exec.
 */
export function sshRunnerOn() {
  return !/^(false|no|off|0)$/i.test(process.env.SANDGATE_SSH_RUNNER ?? '');
}

/** The server environment for SSH tests: no ssh-agent of the caller, unless given. */
export function sshEnv(extra = {}) {
  return { SSH_AUTH_SOCK: undefined, SANDGATE_SSH_PASSPHRASE: undefined, ...extra };
}

/** Checks that ssh.so (and docker.so, which sshArgs loads too) are built. */
export async function sshPreflight() {
  const dir = process.env.SANDGATE_PLUGIN_DIR;
  for (const so of ['ssh.so', 'docker.so']) {
    if (!dir || !fs.existsSync(path.join(dir, so))) {
      await t.bailOut(`${so} is missing from SANDGATE_PLUGIN_DIR=${dir}: build it ("make")`);
    }
  }
}

/** Runs a shell command on this host (the SSH "remote" is local): {code, stdout, stderr}. */
export function sh(cmd) {
  return new Promise((resolve) => {
    execFile('sh', ['-c', cmd], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A `pgrep -f` pattern for tag that does not match pgrep's own command
 * line ("[s]gmark..." for "sgmark..."). */
export const procPattern = (tag) => `[${tag[0]}]${tag.slice(1)}`;

/** The pids of host processes whose command line holds tag. */
export async function hostProcs(tag) {
  const r = await sh(`pgrep -f '${procPattern(tag)}' || true`);
  return r.stdout.split('\n').filter(Boolean);
}

/** Starts `ssh-agent -D -a SOCK` holding `key`; returns {sock, stop()}. */
export async function startAgent(key) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sg-agent-'));
  const sock = path.join(dir, 'agent.sock');
  const child = spawn('ssh-agent', ['-D', '-a', sock], { stdio: 'ignore' });
  for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
  const stop = async () => {
    child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  t.onCleanup(stop);
  await execFileP('ssh-add', [key], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
  return { sock, stop };
}
