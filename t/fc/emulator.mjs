#!/usr/bin/env node
// FC agent sandbox emulator for sandgate's tests: the E2B-compatible wire
// protocol of shared/reference/fc-protocol.md (cited "ref."), section 8 being
// the contract.  Node 20, no packages.
//
//   node t/fc/emulator.mjs --ready FILE [--api-key KEY] [--root DIR]
//        [--upload-status 201] [--faults JSON] [--log-max 2000]
//
// It listens on 127.0.0.1 on an ephemeral port and writes the port to the
// ready file.  One listener serves the platform API (ref. 2) and the data
// plane (ref. 3.2: routed by the E2b-Sandbox-Id/-Port headers, else by a Host
// of the form <port>-<sandboxID>.<domain>).
//
// Each sandbox is a temporary directory; commands really run in it through
// bubblewrap, with that directory bound over / and the host's /usr and /etc
// read-only on top, so the file API and the processes see the same paths
// (/home/user/x written through POST /files is what `cat /home/user/x` reads).
// Its code interpreter keeps a kernel per language (t/fc/driver.py,
// driver.cjs), so names persist from /execute to /execute as with E2B's
// Jupyter kernels, with E2B's contexts API (GET /contexts, POST
// /contexts/<id>/restart) and Jupyter's interrupt on port 8888.
//
// Strict where the service is strict: the API key (X-API-Key or Bearer) on
// the platform API, X-Access-Token on the data plane (403 AccessDenied when
// missing), multipart uploads only (envd 0.5.2, ref. 4.2), an enveloped Start
// request (ref. 5.4; raw JSON gets FC's 500 text/plain), 404 for unknown
// sandboxes on the platform and 502 on the data plane (ref. 8).
//
// Test control, under /_emu/ (no auth, loopback only):
//   GET  /_emu/state            counts of non-idempotent requests (create,
//                               write, start, execute) as they arrived, the
//                               request log (the last --log-max requests; a
//                               data-plane entry has the client's port and,
//                               once answered, `us`: microseconds from the
//                               request's arrival to its response's end),
//                               sandboxes with tokens and processes
//   POST /_emu/faults           {"faults":[rule...]} appends fault rules
//   DELETE /_emu/faults         clears them
//   POST /_emu/expire/<id>      the sandbox expires now ("all" for every one)
//   POST /_emu/reset            clears counts, log and faults
// A fault rule: {"op": "create"|"get"|"list"|"kill"|"timeout"|"files.read"|
//   "files.write"|"listdir"|"stat"|"mkdir"|"remove"|"move"|"start"|"signal"|
//   "input"|"closestdin"|"execute"|"contexts"|"contexts.restart"|"jupyter"|"*", "times": 1, "status": 503,
//   "message": "...", "retryAfter": 2, "delayMs": 3000, "text": true,
//   "drop": true (streams: cut before the end event), "dropAfterMs": 500
//   (process.Start: cut the stream that long after the start event, the
//   process still running), "reset": true (close the connection without an
//   answer), "expire": true (expire the sandbox first)}.

import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ENVD_PORT = 49983;
const CI_PORT = 49999;
const JUPYTER_PORT = 8888;
const MAX_JSON = 4 << 20;
const MAX_UPLOAD = 256 << 20;
const NON_IDEMPOTENT = new Set(['create', 'files.write', 'start', 'execute']);

// ---- options ------------------------------------------------------------------

