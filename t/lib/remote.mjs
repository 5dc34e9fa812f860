// remote.mjs - what every remote-engine test (tcp with TLS, ssh://) checks
// once the server points at the engine: the cloud tools and the named
// machine actions work through it as on the local socket.
import net from 'node:net';
import { spawn } from 'node:child_process';
import { t, resultData, trackSandbox, sleep } from './sg.mjs';
import { uniq, envFlat, container } from './docker.mjs';

/** Runs the common calls on srv; label names the transport in test names. */
export async function remoteBody(srv, label) {
  const cr = await srv.call('create_sandbox', {});
  t.ok(!cr.isError, `${label}: create_sandbox`, cr.isError ? cr.content : undefined);
  const sb = cr.structuredContent ?? {};
  trackSandbox(sb.sandbox_id);
  t.is(sb.backend, 'docker', `${label}: the sandbox is on docker`);
  const rc = await srv.tool('run_command', { command: 'echo out; echo err >&2; exit 3' });
  t.deepEqual([rc.stdout, rc.stderr, rc.exit_code], ['out\n', 'err\n', 3], `${label}: run_command: stdout, stderr, exit code`);
  const big = await srv.tool('run_command', { command: 'head -c 300000 /dev/zero | tr "\\0" x' });
  t.is(big.stdout.length, 300000, `${label}: 300 KB of output arrive whole`);
  const w = await srv.tool('write_file', { path: 'remote/a.txt', content: 'hello remote\n' });
  t.is(w.bytes_written, 13, `${label}: write_file`);
  t.is((await srv.tool('read_file', { path: 'remote/a.txt' })).content, 'hello remote\n', `${label}: read_file reads it back`);
  const ls = await srv.tool('list_files', { path: 'remote' });
  t.deepEqual((ls.files ?? []).map((f) => f.name), ['a.txt'], `${label}: list_files`);
  t.is((await srv.tool('run_command', { command: 'cat remote/a.txt' })).stdout, 'hello remote\n', `${label}: the file is in the container`);

  const name = uniq(`sgt-${label}`);
  const run = resultData(await envFlat(srv, 'docker_run', { name }));
  t.is(run.status, 'running', `${label}: docker_run makes a running machine`);
  const c = await container(`sandgate-${name}`);
  t.is(c?.State?.Running, true, `${label}: its container runs on the engine`);
  t.is(resultData(await envFlat(srv, 'docker_remove', { machine: name })).status, 'removed', `${label}: docker_remove`);
  t.is(await container(`sandgate-${name}`), null, `${label}: the container is gone`);
  await srv.call('kill_sandbox', { sandbox_id: sb.sandbox_id });
}

/** A free TCP port on 127.0.0.1. */
export const freePort = () => new Promise((res) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
});

/** Waits until something listens on 127.0.0.1:port (5 s at most). */
export async function waitPort(port) {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise((res) => { const c = net.connect(port, '127.0.0.1', () => { c.end(); res(true); }); c.on('error', () => res(false)); });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

/**
 * A TLS front for the local engine (socat), started in dir, which holds
 * server.pem and server.key, and ca.pem when verifyClients (a client must
 * show a certificate that CA signed).  Stopped when the test ends.
 * Returns its tcp:// URL.
 */
export async function tlsFront(dir, { verifyClients }) {
  const port = await freePort();
  const tls = verifyClients ? 'cafile=ca.pem,verify=1' : 'verify=0';
  const front = spawn('socat', [`OPENSSL-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork,cert=server.pem,key=server.key,${tls}`,
    'UNIX-CONNECT:/var/run/docker.sock'], { cwd: dir, stdio: 'ignore', detached: true });
  t.onCleanup(() => { try { process.kill(-front.pid, 'SIGTERM'); } catch { /* gone */ } });
  await waitPort(port);
  return `tcp://127.0.0.1:${port}`;
}
