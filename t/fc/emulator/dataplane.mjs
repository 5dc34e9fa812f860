// The data plane (ref. 3-6): routing by port and path, the access token,
// faults, the request log, and the unary Connect RPCs' framing.

import { state, logReq, NON_IDEMPOTENT, CI_PORT, JUPYTER_PORT } from './state.mjs';
import { send, apiError, connectError, readJson, rpcError } from './http.mjs';
import { takeFault, applyFault } from './faults.mjs';
import { filesRead, filesWrite, filesystemRpc } from './files.mjs';
import { processStart, processRpc } from './process.mjs';
import { execute, contexts, jupyter } from './interpreter.mjs';

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

export async function dataPlane(req, res, url, sid, port) {
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

// ---- unary Connect RPCs (ref. 5.5, 5.3) ---------------------------------------------------------------

async function unary(op, sbx, req, res) {
  if (!(req.headers['content-type'] || '').startsWith('application/json')) {
    req.resume();
    throw rpcError(415, 'invalid_argument', 'unary requests are application/json');
  }
  let body;
  try { body = await readJson(req); } catch { throw rpcError(400, 'invalid_argument', 'invalid JSON'); }
  const out = filesystemRpc(op, sbx, body) ?? processRpc(op, sbx, body);
  if (!out) throw rpcError(501, 'unimplemented', `${op} is not implemented by the emulator`);
  send(res, 200, out);
  return 200;
}
