// HTTP and Connect helpers: answers, bodies, Connect envelopes and errors.

import { MAX_JSON } from './state.mjs';

// ---- small http helpers ---------------------------------------------------------

export function send(res, status, body, type = 'application/json', extra = {}) {
  if (res.headersSent || res.destroyed) return;
  const data = body === undefined ? '' : (typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(data), ...extra });
  res.end(data);
}

export const apiError = (res, status, message, extra) => send(res, status, { code: status, message }, 'application/json', extra);
export const connectError = (res, status, code, message) => send(res, status, { code, message });

export function readBody(req, max) {
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

export async function readJson(req) {
  const b = await readBody(req, MAX_JSON);
  if (!b.length) return {};
  return JSON.parse(b.toString('utf8'));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- Connect envelopes (ref. 5.1) --------------------------------------------------------

export function envelope(flags, obj) {
  const payload = Buffer.from(JSON.stringify(obj), 'utf8');
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

export function parseEnveloped(buf) {
  if (buf.length < 5) return null;
  if (buf[0] !== 0) return null;
  const n = buf.readUInt32BE(1);
  if (buf.length !== 5 + n) return null;
  return JSON.parse(buf.subarray(5).toString('utf8'));
}

// A Connect error (ref. 5.5, 5.3) for the data plane's handler to answer.
export function rpcError(status, code, message) {
  return Object.assign(new Error(message), { status, code });
}
