// sg.mjs - helpers for sandgate's end-to-end tests.
//
// Environment (set by `make check`, see AM_TESTS_ENVIRONMENT in Makefile.am):
//   SANDGATE_BIN         the built sandgate binary
//   SANDGATE_PLUGIN_DIR  the directory holding docker.so
//   SG_TEST_SRCDIR, SG_TEST_BUILDDIR
// Optional:
//   SG_TEST_KEEP=1       keep the per-test temp directory (server stderr, state)
//   SG_NODE_MODULES      where @modelcontextprotocol/sdk is (default $SG_TEST_DEPS/node_modules)
//   SG_TEST_DEPS         the folder of the tests' Node packages (default t/ of the source tree)
//
// Every test gets its own HOME, XDG_STATE_HOME and XDG_CONFIG_HOME under a temp
// directory, so sandgate's state never leaks between tests.  Everything a test
// starts (servers, containers) is registered here and torn down by the cleanup
// hook that tap.mjs runs at the end of the file, however the file ends.
// Missing prerequisites (Node SDK, Docker, the image, the binary) fail the test
// with a "Bail out!" that says how to fix it: nothing here ever skips.

import { spawn, execFile, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify, isDeepStrictEqual } from 'node:util';
import * as t from './tap.mjs';

const execFileP = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));

export const IMAGE = 'sandgate/base:1';
export const LABEL_MANAGED = 'org.sandgate.managed';
export const LABEL_OWNER = 'org.sandgate.owner';
export const LABEL_SESSION = 'org.sandgate.session';
export const LABEL_CREATED = 'org.sandgate.created';
export const LABEL_LIFETIME = 'org.sandgate.lifetime';

export const CLOUD_TOOLS = ['create_sandbox', 'run_code', 'run_command', 'read_file',
  'write_file', 'list_files', 'kill_sandbox'];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- per-test temp directory --------------------------------------------------

const testName = path.basename(process.argv[1] || 'test', '.mjs');
let tmpRoot = null;

/** The test's temp directory (created on first use, removed at the end unless SG_TEST_KEEP). */
export function tmpdir() {
  if (!tmpRoot) {
    tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), `sg-e2e-${testName}-`));
    for (const d of ['home', 'state', 'config']) fs.mkdirSync(path.join(tmpRoot, d), { mode: 0o700 });
  }
  return tmpRoot;
}

/** For a server's env: [local] spare as users get it (unset), not the suite's 0. */
export const SPARE_DEFAULT = Object.freeze({ SANDGATE_LOCAL_SPARE: undefined });

/** The environment a sandgate server runs with: ours (sanitizer options included) plus isolation. */
export function serverEnv(extra = {}) {
  const root = tmpdir();
  const env = {
    ...process.env,
    HOME: path.join(root, 'home'),
    XDG_STATE_HOME: path.join(root, 'state'),
    XDG_CONFIG_HOME: path.join(root, 'config'),
  };
  // No warm pool unless a test asks for one (t5020): an HTTP server's default
  // pool of 1 would make and remove a container for every server the suite
  // starts, on an engine the tests share (doc/docker.md).
  if (env.SANDGATE_DOCKER_POOL === undefined) env.SANDGATE_DOCKER_POOL = '0';
  // Nor local spares (doc/local.md): a jail made ahead by each of the suite's
  // servers, most never on local.  The local tests ask for the default
  // (SPARE_DEFAULT) and so run as users do.
  if (env.SANDGATE_LOCAL_SPARE === undefined) env.SANDGATE_LOCAL_SPARE = '0';
  if (process.env.SANDGATE_PLUGIN_DIR) env.SANDGATE_PLUGIN_DIR = process.env.SANDGATE_PLUGIN_DIR;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined || v === null) delete env[k];
    else env[k] = String(v);
  }
  return env;
}

// ---- prerequisites ---------------------------------------------------------------

let sdkCache = null;

