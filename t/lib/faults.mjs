// faults.mjs - what every fault test (t/e2e/t95xx-fault-*) checks after its
// fault, on each backend it applies to: the machine, its processes and its
// files as seen from outside sandgate (docker CLI and Engine API, the SSH
// "remote" which is this host, the FC emulator's state and its sandbox roots).
//
//   const fx = await backendFixture('ssh');          // starts sshd / the emulator
//   const srv = await sdkClient(fx.args(), fx.env());
//   ... the fault ...
//   await fx.noProcess('sleep 3171', 'label');       // nothing of the command left
//   await fx.noTemp(sid, dir, 'label');              // no half-written file
//   await fx.noMachineOf(srv.pid, 'label');          // every machine of that sandgate gone
//
// Marker commands are `sleep N` with an N no other test uses, so a process
// left behind is found by its command line wherever it runs.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, containersOfServer, containerOf, docker, waitFor } from './sg.mjs';
import { runningExecs } from './engine.mjs';

const execFileP = promisify(execFile);

/** Command lines of this host's processes that match re (ps -eo args; never ps itself). */
export async function hostProcs(re) {
  const { stdout } = await execFileP('ps', ['-eo', 'args='], { maxBuffer: 16 << 20 });
  return stdout.split('\n').map((l) => l.trim()).filter((l) => l && re.test(l) && !/^ps -eo/.test(l));
}

/** Names in a listing that are sandgate's temporary files (docker, ssh and fc forms). */
export function tempNames(names) {
  // the archive path's, SFTP's, and the runner's (.sg-PID-ID-SEQ.tmp, plugins/runner/files.c)
  return names.filter((n) => /\.sg-[0-9a-f]{16}$|^\.sandgate-[0-9a-f]+\.tmp$|\.sandgate-[0-9a-f]+\.tmp$|^\.sg-\d+-\d+-\d+\.tmp$/.test(n));
}

/**
 * Starts what backend `name` needs and returns its probes.  opts.engine: a
 * second Docker engine (t/lib/engine.mjs) instead of the shared one.
 */
export async function backendFixture(name, opts = {}) {
  if (name === 'docker') return dockerFixture(opts.engine);
  if (name === 'ssh') return sshFixture(opts);
  if (name === 'fc') return fcFixture(opts);
  throw new Error(`no fault fixture for backend ${name}`);
}

function common(fx) {
  /** Asserts no process whose command line matches re is left (waits up to ms). */
  fx.noProcess = async (sid, re, label, ms = 5000) => {
    const left = await waitFor(async () => { const l = await fx.procs(sid, re); return l.length ? null : l; }, ms);
    return t.ok(left !== null, `${label}: no process matching ${re} is left`, left === null ? { left: await fx.procs(sid, re) } : undefined);
  };
  /** Asserts dir in the sandbox holds no temporary file of sandgate's. */
  fx.noTemp = async (sid, dir, label) => {
    const names = await fx.list(sid, dir);
    return t.deepEqual(tempNames(names), [], `${label}: no temporary file left in ${dir}`);
  };
  /** Asserts every machine sandgate `pid` made is gone (waits up to ms). */
  fx.noMachineOf = async (pid, label, ms = 10000) => {
    const gone = await waitFor(async () => (await fx.machinesOf(pid)).length === 0, ms, 500);
    return t.ok(gone, `${label}: no sandbox of sandgate pid ${pid} is left`, gone ? undefined : { left: await fx.machinesOf(pid) });
  };
  return fx;
}

