// lib.mjs - helpers for the Streamable HTTP end-to-end tests (t/e2e/t3*-http-*.mjs).
//
// startHttp() runs `$SANDGATE_BIN --set server.port=0 ... http` on loopback,
// waits for its "listening on" line (the kernel picks a free port: no race),
// and registers a cleanup that kills it, fails the test on a sanitizer
// report, and removes every container it made.  connect() attaches the
// official SDK client (StreamableHTTPClientTransport).  post() and friends
// speak raw HTTP for the protocol checks the SDK would hide.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  t, sdk, serverEnv, tmpdir, listManaged, ownerPid, removeContainers,
  resultData, trackSandbox, LABEL_SESSION,
} from '../lib/sg.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const INIT = {
  protocolVersion: '2025-11-25',
  capabilities: {},
  clientInfo: { name: 'sandgate-http-e2e', version: '1.0.0' },
};

let httpSdk = null;

/** The SDK's StreamableHTTPClientTransport (t/node_modules), plus sg.mjs's sdk(). */
export async function httpSdkLoad() {
  if (httpSdk) return httpSdk;
  const base = await sdk();
  const req = createRequire(path.join(process.env.SG_TEST_DEPS ?? path.resolve(here, '..'), 'package.json'));
  const mod = await import(pathToFileURL(req.resolve('@modelcontextprotocol/sdk/client/streamableHttp.js')).href);
  httpSdk = { ...base, StreamableHTTPClientTransport: mod.StreamableHTTPClientTransport };
  return httpSdk;
}

/** The session label sandgate puts on containers: the SHA-256 prefix of the session id. */
export function sessionHash(sid) {
  return createHash('sha256').update(sid).digest('hex').slice(0, 16);
}

let seq = 0;

const SAN_RE = /ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|AddressSanitizer:DEADLYSIGNAL|WARNING: ThreadSanitizer/;

/** A sanitizer report in the server's stderr fails the test (once). */
function checkSanitizer(h) {
  const text = h.stderr();
  const m = SAN_RE.exec(text);
  if (!m || h.sanitizerReported) return;
  h.sanitizerReported = true;
  t.fail(`sandgate http pid ${h.pid}: no sanitizer report on stderr`, text.slice(Math.max(0, m.index - 200), m.index + 4000));
}

const TOKEN_KEYS = ['auth', 'auth_tokens_file', 'ephemeral_token', 'server.auth', 'server.auth_tokens_file', 'server.ephemeral_token'];
const TOKEN_VARS = ['SANDGATE_SERVER_AUTH_TOKENS', 'ABX_MCP_AUTH_TOKEN'];

/**
 * Starts `sandgate http`.  opts.set: {key: value} for --set server.KEY=VALUE
 * (a key with a dot is taken as SECTION.KEY); opts.env: extra environment;
 * opts.fixtures: add the conformance fixture tools.  Without a token
 * source in set or env (and none in the test's environment) it passes
 * server.auth=none: a test that wants no authentication says so, since
 * sandgate http otherwise generates a token (opts.rawAuth: pass nothing,
 * to test that).  Resolves
 * { url, port, pid, stderrPath, stderr(), stop(sig, ms), exited }.
 */
