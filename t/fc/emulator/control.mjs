// Test control under /_emu/ (see ../emulator.mjs): state, faults, expiry,
// reset.

import { state, normFault } from './state.mjs';
import { send, readJson } from './http.mjs';
import { expired, expire } from './sandbox.mjs';

export async function control(req, res, url) {
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
