// The runner's direct channel on a local engine (plugins/docker/channel.c):
// the runner speaks on a socket sandgate listens on, bind-mounted read-only
// into its own sandbox, instead of through the engine's relay.  A process in
// the sandbox that connects first, with a wrong token, a fake HELLO or
// nothing at all, is dropped and does not keep the runner out; the channel's
// directory goes with its sandbox, and one whose container is gone without
// sandgate is swept by the next server; with [docker] runner_channel = false,
// for a sandbox that could remount it writable (CAP_SYS_ADMIN), or under a
// state directory others may write, the runner speaks through the engine
// and the sandbox has no such mount.
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { t, preflight, sdkClient, containerOf, psArgs, docker, tmpdir, waitFor, sleep } from '../lib/sg.mjs';

// The runner is what this test is about: on even in `make check-fallback`.
const RUNNER_ON = { SANDGATE_DOCKER_RUNNER: 'true' };
const execFileP = (cmd, args, opts = {}) => new Promise((resolve, reject) => {
  const c = execFile(cmd, args, { timeout: 120000 }, (e, out) => (e ? reject(e) : resolve(out)));
  if (opts.input !== undefined) c.stdin.end(opts.input);
});
const DEBUG = ['--set', 'log.level=debug'];
const isRunner = (p) => /\.sandgate-runner-[0-9a-f]{16} --stdio/.test(p);
const DIALS = / --stdio --dial \/run\/sandgate\/runner\.sock$/;
const logLines = (srv, re) => fs.readFileSync(srv.stderrPath, 'utf8').split('\n').filter((l) => re.test(l));
const ON_CHANNEL = /\[docker\] runner in [0-9a-f]{12}: on its channel$/;
const ON_EXEC = /\[docker\] runner in [0-9a-f]{12}: on the exec stream$/;
const chanRoot = () => path.join(tmpdir(), 'state', 'sandgate', 'runner-chan');

// Connects as fast as it can while sandgate listens: every third connection
// sends a wrong token and a fake HELLO, every third a wrong token only, and
// the others say nothing and stay open (up to 16 held at once).
const HOSTILE = `
import socket, time
n = 0; held = []
open('/tmp/hostile.up', 'w').write('1')
end = time.time() + 90
while time.time() < end:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect('/run/sandgate/runner.sock')
    except OSError:
        time.sleep(0.001)
        continue
    n += 1
    open('/tmp/hostile.n', 'w').write(str(n))
    if n % 3 == 0:
        s.sendall(b'0' * 64 + b'\\n' + bytes(16))
    elif n % 3 == 1:
        s.sendall(b'f' * 64 + b'\\n')
    held.append(s)
    if len(held) > 16:
        held.pop(0).close()
`;