/** Loads the official MCP SDK from t/node_modules; bails out with the fix when it is missing. */
export async function sdk() {
  if (sdkCache) return sdkCache;
  const base = process.env.SG_NODE_MODULES
    ? path.resolve(process.env.SG_NODE_MODULES, '..')
    : path.resolve(process.env.SG_TEST_DEPS ?? path.resolve(here, '..'));
  const req = createRequire(path.join(base, 'package.json'));
  const load = async (spec) => import(pathToFileURL(req.resolve(spec)).href);
  try {
    const [{ Client }, { StdioClientTransport }, types] = await Promise.all([
      load('@modelcontextprotocol/sdk/client/index.js'),
      load('@modelcontextprotocol/sdk/client/stdio.js'),
      load('@modelcontextprotocol/sdk/types.js'),
    ]);
    let version = '?';
    for (let d = path.dirname(req.resolve('@modelcontextprotocol/sdk/client/index.js')); d !== path.dirname(d); d = path.dirname(d)) {
      const f = path.join(d, 'package.json');
      if (!fs.existsSync(f)) continue;
      const pkg = JSON.parse(fs.readFileSync(f, 'utf8'));
      if (pkg.name === '@modelcontextprotocol/sdk') { version = pkg.version; break; }
    }
    sdkCache = { Client, StdioClientTransport, types, version };
  } catch (e) {
    await t.bailOut(`the MCP SDK is not installed in ${path.join(base, 'node_modules')} (${e.code ?? e.message}): `
      + `run "npm --prefix ${base} install --no-audit --no-fund" (.ci/run does)`);
  }
  return sdkCache;
}

/**
 * Checks everything an end-to-end test needs and bails out (never skips) with
 * the fix when something is missing.  opts.docker=false for tests that do not
 * touch containers.
 */
export async function preflight(opts = {}) {
  const needDocker = opts.docker !== false;
  const [major] = process.versions.node.split('.').map(Number);
  if (major < 18) await t.bailOut(`Node ${process.versions.node} is too old: the MCP SDK needs Node >= 18 (apt-get install nodejs)`);
  const bin = process.env.SANDGATE_BIN;
  if (!bin) await t.bailOut('SANDGATE_BIN is not set: run the end-to-end tests through "make check" (or set it to the built sandgate)');
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch {
    await t.bailOut(`SANDGATE_BIN=${bin} is not an executable file: build it first ("make")`);
  }
  const s = await sdk();
  t.diag(`node ${process.versions.node}, @modelcontextprotocol/sdk ${s.version}, sandgate ${bin}`);
  if (needDocker) {
    const pdir = process.env.SANDGATE_PLUGIN_DIR;
    if (!pdir || !fs.existsSync(path.join(pdir, 'docker.so'))) {
      await t.bailOut(`the docker plugin is missing: ${pdir ? path.join(pdir, 'docker.so') : 'SANDGATE_PLUGIN_DIR is not set'}; build it ("make")`);
    }
    try {
      const { stdout } = await execFileP('docker', ['version', '--format', '{{.Server.Version}}'], { timeout: 20000 });
      t.diag(`docker engine ${stdout.trim()}`);
    } catch (e) {
      const why = e.code === 'ENOENT' ? 'the docker CLI is not installed (apt-get install docker.io)'
        : `the Docker engine does not answer (${(e.stderr || e.message).trim().split('\n')[0]}): start dockerd (.ci/run does)`;
      await t.bailOut(why);
    }
    try {
      await execFileP('docker', ['image', 'inspect', '--format', '{{.Id}}', IMAGE], { timeout: 20000 });
    } catch {
      await t.bailOut(`the image ${IMAGE} is missing: build it with etc/image/build.sh (.ci/run does)`);
    }
  }
}

// ---- registry of what a test started, and cleanup --------------------------------

const servers = new Set();       // every server process this file started
const sandboxIds = new Set();    // every sandbox_id seen in a result
const containerIds = new Set();  // every container id the test looked at

export function trackSandbox(id) { if (typeof id === 'string' && id) sandboxIds.add(id); }

const SAN_RE = /ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|LeakSanitizer|AddressSanitizer:DEADLYSIGNAL|WARNING: ThreadSanitizer/;

function sanitizerReport(file) {
  let text;
  try { text = fs.readFileSync(file, 'utf8'); } catch { return null; }
  const m = SAN_RE.exec(text);
  if (!m) return null;
  return text.slice(Math.max(0, m.index - 200), m.index + 4000);
}

function tail(file, n = 40) {
  try {
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    return lines.slice(-n).join('\n');
  } catch {
    return '(no stderr file)';
  }
}

