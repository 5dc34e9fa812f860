// The code interpreter (ref. 6): contexts, kernels, POST /execute, and
// Jupyter's interrupt.

import path from 'node:path';
import crypto from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import { state } from './state.mjs';
import { send, readJson } from './http.mjs';
import { baseEnv, killGroup, spawnIn } from './bwrap.mjs';

// t/fc, bound at /.emu in the sandbox: the kernels' drivers
const fcDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

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
    ['--ro-bind', fcDir, '/.emu']);
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

export function kernelsStop(sbx) {
  for (const ctx of sbx.contexts?.values() ?? []) {
    if (ctx.kernel) killGroup(ctx.kernel, 'SIGKILL');
  }
}

export async function execute(sbx, req, res, fault) {
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
export async function contexts(op, sbx, req, res, url) {
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
export function jupyter(sbx, req, res, url) {
  req.resume();
  const m = /^\/api\/kernels\/([^/]+)\/interrupt$/.exec(url.pathname);
  const ctx = m && req.method === 'POST' && contextById(sbx, decodeURIComponent(m[1]));
  if (!ctx) { send(res, 404, { message: 'Kernel does not exist' }); return 404; }
  if (ctx.kernel?.pid) { try { process.kill(ctx.kernel.pid, 'SIGINT'); } catch { /* gone */ } }
  send(res, 204);
  return 204;
}