function parseArgs(argv) {
  const o = {
    ready: process.env.FC_EMU_READY,
    apiKey: process.env.FC_EMU_API_KEY || 'emu-key',
    root: process.env.FC_EMU_ROOT,
    uploadStatus: Number(process.env.FC_EMU_UPLOAD_STATUS || 201),
    faults: process.env.FC_EMU_FAULTS,
    logMax: 2000,
    templates: ['base', 'code-interpreter-v1'],
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--ready') o.ready = v();
    else if (a === '--api-key') o.apiKey = v();
    else if (a === '--root') o.root = v();
    else if (a === '--upload-status') o.uploadStatus = Number(v());
    else if (a === '--faults') o.faults = v();
    else if (a === '--log-max') o.logMax = Number(v());
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const opts = parseArgs(process.argv);
const rootBase = opts.root || fs.mkdtempSync(path.join(os.tmpdir(), 'fc-emu-'));
const ownRoot = !opts.root;
const bwrap = findBwrap();

function findBwrap() {
  const r = spawnSync('bwrap', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    process.stderr.write('fc emulator: bubblewrap (bwrap) is missing: apt-get install bubblewrap\n');
    process.exit(2);
  }
  return 'bwrap';
}

// ---- state --------------------------------------------------------------------

const state = {
  sandboxes: new Map(), // id -> sandbox
  counts: {},           // op -> requests that arrived
  log: [],              // recent requests
  faults: [],
  executions: 0,
};

if (opts.faults) state.faults.push(...JSON.parse(opts.faults).map(normFault));

function normFault(f) {
  return { times: 1, ...f };
}

function logReq(entry) {
  state.log.push(entry);
  if (state.log.length > opts.logMax) state.log.splice(0, state.log.length - opts.logMax);
}

// ---- small http helpers ---------------------------------------------------------

function send(res, status, body, type = 'application/json', extra = {}) {
  if (res.headersSent || res.destroyed) return;
  const data = body === undefined ? '' : (typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(data), ...extra });
  res.end(data);
}

const apiError = (res, status, message, extra) => send(res, status, { code: status, message }, 'application/json', extra);
const connectError = (res, status, code, message) => send(res, status, { code, message });

function readBody(req, max) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => {
      n += c.length;
      if (n > max) { reject(Object.assign(new Error('body too large'), { status: 413 })); req.destroy(); return; }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

async function readJson(req) {
  const b = await readBody(req, MAX_JSON);
  if (!b.length) return {};
  return JSON.parse(b.toString('utf8'));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- faults -----------------------------------------------------------------------

function takeFault(op, sid) {
  const i = state.faults.findIndex((f) => (f.op === op || f.op === '*') && f.times > 0
    && (!f.sandbox || f.sandbox === sid));
  if (i < 0) return null;
  const f = state.faults[i];
  f.times -= 1;
  if (f.times <= 0) state.faults.splice(i, 1);
  return f;
}

// Applies the parts of fault f that happen before the handler; returns true
// when the request was answered (or dropped) here.
async function applyFault(f, req, res, sid, plane) {
  if (f.delayMs) await sleep(f.delayMs);
  if (f.expire && sid) expire(sid);
  if (f.reset) { req.socket.destroy(); return true; }
  if (f.status) {
    const extra = f.retryAfter !== undefined ? { 'Retry-After': String(f.retryAfter) } : {};
    const msg = f.message || `injected ${f.status}`;
    if (f.text || plane === 'ci') send(res, f.status, msg, 'text/plain; charset=utf-8', extra);
    else if (plane === 'connect') send(res, f.status, { code: f.code || 'unavailable', message: msg }, 'application/json', extra);
    else apiError(res, f.status, msg, extra);
    return true;
  }
  return false;
}

// ---- sandboxes -----------------------------------------------------------------------

function newId() { return `sbx-${crypto.randomUUID()}`; }

function makeRoot(id) {
  const root = fs.mkdtempSync(path.join(rootBase, `${id}-`));
  for (const d of ['home/user', 'app', 'tmp', 'usr', 'etc', 'proc', 'dev', 'var/tmp', 'root', '.emu']) {
    fs.mkdirSync(path.join(root, d), { recursive: true });
  }
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  // merged-/usr hosts: /bin etc. are symlinks into /usr; elsewhere bound read-only
  for (const d of ['bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32']) {
    let st;
    try { st = fs.lstatSync(`/${d}`); } catch { continue; }
    if (st.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(`/${d}`), path.join(root, d));
    else fs.mkdirSync(path.join(root, d));
  }
  return root;
}

function createSandbox(body) {
  const id = newId();
  const timeout = Number.isInteger(body.timeout) ? body.timeout : 300;
  const now = Date.now();
  const sbx = {
    id,
    token: crypto.randomBytes(24).toString('hex'),
    templateID: body.templateID,
    alias: body.templateID,
    clientID: 'emu-client',
    root: makeRoot(id),
    metadata: body.metadata && typeof body.metadata === 'object' ? body.metadata : {},
    envVars: body.envVars && typeof body.envVars === 'object' ? body.envVars : {},
    startedAt: new Date(now).toISOString(),
    deadline: now + timeout * 1000,
    procs: new Map(), // pid -> proc
  };
  state.sandboxes.set(id, sbx);
  return sbx;
}

function detail(sbx, withToken) {
  const d = {
    templateID: sbx.templateID,
    alias: sbx.alias,
    sandboxID: sbx.id,
    clientID: sbx.clientID,
    startedAt: sbx.startedAt,
    endAt: new Date(sbx.deadline).toISOString(),
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    state: 'running',
    metadata: sbx.metadata,
    envdVersion: '0.5.2',
  };
  if (withToken) d.envdAccessToken = sbx.token;
  return d;
}

const expired = new Set();

function destroySandbox(id) {
  const sbx = state.sandboxes.get(id);
  if (!sbx) return false;
  state.sandboxes.delete(id);
  for (const p of sbx.procs.values()) killGroup(p, 'SIGKILL');
  kernelsStop(sbx);
  fs.rm(sbx.root, { recursive: true, force: true }, () => {});
  return true;
}

function expire(id) {
  if (destroySandbox(id)) expired.add(id);
}

setInterval(() => {
  const now = Date.now();
  for (const sbx of [...state.sandboxes.values()]) if (sbx.deadline <= now) expire(sbx.id);
}, 200).unref();

// ---- paths inside a sandbox ------------------------------------------------------------

// The sandbox path of p (relative paths are under the user's home, ref. 4.1)
// and its host path; throws {status, code} when it would leave the sandbox.
function resolvePath(sbx, p) {
  if (typeof p !== 'string' || !p) throw Object.assign(new Error('path is required'), { status: 400, code: 'invalid_argument' });
  const abs = path.posix.resolve('/home/user', p);
  const host = path.join(sbx.root, abs);
  // symlinks may not lead out of the sandbox
  let probe = host;
  while (!fs.existsSync(probe)) probe = path.dirname(probe);
  const real = fs.realpathSync(probe);
  if (real !== sbx.root && !real.startsWith(sbx.root + path.sep)) {
    throw Object.assign(new Error(`path ${abs} leaves the sandbox`), { status: 403, code: 'permission_denied' });
  }
  return { abs, host };
}

function fileType(st) {
  if (st.isSymbolicLink()) return 'FILE_TYPE_SYMLINK';
  if (st.isDirectory()) return 'FILE_TYPE_DIRECTORY';
  if (st.isFile()) return 'FILE_TYPE_FILE';
  return 'FILE_TYPE_UNSPECIFIED';
}

function permString(st) {
  const t = st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : '-';
  const m = st.mode;
  const rwx = (s) => `${m & (4 << s) ? 'r' : '-'}${m & (2 << s) ? 'w' : '-'}${m & (1 << s) ? 'x' : '-'}`;
  return t + rwx(6) + rwx(3) + rwx(0);
}

// ref. 5.5 EntryInfo, proto3 JSON: int64 size as a string, enum names
function entryInfo(host, abs) {
  const st = fs.lstatSync(host);
  const e = {
    name: path.posix.basename(abs) || '/',
    type: fileType(st),
    path: abs,
    size: String(st.size),
    mode: st.mode & 0o7777,
    permissions: permString(st),
    owner: st.uid === 0 ? 'root' : String(st.uid),
    group: st.gid === 0 ? 'root' : String(st.gid),
    modifiedTime: st.mtime.toISOString(),
  };
  if (st.isSymbolicLink()) e.symlinkTarget = fs.readlinkSync(host);
  return e;
}

// ---- processes ---------------------------------------------------------------------------

function bwrapArgs(sbx, cwd, extra = []) {
  const a = ['--bind', sbx.root, '/', '--ro-bind', '/usr', '/usr', '--ro-bind', '/etc', '/etc'];
  for (const d of ['bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32']) {
    try { if (!fs.lstatSync(`/${d}`).isSymbolicLink()) a.push('--ro-bind', `/${d}`, `/${d}`); } catch { /* absent */ }
  }
  a.push('--proc', '/proc', '--dev', '/dev', '--die-with-parent', '--chdir', cwd, ...extra);
  return a;
}

function baseEnv(sbx, envs) {
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: '/home/user', USER: 'user', LANG: 'C.UTF-8', TERM: 'xterm',
    E2B_SANDBOX: 'true', E2B_SANDBOX_ID: sbx.id,
    ...sbx.envVars,
    ...(envs && typeof envs === 'object' ? envs : {}),
  };
}

function killGroup(p, sig) {
  try { process.kill(-p.child.pid, sig); } catch { /* gone */ }
}

// Go's ProcessState.String() for a signal (ref. 5.2)
const GO_SIGNAL = { SIGHUP: 'hangup', SIGINT: 'interrupt', SIGQUIT: 'quit', SIGABRT: 'aborted', SIGKILL: 'killed', SIGSEGV: 'segmentation fault', SIGPIPE: 'broken pipe', SIGTERM: 'terminated' };

function spawnIn(sbx, argv, cwd, env, stdio, extraBwrap = []) {
  return spawn(bwrap, [...bwrapArgs(sbx, cwd, extraBwrap), '--', ...argv], { env, detached: true, stdio });
}

// ---- Connect envelopes (ref. 5.1) --------------------------------------------------------

function envelope(flags, obj) {
  const payload = Buffer.from(JSON.stringify(obj), 'utf8');
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

function parseEnveloped(buf) {
  if (buf.length < 5) return null;
  if (buf[0] !== 0) return null;
  const n = buf.readUInt32BE(1);
  if (buf.length !== 5 + n) return null;
  return JSON.parse(buf.subarray(5).toString('utf8'));
}

// ---- platform API (ref. 2) -------------------------------------------------------------------

function platformAuth(req) {
  const key = req.headers['x-api-key'];
  const auth = req.headers.authorization || '';
  return key === opts.apiKey || auth === `Bearer ${opts.apiKey}`;
}

function platformOp(method, p) {
  if ((p === '/sandboxes' || p === '/v2/sandboxes') && method === 'POST') return ['create'];
  if ((p === '/sandboxes' || p === '/v2/sandboxes') && method === 'GET') return ['list'];
  let m = /^(?:\/v2)?\/sandboxes\/([^/]+)$/.exec(p);
  if (m && method === 'GET') return ['get', m[1]];
  if (m && method === 'DELETE') return ['kill', m[1]];
  m = /^\/sandboxes\/([^/]+)\/timeout$/.exec(p);
  if (m && method === 'POST') return ['timeout', m[1]];
  m = /^(?:\/v2)?\/sandboxes\/([^/]+)\/connect$/.exec(p);
  if (m && method === 'POST') return ['connect', m[1]];
  return [null];
}

async function platform(req, res, url) {
  const [op, id] = platformOp(req.method, url.pathname);
  const entry = { at: Date.now(), plane: 'platform', op: op || 'unknown', method: req.method, path: url.pathname, sandbox: id };
  logReq(entry);
  if (op && NON_IDEMPOTENT.has(op)) state.counts[op] = (state.counts[op] || 0) + 1;
  if (!platformAuth(req)) { entry.status = 401; return apiError(res, 401, 'unauthorized'); }
  const f = op ? takeFault(op, id) : null;
  if (f && await applyFault(f, req, res, id, 'platform')) { entry.status = f.status || 0; return undefined; }
  entry.status = await platformHandle(op, id, req, res);
  return undefined;
}

async function platformHandle(op, id, req, res) {
  const sbx = id ? state.sandboxes.get(id) : null;
  switch (op) {
    case 'create': {
      let body;
      try { body = await readJson(req); } catch { apiError(res, 400, 'invalid JSON body'); return 400; }
      if (typeof body.templateID !== 'string' || !body.templateID) { apiError(res, 400, 'templateID is required'); return 400; }
      if (!opts.templates.includes(body.templateID)) { apiError(res, 404, 'template not found'); return 404; }
      if (body.timeout !== undefined && !Number.isInteger(body.timeout)) { apiError(res, 400, 'timeout must be an integer'); return 400; }
      const s = createSandbox(body);
      send(res, 201, { templateID: s.templateID, sandboxID: s.id, alias: s.alias, clientID: s.clientID,
        envdVersion: '0.5.2', envdAccessToken: s.token });
      return 201;
    }
    case 'list':
      send(res, 200, [...state.sandboxes.values()].map((s) => detail(s, false)));
      return 200;
    case 'get':
    case 'connect':
      if (!sbx) { apiError(res, 404, `sandbox ${id} not found`); return 404; }
      if (op === 'connect') await readBody(req, MAX_JSON);
      send(res, 200, detail(sbx, true));
      return 200;
    case 'kill':
      if (!destroySandbox(id)) { apiError(res, 404, 'not found'); return 404; }
      send(res, 204);
      return 204;
    case 'timeout': {
      let body;
      try { body = await readJson(req); } catch { apiError(res, 400, 'invalid JSON body'); return 400; }
      if (!sbx) { apiError(res, 404, `sandbox ${id} not found`); return 404; }
      if (!Number.isInteger(body.timeout)) { apiError(res, 400, 'timeout must be an integer'); return 400; }
      sbx.deadline = Date.now() + body.timeout * 1000;
      send(res, 204);
      return 204;
    }
    default:
      apiError(res, 404, 'no such endpoint');
      return 404;
  }
}

// ---- data plane (ref. 3-6) ----------------------------------------------------------------------

function dataOp(method, p, port) {
  if (p === '/health') return 'health';
  if (p === '/files') return method === 'GET' ? 'files.read' : 'files.write';
  if (port === CI_PORT && p === '/contexts') return 'contexts';
  if (port === CI_PORT && /^\/contexts\/[^/]+\/restart$/.test(p)) return 'contexts.restart';
  if (p === '/execute' || port === CI_PORT) return 'execute';
  if (port === JUPYTER_PORT) return 'jupyter';
  const m = /^\/(filesystem\.Filesystem|process\.Process)\/(\w+)$/.exec(p);
  if (!m) return 'unknown';
  return ({ ListDir: 'listdir', Stat: 'stat', MakeDir: 'mkdir', Remove: 'remove', Move: 'move',
    Start: 'start', SendSignal: 'signal', SendInput: 'input', CloseStdin: 'closestdin', List: 'ps',
    Connect: 'attach' })[m[2]] || 'unknown';
}

async function dataPlane(req, res, url, sid, port) {
  const op = dataOp(req.method, url.pathname, port);
  const entry = { at: Date.now(), plane: 'data', op, method: req.method, path: url.pathname, sandbox: sid, port,
    client: req.socket.remotePort };
  const t0 = process.hrtime.bigint();
  res.on('finish', () => { entry.us = Number(process.hrtime.bigint() - t0) / 1000; });
  logReq(entry);
  if (NON_IDEMPOTENT.has(op)) state.counts[op] = (state.counts[op] || 0) + 1;
  const f = takeFault(op, sid);
  const plane = op === 'execute' || op.startsWith('contexts') || op === 'jupyter' ? 'ci'
    : op.startsWith('files') ? 'platform' : 'connect';
  if (f && await applyFault(f, req, res, sid, plane)) { entry.status = f.status || 0; return; }
  const sbx = state.sandboxes.get(sid);
  if (!sbx) {
    // ref. 8: an expired sandbox answers 502 on the data plane
    entry.status = 502;
    req.resume();
    send(res, 502, `The sandbox ${sid} was not found or has timed out`, 'text/plain; charset=utf-8');
    return;
  }
  if (op === 'health') { entry.status = 204; send(res, 204); return; }
  const token = req.headers['x-access-token'];
  if (!token) {
    entry.status = 403;
    req.resume();
    send(res, 403, { Code: 'AccessDenied', Message: 'access denied: X-Access-Token header is required' });
    return;
  }
  if (token !== sbx.token) {
    entry.status = 401;
    req.resume();
    apiError(res, 401, 'invalid access token');
    return;
  }
  if (op === 'execute' || op.startsWith('contexts') || op === 'jupyter') {
    if (sbx.templateID === 'base') { entry.status = 404; req.resume(); send(res, 404, 'Not Found', 'text/plain'); return; }
    if (op === 'execute') entry.status = await execute(sbx, req, res, f);
    else if (op === 'jupyter') entry.status = jupyter(sbx, req, res, url);
    else entry.status = await contexts(op, sbx, req, res, url);
    return;
  }
  try {
    entry.status = await envd(op, sbx, req, res, url, f);
  } catch (e) {
    entry.status = e.status || 500;
    if (op.startsWith('files')) apiError(res, entry.status, e.message);
    else connectError(res, entry.status, e.code || 'internal', e.message);
  }
}

async function envd(op, sbx, req, res, url, fault) {
  switch (op) {
    case 'files.read': return filesRead(sbx, req, res, url);
    case 'files.write': return filesWrite(sbx, req, res, url);
    case 'start': return processStart(sbx, req, res, fault);
    case 'unknown': req.resume(); send(res, 404, '404 page not found', 'text/plain'); return 404;
    default: return unary(op, sbx, req, res);
  }
}

// ---- files (ref. 4) -------------------------------------------------------------------------------

function filesRead(sbx, req, res, url) {
  const { abs, host } = resolvePath(sbx, url.searchParams.get('path'));
  let st;
  try { st = fs.statSync(host); } catch { apiError(res, 404, `path '${abs}' does not exist`); return 404; }
  if (st.isDirectory()) { apiError(res, 400, `path '${abs}' is a directory`); return 400; }
  const data = fs.readFileSync(host);
  send(res, 200, data, 'application/octet-stream', { 'Content-Disposition': `attachment; filename=${JSON.stringify(path.basename(abs))}` });
  return 200;
}

// Minimal multipart/form-data parser: the parts' headers and bytes.
function parseMultipart(buf, boundary) {
  const delim = Buffer.from(`--${boundary}`);
  const parts = [];
  let pos = buf.indexOf(delim);
  while (pos >= 0) {
    pos += delim.length;
    if (buf.subarray(pos, pos + 2).toString() === '--') break;
    if (buf.subarray(pos, pos + 2).toString() === '\r\n') pos += 2;
    const headEnd = buf.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) return null;
    const headers = {};
    for (const line of buf.subarray(pos, headEnd).toString('utf8').split('\r\n')) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const next = buf.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    if (next < 0) return null;
    parts.push({ headers, data: buf.subarray(headEnd + 4, next) });
    pos = next + 2;
  }
  return parts;
}

function dispositionParam(disp, name) {
  const m = new RegExp(`(?:^|;)\\s*${name}="((?:[^"\\\\]|\\\\.)*)"`).exec(disp || '');
  return m ? m[1].replace(/\\(.)/g, '$1') : undefined;
}

async function filesWrite(sbx, req, res, url) {
  const ctype = req.headers['content-type'] || '';
  const bm = /^multipart\/form-data;.*boundary=("?)([^";]+)\1/i.exec(ctype);
  if (!bm) {
    // ref. 4.2: envd 0.5.2 (FC) takes multipart only
    req.resume();
    apiError(res, 400, `unsupported content type '${ctype.split(';')[0]}': expected multipart/form-data`);
    return 400;
  }
  const body = await readBody(req, MAX_UPLOAD);
  const parts = parseMultipart(body, bm[2]);
  const part = parts?.find((p) => dispositionParam(p.headers['content-disposition'], 'name') === 'file');
  if (!part) { apiError(res, 400, 'no multipart part named "file"'); return 400; }
  const target = url.searchParams.get('path') || dispositionParam(part.headers['content-disposition'], 'filename');
  if (!target) { apiError(res, 400, 'no path and no filename'); return 400; }
  const { abs, host } = resolvePath(sbx, target);
  if (fs.existsSync(host) && fs.statSync(host).isDirectory()) { apiError(res, 400, `path '${abs}' is a directory`); return 400; }
  fs.mkdirSync(path.dirname(host), { recursive: true });
  try {
    fs.writeFileSync(host, part.data); // like envd: O_TRUNC in place, mode kept
  } catch (e) {
    // ref. 4.2: a full disk is 507 (E2B's SDK: NotEnoughDiskSpaceError); like
    // envd, what was written before the error stays (the file is not removed)
    if (e.code !== 'ENOSPC' && e.code !== 'EDQUOT') throw e;
    apiError(res, 507, `not enough disk space: write ${abs}: ${e.code === 'ENOSPC' ? 'no space left on device' : 'disk quota exceeded'}`);
    return 507;
  }
  send(res, opts.uploadStatus, [{ name: path.posix.basename(abs), path: abs, type: 'file' }]);
  return opts.uploadStatus;
}

// ---- unary Connect RPCs (ref. 5.5, 5.3) ---------------------------------------------------------------

function rpcError(status, code, message) {
  return Object.assign(new Error(message), { status, code });
}

function signalName(v) {
  if (v === 9 || v === 'SIGNAL_SIGKILL') return 'SIGKILL';
  if (v === 15 || v === 'SIGNAL_SIGTERM') return 'SIGTERM';
  return null;
}

function procOf(sbx, sel) {
  const p = sbx.procs.get(Number(sel?.pid));
  if (!p) throw rpcError(404, 'not_found', `process with pid ${sel?.pid} not found`);
  return p;
}

function listDir(sbx, abs, host, depth, out) {
  for (const name of fs.readdirSync(host).sort()) {
    const ha = path.join(host, name);
    const aa = path.posix.join(abs, name);
    out.push(entryInfo(ha, aa));
    if (depth > 1 && fs.lstatSync(ha).isDirectory()) listDir(sbx, aa, ha, depth - 1, out);
  }
}

async function unary(op, sbx, req, res) {
  if (!(req.headers['content-type'] || '').startsWith('application/json')) {
    req.resume();
    throw rpcError(415, 'invalid_argument', 'unary requests are application/json');
  }
  let body;
  try { body = await readJson(req); } catch { throw rpcError(400, 'invalid_argument', 'invalid JSON'); }
  let out = {};
  switch (op) {
    case 'listdir': {
      const { abs, host } = resolvePath(sbx, body.path);
      if (!fs.existsSync(host)) throw rpcError(404, 'not_found', `directory '${abs}' does not exist`);
      if (!fs.statSync(host).isDirectory()) throw rpcError(400, 'invalid_argument', `path '${abs}' is not a directory`);
      const entries = [];
      listDir(sbx, abs, host, Math.max(1, Number(body.depth) || 1), entries);
      out = { entries };
      break;
    }
    case 'stat': {
      const { abs, host } = resolvePath(sbx, body.path);
      try { fs.lstatSync(host); } catch { throw rpcError(404, 'not_found', `path '${abs}' does not exist`); }
      out = { entry: entryInfo(host, abs) };
      break;
    }
    case 'mkdir': {
      const { abs, host } = resolvePath(sbx, body.path);
      if (fs.existsSync(host)) throw rpcError(409, 'already_exists', `path '${abs}' already exists`);
      fs.mkdirSync(host, { recursive: true });
      out = { entry: entryInfo(host, abs) };
      break;
    }
    case 'remove': {
      const { abs, host } = resolvePath(sbx, body.path);
      try { fs.lstatSync(host); } catch { throw rpcError(404, 'not_found', `path '${abs}' does not exist`); }
      fs.rmSync(host, { recursive: true, force: true });
      break;
    }
    case 'move': {
      const src = resolvePath(sbx, body.source);
      const dst = resolvePath(sbx, body.destination);
      try { fs.lstatSync(src.host); } catch { throw rpcError(404, 'not_found', `path '${src.abs}' does not exist`); }
      fs.mkdirSync(path.dirname(dst.host), { recursive: true });
      fs.renameSync(src.host, dst.host);
      out = { entry: entryInfo(dst.host, dst.abs) };
      break;
    }
    case 'signal': {
      const p = procOf(sbx, body.process);
      const sig = signalName(body.signal);
      if (!sig) throw rpcError(400, 'invalid_argument', `unknown signal ${body.signal}`);
      p.signalled = sig;
      killGroup(p, sig);
      break;
    }
    case 'input': {
      const p = procOf(sbx, body.process);
      if (!p.stdinOpen) throw rpcError(400, 'failed_precondition', 'stdin is closed');
      p.child.stdin.write(Buffer.from(body.input?.stdin || '', 'base64'));
      break;
    }
    case 'closestdin': {
      const p = procOf(sbx, body.process);
      p.stdinOpen = false;
      p.child.stdin.end();
      break;
    }
    case 'ps':
      out = { processes: [...sbx.procs.values()].map((p) => ({ config: p.config, pid: p.child.pid })) };
      break;
    default:
      throw rpcError(501, 'unimplemented', `${op} is not implemented by the emulator`);
  }
  send(res, 200, out);
  return 200;
}

// ---- process.Process/Start (ref. 5.2) --------------------------------------------------------------------

async function processStart(sbx, req, res, fault) {
  if ((req.headers['content-type'] || '') !== 'application/connect+json') {
    req.resume();
    send(res, 415, { code: 'invalid_argument', message: 'streaming requests are application/connect+json' });
    return 415;
  }
  const raw = await readBody(req, MAX_JSON);
  let msg;
  try { msg = parseEnveloped(raw); } catch { msg = null; }
  if (!msg) {
    // ref. 5.4: FC fails an un-enveloped body with a plain-text 500
    send(res, 500, 'invalid request: the streaming request body must be an enveloped message', 'text/plain; charset=utf-8');
    return 500;
  }
  const cfg = msg.process || {};
  const cwd = cfg.cwd || '/home/user';
  res.writeHead(200, { 'Content-Type': 'application/connect+json' });
  res.flushHeaders();
  const trailer = (error) => { if (!res.destroyed && !res.writableEnded) res.end(envelope(2, error ? { error } : {})); };
  let dir;
  try { dir = resolvePath(sbx, cwd); } catch (e) { trailer({ code: 'invalid_argument', message: e.message }); return 200; }
  if (!fs.existsSync(dir.host) || !fs.statSync(dir.host).isDirectory()) {
    trailer({ code: 'invalid_argument', message: `error changing directory to ${dir.abs}: no such file or directory` });
    return 200;
  }
  if (typeof cfg.cmd !== 'string' || !cfg.cmd) { trailer({ code: 'invalid_argument', message: 'cmd is required' }); return 200; }
  const stdinOpen = msg.stdin === true;
  const child = spawnIn(sbx, [cfg.cmd, ...(Array.isArray(cfg.args) ? cfg.args.map(String) : [])], dir.abs,
    baseEnv(sbx, cfg.envs), ['pipe', 'pipe', 'pipe']);
  const p = { child, config: cfg, stdinOpen, signalled: null };
  if (!child.pid) { trailer({ code: 'internal', message: 'cannot start bwrap' }); return 200; }
  sbx.procs.set(child.pid, p);
  if (!stdinOpen) child.stdin.end();
  child.stdin.on('error', () => {});
  const write = (obj) => { if (!res.destroyed && !res.writableEnded) res.write(envelope(0, obj)); };
  write({ event: { start: { pid: child.pid } } });
  if (fault?.dropAfterMs) setTimeout(() => res.socket?.destroy(), fault.dropAfterMs).unref();
  child.stdout.on('data', (d) => write({ event: { data: { stdout: d.toString('base64') } } }));
  child.stderr.on('data', (d) => write({ event: { data: { stderr: d.toString('base64') } } }));
  const ping = Number(req.headers['keepalive-ping-interval']);
  const pinger = ping > 0 ? setInterval(() => write({ event: { keepalive: {} } }), ping * 1000) : null;
  const tmo = Number(req.headers['connect-timeout-ms']);
  let timedOut = false;
  const timer = tmo > 0 ? setTimeout(() => { timedOut = true; killGroup(p, 'SIGKILL'); }, tmo) : null;
  let status = null;
  let finished = false;
  const finish = () => {
    if (finished || !status) return;
    finished = true;
    clearInterval(pinger);
    clearTimeout(timer);
    sbx.procs.delete(child.pid);
    if (fault?.drop) { res.socket?.destroy(); return; }
    if (timedOut) { trailer({ code: 'deadline_exceeded', message: `the process was killed after ${tmo} ms` }); return; }
    const [code, signal] = status;
    let end;
    if (signal) end = { exitCode: -1, status: `signal: ${GO_SIGNAL[signal] || signal.toLowerCase()}` };
    else if (code === 0) end = { exited: true, status: 'exit status 0' }; // ref. 5.1: zero omitted
    else end = { exitCode: code, exited: true, status: `exit status ${code}`, error: `exit status ${code}` };
    write({ event: { end } });
    trailer(null);
  };
  child.on('exit', (code, signal) => {
    status = [code, signal];
    // a background job may hold stdout open: end shortly after the exit anyway
    setTimeout(finish, 300).unref();
  });
  child.on('close', () => finish());
  return 200;
}

// ---- code interpreter: POST /execute (ref. 6) -----------------------------------------------------------------
//
// As E2B's code interpreter: one kernel per sandbox and language (a
// "context" with an id), started on its first execution and kept, so names
// persist from call to call; executions on one kernel run one after the
// other.  The kernels are t/fc/driver.py and driver.cjs, stand-ins for
// Jupyter's: their events (stream output, results, errors, `done`) come on
// fd 3 as JSON lines, requests as JSON lines on stdin.  A client that goes
// away does not stop its execution (E2B's does not either); Jupyter's
// interrupt (port 8888, POST /api/kernels/<context id>/interrupt) does.  A
// kernel that dies is started again by the next execution, and the one in
// flight ends with the error ContextRestarting, as E2B reports a Jupyter
// kernel restart.  bash has no kernel here: each execution is a fresh
// /bin/bash -s.

const LANG = { python: 'python', python3: 'python', js: 'javascript', javascript: 'javascript',
  bash: 'bash', sh: 'bash', shell: 'bash', typescript: 'typescript', ts: 'typescript', r: 'r', java: 'java' };
const KERNELS = { python: ['python3', '/.emu/driver.py'], javascript: ['node', '/.emu/driver.cjs'] };

function contextsOf(sbx) {
  if (!sbx.contexts) {
    sbx.contexts = new Map();
    for (const language of Object.keys(KERNELS)) {
      sbx.contexts.set(language, { id: crypto.randomUUID(), language, cwd: '/home/user', kernel: null,
        queue: [], current: null });
    }
  }
  return sbx.contexts;
}

function contextById(sbx, id) {
  for (const c of contextsOf(sbx).values()) if (c.id === id) return c;
  return null;
}

function kernelStart(sbx, ctx) {
  const env = { MPLBACKEND: 'Agg', ...baseEnv(sbx) };
  const child = spawnIn(sbx, KERNELS[ctx.language], ctx.cwd, env, ['pipe', 'pipe', 'pipe', 'pipe'],
    ['--ro-bind', here, '/.emu']);
  const k = { child, pid: 0 };
  const now = () => new Date().toISOString();
  const out = new StringDecoder('utf8');
  const err = new StringDecoder('utf8');
  // what subprocesses write on the kernel's own fds 1 and 2
  child.stdout.on('data', (d) => { const text = out.write(d); if (text) ctx.current?.line({ type: 'stdout', text, timestamp: now() }); });
  child.stderr.on('data', (d) => { const text = err.write(d); if (text) ctx.current?.line({ type: 'stderr', text, timestamp: now() }); });
  let pending = '';
  child.stdio[3].on('data', (d) => {
    pending += d.toString('utf8');
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const l = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      let o;
      try { o = JSON.parse(l); } catch { continue; }
      if (o.type === 'hello') k.pid = o.pid;
      else if (o.type === 'done') executionEnd(sbx, ctx);
      else {
        if (o.type === 'stdout' || o.type === 'stderr') o.timestamp = now();
        ctx.current?.line(o);
      }
    }
  });
  child.stdin.on('error', () => {});
  child.on('exit', () => {
    if (ctx.kernel !== k) return;
    ctx.kernel = null;
    if (ctx.current) {
      ctx.current.line({ type: 'error', name: 'ContextRestarting', value: 'Context was restarted', traceback: '' });
      executionEnd(sbx, ctx);
    }
  });
  ctx.kernel = k;
  return k;
}