let cleanupInstalled = false;

function installCleanup() {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  t.onFailure(() => {
    for (const s of servers) {
      t.diag(`---- last lines of stderr of server pid ${s.pid} (${s.stderrPath}) ----`);
      t.diag(tail(s.stderrPath));
    }
  });
  t.onCleanup(async () => {
    // 1. no server may outlive its test
    for (const s of servers) {
      if (s.alive()) {
        s.killNow('SIGKILL');
        await s.waitExit(5000).catch(() => {});
      }
      await s.flushed();
    }
    // 2. sanitizer reports in any server's stderr fail the test
    for (const s of servers) {
      const rep = sanitizerReport(s.stderrPath);
      if (rep && !s.sanitizerReported) {
        s.sanitizerReported = true;
        t.fail(`server pid ${s.pid}: no sanitizer report on stderr`, rep);
      }
    }
    // 3. remove every container this test's servers made (by owner pid) or that it saw
    const pids = new Set([...servers].map((s) => s.pid));
    let all = [];
    try { all = await listManaged(); } catch (e) { process.stderr.write(`cleanup: docker ps failed: ${e.message}\n`); }
    const doomed = all.filter((c) => pids.has(ownerPid(c)) || containerIds.has(c.id)
      || [...sandboxIds].some((sid) => matchesSandbox(c, sid)));
    if (doomed.length) {
      t.diag(`cleanup: removing ${doomed.length} container(s) left by this test: ${doomed.map((c) => c.id.slice(0, 12)).join(' ')}`);
      await removeContainers(doomed.map((c) => c.id));
    }
    if (tmpRoot && !process.env.SG_TEST_KEEP && t.failures() === 0) {
      try {
        fs.rmSync(tmpRoot, { recursive: true, force: true });
      } catch {
        // named machines wrote into their workspaces (under the temp
        // directory) as root: make it ours through a container, then again
        spawnSync('docker', ['run', '--rm', '-v', `${tmpRoot}:/x`, IMAGE, 'chmod', '-R', 'a+rwX', '/x'],
          { stdio: 'ignore', timeout: 60000 });
        fs.rmSync(tmpRoot, { recursive: true, force: true });
      }
    } else if (tmpRoot) {
      t.diag(`kept the test's temp directory ${tmpRoot}`);
    }
  });
}

// ---- processes --------------------------------------------------------------------

let serverSeq = 0;

function stderrFile() {
  serverSeq++;
  return path.join(tmpdir(), `server-${serverSeq}.stderr`);
}

/** Wraps a ChildProcess with exit bookkeeping. */
function procHandle(child, stderrPath, args) {
  let exitInfo = null;
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      resolve(exitInfo);
    });
  });
  const h = {
    child,
    pid: child.pid,
    args,
    stderrPath,
    exited,
    alive: () => exitInfo === null,
    exitInfo: () => exitInfo,
    killNow(sig = 'SIGTERM') { if (exitInfo === null) { try { child.kill(sig); } catch { /* gone */ } } },
    async waitExit(ms) {
      if (exitInfo) return exitInfo;
      let timer;
      const r = await Promise.race([exited, new Promise((res) => { timer = setTimeout(() => res(null), ms); })]);
      clearTimeout(timer);
      if (r === null) throw new Error(`server pid ${child.pid} did not exit within ${ms} ms`);
      return r;
    },
    sanitizerReported: false,
    stderrDone: null, // a promise when stderr is copied to the file by us
    /** Waits (at most 2 s) until everything the server wrote to stderr is in the file. */
    async flushed() {
      if (!h.stderrDone) return;
      let timer;
      await Promise.race([h.stderrDone, new Promise((r) => { timer = setTimeout(r, 2000); })]);
      clearTimeout(timer);
    },
  };
  servers.add(h);
  installCleanup();
  return h;
}

/** Checks the server's stderr for sanitizer reports now (a test point only when one is found). */
export function checkSanitizer(h) {
  const rep = sanitizerReport(h.stderrPath);
  if (rep && !h.sanitizerReported) {
    h.sanitizerReported = true;
    t.fail(`server pid ${h.pid}: no sanitizer report on stderr`, rep);
  }
}