function dockerFixture(engine) {
  const sock = engine ? engine.sock : '/var/run/docker.sock';
  const host = `unix://${sock}`;
  const dk = engine ? (args) => engine.docker(args) : (args) => docker(args, { timeout: 30000 });
  const fx = {
    name: 'docker',
    args: (extra = []) => (engine ? engine.args(extra) : extra),
    env: (extra = {}) => extra,
    /** The workspace of a new sandbox. */
    workspace: '/workspace',
    async containerId(sid) {
      if (engine) return sid;
      return (await containerOf(sid))?.id ?? sid;
    },
    async procs(sid, re) {
      let out = '';
      try { out = await dk(['exec', await fx.containerId(sid), 'ps', '-eo', 'args']); } catch { return []; }
      return out.split('\n').slice(1).map((l) => l.trim()).filter((l) => re.test(l) && !/^ps /.test(l));
    },
    // docker cp reads a stopped container too (an engine restart stops them)
    async list(sid, dir) {
      const { stdout } = await execFileP('sh', ['-c', 'docker -H "$1" cp "$2:$3/." - | tar -t', 'sh', host,
        await fx.containerId(sid), dir], { maxBuffer: 64 << 20 });
      return [...new Set(stdout.split('\n').map((l) => l.replace(/^\.\//, '').split('/')[0]).filter((n) => n && n !== '.'))];
    },
    async read(sid, file) {
      try {
        return (await execFileP('sh', ['-c', 'docker -H "$1" cp "$2:$3" - | tar -xO', 'sh', host,
          await fx.containerId(sid), file], { maxBuffer: 64 << 20 })).stdout;
      } catch { return null; }
    },
    async machinesOf(pid) {
      if (!engine) return (await containersOfServer(pid)).map((c) => c.id);
      return (await engine.containers()).filter((c) => (c.Labels?.['org.sandgate.owner'] ?? '').split(':')[1] === String(pid))
        .map((c) => c.Id);
    },
    /** Running exec instances of the sandbox's container besides its runner. */
    async execs(sid) {
      return (await runningExecs(sock, await fx.containerId(sid))).filter((x) => !/sandgate-runner/.test(x.cmd));
    },
  };
  return common(fx);
}

async function sshFixture(opts) {
  const { startSshd, sshArgs, sshEnv, sshPreflight } = await import('../ssh/sshd.mjs');
  await sshPreflight();
  const s = await startSshd(opts.sshd ?? {});
  const fx = {
    name: 'ssh',
    sshd: s,
    args: (extra = []) => [...sshArgs(s), ...extra],
    env: (extra = {}) => sshEnv(extra),
    workspace: null, // per sandbox: the create result says
    async procs(_sid, re) { return hostProcs(re); },
    async list(_sid, dir) { return fs.readdirSync(dir); },
    async read(_sid, file) { try { return fs.readFileSync(file, 'utf8'); } catch { return null; } },
    /** The sandboxes' directories under the fixture's [ssh] root (all of them: one sandgate per fixture). */
    async machinesOf() { return fs.existsSync(s.root) ? fs.readdirSync(s.root).filter((n) => !n.startsWith('.')) : []; },
    async execs() { return []; },
    /** sandgate-runner processes this sshd's sessions started. */
    async runners() { return hostProcs(new RegExp(`${s.dir}/.*sandgate-runner`)); },
  };
  return common(fx);
}

async function fcFixture(opts) {
  const { startEmulator } = await import('../fc/emu.mjs');
  const emu = await startEmulator(opts.emulator ?? {});
  const sbx = async (sid) => (await emu.state()).sandboxes.find((x) => x.id === sid);
  const hostPath = async (sid, p) => path.join((await sbx(sid)).root, p);
  const fx = {
    name: 'fc',
    emu,
    args: (extra = []) => emu.args(extra),
    env: (extra = {}) => emu.env(extra),
    workspace: '/home/user',
    async procs(_sid, re) { return hostProcs(re); },
    async list(sid, dir) { return fs.readdirSync(await hostPath(sid, dir)); },
    async read(sid, file) { try { return fs.readFileSync(await hostPath(sid, file), 'utf8'); } catch { return null; } },
    async machinesOf() { return (await emu.state()).sandboxes.map((x) => x.id); },
    async execs(sid) { return (await sbx(sid))?.procs ?? []; },
  };
  return common(fx);
}
