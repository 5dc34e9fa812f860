// engine.mjs - a second Docker engine of the test's own, for the faults that
// stop or kill the engine (t/e2e/t95xx-fault-*): the shared engine and the
// containers of other tests are never touched.
//
//   const eng = await startEngine();
//   const srv = await sdkClient(eng.args());       // --set docker.host=unix://...
//   await eng.kill(); await eng.start();           // kill -9, then a new dockerd
//   await eng.restart();                           // SIGTERM, wait, start again
//   await eng.containers()                         // every container it holds
//   const h = eng.holdResponse(/^PUT \/containers\/.*\/archive/);
//   await h.answered; ...; h.cut();                 // the engine did it, sandgate never hears
//
// sandgate talks to the engine through a small proxy on its own socket
// (eng.host), which passes every byte through unless a test holds the
// answer to one request: then the engine has done the work (an archive
// PUT has written its file) while sandgate waits, and the test decides what
// happens next (stop the engine, cut the connection).
// The engine gets its own socket, data root, exec root and pid file in a
// temp directory, and its own bridge interface: `--bridge none` must not be
// used, because dockerd then deletes the host's docker0, the default bridge
// of the shared engine.  Its containerd is started apart, as the system's
// containerd.service is: killing or stopping dockerd leaves containerd and
// the containers' shims running, and the next dockerd finds them again.
//
// Its image is not a copy of sandgate/base:1 (1.25 GB, more than a minute to
// save and load): the host's sh, bash, coreutils, findutils, procps and
// setsid with their libraries, imported under the same name, which is all
// run_command and the file tools need (sandgate-runner is static).
//
// Cleanup (however the test ends): dockerd stopped (TERM, then KILL), its
// containerd and shims killed by the pids they recorded, mounts under the
// data root undone, the directory and the bridge removed.  Needs root (the
// tests run as root in CI) and dockerd; a missing one is a "Bail out!".

import { spawn, execFile, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, sleep, IMAGE } from './sg.mjs';

const execFileP = promisify(execFile);

const BINARIES = ['sh', 'dash', 'bash', 'cat', 'echo', 'sleep', 'stat', 'chown', 'chmod', 'mv', 'rm',
  'mkdir', 'rmdir', 'ls', 'head', 'tail', 'wc', 'dd', 'sha256sum', 'base64', 'printf', 'true', 'false',
  'test', 'env', 'id', 'kill', 'ln', 'cp', 'touch', 'readlink', 'realpath', 'dirname', 'basename',
  'sync', 'timeout', 'nohup', 'yes', 'seq', 'find', 'xargs', 'ps', 'pkill', 'pgrep', 'setsid', 'uname',
  'tr', 'cut', 'sort', 'df', 'du', 'mktemp', 'tee', 'date', 'whoami', 'nproc', 'stty'];

async function run(cmd, args, opts = {}) {
  try {
    const { stdout } = await execFileP(cmd, args, { timeout: opts.timeout ?? 60000, maxBuffer: 64 << 20 });
    return stdout;
  } catch (e) {
    throw new Error(`${cmd} ${args.join(' ')}: ${(e.stderr || e.message || '').trim()}`);
  }
}