/**
 * Ends the server's stdin and waits (up to ms) for it to exit by itself;
 * asserts exit status 0.  Returns the exit info and how long it took.
 */
async function closeAndCheck(h, endStdin, ms, name) {
  const t0 = Date.now();
  endStdin();
  let info;
  try {
    info = await h.waitExit(ms);
  } catch {
    t.fail(`${name}: server exits by itself after stdin EOF`, `still running after ${ms} ms; killing it`);
    h.killNow('SIGKILL');
    info = await h.waitExit(5000).catch(() => ({ code: null, signal: 'SIGKILL' }));
    await h.flushed();
    checkSanitizer(h);
    return { ...info, ms: Date.now() - t0 };
  }
  const took = Date.now() - t0;
  await h.flushed();
  t.ok(info.code === 0 && info.signal === null, `${name}: server exits with status 0 after stdin EOF (${took} ms)`, info);
  checkSanitizer(h);
  return { ...info, ms: took };
}

// ---- SDK client ---------------------------------------------------------------------

/**
 * Starts `$SANDGATE_BIN stdio ...extraArgs` and connects the official SDK
 * Client through StdioClientTransport.  The server's stderr goes to a file.
 * env: extra environment (a null value removes a variable).
 * opts: name (for test names), preArgs (arguments before "stdio", e.g.
 * ['--set', 'log.level=debug']), cwd, connectTimeout (ms).
 * Returns { client, transport, pid, stderrPath, call, tool, close, kill }.
 */
export async function sdkClient(extraArgs = [], env = {}, opts = {}) {
  const { Client, StdioClientTransport } = await sdk();
  const stderrPath = stderrFile();
  const args = [...(opts.preArgs ?? []), 'stdio', ...extraArgs];
  // opts.wrap: a command line that runs the server, given as its last
  // arguments (another user, other limits)
  const wrap = opts.wrap ?? [];
  const transport = new StdioClientTransport({
    command: wrap.length ? wrap[0] : process.env.SANDGATE_BIN,
    args: wrap.length ? [...wrap.slice(1), process.env.SANDGATE_BIN, ...args] : args,
    env: serverEnv(env),  // the SDK would otherwise pass only HOME, PATH, ...: keep ASAN_OPTIONS etc.
    stderr: 'pipe',
    cwd: opts.cwd ?? tmpdir(),
  });
  const errOut = fs.createWriteStream(stderrPath);
  const errDone = new Promise((res) => errOut.once('close', res));
  transport.stderr.pipe(errOut);
  const client = new Client({ name: 'sandgate-e2e', version: '1.0.0' }, { capabilities: {} });
  client.onerror = (e) => process.stderr.write(`sdk client error: ${e?.message ?? e}\n`);
  await transport.start();
  // connect() calls start() again; make that a no-op now that the process exists
  transport.start = async () => {};
  const h = procHandle(transport._process, stderrPath, args);
  h.stderrDone = errDone;
  const name = opts.name ?? `server ${serverSeq}`;
  try {
    await client.connect(transport, { timeout: opts.connectTimeout ?? 30000 });
    // listing the tools makes the SDK validate structuredContent against outputSchema
    await client.listTools(undefined, { timeout: 30000 });
  } catch (e) {
    t.diag(`stderr of the server:\n${tail(stderrPath)}`);
    throw new Error(`could not connect the MCP SDK client to ${process.env.SANDGATE_BIN} ${args.join(' ')}: ${e.message}`);
  }

  const srv = {
    client,
    transport,
    pid: h.pid,
    proc: h,
    stderrPath,
    /** tools/call; returns the SDK's CallToolResult (isError results do not throw). */
    async call(tool, args = {}, callOpts = {}) {
      const res = await client.callTool({ name: tool, arguments: args }, undefined,
        { timeout: callOpts.timeout ?? 120000, ...callOpts });
      const data = resultData(res);
      if (data && typeof data === 'object') trackSandbox(data.sandbox_id);
      return res;
    },
    /** tools/call that must succeed; returns the structured result object. */
    async tool(tool, args = {}, callOpts = {}) {
      const res = await srv.call(tool, args, callOpts);
      if (res.isError) {
        throw new Error(`${tool} ${JSON.stringify(args).slice(0, 300)} returned isError: ${res.content?.[0]?.text}`);
      }
      return resultData(res);
    },
    /** Closes stdin, waits for the server to exit by itself, asserts status 0. */
    async close(ms = 30000) {
      const r = await closeAndCheck(h, () => { try { transport._process?.stdin?.end(); } catch { /* gone */ } }, ms, name);
      await client.close().catch(() => {});
      return r;
    },
    kill(sig = 'SIGKILL') { h.killNow(sig); return h.exited; },
  };
  return srv;
}

