// The emulator's options, constants and shared state: the sandboxes, the
// counts and log of requests, the fault rules (see ../emulator.mjs).
// Evaluated first: a bad option or a missing bwrap stops the emulator before
// it listens.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

export const ENVD_PORT = 49983;
export const CI_PORT = 49999;
export const JUPYTER_PORT = 8888;
export const MAX_JSON = 4 << 20;
export const MAX_UPLOAD = 256 << 20;
export const NON_IDEMPOTENT = new Set(['create', 'files.write', 'start', 'execute']);

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

export const opts = parseArgs(process.argv);
export const rootBase = opts.root || fs.mkdtempSync(path.join(os.tmpdir(), 'fc-emu-'));
export const ownRoot = !opts.root;
export const bwrap = findBwrap();

function findBwrap() {
  const r = spawnSync('bwrap', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    process.stderr.write('fc emulator: bubblewrap (bwrap) is missing: apt-get install bubblewrap\n');
    process.exit(2);
  }
  return 'bwrap';
}

// ---- state --------------------------------------------------------------------

export const state = {
  sandboxes: new Map(), // id -> sandbox
  counts: {},           // op -> requests that arrived
  log: [],              // recent requests
  faults: [],
  executions: 0,
};

if (opts.faults) state.faults.push(...JSON.parse(opts.faults).map(normFault));

export function normFault(f) {
  return { times: 1, ...f };
}

export function logReq(entry) {
  state.log.push(entry);
  if (state.log.length > opts.logMax) state.log.splice(0, state.log.length - opts.logMax);
}