function executionNext(sbx, ctx) {
  if (ctx.current || !ctx.queue.length || !state.sandboxes.has(sbx.id)) return;
  ctx.current = ctx.queue.shift();
  const k = ctx.kernel ?? kernelStart(sbx, ctx);
  k.child.stdin.write(`${JSON.stringify({ code: ctx.current.code, env: ctx.current.env })}\n`);
}

function executionEnd(sbx, ctx) {
  const x = ctx.current;
  ctx.current = null;
  x?.end();
  executionNext(sbx, ctx);
}

function kernelsStop(sbx) {
  for (const ctx of sbx.contexts?.values() ?? []) {
    if (ctx.kernel) killGroup(ctx.kernel, 'SIGKILL');
  }
}

async function execute(sbx, req, res, fault) {
  let body;
  try { body = await readJson(req); } catch { send(res, 400, 'invalid JSON', 'text/plain'); return 400; }
  if (body.context_id && body.language) { send(res, 400, 'Only one of context_id or language can be provided', 'text/plain'); return 400; }
  if (typeof body.code !== 'string') { send(res, 400, 'code is required', 'text/plain'); return 400; }
  let lang = LANG[String(body.language || 'python').toLowerCase()];
  let ctx = null;
  if (body.context_id) {
    ctx = contextById(sbx, String(body.context_id));
    if (!ctx) { send(res, 404, `Context ${body.context_id} not found`, 'text/plain'); return 404; }
    lang = ctx.language;
  }
  if (!lang || lang === 'r' || lang === 'java') {
    send(res, 500, `No kernel for language ${body.language}`, 'text/plain'); return 500;
  }
  state.executions += 1;
  res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
  res.flushHeaders();
  const line = (o) => { if (!res.destroyed && !res.writableEnded) res.write(`${JSON.stringify(o)}\n`); };
  const end = () => {
    if (fault?.drop) { res.socket?.destroy(); return; }
    line({ type: 'number_of_executions', execution_count: state.executions });
    line({ type: 'end_of_execution' });
    res.end();
  };
  if (lang === 'typescript') {
    line({ type: 'error', name: 'KernelNotAvailable', value: `the emulator has no ${lang} kernel`, traceback: '' });
    end();
    return 200;
  }
  if (lang === 'bash') return executeBash(sbx, body, line, end);
  ctx = ctx ?? contextsOf(sbx).get(lang);
  ctx.queue.push({ code: body.code, env: body.env_vars && typeof body.env_vars === 'object' ? body.env_vars : {}, line, end });
  executionNext(sbx, ctx);
  return 200;
}