/** The result object of a CallToolResult: structuredContent, else the JSON of content[0].text. */
export function resultData(res) {
  if (!res) return undefined;
  if (res.structuredContent !== undefined) return res.structuredContent;
  const text = res.content?.find((c) => c.type === 'text')?.text;
  if (text === undefined) return undefined;
  try { return JSON.parse(text); } catch { return text; }
}

/** The error text of an isError result. */
export function errorText(res) {
  return (res?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// ---- raw line client ------------------------------------------------------------------

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The raw text of the top-level "id" member of a JSON object text, or undefined. */
export function rawId(line) {
  let i = 0;
  const n = line.length;
  const ws = () => { while (i < n && ' \t\r\n'.includes(line[i])) i++; };
  const skipString = () => {  // at '"'
    const s = i;
    i++;
    while (i < n && line[i] !== '"') i += line[i] === '\\' ? 2 : 1;
    i++;
    return line.slice(s, i);
  };
  const skipValue = () => {
    ws();
    const s = i;
    if (line[i] === '"') { skipString(); return line.slice(s, i); }
    if (line[i] === '{' || line[i] === '[') {
      let depth = 0;
      while (i < n) {
        const c = line[i];
        if (c === '"') { skipString(); continue; }
        if (c === '{' || c === '[') depth++;
        if (c === '}' || c === ']') { depth--; if (depth === 0) { i++; break; } }
        i++;
      }
      return line.slice(s, i);
    }
    while (i < n && !',}] \t\r\n'.includes(line[i])) i++;
    return line.slice(s, i);
  };
  ws();
  if (line[i] !== '{') return undefined;
  i++;
  for (;;) {
    ws();
    if (line[i] !== '"') return undefined;
    const key = JSON.parse(skipString());
    ws();
    if (line[i] !== ':') return undefined;
    i++;
    const v = skipValue();
    if (key === 'id') return v;
    ws();
    if (line[i] === ',') { i++; continue; }
    return undefined;
  }
}

/**
 * Spawns `$SANDGATE_BIN stdio ...extraArgs` and talks newline-delimited
 * JSON-RPC by hand.  EVERY stdout line is checked: it must be valid UTF-8 and
 * parse as a JSON-RPC 2.0 object; close() asserts that.  env and opts as for
 * sdkClient().  Responses are matched by id with the same JSON type; each
 * record keeps the raw line text (rec.text) next to the parsed message.
 */
export async function rawServer(extraArgs = [], env = {}, opts = {}) {
  const stderrPath = stderrFile();
  const errFd = fs.openSync(stderrPath, 'w');
  const args = [...(opts.preArgs ?? []), 'stdio', ...extraArgs];
  const child = spawn(process.env.SANDGATE_BIN, args, {
    env: serverEnv(env),
    stdio: ['pipe', 'pipe', errFd],
    cwd: opts.cwd ?? tmpdir(),
  });
  fs.closeSync(errFd);
  await new Promise((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (e) => reject(new Error(`cannot start ${process.env.SANDGATE_BIN}: ${e.message}`)));
  });
  const h = procHandle(child, stderrPath, args);
  const name = opts.name ?? `server ${serverSeq}`;
  child.stdin.on('error', () => {}); // EPIPE after the server exited is reported by the tests

  const lines = [];      // every stdout line: { text, msg, at, bad }
  const bad = [];        // lines that are not valid UTF-8 JSON-RPC objects
  const queue = [];      // parsed messages not yet consumed
  let waiters = [];
  let pending = Buffer.alloc(0);
  let eof = false;

  const wake = () => { const w = waiters; waiters = []; for (const f of w) f(); };
  child.stdout.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    let nl;
    while ((nl = pending.indexOf(0x0a)) >= 0) {
      const raw = pending.subarray(0, nl);
      pending = pending.subarray(nl + 1);
      const rec = { at: Date.now(), bytes: raw.length };
      try {
        rec.text = strictUtf8.decode(raw);
      } catch {
        rec.text = raw.toString('utf8');
        rec.bad = 'not valid UTF-8';
      }
      if (!rec.bad) {
        try {
          rec.msg = JSON.parse(rec.text);
          if (rec.msg === null || typeof rec.msg !== 'object' || Array.isArray(rec.msg) || rec.msg.jsonrpc !== '2.0') {
            rec.bad = 'not a JSON-RPC 2.0 object';
          }
        } catch (e) {
          rec.bad = `not JSON (${e.message})`;
        }
      }
      lines.push(rec);
      if (rec.bad) bad.push(rec);
      else queue.push(rec);
    }
    wake();
  });
  child.stdout.on('end', () => {
    eof = true;
    if (pending.length) {
      const rec = { at: Date.now(), text: pending.toString('utf8'), bad: 'unterminated last line' };
      lines.push(rec);
      bad.push(rec);
    }
    wake();
  });

  let nextId = 1;

  /** Waits until pred(rec) holds for a queued record; removes and returns it, or null on timeout/EOF. */
  async function take(pred, ms) {
    const deadline = Date.now() + ms;
    for (;;) {
      const i = queue.findIndex(pred);
      if (i >= 0) return queue.splice(i, 1)[0];
      if (eof) return null;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      let timer;
      await new Promise((r) => { waiters.push(r); timer = setTimeout(r, left); });
      clearTimeout(timer);
    }
  }

  const sameId = (a, b) => a === b && typeof a === typeof b;

  const srv = {
    pid: h.pid,
    proc: h,
    stderrPath,
    lines,
    bad,
    queue,
    /** Writes one line (a string is sent as is, anything else as JSON) plus '\n'. */
    send(msg) {
      const text = typeof msg === 'string' ? msg : JSON.stringify(msg);
      child.stdin.write(`${text}\n`);
    },
    sendRaw(bytes) { child.stdin.write(bytes); },
    /** Sends a request; returns its id.  id may be given (any JSON value). */
    sendRequest(method, params, id) {
      const rid = id === undefined ? `r${nextId++}` : id;
      const m = { jsonrpc: '2.0', id: rid, method };
      if (params !== undefined) m.params = params;
      srv.send(m);
      return rid;
    },
    notify(method, params) {
      const m = { jsonrpc: '2.0', method };
      if (params !== undefined) m.params = params;
      srv.send(m);
    },
    /** Waits for the response whose id has the same type and value; returns the record {msg,text,at} or null. */
    async response(id, ms = 30000) {
      return take((r) => 'id' in r.msg && !('method' in r.msg) && sameId(r.msg.id, id), ms);
    },
    /** Sends a request and waits for its response message (throws on timeout). */
    async request(method, params, reqOpts = {}) {
      const id = srv.sendRequest(method, params, reqOpts.id);
      const rec = await srv.response(id, reqOpts.timeout ?? 60000);
      if (!rec) throw new Error(`no response to ${method} (id ${JSON.stringify(id)}) within ${reqOpts.timeout ?? 60000} ms${eof ? ' (server closed stdout)' : ''}`);
      return rec.msg;
    },
    /** tools/call; returns the JSON-RPC result (throws on a JSON-RPC error). */
    async callTool(tool, args = {}, reqOpts = {}) {
      const msg = await srv.request('tools/call', { name: tool, arguments: args }, reqOpts);
      if (msg.error) throw new Error(`tools/call ${tool}: JSON-RPC error ${JSON.stringify(msg.error)}`);
      const data = resultData(msg.result);
      if (data && typeof data === 'object') trackSandbox(data.sandbox_id);
      return msg.result;
    },
    async tool(tool, args = {}, reqOpts = {}) {
      const res = await srv.callTool(tool, args, reqOpts);
      if (res.isError) throw new Error(`${tool} returned isError: ${errorText(res)}`);
      return resultData(res);
    },
    /** Waits for any message matching pred (e.g. a notification). */
    async next(pred = () => true, ms = 10000) {
      return take((r) => pred(r.msg, r), ms);
    },
    /** initialize + notifications/initialized; returns the initialize result. */
    async initialize(protocolVersion = '2025-11-25') {
      const msg = await srv.request('initialize', {
        protocolVersion,
        capabilities: {},
        clientInfo: { name: 'sandgate-e2e-raw', version: '1.0.0' },
      }, { timeout: 30000 });
      if (msg.error) throw new Error(`initialize failed: ${JSON.stringify(msg.error)}`);
      srv.notify('notifications/initialized');
      return msg.result;
    },
    /** All messages received so far (consumed or not). */
    messages() { return lines.filter((l) => l.msg).map((l) => l.msg); },
    eof: () => eof,
    /** Asserts every stdout line so far was a JSON-RPC object. */
    checkAllJson(label = name) {
      return t.ok(bad.length === 0, `${label}: every stdout line (${lines.length}) is a UTF-8 JSON-RPC object`,
        bad.length ? { bad: bad.slice(0, 5).map((b) => ({ why: b.bad, text: b.text.slice(0, 300) })) } : undefined);
    },
    /** Closes stdin, waits for the exit, asserts status 0 and that all stdout was JSON. */
    async close(ms = 30000) {
      const r = await closeAndCheck(h, () => child.stdin.end(), ms, name);
      srv.checkAllJson();
      return r;
    },
    kill(sig = 'SIGKILL') { h.killNow(sig); return h.exited; },
  };
  return srv;
}

