// docker.mjs - helpers for the named-machine tests (t/e2e/t46xx-docker-*.mjs).
//
// Other people share the Docker engine: everything a test makes is named
// with its pid (machines, the network, images) and removed at the end,
// whatever happens.  Images are built locally FROM sandgate/base:1 (no
// registry is reachable).

import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { t, docker, tmpdir, IMAGE } from './sg.mjs';

export const PID = process.pid;

/** A name unique to this test run: `${stem}-${pid}`. */
export const uniq = (stem) => `${stem}-${PID}`;

const networks = new Set();
const images = new Set();
let cleanupInstalled = false;

function installCleanup() {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  // registered before any server starts: runs after sg.mjs removed the containers
  t.onCleanup(async () => {
    for (const img of images) spawnSync('docker', ['rmi', '-f', img], { stdio: 'ignore', timeout: 60000 });
    for (const net of networks) {
      const r = spawnSync('docker', ['network', 'inspect', net], { stdio: 'ignore', timeout: 30000 });
      if (r.status === 0) spawnSync('docker', ['network', 'rm', net], { stdio: 'ignore', timeout: 30000 });
    }
  });
}

/** Registers a network name (made by sandgate) to remove at the end if it is still there. */
export function trackNetwork(name) { installCleanup(); networks.add(name); }

/** Registers an image tag to remove at the end. */
export function trackImage(tag) { installCleanup(); images.add(tag); }

/**
 * The sandgate arguments every docker test uses: a network of its own
 * (registered for cleanup) and work_home in the test's temp directory.
 * extra: more {'section.key': value}.
 */
export function dockerArgs(extra = {}) {
  const net = uniq('sgt-net');
  trackNetwork(net);
  const set = { 'docker.auto_network': net, 'storage.work_home': path.join(tmpdir(), 'work'), ...extra };
  return Object.entries(set).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
}

/** Builds image `tag` from Dockerfile text (a tiny one FROM sandgate/base:1); registers it. */
export async function buildImage(tag, dockerfile) {
  trackImage(tag);
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'img-'));
  fs.writeFileSync(path.join(dir, 'Dockerfile'), dockerfile);
  await docker(['build', '-q', '-t', tag, dir], { timeout: 300000 });
  return tag;
}

/** sandbox_env with flat params (the seed's style). */
export const envFlat = (srv, action, params = {}) => srv.call('sandbox_env', { action, ...params });

/** docker inspect of one container by name or id, or null. */
export async function container(nameOrId) {
  try {
    return JSON.parse(await docker(['inspect', '--type', 'container', nameOrId]))[0];
  } catch {
    return null;
  }
}

/** True when network `name` exists. */
export async function networkExists(name) {
  return spawnSync('docker', ['network', 'inspect', name], { stdio: 'ignore', timeout: 30000 }).status === 0;
}

export { IMAGE };
