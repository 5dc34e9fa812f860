// remote.mjs - what every remote-engine test (tcp with TLS, ssh://) checks
// once the server points at the engine: the cloud tools and the named
// machine actions work through it as on the local socket.
import { t, resultData, trackSandbox } from './sg.mjs';
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