// ---- the fake backend that works (t/plugins/fake.c, FAKE_WORKS) ---------------------------

/**
 * The arguments that make sandgate load only t/plugins/.libs/fakework.so and
 * use it by default: machines and commands at no cost ("ok\n"; the command
 * "hang" never returns and ignores cancellation).  Bails out when it is not
 * built ("make check" builds it).
 */
export async function fakeBackendArgs() {
  const libs = path.join(process.env.SG_TEST_BUILDDIR ?? '', 't', 'plugins', '.libs');
  if (!fs.existsSync(path.join(libs, 'fakework.so'))) {
    await t.bailOut(`${path.join(libs, 'fakework.so')} is missing: build the test plugins with "make check" (they are check_LTLIBRARIES)`);
  }
  return ['--set', `plugin.path=${libs}`, '--set', 'plugin.load=fakework', '--set', 'sandbox.default_backend=fakework'];
}

// ---- sandgate CLI -------------------------------------------------------------------------

/**
 * Runs `$SANDGATE_BIN ...args`; resolves {code, signal, stdout, stderr, ms}.
 * opts: input (written to stdin, then closed), stdinFile (a file opened as
 * stdin instead of a pipe), timeout (ms).
 */
export async function runCli(args, env = {}, opts = {}) {
  const t0 = Date.now();
  const stderrPath = stderrFile();
  return new Promise((resolve) => {
    const stdin = opts.stdinFile ? fs.openSync(opts.stdinFile, 'r') : 'pipe';
    const child = spawn(process.env.SANDGATE_BIN, args, { env: serverEnv(env), stdio: [stdin, 'pipe', 'pipe'], cwd: tmpdir() });
    if (typeof stdin === 'number') fs.closeSync(stdin);
    const h = procHandle(child, stderrPath, args);
    const out = [];
    const err = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    if (!child.stdin) { /* stdin is the file */ } else if (opts.input !== undefined) child.stdin.end(opts.input); else child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeout ?? 120000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8');
      fs.writeFileSync(stderrPath, stderr);
      checkSanitizer(h);
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr, ms: Date.now() - t0, pid: child.pid });
    });
  });
}

