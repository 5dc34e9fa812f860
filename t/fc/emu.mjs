// emu.mjs - start the FC emulator (t/fc/emulator.mjs) from a TAP test and
// point sandgate at it.
//
//   const emu = await startEmulator();
//   const srv = await sdkClient(emu.args(), emu.env());
//   await emu.faults([{ op: 'create', status: 503 }]);
//   (await emu.state()).counts.create
//
// The emulator runs until the test file ends (tap.mjs cleanup), writes its
// stderr into the test's temp directory, and needs bubblewrap: a missing
// bwrap is a "Bail out!" naming the package, never a skip.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { t, tmpdir, sleep } from '../lib/sg.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
let seq = 0;

export const EMULATOR = path.join(here, 'emulator.mjs');

/** Starts an emulator; resolves its handle once it listens. */
export async function startEmulator(opts = {}) {
  seq++;
  const dir = tmpdir();
  const ready = path.join(dir, `emu-${seq}.port`);
  const stderrPath = path.join(dir, `emu-${seq}.stderr`);
  const apiKey = opts.apiKey ?? `sk-emu-${crypto.randomBytes(16).toString('hex')}`;
  const args = [EMULATOR, '--ready', ready, '--api-key', apiKey];
  if (opts.uploadStatus) args.push('--upload-status', String(opts.uploadStatus));
  if (opts.faults) args.push('--faults', JSON.stringify(opts.faults));
  const errFd = fs.openSync(stderrPath, 'w');
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', errFd] });
  fs.closeSync(errFd);
  let exited = null;
  child.on('exit', (code, signal) => { exited = { code, signal }; });
  t.onCleanup(async () => {
    if (!exited) {
      child.kill('SIGTERM');
      for (let i = 0; i < 50 && !exited; i++) await sleep(100);
      if (!exited) child.kill('SIGKILL');
    }
  });
  t.onFailure(() => {
    const text = fs.existsSync(stderrPath) ? fs.readFileSync(stderrPath, 'utf8') : '';
    t.diag(`emulator stderr (${stderrPath}):\n${text.split('\n').slice(-30).join('\n')}`);
  });
  const deadline = Date.now() + 15000;
  while (!fs.existsSync(ready)) {
    if (exited) {
      const why = fs.readFileSync(stderrPath, 'utf8').trim();
      await t.bailOut(`the FC emulator exited (${JSON.stringify(exited)}): ${why || 'no message'}`);
    }
    if (Date.now() > deadline) await t.bailOut('the FC emulator did not write its ready file within 15 s');
    await sleep(25);
  }
  const port = Number(fs.readFileSync(ready, 'utf8').trim());
  const base = `http://127.0.0.1:${port}`;

  const ctl = async (method, p, body) => {
    const r = await fetch(`${base}/_emu/${p}`, {
      method,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    return r.json();
  };

  const emu = {
    base,
    port,
    apiKey,
    stderrPath,
    child,
    /** The emulator's counts, log, sandboxes (with their tokens) and faults. */
    state: () => ctl('GET', 'state'),
    /** Appends fault rules (see emulator.mjs). */
    faults: (list) => ctl('POST', 'faults', { faults: list }),
    clearFaults: () => ctl('DELETE', 'faults'),
    expire: (id) => ctl('POST', `expire/${id}`),
    reset: () => ctl('POST', 'reset'),
    /** Every secret the emulator handed out so far: the API key and the access tokens. */
    async secrets() {
      const s = await emu.state();
      return [apiKey, ...s.sandboxes.map((x) => x.token), ...tokensSeen];
    },
    /** sandgate options: fc loaded beside docker, fc the default backend, endpoints at the emulator. */
    args(extra = []) {
      return ['--set', 'plugin.load=docker,fc', '--set', 'sandbox.default_backend=fc',
        '--set', `fc.base_url=${base}`, '--set', `fc.sandbox_url=${base}`, ...extra];
    },
    /** The key goes through the seed's own variable, as a user would set it. */
    env(extra = {}) {
      return { ABX_SANDBOX_API_KEY: apiKey, E2B_API_KEY: undefined, SANDGATE_FC_API_KEY: undefined, ...extra };
    },
  };
  // tokens of sandboxes that are gone are no longer in state(): remember them
  const tokensSeen = new Set();
  const remember = setInterval(async () => {
    try { for (const s of (await emu.state()).sandboxes) tokensSeen.add(s.token); } catch { /* stopped */ }
  }, 200);
  remember.unref();
  t.onCleanup(() => clearInterval(remember));
  return emu;
}

/** Asserts that none of the secrets appears in any of the texts. */
export function noSecrets(texts, secrets, name) {
  const leaks = [];
  for (const [label, text] of Object.entries(texts)) {
    for (const s of secrets) if (s && s.length >= 8 && text.includes(s)) leaks.push(`${label} contains ${s.slice(0, 6)}...`);
  }
  return t.ok(leaks.length === 0, name, { leaks });
}

/** A 1x1 red PNG, base64. */
export const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
