// The Function Compute artifact's Dockerfile builds: FROM the local Debian 12
// image sandgate/base:1 (no registry; apt reaches Debian's mirror), with the
// source tree as the build context.  The container runs `sandgate http`
// with the fc backend, refuses a request without the bearer token, answers
// initialize and tools/list with it, and runs as an unprivileged user.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, runCli, tmpdir, sleep, IMAGE } from '../lib/sg.mjs';

const run = promisify(execFile);
const tag = `sandgate-test/fc-deploy:${process.pid}`;
let container = null;

async function docker(args, opts = {}) {
  const r = await run('docker', args, { maxBuffer: 64 << 20, timeout: opts.timeout ?? 60000, env: opts.env ?? process.env });
  return r.stdout.trim();
}

async function logs(id) {
  try {
    const r = await run('docker', ['logs', id], { maxBuffer: 64 << 20, timeout: 30000 });
    return r.stdout + r.stderr;
  } catch (e) {
    return `${e.stdout ?? ''}${e.stderr ?? e.message}`;
  }
}

async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, json };
}

t.run(async () => {
  await preflight();
  t.onCleanup(async () => {
    if (container) await docker(['rm', '-f', container]).catch(() => {});
    await docker(['rmi', '-f', tag]).catch(() => {});
  });
  const out = path.join(tmpdir(), 'fc');
  const d = await runCli(['deploy', '--target', 'fc', '--output-dir', out, '--base-image', IMAGE]);
  t.is(d.code, 0, 'deploy --target fc exits 0', { stderr: d.stderr });
  const token = fs.readFileSync(path.join(out, 'auth-token'), 'utf8').trim();

  const t0 = Date.now();
  try {
    await docker(['build', '-q', '--force-rm', '-f', path.join(out, 'Dockerfile'), '-t', tag, process.env.SG_TEST_SRCDIR], { timeout: 1200000 });
  } catch (e) {
    await t.bailOut(`docker build of the artifact failed (apt needs deb.debian.org): ${(e.stderr || e.message).trim().split('\n').slice(-15).join('\n')}`);
  }
  const secs = Math.round((Date.now() - t0) / 1000);
  t.pass(`the artifact's image builds FROM ${IMAGE} (${secs} s)`);
  t.diag(`docker build took ${secs} s`);

  // the token reaches the container from the environment, not the command line
  container = await docker(['run', '-d', '-e', 'ABX_MCP_AUTH_TOKEN', '-p', '127.0.0.1::9000', tag],
    { env: { ...process.env, ABX_MCP_AUTH_TOKEN: token } });
  const port = (await docker(['port', container, '9000/tcp'])).split('\n')[0].split(':').pop();
  const url = `http://127.0.0.1:${port}/mcp`;
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'sandgate-deploy-test', version: '1' } } };

  let noauth;
  for (let i = 0; i < 60; i++) {
    try { noauth = await post(url, init); break; } catch { await sleep(250); }
  }
  t.is(noauth?.status, 401, 'initialize without the bearer token: 401', { text: noauth?.text, logs: await logs(container) });
  const wrong = await post(url, init, { Authorization: 'Bearer not-the-token-at-all' });
  t.is(wrong.status, 401, 'initialize with another token: 401');

  const ok = await post(url, init, { Authorization: `Bearer ${token}` });
  t.is(ok.status, 200, 'initialize with the token: 200', { text: ok.text });
  t.is(ok.json?.result?.serverInfo?.name, 'sandgate', 'the server is sandgate', { text: ok.text });
  t.is(ok.json?.result?.protocolVersion, '2025-06-18', 'it speaks the revision FC\'s session affinity knows');
  const sid = ok.headers.get('mcp-session-id');
  t.like(sid ?? '', /^[0-9a-f]{64}$/, 'it gives an Mcp-Session-Id, the header FC\'s affinity routes on');

  const h = { Authorization: `Bearer ${token}`, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  const tl = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, h);
  t.ok((tl.json?.result?.tools ?? []).some((x) => x.name === 'create_sandbox'), 'tools/list answers in the session', { text: tl.text.slice(0, 500) });

  await sleep(1000);
  const state = JSON.parse(await docker(['inspect', '--format', '{{json .State}}', container]));
  t.ok(state.Running, 'the container still runs once its backend (fc) is loaded', { state, logs: await logs(container) });
  t.is(await docker(['exec', container, 'id', '-un']), 'sandgate', 'sandgate runs as the user sandgate, not root');
  const text = await logs(container);
  t.ok(!text.includes(token), 'the token is not in the container\'s log');
}, { timeout: 1500 });