/** The real path of every binary of BINARIES and of the libraries they load. */
async function rootfsFiles() {
  const files = new Set(['/etc/passwd', '/etc/group']);
  for (const b of BINARIES) {
    const p = ['/usr/bin', '/usr/sbin'].map((d) => path.join(d, b)).find((f) => fs.existsSync(f));
    if (!p) continue;
    files.add(p);
    const out = await run('ldd', [p]).catch(() => ''); // a static binary: ldd fails
    for (const m of out.matchAll(/(\/\S+) \(0x/g)) files.add(m[1]);
  }
  return [...files];
}

/** Builds the small root filesystem in dir/rootfs; resolves its tar file. */
async function buildRootfs(dir) {
  const root = path.join(dir, 'rootfs');
  for (const d of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64', 'etc', 'tmp', 'workspace', 'proc', 'sys', 'dev', 'root']) {
    fs.mkdirSync(path.join(root, d), { recursive: true });
  }
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  for (const l of ['bin', 'sbin', 'lib', 'lib64']) fs.symlinkSync(`usr/${l}`, path.join(root, l));
  for (const f of await rootfsFiles()) {
    // a library named through /lib goes to usr/lib (merged /usr)
    const real = fs.realpathSync(f);
    const rel = (p) => p.replace(/^\/(bin|sbin|lib|lib64)\//, '/usr/$1/').slice(1);
    for (const p of new Set([f, real])) {
      const dst = path.join(root, rel(p));
      fs.mkdirSync(path.dirname(dst), { recursive: true });
      if (!fs.existsSync(dst)) fs.copyFileSync(real, dst);
      fs.chmodSync(dst, fs.statSync(real).mode & 0o7777);
    }
  }
  const tar = path.join(dir, 'rootfs.tar');
  await run('tar', ['-C', root, '-cf', tar, '.']);
  fs.rmSync(root, { recursive: true, force: true });
  return tar;
}

/** An unused bridge name and a /24 no interface of this host is in. */
function pickBridge() {
  const used = new Set();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4') used.add(a.address.split('.').slice(0, 3).join('.'));
  }
  for (;;) {
    const net = `10.${200 + crypto.randomInt(50)}.${crypto.randomInt(256)}`;
    if (!used.has(net)) return { name: `sgf${crypto.randomBytes(4).toString('hex')}`, cidr: `${net}.1/24` };
  }
}

/** GET path on the engine's socket; resolves the parsed JSON body (null on 404). */
export function engineGet(socketPath, p) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: p, method: 'GET', timeout: 20000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 404) resolve(null);
        else if (res.statusCode !== 200) reject(new Error(`GET ${p}: HTTP ${res.statusCode} ${text}`));
        else { try { resolve(JSON.parse(text)); } catch { resolve(text); } }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${p}: no answer within 20 s`)));
    req.on('error', reject);
    req.end();
  });
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

/** Starts the engine and loads the image; resolves its handle. */
export async function startEngine() {
  if (process.getuid?.() !== 0) await t.bailOut('a second Docker engine needs root: run the fault tests as root (CI does)');
  if (spawnSync('dockerd', ['--version']).status !== 0) await t.bailOut('dockerd is missing: apt-get install docker.io');
  // short: the socket path must stay under 108 bytes
  const dir = fs.mkdtempSync('/tmp/sge-');
  const sock = path.join(dir, 'd.sock');
  const br = pickBridge();
  const cdSock = path.join(dir, 'c.sock');
  const proxy = startProxy(path.join(dir, 'p.sock'), sock);
  const e = { dir, sock, host: `unix://${proxy.path}`, engineHost: `unix://${sock}`, bridge: br.name,
    child: null, exited: null, starts: 0 };
  let bridgeMade = false;
  let containerd = null;

  const startContainerd = async () => {
    fs.writeFileSync(path.join(dir, 'containerd.toml'), [
      'version = 2', `root = "${dir}/containerd"`, `state = "${dir}/cstate"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri"]', '[grpc]', `  address = "${cdSock}"`,
      '[debug]', '  level = "warn"', ''].join('\n'));
    const log = fs.openSync(path.join(dir, 'containerd.log'), 'a');
    const child = spawn('containerd', ['--config', path.join(dir, 'containerd.toml')],
      { stdio: ['ignore', log, log], detached: true });
    fs.closeSync(log);
    containerd = { child, exited: null };
    child.once('exit', (code, signal) => { containerd.exited = { code, signal }; });
    const deadline = Date.now() + 30000;
    while (!fs.existsSync(cdSock)) {
      if (containerd.exited) await t.bailOut(`the test's containerd exited (${JSON.stringify(containerd.exited)})`);
      if (Date.now() > deadline) await t.bailOut('the test\'s containerd did not listen within 30 s');
      await sleep(100);
    }
  };

  const dockerd = () => {
    e.starts++;
    const log = fs.openSync(path.join(dir, 'dockerd.log'), 'a');
    const child = spawn('dockerd', ['--host', e.engineHost, '--data-root', path.join(dir, 'data'),
      '--exec-root', path.join(dir, 'exec'), '--pidfile', path.join(dir, 'dockerd.pid'),
      '--containerd', cdSock,
      '--bridge', br.name, '--iptables=false', '--ip-masq=false', '--ip-forward=false',
      '--storage-driver', 'overlay2', '--log-level', 'warn'],
    { stdio: ['ignore', log, log], detached: true });
    fs.closeSync(log);
    const h = { child, exited: null };
    h.done = new Promise((r) => child.once('exit', (code, signal) => { h.exited = { code, signal }; r(h.exited); }));
    e.child = h;
    return h;
  };

  /** Waits until the engine answers (or bails out with its log). */
  const ready = async (h) => {
    const deadline = Date.now() + 60000;
    for (;;) {
      try { if (await engineGet(sock, '/_ping') === 'OK') break; } catch { /* not yet */ }
      if (h.exited) await t.bailOut(`the test's dockerd exited (${JSON.stringify(h.exited)}): ${e.log().split('\n').slice(-5).join(' ')}`);
      if (Date.now() > deadline) await t.bailOut(`the test's dockerd did not answer within 60 s: ${e.log().split('\n').slice(-5).join(' ')}`);
      await sleep(200);
    }
  };

  e.log = () => { try { return fs.readFileSync(path.join(dir, 'dockerd.log'), 'utf8'); } catch { return ''; } };
  e.args = (extra = []) => ['--set', `docker.host=${e.host}`, ...extra];
  e.docker = (args, opts) => run('docker', ['-H', e.engineHost, ...args], opts);
  e.holdResponse = (re) => proxy.hold(re);
  /** Resolves when sandgate starts a request matching re (passed through). */
  e.whenRequest = (re) => proxy.hold(re, true).answered;
  /** The requests sandgate made so far ("METHOD /path"). */
  e.requests = () => proxy.seen;
  e.get = (p) => engineGet(sock, p);
  e.pid = () => e.child?.child.pid;
  /** Starts dockerd (after a kill or a stop) and waits for it. */
  e.start = async () => { const h = dockerd(); await ready(h); await proxy.listen(); };
  /** kill -9 of dockerd (its containerd and the containers live on). */
  e.kill = async () => {
    const h = e.child;
    if (!h || h.exited) return;
    proxy.unlisten();
    h.child.kill('SIGKILL');
    await h.done;
  };
  /** SIGTERM of dockerd, as `systemctl stop docker` does; waits for the exit. */
  e.stop = async (ms = 60000) => {
    const h = e.child;
    if (!h || h.exited) return;
    proxy.unlisten();
    h.child.kill('SIGTERM');
    let timer;
    const r = await Promise.race([h.done, new Promise((res) => { timer = setTimeout(() => res(null), ms); })]);
    clearTimeout(timer);
    if (!r) { h.child.kill('SIGKILL'); await h.done; }
  };
  e.restart = async () => { await e.stop(); await e.start(); };
  /** Every container of the engine, as the API lists them (all states). */
  e.containers = async () => (await e.get('/containers/json?all=1')) ?? [];
  /** The exec instances of container id that are still running. */
  e.runningExecs = async (id) => runningExecs(sock, id);

  t.onFailure(() => t.diag(`the test's dockerd log (${dir}/dockerd.log):\n${e.log().split('\n').slice(-20).join('\n')}`));
  t.onCleanup(async () => {
    proxy.close();
    await e.stop(30000).catch(() => {});
    // containerd outlives dockerd; its shims hold the containers' processes
    const shims = spawnSync('pgrep', ['-f', '--', `-address ${cdSock}`], { encoding: 'utf8' }).stdout
      .split('\n').map(Number).filter((n) => n > 1);
    const pids = [...shims, containerd && !containerd.exited ? containerd.child.pid : null].filter(Boolean);
    for (const pid of pids) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
    for (let i = 0; i < 50 && pids.some(alive); i++) await sleep(100);
    const mounts = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1])
      .filter((m) => m && m.startsWith(`${dir}/`)).sort((a, b) => b.length - a.length);
    for (const m of mounts) spawnSync('umount', ['-l', m]);
    fs.rmSync(dir, { recursive: true, force: true });
    if (bridgeMade) spawnSync('ip', ['link', 'del', br.name]);
  });

  await run('ip', ['link', 'add', br.name, 'type', 'bridge']);
  bridgeMade = true;
  await run('ip', ['addr', 'add', br.cidr, 'dev', br.name]);
  await run('ip', ['link', 'set', br.name, 'up']);
  const t0 = Date.now();
  // the root filesystem is built while the engine starts
  const [tar] = await Promise.all([buildRootfs(dir), (async () => { await startContainerd(); await e.start(); })()]);
  await run('docker', ['-H', e.engineHost, 'import', '-c', 'WORKDIR /workspace',
    '-c', 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8',
    '-c', 'CMD ["/bin/sleep","infinity"]', tar, IMAGE]);
  fs.rmSync(tar, { force: true });
  t.diag(`a second Docker engine on ${e.engineHost} (pid ${e.pid()}, bridge ${br.name} ${br.cidr}), `
    + `${IMAGE} imported from the host's tools, in ${Date.now() - t0} ms`);
  return e;
}

