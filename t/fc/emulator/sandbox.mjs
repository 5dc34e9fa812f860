// Sandboxes: ids, root directories, their details, destruction and expiry.

import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { rootBase, state } from './state.mjs';
import { killGroup } from './bwrap.mjs';
import { kernelsStop } from './interpreter.mjs';

function newId() { return `sbx-${crypto.randomUUID()}`; }

function makeRoot(id) {
  const root = fs.mkdtempSync(path.join(rootBase, `${id}-`));
  for (const d of ['home/user', 'app', 'tmp', 'usr', 'etc', 'proc', 'dev', 'var/tmp', 'root', '.emu']) {
    fs.mkdirSync(path.join(root, d), { recursive: true });
  }
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  // merged-/usr hosts: /bin etc. are symlinks into /usr; elsewhere bound read-only
  for (const d of ['bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32']) {
    let st;
    try { st = fs.lstatSync(`/${d}`); } catch { continue; }
    if (st.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(`/${d}`), path.join(root, d));
    else fs.mkdirSync(path.join(root, d));
  }
  return root;
}

export function createSandbox(body) {
  const id = newId();
  const timeout = Number.isInteger(body.timeout) ? body.timeout : 300;
  const now = Date.now();
  const sbx = {
    id,
    token: crypto.randomBytes(24).toString('hex'),
    templateID: body.templateID,
    alias: body.templateID,
    clientID: 'emu-client',
    root: makeRoot(id),
    metadata: body.metadata && typeof body.metadata === 'object' ? body.metadata : {},
    envVars: body.envVars && typeof body.envVars === 'object' ? body.envVars : {},
    startedAt: new Date(now).toISOString(),
    deadline: now + timeout * 1000,
    procs: new Map(), // pid -> proc
  };
  state.sandboxes.set(id, sbx);
  return sbx;
}

export function detail(sbx, withToken) {
  const d = {
    templateID: sbx.templateID,
    alias: sbx.alias,
    sandboxID: sbx.id,
    clientID: sbx.clientID,
    startedAt: sbx.startedAt,
    endAt: new Date(sbx.deadline).toISOString(),
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    state: 'running',
    metadata: sbx.metadata,
    envdVersion: '0.5.2',
  };
  if (withToken) d.envdAccessToken = sbx.token;
  return d;
}

export const expired = new Set();

export function destroySandbox(id) {
  const sbx = state.sandboxes.get(id);
  if (!sbx) return false;
  state.sandboxes.delete(id);
  for (const p of sbx.procs.values()) killGroup(p, 'SIGKILL');
  kernelsStop(sbx);
  fs.rm(sbx.root, { recursive: true, force: true }, () => {});
  return true;
}

export function expire(id) {
  if (destroySandbox(id)) expired.add(id);
}

setInterval(() => {
  const now = Date.now();
  for (const sbx of [...state.sandboxes.values()]) if (sbx.deadline <= now) expire(sbx.id);
}, 200).unref();
