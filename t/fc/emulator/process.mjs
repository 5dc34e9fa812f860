// envd's processes: process.Process/Start (ref. 5.2), a server stream of
// Connect envelopes, and the unary RPCs on a started process (ref. 5.3).

import fs from 'node:fs';
import { MAX_JSON } from './state.mjs';
import { send, readBody, envelope, parseEnveloped, rpcError } from './http.mjs';
import { resolvePath } from './paths.mjs';
import { baseEnv, killGroup, spawnIn } from './bwrap.mjs';

// Go's ProcessState.String() for a signal (ref. 5.2)
const GO_SIGNAL = { SIGHUP: 'hangup', SIGINT: 'interrupt', SIGQUIT: 'quit', SIGABRT: 'aborted', SIGKILL: 'killed', SIGSEGV: 'segmentation fault', SIGPIPE: 'broken pipe', SIGTERM: 'terminated' };

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

// The answer to the unary RPC op (signal, input, closestdin, ps) with the
// request body, or undefined when op is not a process one; throws
// rpcError's errors.
export function processRpc(op, sbx, body) {
  let out = {};
  switch (op) {
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
      return undefined;
  }
  return out;
}

// ---- process.Process/Start (ref. 5.2) --------------------------------------------------------------------

export async function processStart(sbx, req, res, fault) {
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