/** The exec instances of container id that still run, on the engine at socketPath. */
export async function runningExecs(socketPath, id) {
  const c = await engineGet(socketPath, `/containers/${id}/json`);
  const out = [];
  for (const x of c?.ExecIDs ?? []) {
    const ex = await engineGet(socketPath, `/exec/${x}/json`).catch(() => null);
    if (ex?.Running) out.push({ id: x, cmd: [ex.ProcessConfig?.entrypoint, ...(ex.ProcessConfig?.arguments ?? [])].join(' ') });
  }
  return out;
}

/**
 * A byte-for-byte proxy from listenPath to the engine's socket.  hold(re)
 * arms a one-shot hold: the first request whose "METHOD /path" matches re
 * goes to the engine, but its answer is kept from the client; `answered`
 * resolves once the engine started answering, cut() closes the client's
 * connection without a byte of it.
 */
function startProxy(listenPath, upstream) {
  const holds = [];
  const seen = [];
  const socks = new Set();
  let server = null;
  const onConnection = (client) => {
    const up = net.connect(upstream);
    socks.add(client);
    socks.add(up);
    let held = null;
    client.on('data', (d) => {
      const m = /^([A-Z]+) (\S+) HTTP\/1\.[01]\r\n/.exec(d.toString('latin1', 0, Math.min(d.length, 4096)));
      if (m) {
        const req = `${m[1]} ${m[2]}`;
        seen.push(req);
        const i = holds.findIndex((h) => h.re.test(req));
        if (i >= 0) {
          const h = holds.splice(i, 1)[0];
          h.client = client;
          h.request = req;
          if (h.watchOnly) h.got(); else held = h;
        }
      }
      up.write(d);
    });
    up.on('data', (d) => {
      if (held) { held.got(); return; }
      client.write(d);
    });
    const end = () => { client.destroy(); up.destroy(); socks.delete(client); socks.delete(up); };
    up.on('error', end);
    client.on('error', end);
    up.on('close', () => { if (!held) end(); });
    client.on('close', end);
  };
  return {
    path: listenPath,
    seen,
    /** Accepts connections (the engine is up). */
    listen() {
      fs.rmSync(listenPath, { force: true });
      server = net.createServer(onConnection);
      return new Promise((resolve, reject) => { server.once('error', reject); server.listen(listenPath, resolve); });
    },
    /** Refuses new connections as a dead engine's socket does; open ones stay. */
    unlisten() {
      server?.close();
      server = null;
      fs.rmSync(listenPath, { force: true });
    },
    hold(re, watchOnly = false) {
      const h = { re, watchOnly };
      h.answered = new Promise((resolve) => { h.got = () => { h.got = () => {}; resolve(h.request); }; });
      h.cut = () => h.client?.destroy();
      holds.push(h);
      return h;
    },
    close() { server?.close(); server = null; for (const s of socks) s.destroy(); },
  };
}