function executeBash(sbx, body, line, end) {
  const child = spawnIn(sbx, ['/bin/bash', '-s'], '/home/user', baseEnv(sbx, body.env_vars), ['pipe', 'pipe', 'pipe']);
  const now = () => new Date().toISOString();
  const out = new StringDecoder('utf8');
  const err = new StringDecoder('utf8');
  child.stdout.on('data', (d) => { const text = out.write(d); if (text) line({ type: 'stdout', text, timestamp: now() }); });
  child.stderr.on('data', (d) => { const text = err.write(d); if (text) line({ type: 'stderr', text, timestamp: now() }); });
  child.stdin.on('error', () => {});
  child.stdin.end(body.code);
  child.on('close', (code) => {
    if (code !== 0) line({ type: 'error', name: 'ExitCodeError', value: `exit status ${code}`, traceback: '' });
    end();
  });
  return 200;
}

// GET /contexts, POST /contexts/<id>/restart (ref. 6, context management)
async function contexts(op, sbx, req, res, url) {
  req.resume();
  if (op === 'contexts') {
    send(res, 200, [...contextsOf(sbx).values()].map((c) => ({ id: c.id, language: c.language, cwd: c.cwd })));
    return 200;
  }
  const m = /^\/contexts\/([^/]+)\/restart$/.exec(url.pathname);
  const ctx = m && contextById(sbx, decodeURIComponent(m[1]));
  if (!ctx) { send(res, 404, `Context ${m?.[1]} not found`, 'text/plain'); return 404; }
  if (ctx.kernel) killGroup(ctx.kernel, 'SIGKILL');
  send(res, 200, 'null');
  return 200;
}

