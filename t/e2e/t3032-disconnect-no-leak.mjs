// No slow leaks: HTTP clients that close their connection during a slow
// run_command (local backend) leave nothing behind.  After 40 such
// disconnects and again after 200, once the calls have ended: the
// server's descriptors (/proc/PID/fd) and threads (/proc/PID/task) are no
// more than after 40 (the worker pool is bounded, doc/http.md), and its RSS
// grew by less than 8 MiB.
import fs from 'node:fs';
import http from 'node:http';
import { preflight, sleep } from '../lib/sg.mjs';
import { t, startHttp, initSession, request } from '../http/lib.mjs';

const kb = (pid, field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const count = (dir) => fs.readdirSync(dir).length;

/** POSTs a tools/call and closes the connection once the server has started answering (or after 150 ms). */
function dropMidCall(url, sid, id, args) {
  const u = new URL(url);
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_command', arguments: args } });
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port: u.port, path: u.pathname, method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Host: u.host,
        'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25', 'Content-Length': Buffer.byteLength(body) },
    });
    const drop = () => { req.destroy(); resolve(); };
    const timer = setTimeout(drop, 150);
    req.on('response', () => { clearTimeout(timer); setTimeout(drop, 20); });
    req.on('error', () => { clearTimeout(timer); resolve(); });
    req.end(body);
  });
}

async function drops(url, sid, sb, from, n) {
  const PAR = 20;
  for (let i = 0; i < n; i += PAR) {
    await Promise.all(Array.from({ length: Math.min(PAR, n - i) }, (_, k) =>
      dropMidCall(url, sid, from + i + k, { command: 'sleep 0.4; echo done', sandbox_id: sb })));
  }
}

/** Waits until the server's threads and descriptors stop changing for 2 s (at most 20 s): the calls have ended. */
async function settle(pid) {
  const snap = () => ({ fds: count(`/proc/${pid}/fd`), threads: count(`/proc/${pid}/task`), rss: kb(pid, 'VmRSS') });
  let last = snap(), since = Date.now();
  const t0 = Date.now();
  while (Date.now() - since < 2000 && Date.now() - t0 < 20000) {
    await sleep(250);
    const now = snap();
    if (now.fds !== last.fds || now.threads !== last.threads) since = Date.now();
    last = now;
  }
  return { ...last, ms: Date.now() - t0 };
}

t.run(async () => {
  await preflight({ docker: false });
  const srv = await startHttp({
    set: { 'sandbox.default_backend': 'local' },
    env: { SANDGATE_DOCKER_HOST: 'unix:///nonexistent/docker.sock', DOCKER_HOST: undefined },
  });
  const sid = await initSession(srv.url);
  const tool = async (name, args) => {
    const r = await request(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }, sid, version: '2025-11-25' });
    const msg = r.json ?? r.events?.map((e) => e.msg).filter((m) => m?.result).pop();
    if (!msg?.result || msg.result.isError) throw new Error(`${name}: ${r.text.slice(0, 300)}`);
    return msg.result.structuredContent;
  };
  const sb = (await tool('create_sandbox', { backend: 'local' })).sandbox_id;
  const t0 = Date.now();
  await drops(srv.url, sid, sb, 1000, 40);
  const at40 = await settle(srv.pid);
  await drops(srv.url, sid, sb, 2000, 160);
  let at200 = await settle(srv.pid);
  // calls queued behind the sandbox's runner still end: wait for them (at most 30 s more)
  for (let i = 0; i < 120 && at200.threads > at40.threads; i++) { await sleep(250); at200 = { ...at200, threads: count(`/proc/${srv.pid}/task`), fds: count(`/proc/${srv.pid}/fd`), rss: kb(srv.pid, 'VmRSS'), ms: at200.ms + 250 * (i + 1) }; }
  t.diag(`after 40: ${JSON.stringify(at40)}; after 200: ${JSON.stringify(at200)}; ${Date.now() - t0} ms`);
  t.cmp(at200.fds, '<=', at40.fds, `descriptors after 200 disconnects (${at200.fds}) no more than after 40 (${at40.fds})`);
  t.cmp(at200.threads, '<=', at40.threads, `threads after 200 (${at200.threads}) no more than after 40 (${at40.threads})`);
  if (process.env.ASAN_OPTIONS) t.pass('under AddressSanitizer RSS is said, not asserted');
  else t.cmp(at200.rss - at40.rss, '<', 8 * 1024, `RSS grew ${at200.rss - at40.rss} kB from 40 to 200 disconnects (under 8 MiB)`);
  const ok = await tool('run_command', { command: 'echo still', sandbox_id: sb });
  t.is(ok.stdout, 'still\n', 'the server still serves');
  await tool('kill_sandbox', { sandbox_id: sb });
  await srv.stop();
});
