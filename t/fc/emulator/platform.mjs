// The platform API (ref. 2): create, list, get, connect, kill, timeout.

import { opts, state, logReq, NON_IDEMPOTENT, MAX_JSON } from './state.mjs';
import { send, apiError, readBody, readJson } from './http.mjs';
import { takeFault, applyFault } from './faults.mjs';
import { createSandbox, detail, destroySandbox } from './sandbox.mjs';

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

export async function platform(req, res, url) {
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
