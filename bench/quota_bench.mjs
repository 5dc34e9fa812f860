// Quotas per credential (doc/performance.md): credential B's HTTP throughput
// (run_command "true" on the local backend, 4 clients) alone, then while
// credential A saturates its own quotas (its calls in flight held by slow
// commands, and 4 more clients hammering calls its quota refuses), in one
// run.  Prints both rates and their ratio (target >= 0.8).
// usage: SANDGATE_BIN=build/sandgate SANDGATE_PLUGIN_DIR=build/.libs node bench/quota_bench.mjs [seconds] [pace_ms]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SECS = Number(process.argv[2] ?? 5);
// ms each of A's hammering clients waits after a refusal (an agent's retry);
// 0: back to back, which measures the CPU the refusals take on this host
const PACE = Number(process.argv[3] ?? 20);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sg-quota-bench-'));
const TA = `bench-a-${'a'.repeat(40)}`, TB = `bench-b-${'b'.repeat(40)}`;
fs.writeFileSync(path.join(dir, 'tokens'), `${TA}\n${TB}\n`, { mode: 0o600 });
const child = spawn(process.env.SANDGATE_BIN ?? 'sandgate', ['--set', 'sandbox.default_backend=local', '--set', 'server.port=0',
  '--set', `server.auth_tokens_file=${dir}/tokens`, '--set', 'server.quota_calls=4', 'http'],
{ stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, XDG_STATE_HOME: dir, XDG_RUNTIME_DIR: dir } });
let err = '';
child.stderr.on('data', (c) => { err += c; });
const port = await new Promise((res, rej) => {
  const iv = setInterval(() => {
    const m = /listening on http:\/\/[^:]+:(\d+)\/mcp/.exec(err);
    if (m) { clearInterval(iv); res(m[1]); }
  }, 50);
  setTimeout(() => rej(new Error(`no listen: ${err}`)), 20000);
});
const url = `http://localhost:${port}/mcp`;
let rid = 1;
async function rpc(token, sid, method, params) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${token}`,
      ...(sid ? { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' } : {}) },
    body: JSON.stringify(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', id: rid++, method, params }),
  });
  const text = await r.text();
  const data = text.startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).pop();
  return { sid: r.headers.get('mcp-session-id'), msg: data ? JSON.parse(data) : null };
}
async function session(token) {
  const { sid } = await rpc(token, null, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } });
  await rpc(token, sid, 'notifications/initialized');
  return sid;
}
const call = (token, sid, args) => rpc(token, sid, 'tools/call', { name: 'run_command', arguments: args });
async function throughput(token, sid, sbx) {
  let n = 0;
  const end = Date.now() + SECS * 1000;
  await Promise.all([0, 1, 2, 3].map(async () => {
    while (Date.now() < end) {
      const r = await call(token, sid, { command: 'true', sandbox_id: sbx });
      if (r.msg?.result && !r.msg.result.isError) n++;
    }
  }));
  return n / SECS;
}
const sb = await session(TB), sa = await session(TA);
const sbxB = (await rpc(TB, sb, 'tools/call', { name: 'create_sandbox', arguments: {} })).msg.result.structuredContent.sandbox_id;
const sbxA = (await rpc(TA, sa, 'tools/call', { name: 'create_sandbox', arguments: {} })).msg.result.structuredContent.sandbox_id;
await throughput(TB, sb, sbxB); // warm-up
const alone = await throughput(TB, sb, sbxB);
// A saturates: 4 slow calls hold its calls quota, 4 clients hammer refused calls
let stop = false, refused = 0;
const slow = [0, 1, 2, 3].map(() => call(TA, sa, { command: `sleep ${SECS + 3}`, sandbox_id: sbxA }));
await new Promise((r) => setTimeout(r, 500));
const hammer = [0, 1, 2, 3].map(async () => {
  while (!stop) {
    const r = await call(TA, sa, { command: 'true', sandbox_id: sbxA });
    if (r.msg?.error) refused++;
    if (PACE) await new Promise((res) => setTimeout(res, PACE));
  }
});
const busy = await throughput(TB, sb, sbxB);
stop = true;
await Promise.all([...hammer, ...slow]);
console.log(`B alone: ${alone.toFixed(1)} calls/s; B while A saturates its quotas: ${busy.toFixed(1)} calls/s ` +
  `(A refused ${(refused / SECS).toFixed(0)}/s); ratio ${(busy / alone).toFixed(2)} (target >= 0.8)`);
child.kill('SIGTERM');
await new Promise((r) => child.once('close', r));
fs.rmSync(dir, { recursive: true, force: true });
