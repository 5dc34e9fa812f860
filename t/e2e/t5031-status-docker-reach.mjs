// `sandgate status` says whether the docker engine can be reached, with its
// endpoint and, when it cannot, the cause: a socket that is not there, and a
// TLS front (socat, certificates made here, as t5005) whose certificate the
// configured CA did not sign, named with the CA file.  The text and --json
// forms both; the exit status is 1 when docker is the default and unusable.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, runCli, tmpdir } from '../lib/sg.mjs';
import { tlsFront } from '../lib/remote.mjs';

const ssl = (dir, args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const status = (sets, env = {}) => runCli([...sets.flatMap(([k, v]) => ['--set', `${k}=${v}`]), '--set', 'sandbox.default_backend=docker', 'status'],
  { DOCKER_HOST: undefined, DOCKER_TLS_VERIFY: undefined, DOCKER_CERT_PATH: undefined, ...env }, { timeout: 30000 });
const statusJson = async (sets, env) => {
  const r = await runCli([...sets.flatMap(([k, v]) => ['--set', `${k}=${v}`]), '--set', 'sandbox.default_backend=docker', 'status', '--json'],
    { DOCKER_HOST: undefined, DOCKER_TLS_VERIFY: undefined, DOCKER_CERT_PATH: undefined, ...env }, { timeout: 30000 });
  return { r, docker: JSON.parse(r.stdout).backends.find((b) => b.name === 'docker') };
};

t.run(async () => {
  await preflight();
  for (const tool of ['socat', 'openssl']) {
    try { execFileSync('sh', ['-c', `command -v ${tool}`]); } catch { await t.bailOut(`${tool} is missing: apt-get install -y ${tool}`); }
  }
  // a socket that is not there
  const sock = path.join(tmpdir(), 'no-docker.sock');
  let r = await status([['docker.host', `unix://${sock}`]]);
  t.is(r.code, 1, 'status exits 1: the default backend cannot be reached');
  t.like(r.stdout, new RegExp(`docker +usable: no \\(docker: cannot connect to the docker daemon at ${esc(sock)}: dockerd is not running .*\\(No such file or directory\\)\\)`),
    'the docker line says unusable, the socket and the cause', r.stdout);
  t.like(r.stdout, new RegExp(`^ +endpoint: ${esc(sock)}\\b`, 'm'), 'the endpoint is shown under it', r.stdout);
  let j = await statusJson([['docker.host', `unix://${sock}`]]);
  t.is(j.docker.usable, false, '--json: usable false');
  t.is(j.docker.details.endpoint, sock, '--json: details.endpoint is the socket');

  // the TLS front with a CA that did not sign its certificate
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'tls-'));
  ssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=t5031 CA', '-keyout', 'ca.key', '-out', 'ca.pem']);
  ssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=t5031 other CA', '-keyout', 'other.key', '-out', 'other.pem']);
  ssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=server', '-keyout', 'server.key', '-out', 'server.csr']);
  fs.writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  ssl(dir, ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'server.ext', '-out', 'server.pem']);
  const wrong = path.join(dir, 'wrong');
  fs.mkdirSync(wrong);
  fs.copyFileSync(path.join(dir, 'other.pem'), path.join(wrong, 'ca.pem'));
  const url = await tlsFront(dir, { verifyClients: false });
  const env = { DOCKER_HOST: url, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: wrong };
  r = await status([], env);
  t.is(r.code, 1, 'a wrong CA: status exits 1');
  t.like(r.stdout, new RegExp(`docker +usable: no \\(docker: TLS verification of the docker engine at ${esc(url)} failed: its certificate is not signed by the CA ${esc(wrong)}/ca\\.pem`),
    'the docker line names the endpoint, the failed verification and the CA file', r.stdout);
  t.like(r.stdout, new RegExp(`^ +endpoint: ${esc(url)}\\b`, 'm'), 'the endpoint is the tcp:// address', r.stdout);
  j = await statusJson([], env);
  t.is(j.docker.details.endpoint, url, '--json: details.endpoint is the tcp:// address');

  // and the reachable engine, for contrast: usable, its endpoint and version
  r = await status([['docker.host', 'unix:///var/run/docker.sock']]);
  t.like(r.stdout, /docker +usable: yes \(the probe succeeded\)\n +endpoint: \/var\/run\/docker\.sock, .*engine_version: \S+/,
    'a reachable engine: usable, with its endpoint and engine version', r.stdout);
}, { timeout: 60 });
