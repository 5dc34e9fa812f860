// Fault rules (see ../emulator.mjs): the first that matches a request is
// taken and applied before its handler.

import { state } from './state.mjs';
import { send, apiError, sleep } from './http.mjs';
import { expire } from './sandbox.mjs';

export function takeFault(op, sid) {
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
export async function applyFault(f, req, res, sid, plane) {
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
