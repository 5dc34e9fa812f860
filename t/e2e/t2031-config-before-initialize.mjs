// Every configuration error is found before initialize is answered: a bad
// value in a plugin's section (only the plugin knows its keys) stops
// `sandgate stdio` before it answers anything, never after a good
// handshake.  A configuration with nothing for a plugin to check answers
// initialize without waiting for the backends, and its first tools/list
// still lists them all.
import { spawn } from 'node:child_process';
import { t, serverEnv, tmpdir } from '../lib/sg.mjs';

const INIT = `${JSON.stringify({
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't2031', version: '1' } },
})}\n`;
const LIST = `${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' })}\n`;

/** Runs `sandgate stdio` with args and env, writes the lines, returns stdout lines, stderr, code. */
function run(args, env, input) {
  return new Promise((resolve) => {
    const child = spawn(process.env.SANDGATE_BIN, ['stdio', ...args], { env: serverEnv(env), cwd: tmpdir() });
    const out = [];
    const err = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    child.stdin.on('error', () => {}); // it may be gone before we wrote
    child.stdin.end(input);
    const timer = setTimeout(() => child.kill('SIGKILL'), 30000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, lines: Buffer.concat(out).toString().split('\n').filter(Boolean), stderr: Buffer.concat(err).toString() });
    });
  });
}

t.run(async () => {
  for (const [how, args, env] of [
    ['--set docker.api_timeout=soon', ['--set', 'docker.api_timeout=soon'], {}],
    ['SANDGATE_DOCKER_API_TIMEOUT=soon', [], { SANDGATE_DOCKER_API_TIMEOUT: 'soon' }],
    ['--set ssh.target.lab.port=twenty-two', ['--set', 'ssh.target.lab.port=twenty-two'], {}],
  ]) {
    const r = await run(args, env, INIT);
    t.is(r.code, 3, `${how}: exit status 3 (configuration error)`, { stderr: r.stderr });
    t.deepEqual(r.lines, [], `${how}: nothing was answered before the exit`);
    t.like(r.stderr, /is not a whole number|accepts|expected|not valid|must be/i, `${how}: the log names the bad value`, { stderr: r.stderr });
  }
  // a default_backend that names no plugin is a configuration error too
  const nb = await run(['--set', 'sandbox.default_backend=nosuchbackend'], {}, INIT);
  t.is(nb.code, 3, 'default_backend naming no plugin: exit 3');
  t.deepEqual(nb.lines, [], '... before answering');
  t.like(nb.stderr, /default_backend = 'nosuchbackend' is not a loaded plugin/, '... saying which');

  // nothing for a plugin to check: the handshake does not wait, and the
  // first tools/list has every backend in create_sandbox's enum
  const ok = await run([], {}, INIT + LIST);
  t.is(ok.code, 0, 'a plain start exits 0 at EOF');
  const list = ok.lines.map((l) => JSON.parse(l)).find((m) => m.id === 2);
  const enums = list?.result?.tools?.find((x) => x.name === 'create_sandbox')?.inputSchema?.properties?.backend?.enum ?? [];
  t.ok(['docker', 'ssh', 'fc'].every((b) => enums.includes(b)), `tools/list waited for the backends: ${enums.join(', ')}`);
}, { timeout: 120 });
