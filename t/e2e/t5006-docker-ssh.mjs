// An ssh:// engine through the loopback sshd of the SSH tests (this host is
// the "remote": its docker CLI runs `docker system dial-stdio` there): the
// cloud tools, docker_run and docker_remove work; 20 calls use one SSH
// connection; after sandgate exits no dial-stdio process is left; an unknown
// host key is refused with its fingerprint, a key the server refuses with
// what was tried, and a docker host whose sshd is down names the endpoint.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, runCli, tmpdir, sleep } from '../lib/sg.mjs';
import { dockerArgs } from '../lib/docker.mjs';
import { remoteBody } from '../lib/remote.mjs';
import { startSshd, sshEnv } from '../ssh/sshd.mjs';

/** The dial-stdio processes whose parent chain reaches sshd pid. */
function dialStdio(sshdPid) {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).trim().split('\n')
    .map((l) => l.trim().match(/^(\d+)\s+(\d+)\s+(.*)$/)).filter(Boolean).map((m) => ({ pid: +m[1], ppid: +m[2], args: m[3] }));
  const parent = new Map(rows.map((r) => [r.pid, r.ppid]));
  const under = (pid) => { for (let p = pid, i = 0; p > 1 && i < 50; p = parent.get(p), i++) if (p === sshdPid) return true; return false; };
  return rows.filter((r) => /docker system dial-stdio/.test(r.args) && under(r.pid));
}

const accepted = (s) => (s.log().match(/Accepted publickey/g) ?? []).length;

t.run(async () => {
  await preflight();
  try { execFileSync('sh', ['-c', 'command -v docker']); } catch { await t.bailOut('the docker CLI is missing on the ssh "remote" (this host): apt-get install -y docker.io'); }
  const s = await startSshd();
  const url = `ssh://${s.user}@127.0.0.1:${s.port}`;
  const sets = { 'docker.ssh_key': s.key, 'docker.ssh_known_hosts': s.knownHosts, 'sandbox.default_backend': 'docker' };
  const args = (extra = {}) => Object.entries({ ...sets, ...extra }).flatMap(([k, v]) => ['--set', `${k}=${v}`]);

  // The refusals run beside the working session (docker is slow on a shared
  // machine; the test must stay within its minute).  Neither signs in, so
  // sshd's count of accepted sign-ins stays the session's.
  const call = (extra, env = {}) => runCli([...args(extra), 'call', 'run_command', '{"command":"true"}'], sshEnv({ DOCKER_HOST: url, ...env }), { timeout: 30000 });
  const empty = path.join(tmpdir(), 'empty_known_hosts');
  fs.writeFileSync(empty, '');
  const refusals = (async () => {
    let r = await call({ 'docker.ssh_known_hosts': empty });
    t.is(r.code, 1, 'an unknown host key: the call fails');
    t.like(r.stderr, new RegExp(`host key of \\[127\\.0\\.0\\.1\\]:${s.port} is not known: ED25519 ${s.hostFp.replace(/[+/]/g, '\\$&')} is not in ${empty}.*\\[docker\\] ssh_host_key_policy = accept-new`),
      'the message has the fingerprint, the file and the keys to fix it', { stderr: r.stderr });

    r = await call({ 'docker.ssh_key': s.wrongKey });
    t.is(r.code, 1, 'a key the server refuses: the call fails');
    t.like(r.stderr, new RegExp(`authentication as ${s.user}@127\\.0\\.0\\.1:${s.port} failed; tried: .*key ${s.wrongKey} \\(ssh-ed25519\\): rejected by the server`),
      'the message lists what was tried', { stderr: r.stderr });
  })();

  const before = accepted(s);
  // results whole: the transport's exact bytes are the point, not the cut (t4035)
  const srv = await sdkClient([...dockerArgs({ 'server.max_result_bytes': '1048576' }), ...args()], sshEnv({ DOCKER_HOST: url }));
  await remoteBody(srv, 'ssh');
  for (let i = 0; i < 20; i++) await srv.tool('run_command', { command: `echo ${i}` });
  t.is(accepted(s) - before, 1, '20 more calls after the body: still one SSH connection (sshd accepted one sign-in)');
  t.ok(dialStdio(Number(s.pid)).length > 0, 'while serving, dial-stdio runs under the sshd');
  await srv.close();
  let left = [];
  for (let i = 0; i < 40; i++) {
    left = dialStdio(Number(s.pid));
    if (!left.length) break;
    await sleep(100);
  }
  t.deepEqual(left.map((p) => p.args), [], 'after sandgate exits, no docker system dial-stdio is left on the host');

  await refusals;
  await s.stop();
  const r = await call({});
  t.is(r.code, 1, 'sshd down: the call fails');
  t.like(r.stderr, new RegExp(`cannot connect to the SSH server of docker host ${url.replace(/\./g, '\\.')}: Connection refused`),
    'the message names the endpoint and the cause', { stderr: r.stderr });
}, { timeout: 60 });