export async function startHttp(opts = {}) {
  const set = { port: 0, ...(opts.set ?? {}) };
  const env = serverEnv(opts.env ?? {});
  if (!opts.rawAuth && !TOKEN_KEYS.some((k) => k in set) && !TOKEN_VARS.some((v) => env[v])) set.auth = 'none';

  const args = [...(opts.args ?? [])];
  for (const [k, v] of Object.entries(set)) args.push('--set', `${k.includes('.') ? k : `server.${k}`}=${v}`);
  args.push('http');
  seq++;
  const stderrPath = path.join(tmpdir(), `http-${seq}.stderr`);
  // stderr is kept in memory as well as in the file: the tests read it while
  // the server runs, and a file can vanish under a test (tmp cleaners)
  const errFile = fs.createWriteStream(stderrPath);
  let errText = '';
  // the fixture tools are only in the test build of sandgate
  const bin = opts.fixtures ? process.env.SANDGATE_CONFORMANCE_BIN : process.env.SANDGATE_BIN;
  const child = spawn(bin, args, {
    env, stdio: ['ignore', 'ignore', 'pipe'], cwd: tmpdir(),
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    errFile.write(chunk);
    if (errText.length < (64 << 20)) errText += chunk;
  });
  child.stderr.on('end', () => errFile.end());
  let exitInfo = null;
  const exited = new Promise((resolve) => child.once('close', (code, signal) => {
    exitInfo = { code, signal };
    resolve(exitInfo);
  }));
  const h = {
    pid: child.pid, stderrPath, sanitizerReported: false, exited, args,
    alive: () => exitInfo === null,
    stderr: () => errText,
    /** Sends sig, waits up to ms for the exit; resolves {code, signal, ms} (null on timeout). */
    async stop(sig = 'SIGTERM', ms = 30000) {
      const t0 = Date.now();
      if (exitInfo === null) child.kill(sig);
      let timer;
      const r = await Promise.race([exited, new Promise((res) => { timer = setTimeout(() => res(null), ms); })]);
      clearTimeout(timer);
      checkSanitizer(h);
      return r ? { ...r, ms: Date.now() - t0 } : null;
    },
  };
  t.onFailure(() => {
    t.diag(`---- last lines of stderr of sandgate http pid ${h.pid} (${stderrPath}) ----`);
    t.diag(h.stderr().split('\n').slice(-40).join('\n'));
  });
  t.onCleanup(async () => {
    if (exitInfo === null) {
      child.kill('SIGKILL');
      await exited;
    }
    checkSanitizer(h);
    const mine = (await listManaged().catch(() => [])).filter((c) => ownerPid(c) === h.pid);
    if (mine.length) {
      t.diag(`cleanup: removing ${mine.length} container(s) left by sandgate http pid ${h.pid}`);
      await removeContainers(mine.map((c) => c.id));
    }
  });
  const deadline = Date.now() + (opts.startTimeout ?? 20000);
  for (;;) {
    const m = /listening on http:\/\/[^:]+:(\d+)\/mcp/.exec(h.stderr());
    if (m) {
      h.port = Number(m[1]);
      // "localhost", not 127.0.0.1: what the conformance suite and browsers send as Host
      h.url = `http://localhost:${h.port}/mcp`;
      return h;
    }
    if (exitInfo !== null) throw new Error(`sandgate http exited (${JSON.stringify(exitInfo)}) before listening:\n${h.stderr()}`);
    if (Date.now() > deadline) throw new Error(`sandgate http did not listen within 20 s:\n${h.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The Authorization header for a bearer token (none without one). */
function authHeaders(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/**
 * Connects the official SDK client over Streamable HTTP.  Resolves
 * { client, transport, sessionId, hash, call, tool, close, terminate }.
 */
export async function connect(url, opts = {}) {
  const { Client, StreamableHTTPClientTransport } = await httpSdkLoad();
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { ...authHeaders(opts.token), ...(opts.headers ?? {}) } },
  });
  const client = new Client({ name: opts.name ?? 'sandgate-http-e2e', version: '1.0.0' }, { capabilities: {} });
  client.onerror = (e) => { if (!opts.quiet) process.stderr.write(`sdk client error: ${e?.message ?? e}\n`); };
  await client.connect(transport, { timeout: opts.timeout ?? 30000 });
  const c = {
    client,
    transport,
    sessionId: transport.sessionId,
    hash: sessionHash(transport.sessionId),
    async call(tool, args = {}, callOpts = {}) {
      const res = await client.callTool({ name: tool, arguments: args }, undefined,
        { timeout: callOpts.timeout ?? 120000, ...callOpts });
      const d = resultData(res);
      if (d && typeof d === 'object') trackSandbox(d.sandbox_id);
      return res;
    },
    async tool(tool, args = {}, callOpts = {}) {
      const res = await c.call(tool, args, callOpts);
      if (res.isError) throw new Error(`${tool} ${JSON.stringify(args).slice(0, 200)} returned isError: ${res.content?.[0]?.text}`);
      return resultData(res);
    },
    /** DELETE the session (MCP basic/transports "Session Management"). */
    async terminate() { await transport.terminateSession(); },
    async close() { await client.close().catch(() => {}); },
  };
  return c;
}

/**
 * One raw HTTP request.  Resolves { status, headers, text, json, events }:
 * json when the body is JSON, events (parsed SSE: [{id, data, retry, msg}])
 * when it is an event stream.
 */
export async function request(url, { method = 'POST', body, headers = {}, token, sid, version } = {}) {
  const h = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    ...authHeaders(token),
    ...(sid ? { 'Mcp-Session-Id': sid } : {}),
    ...(version ? { 'MCP-Protocol-Version': version } : {}),
    ...headers,
  };
  for (const [k, v] of Object.entries(h)) if (v === undefined || v === null) delete h[k];
  const res = await fetch(url, {
    method, headers: h,
    body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)),
  });
  const text = await res.text();
  const out = { status: res.status, headers: res.headers, text };
  const ct = res.headers.get('content-type') ?? '';
  if (ct.startsWith('application/json') && text) {
    try { out.json = JSON.parse(text); } catch { /* left undefined */ }
  }
  if (ct.startsWith('text/event-stream')) out.events = parseSse(text);
  return out;
}

/**
 * One request through node:http, which (unlike fetch) lets a test set Host.
 * Resolves { status, headers, text, json }.
 */
export function rawHttp(url, { method = 'POST', body, headers = {} } = {}) {
  const u = new URL(url);
  const data = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: u.port, path: u.pathname, method,
      headers: {
        'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        ...(data !== undefined ? { 'Content-Length': Buffer.byteLength(data) } : {}),
        ...headers,
      },
      setHost: !Object.keys(headers).some((k) => k.toLowerCase() === 'host'),
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    if (data !== undefined) req.write(data);
    req.end();
  });
}

/** Parses an SSE body into events {id, data, retry, msg} (comments dropped). */
export function parseSse(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    const ev = { data: undefined };
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const k = i < 0 ? line : line.slice(0, i);
      const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (k === 'data') ev.data = ev.data === undefined ? v : `${ev.data}\n${v}`;
      else if (k === 'id') ev.id = v;
      else if (k === 'retry') ev.retry = Number(v);
      else if (k === 'event') ev.event = v;
    }
    if (ev.data === undefined && ev.id === undefined && ev.retry === undefined) continue;
    if (ev.data) { try { ev.msg = JSON.parse(ev.data); } catch { /* not JSON */ } }
    events.push(ev);
  }
  return events;
}

/** initialize + notifications/initialized over raw HTTP; resolves the session id. */
export async function initSession(url, opts = {}) {
  const r = await request(url, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }, token: opts.token });
  const sid = r.headers.get('mcp-session-id');
  if (r.status !== 200 || !sid) throw new Error(`initialize: HTTP ${r.status} ${r.text}`);
  const n = await request(url, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, sid, token: opts.token, version: '2025-11-25' });
  if (n.status !== 202) throw new Error(`notifications/initialized: HTTP ${n.status} ${n.text}`);
  return sid;
}

/** Containers carrying the session label of session id sid. */
export async function containersOfSid(sid) {
  return listManaged({ [LABEL_SESSION]: sessionHash(sid) });
}

export { t };