t.run(async () => {
  await preflight();
  // leftovers of containers removed behind sandgate's back: one old, one
  // young (a create may be on its way: kept)
  const root = chanRoot();
  fs.mkdirSync(root, { recursive: true, mode: 0o700 });
  fs.chmodSync(root, 0o700);
  const stale = path.join(root, 'a'.repeat(32)), young = path.join(root, 'b'.repeat(32));
  for (const d of [stale, young]) {
    fs.mkdirSync(d, { mode: 0o711 });
    fs.writeFileSync(path.join(d, 'runner.sock'), '');
  }
  const hourAgo = new Date(Date.now() - 3600e3);
  fs.utimesSync(stale, hourAgo, hourAgo);

  const srv = await sdkClient(DEBUG, RUNNER_ON);
  const one = await srv.tool('run_command', { command: 'echo one' });
  t.ok(!fs.existsSync(stale), 'an old channel directory no container names is swept');
  t.ok(fs.existsSync(young), 'a young one is kept');
  fs.rmSync(young, { recursive: true });
  t.is(one.stdout, 'one\n', 'a command runs');
  const c = await containerOf(one.sandbox_id);
  const runners = (await psArgs(c.id)).filter(isRunner);
  t.is(runners.length, 1, 'one runner runs in the container');
  t.like(runners[0] ?? '', DIALS, 'started to dial the channel', { runners });
  await sleep(200);
  t.is(logLines(srv, ON_CHANNEL).length, 1, 'and it speaks on its channel (the log says so)');

  // inside: read-only, and no socket once the runner is on it
  const ro = await srv.tool('run_command', {
    command: 'touch /run/sandgate/x 2>&1; echo "entries $(ls -A /run/sandgate | wc -l)"',
    sandbox_id: one.sandbox_id,
  });
  t.like(ro.stdout, /Read-only file system/, 'the channel directory is read-only in the sandbox', { out: ro.stdout });
  t.like(ro.stdout, /entries 0\n$/, 'and holds no socket once the runner is connected');

  // on the host: one directory of the sandbox's own, 0711, under a 0700 root
  t.is((fs.statSync(root).mode & 0o777).toString(8), '700', 'the channels\' root is 0700');
  const dirs = fs.readdirSync(root);
  t.is(dirs.length, 1, 'one channel directory: the sandbox\'s', { dirs });
  t.like(dirs[0] ?? '', /^[0-9a-f]{32}$/, 'named by 32 random hex digits');
  t.is(c.labels['org.sandgate.runner_chan'], dirs[0], 'the container\'s label names it');
  t.is((fs.statSync(path.join(root, dirs[0])).mode & 0o777).toString(8), '711', 'the directory is 0711');

  // a hostile process in the sandbox connects first while a new runner starts
  await docker(['exec', '-d', c.id, 'python3', '-c', HOSTILE]);
  const up = await waitFor(async () => (await docker(['exec', c.id, 'cat', '/tmp/hostile.up']).catch(() => '')) === '1', 20000);
  t.ok(up, 'the hostile connector runs in the sandbox');
  for (let i = 1; i <= 3; i++) {
    await docker(['exec', c.id, 'pkill', '-KILL', '-f', 'sandgate-runner']);
    await waitFor(async () => !(await psArgs(c.id)).some(isRunner), 5000);
    const r = await srv.tool('run_command', { command: `echo again${i}`, sandbox_id: one.sandbox_id });
    t.is(r.stdout, `again${i}\n`, `restart ${i}: the next command runs`);
  }
  const n = Number(await docker(['exec', c.id, 'cat', '/tmp/hostile.n']).catch(() => '0'));
  t.ok(n >= 3, 'the hostile process did connect to the channel while sandgate listened', { n });
  await sleep(200);
  t.is(logLines(srv, ON_CHANNEL).length, 4, 'and every new runner still came on its channel', { exec: logLines(srv, ON_EXEC) });
  t.is((await psArgs(c.id)).filter(isRunner).length, 1, 'one runner is left');
  const files = await srv.tool('write_file', { path: '/workspace/ch.txt', content: 'through the channel', sandbox_id: one.sandbox_id });
  t.ok(!files.isError, 'file tools work on it');
  const back = await srv.tool('read_file', { path: '/workspace/ch.txt', sandbox_id: one.sandbox_id });
  t.is(back.content, 'through the channel', 'and read back exactly');

  // the directory goes with the sandbox
  await srv.tool('kill_sandbox', { sandbox_id: one.sandbox_id });
  t.deepEqual(fs.readdirSync(root), [], 'kill_sandbox removes the channel directory');
  await srv.close();

  // no channel: runner_channel = false; a sandbox that could remount it
  // writable; a state directory others may write (they could swap the root)
  const loose = path.join(tmpdir(), 'loose-state');
  fs.mkdirSync(loose, { mode: 0o777 });
  fs.chmodSync(loose, 0o777);
  const cases = [
    ['runner_channel = false', ['--set', 'docker.runner_channel=false'], {}, /runner channel: off \(\[docker\] runner_channel\)/],
    ['cap_add SYS_ADMIN', ['--set', 'docker.cap_add=SYS_ADMIN'], {}, null],
    ['a state directory others may write', [], { XDG_STATE_HOME: loose }, /runner channel: off \(.*loose-state is a link, another user's, or writable by others\)/],
  ];
  for (const [what, args, env, says] of cases) {
    const off = await sdkClient([...DEBUG, ...args], { ...RUNNER_ON, ...env });
    const o = await off.tool('run_command', { command: 'test -e /run/sandgate && echo there || echo absent' });
    t.is(o.stdout, 'absent\n', `${what}: the sandbox has no channel mount`);
    const oc = await containerOf(o.sandbox_id);
    const orun = (await psArgs(oc.id)).filter(isRunner);
    t.ok(orun.length === 1 && !DIALS.test(orun[0]), `${what}: its runner does not dial`, { orun });
    await sleep(200);
    t.is(logLines(off, ON_EXEC).length, 1, `${what}: it speaks through the engine`);
    t.is(oc.labels['org.sandgate.runner_chan'], undefined, `${what}: the container has no channel label`);
    if (says) t.is(logLines(off, says).length, 1, `${what}: the log says why`);
    await off.tool('kill_sandbox', { sandbox_id: o.sandbox_id });
    await off.close();
  }

  // an image's LABEL is in a container's labels too: it never names a
  // channel the container does not bind (here another sandbox's, made up)
  const other = path.join(root, 'c'.repeat(32));
  fs.mkdirSync(other, { mode: 0o711 });
  fs.writeFileSync(path.join(other, 'runner.sock'), 'not ours to touch');
  const img = 'sandgate-test/chanlabel:1';
  await execFileP('docker', ['build', '-q', '-t', img, '-'], {
    input: `FROM sandgate/base:1\nLABEL org.sandgate.runner_chan=${'c'.repeat(32)}\n` });
  t.onCleanup(() => execFileP('docker', ['rmi', '-f', img]).catch(() => {}));
  const lab = await sdkClient([...DEBUG, '--set', `docker.template.labelled=${img}`,
    '--set', 'docker.runner_channel=false'], RUNNER_ON);
  const lb = await lab.tool('create_sandbox', { template: 'labelled' });
  const lr = await lab.tool('run_command', { command: 'echo labelled', sandbox_id: lb.sandbox_id });
  t.is(lr.stdout, 'labelled\n', 'a sandbox whose image carries the channel label runs');
  await lab.tool('kill_sandbox', { sandbox_id: lb.sandbox_id });
  await lab.close();
  t.is(fs.readFileSync(path.join(other, 'runner.sock'), 'utf8'), 'not ours to touch',
    'the directory its label names is left alone: socket kept, directory not removed');
  fs.rmSync(other, { recursive: true });
}, { timeout: 240 });
