// A command that times out on the plain path (runner off) is killed even
// when the engine is slow.  The kill is an exec of its own; it used to share
// the command's deadline, all but spent by then (the caller is answered
// within 800 ms of the timeout), so behind an engine slower than that the
// kill's requests gave up and the command ran on in the sandbox.  Now a
// thread of docker.so does it with a deadline of its own
// (plugins/docker/killer.c) while the caller is answered on time.
import net from 'node:net';
import path from 'node:path';
import { t, preflight, sdkClient, tmpdir, containerOf, psArgs, waitFor } from '../lib/sg.mjs';

// Forwards to the engine, each request `delay` ms late (order kept).
function slowProxy(sock) {
  const p = { delay: 0, conns: new Set() };
  p.server = net.createServer((c) => {
    const up = net.connect('/var/run/docker.sock');
    p.conns.add(c); p.conns.add(up);
    c.on('data', (d) => { if (p.delay) setTimeout(() => up.write(d), p.delay); else up.write(d); });
    up.on('data', (d) => c.write(d));
    c.on('close', () => up.destroy()); up.on('close', () => c.destroy());
    c.on('error', () => {}); up.on('error', () => {});
  });
  return new Promise((r) => p.server.listen(sock, () => r(p)));
}

const sleeping = (args) => args.some((a) => a.includes('sleep 97'));

t.run(async () => {
  await preflight();
  const sock = path.join(tmpdir(), 'docker.sock');
  const proxy = await slowProxy(sock);
  t.onCleanup(() => { for (const c of proxy.conns) c.destroy(); proxy.server.close(); });
  const srv = await sdkClient(['--set', `docker.host=unix://${sock}`, '--set', 'sandbox.default_backend=docker',
    '--set', 'docker.runner=false']);
  const first = await srv.tool('run_command', { command: 'echo hi' });
  t.is(first.stdout, 'hi\n', 'the plain path answers through the proxy');
  const box = await containerOf(first.sandbox_id);
  t.ok(box, `the sandbox's container is found (${first.sandbox_id})`);

  // the command runs; then every engine request takes 1.5 s, so the kill's
  // create, start and inspect take some 4.5 s, far past the 800 ms
  const t0 = Date.now();
  const call = srv.call('run_command', { command: 'sleep 97', timeout: 3 });
  setTimeout(() => { proxy.delay = 1500; }, 1500);
  const r = await call;
  const took = (Date.now() - t0) / 1000;
  t.is(r.structuredContent?.timed_out, true, 'the command timed out', { r });
  t.ok(took < 5, `the caller is answered on time (${took} s for a 3 s timeout)`);
  t.ok(sleeping(await psArgs(box.id)), 'the command is still running when the caller has its answer');

  const gone = await waitFor(async () => !sleeping(await psArgs(box.id)), 20000, 500);
  t.ok(gone, 'the slow kill still ended it: no `sleep 97` left in the sandbox', { ps: await psArgs(box.id) });
  proxy.delay = 0;
  await srv.close();
}, { timeout: 90 });