// ---- docker --------------------------------------------------------------------------------

/** Runs the docker CLI; resolves stdout, rejects with stderr in the message. */
export async function docker(args, opts = {}) {
  try {
    const { stdout } = await execFileP('docker', args, { timeout: opts.timeout ?? 60000, maxBuffer: 64 << 20 });
    return stdout;
  } catch (e) {
    throw new Error(`docker ${args.join(' ')}: ${(e.stderr || e.message || '').trim()}`);
  }
}

function normalize(c) {
  return {
    id: c.Id,
    name: (c.Name || '').replace(/^\//, ''),
    labels: c.Config?.Labels ?? {},
    running: !!c.State?.Running,
    status: c.State?.Status,
    image: c.Config?.Image,
    created: c.Created,
    startedAt: c.State?.StartedAt,
  };
}

/** docker inspect of the given ids (missing ones are left out). */
export async function inspect(ids) {
  if (!ids.length) return [];
  try {
    return JSON.parse(await docker(['inspect', '--type', 'container', ...ids])).map(normalize);
  } catch {
    // some of them vanished in between: one by one
    const outp = [];
    for (const id of ids) {
      try { outp.push(...JSON.parse(await docker(['inspect', '--type', 'container', id])).map(normalize)); } catch { /* gone */ }
    }
    return outp;
  }
}

/** Containers (running or not) labelled org.sandgate.managed=1, plus extra label filters {k: v}. */
export async function listManaged(labels = {}) {
  const args = ['ps', '-a', '-q', '--no-trunc', '--filter', `label=${LABEL_MANAGED}=1`];
  for (const [k, v] of Object.entries(labels)) args.push('--filter', v === undefined ? `label=${k}` : `label=${k}=${v}`);
  const ids = (await docker(args)).split('\n').filter(Boolean);
  return inspect(ids);
}

/** The pid in a container's owner label "host:pid:starttime" (a number), or null. */
export function ownerPid(c) {
  const o = c.labels?.[LABEL_OWNER];
  if (!o) return null;
  const parts = o.split(':');
  if (parts.length < 2) return null;
  const pid = Number(parts[1]);
  return Number.isInteger(pid) ? pid : null;
}

/** Containers made by the sandgate process `pid` on this host. */
export async function containersOfServer(pid) {
  const all = await listManaged();
  const host = os.hostname();
  return all.filter((c) => ownerPid(c) === pid && (c.labels[LABEL_OWNER] || '').split(':')[0] === host);
}

export async function containersOfSession(hash) {
  return listManaged({ [LABEL_SESSION]: hash });
}

/** True when container c is the one behind sandbox_id sid. */
export function matchesSandbox(c, sid) {
  if (!sid || !c) return false;
  if (c.id === sid || c.name === sid) return true;
  if (sid.length >= 12 && /^[0-9a-f]+$/.test(sid) && c.id.startsWith(sid)) return true;
  return Object.values(c.labels || {}).includes(sid);
}

/** The container behind a sandbox_id (managed containers only), or null. */
export async function containerOf(sid) {
  const all = await listManaged();
  const c = all.find((x) => matchesSandbox(x, sid)) ?? null;
  if (c) containerIds.add(c.id);
  return c;
}

/** `docker exec <id> ps -eo args`: the command lines of the processes in the container. */
export async function psArgs(id) {
  const out = await docker(['exec', id, 'ps', '-eo', 'args'], { timeout: 30000 });
  return out.split('\n').slice(1).map((l) => l.trim()).filter(Boolean);
}

/** Polls fn() every `every` ms until it returns a truthy value or ms pass; returns the last value. */
export async function waitFor(fn, ms, every = 250) {
  const deadline = Date.now() + ms;
  let v;
  for (;;) {
    v = await fn();
    if (v || Date.now() >= deadline) return v;
    await sleep(every);
  }
}

/** docker rm -f, ignoring ids that are already gone. */
export async function removeContainers(ids) {
  if (!ids.length) return;
  try {
    await docker(['rm', '-f', '-v', ...ids], { timeout: 120000 });
  } catch {
    for (const id of ids) spawnSync('docker', ['rm', '-f', '-v', id], { stdio: 'ignore', timeout: 60000 });
  }
}

// ---- small checks shared by tests ------------------------------------------------------

/**
 * Checks the shape every sandgate tool result has: content[0] is text whose
 * JSON equals structuredContent.
 */
export function checkResultShape(res, name) {
  const text = res?.content?.[0]?.type === 'text' ? res.content[0].text : undefined;
  let parsed;
  try { parsed = JSON.parse(text); } catch { parsed = undefined; }
  return t.ok(text !== undefined && res.structuredContent !== undefined
    && isDeepStrictEqual(parsed, res.structuredContent)
    && isPlainObject(res.structuredContent),
  `${name}: content[0] is the JSON text of structuredContent`, { result: res });
}

export function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export { t };
