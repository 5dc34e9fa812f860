// A tcp:// engine with TLS, pointed at as a docker CLI user would
// (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH): a TLS front that this
// test starts (socat with certificates openssl makes here, client
// certificates required) before the test engine's socket.  The cloud tools,
// docker_run and docker_remove work through it; a wrong CA, a missing client
// certificate, a missing ca.pem and plain tcp to another host are refused
// with messages that name the certificate or key and the fix.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, runCli, tmpdir } from '../lib/sg.mjs';
import { dockerArgs } from '../lib/docker.mjs';
import { remoteBody, tlsFront } from '../lib/remote.mjs';

const ssl = (dir, args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });

function makeCa(dir, name, cn) {
  ssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.pem`]);
}

function makeLeaf(dir, name, ca, ext) {
  ssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
  fs.writeFileSync(path.join(dir, `${name}.ext`), ext);
  ssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.pem`]);
}

/** A cert_path directory holding the given {target: source} files. */
function certDir(dir, name, files) {
  const d = path.join(dir, name);
  fs.mkdirSync(d);
  for (const [to, from] of Object.entries(files)) fs.copyFileSync(path.join(dir, from), path.join(d, to));
  return d;
}

t.run(async () => {
  await preflight();
  for (const tool of ['socat', 'openssl']) {
    try { execFileSync('sh', ['-c', `command -v ${tool}`]); } catch { await t.bailOut(`${tool} is missing: apt-get install -y ${tool}`); }
  }
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'tls-'));
  makeCa(dir, 'ca', 'sandgate test CA');
  makeCa(dir, 'otherca', 'another CA');
  makeLeaf(dir, 'server', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  makeLeaf(dir, 'client', 'ca', 'extendedKeyUsage=clientAuth\n');
  const good = certDir(dir, 'good', { 'ca.pem': 'ca.pem', 'cert.pem': 'client.pem', 'key.pem': 'client.key' });
  const wrongCa = certDir(dir, 'wrongca', { 'ca.pem': 'otherca.pem', 'cert.pem': 'client.pem', 'key.pem': 'client.key' });
  const noCert = certDir(dir, 'nocert', { 'ca.pem': 'ca.pem' });
  const noCa = certDir(dir, 'noca', { 'cert.pem': 'client.pem', 'key.pem': 'client.key' });

  const url = await tlsFront(dir, { verifyClients: true });

  // The refusals run beside the working session: the machine is shared and
  // docker is slow under load, the test must stay within its minute.
  const refusals = (async () => {
    const call = (e, sets = []) => runCli([...sets, '--set', 'sandbox.default_backend=docker', 'call', 'run_command', '{"command":"true"}'],
      { DOCKER_HOST: url, DOCKER_TLS_VERIFY: '1', ...e }, { timeout: 30000 });
    const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

    let r = await call({ DOCKER_CERT_PATH: wrongCa });
    t.is(r.code, 1, 'a wrong CA: the call fails');
    t.like(r.stderr, new RegExp(`TLS verification of the docker engine at ${esc(url)} failed: its certificate is not signed by the CA ${esc(wrongCa)}/ca\\.pem .*set \\[docker\\] cert_path / DOCKER_CERT_PATH`),
      'the message names the endpoint, the CA file and the fix', { stderr: r.stderr });

    r = await call({ DOCKER_CERT_PATH: noCert });
    t.is(r.code, 1, 'no client certificate: the call fails');
    t.like(r.stderr, new RegExp(`the TLS handshake with the docker engine at ${esc(url)} failed .*sandgate sent no client certificate \\(no cert\\.pem and key\\.pem beside ${esc(noCert)}/ca\\.pem\\)`),
      'the message says no client certificate was sent and where it belongs', { stderr: r.stderr });

    r = await call({ DOCKER_CERT_PATH: '' }, ['--set', `docker.cert_path=${noCa}`]);
    t.is(r.code, 1, 'no ca.pem: the call fails');
    t.like(r.stderr, new RegExp(`docker host ${esc(url)}: TLS needs the CA certificate ${esc(noCa)}/ca\\.pem \\(No such file or directory\\): set \\[docker\\] cert_path or DOCKER_CERT_PATH`),
      'the message names the missing ca.pem and the keys', { stderr: r.stderr });

    r = await runCli(['--set', 'docker.host=tcp://192.0.2.7:2375', '--set', 'sandbox.default_backend=docker', 'call', 'run_command', '{"command":"true"}'],
      { DOCKER_HOST: undefined, DOCKER_TLS_VERIFY: undefined }, { timeout: 30000 });
    t.is(r.code, 1, 'plain tcp to another host: the call fails');
    t.like(r.stderr, /docker host tcp:\/\/192\.0\.2\.7:2375 without TLS would let anyone on the network run containers as root there: set \[docker\] tls_verify = true .* or \[docker\] allow_plain_tcp = true/,
      'the message names tls_verify and allow_plain_tcp', { stderr: r.stderr });
  })();
  const env = { DOCKER_HOST: url, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: good };
  // results whole: the transport's exact bytes are the point, not the cut (t4035)
  const srv = await sdkClient([...dockerArgs({ 'server.max_result_bytes': '1048576' }), '--set', 'sandbox.default_backend=docker'], env);
  await remoteBody(srv, 'tls');
  await srv.close();
  await refusals;

}, { timeout: 60 });