// Jupyter's REST API on port 8888: the interrupt of a kernel.
function jupyter(sbx, req, res, url) {
  req.resume();
  const m = /^\/api\/kernels\/([^/]+)\/interrupt$/.exec(url.pathname);
  const ctx = m && req.method === 'POST' && contextById(sbx, decodeURIComponent(m[1]));
  if (!ctx) { send(res, 404, { message: 'Kernel does not exist' }); return 404; }
  if (ctx.kernel?.pid) { try { process.kill(ctx.kernel.pid, 'SIGINT'); } catch { /* gone */ } }
  send(res, 204);
  return 204;
}

// ---- control -----------------------------------------------------------------------------------------

async function control(req, res, url) {
  const p = url.pathname;
  if (p === '/_emu/state' && req.method === 'GET') {
    send(res, 200, {
      counts: state.counts,
      log: state.log,
      faults: state.faults,
      sandboxes: [...state.sandboxes.values()].map((s) => ({ id: s.id, token: s.token, template: s.templateID,
        root: s.root, deadline: s.deadline, metadata: s.metadata,
        procs: [...s.procs.values()].map((x) => ({ pid: x.child.pid, cmd: x.config.cmd, args: x.config.args })) })),
      expired: [...expired],
    });
    return;
  }
  if (p === '/_emu/faults' && req.method === 'POST') {
    const body = await readJson(req);
    state.faults.push(...(body.faults || []).map(normFault));
    send(res, 200, { faults: state.faults });
    return;
  }
  if (p === '/_emu/faults' && req.method === 'DELETE') { state.faults = []; send(res, 200, {}); return; }
  if (p === '/_emu/reset' && req.method === 'POST') {
    state.faults = []; state.counts = {}; state.log = [];
    send(res, 200, {});
    return;
  }
  const m = /^\/_emu\/expire\/(.+)$/.exec(p);
  if (m && req.method === 'POST') {
    const ids = m[1] === 'all' ? [...state.sandboxes.keys()] : [m[1]];
    for (const id of ids) expire(id);
    send(res, 200, { expired: ids });
    return;
  }
  send(res, 404, { message: 'no such control endpoint' });
}

