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
//
// The code is in t/fc/emulator/, one concern a module: state.mjs (options,
// constants, shared state), http.mjs (answers, bodies, Connect envelopes),
// bwrap.mjs (commands in a sandbox), paths.mjs, sandbox.mjs (create,
// destroy, expire), faults.mjs, platform.mjs (ref. 2), dataplane.mjs
// (routing, tokens, unary RPCs), files.mjs (ref. 4, filesystem RPCs),
// process.mjs (ref. 5.2, 5.3), interpreter.mjs (ref. 6), control.mjs
// (/_emu/).  This file routes requests and runs the server.

import http from 'node:http';
import fs from 'node:fs';
import { ENVD_PORT, opts, rootBase, ownRoot, state } from './emulator/state.mjs';
import { apiError } from './emulator/http.mjs';
import { destroySandbox } from './emulator/sandbox.mjs';
import { platform } from './emulator/platform.mjs';
import { dataPlane } from './emulator/dataplane.mjs';
import { control } from './emulator/control.mjs';

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
