// A frozen Docker engine (a socket proxy that accepts and never answers)
// gives a timeout error naming [docker] api_timeout instead of a hang, and a
// command's own timeout holds within a second whatever the engine does, on
// the plain path and through the runner (whose client answers the caller
// RNC_ANSWER_MS after the timeout when the runner has not said the end).
import net from 'node:net';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, tmpdir } from '../lib/sg.mjs';

function frozenProxy(sock) {
  const p = { frozen: false, conns: new Set() };
  p.server = net.createServer((c) => {
    const up = net.connect('/var/run/docker.sock');
    p.conns.add(c); p.conns.add(up);
    c.on('data', (d) => { if (!p.frozen) up.write(d); });
    up.on('data', (d) => { if (!p.frozen) c.write(d); });
    c.on('close', () => up.destroy()); up.on('close', () => c.destroy());
    c.on('error', () => {}); up.on('error', () => {});
  });
  return new Promise((r) => p.server.listen(sock, () => r(p)));
}

t.run(async () => {
  await preflight();
  const sock = path.join(tmpdir(), 'docker.sock');
  const proxy = await frozenProxy(sock);
  t.onCleanup(() => { for (const c of proxy.conns) c.destroy(); proxy.server.close(); });
  for (const runner of ['false', 'true']) {
    const srv = await sdkClient(['--set', `docker.host=unix://${sock}`, '--set', 'docker.api_timeout=8',
      '--set', 'sandbox.default_backend=docker', '--set', `docker.runner=${runner}`]);
    const ok = await srv.tool('run_command', { command: 'echo hi' });
    t.is(ok.stdout, 'hi\n', `runner=${runner}: through the proxy the engine answers`);

    // frozen in the middle of a command: its 3 s timeout holds within a second
    let t0 = Date.now();
    const mid = srv.call('run_command', { command: 'sleep 20', timeout: 3 });
    setTimeout(() => { proxy.frozen = true; }, 1000);
    let r = await mid;
    let took = (Date.now() - t0) / 1000;
    // both paths answer within a second of the timeout (4.5 s: the slack of a
    // loaded machine); the clean-up of the frozen backend goes on after the reply
    const bound = 4.5;
    t.ok(took < bound, `runner=${runner}: frozen mid-command, the 3 s timeout answers in ${took} s (< ${bound})`, { r });
    t.ok(!r.isError && r.structuredContent?.timed_out === true, `runner=${runner}: ... as a timed-out result`, { r });

    if (runner === 'true') { // a new runner would start next: the plain path is checked above
      proxy.frozen = false;
      await srv.close();
      break;
    }
    t0 = Date.now();
    r = await srv.call('run_command', { command: 'echo x', timeout: 30 });
    took = (Date.now() - t0) / 1000;
    t.ok(r.isError, `runner=${runner}: a frozen engine is an error`, { r });
    t.like(errorText(r), /\[docker\] api_timeout/, 'naming [docker] api_timeout', { text: errorText(r) });
    t.ok(took < 9.5, `it comes by api_timeout 8 s (${took} s)`);

    t0 = Date.now();
    r = await srv.call('run_command', { command: 'echo x', timeout: 2 });
    took = (Date.now() - t0) / 1000;
    t.ok(r.isError && took < 3, `a 2 s command timeout holds within a second (${took} s)`, { r });
    t.like(errorText(r), /\[docker\] api_timeout/, 'naming [docker] api_timeout', { text: errorText(r) });

    proxy.frozen = false;
    await srv.close();
  }
}, { timeout: 60 });