// ---- server --------------------------------------------------------------------------------------

function route(req, res) {
  const url = new URL(req.url, 'http://emulator');
  if (url.pathname.startsWith('/_emu/')) return control(req, res, url);
  let sid = req.headers['e2b-sandbox-id'];
  let port = Number(req.headers['e2b-sandbox-port']) || 0;
  if (!sid) {
    const m = /^(\d+)-([A-Za-z0-9_-]+)\./.exec(req.headers.host || '');
    if (m) { port = Number(m[1]); sid = m[2]; }
  }
  if (sid) return dataPlane(req, res, url, sid, port || ENVD_PORT);
  return platform(req, res, url);
}

const server = http.createServer((req, res) => {
  Promise.resolve().then(() => route(req, res)).catch((e) => {
    if (!res.headersSent) apiError(res, e.status || 500, e.message);
    else res.destroy();
  });
});
server.keepAliveTimeout = 60000;
server.headersTimeout = 65000;
server.requestTimeout = 0;

function shutdown() {
  for (const id of [...state.sandboxes.keys()]) destroySandbox(id);
  if (ownRoot) fs.rmSync(rootBase, { recursive: true, force: true });
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
// never outlive the test that started us
const parent = process.ppid;
setInterval(() => { try { process.kill(parent, 0); } catch { shutdown(); } }, 1000).unref();

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  if (opts.ready) {
    fs.writeFileSync(`${opts.ready}.tmp`, `${port}\n`);
    fs.renameSync(`${opts.ready}.tmp`, opts.ready);
  }
  process.stderr.write(`fc emulator listening on 127.0.0.1:${port}, sandboxes in ${rootBase}\n`);
});
