// Fault: the stdio client goes away mid-call (its end of stdin closes),
// on docker, ssh and fc (doc/faults.md).  sandgate gives the calls in flight
// [server] shutdown_grace (1 s and the default 10 s here), then cancels
// them: the command is killed, the session's sandbox destroyed, and it
// exits with status 0.
//   a call shorter than the grace finishes first (its response is written
//   to a client that may be gone: no crash);
//   a call longer than the grace is cancelled: no response, no process.
// Every time: no sanitizer report, no process, no sandbox left.
import { t, preflight, rawServer, waitFor, sleep } from '../lib/sg.mjs';
import { backendFixture } from '../lib/faults.mjs';

t.run(async () => {
  await preflight();
  let marker = 3180;
  for (const backend of ['docker', 'ssh', 'fc']) {
    const fx = await backendFixture(backend);
    for (const [what, seconds, grace] of [['longer than the grace', null, 1], ['shorter than the grace', 0.3, 10]]) {
      marker++;
      const label = `${backend}, a call ${what}`;
      const srv = await rawServer(fx.args(['--set', `server.shutdown_grace=${grace}`]), fx.env(), { name: label });
      await srv.initialize();
      const made = await srv.tool('create_sandbox', {});
      const sid = made.sandbox_id;
      await srv.tool('run_command', { command: 'true' }); // the runner is up
      const cmd = seconds === null ? `sleep ${marker}` : `sleep ${seconds}; echo done ${marker}`;
      const id = srv.sendRequest('tools/call', { name: 'run_command', arguments: { command: cmd } });
      const re = seconds === null ? new RegExp(`^sleep ${marker}$`) : /^sleep 0\.3$/;
      if (seconds === null) t.ok(await waitFor(async () => (await fx.procs(sid, re)).length > 0, 15000), `${label}: the command runs`);
      const t0 = Date.now();
      const { code, signal } = await srv.close(20000);
      t.ok(code === 0 && signal === null, `${label}: stdin EOF: exit status 0 (${Date.now() - t0} ms)`);
      const resp = srv.messages().find((m) => m.id === id);
      if (seconds === null) t.ok(!resp, `${label}: the cancelled call got no response`, { resp });
      else t.ok(resp?.result?.structuredContent?.stdout === `done ${marker}\n`, `${label}: the call finished and its response was written`, { resp });
      await fx.noProcess(sid, re, label);
      await fx.noMachineOf(srv.pid, label);
    }
    if (backend === 'ssh') {
      const left = await waitFor(async () => { const l = await fx.runners(); return l.length ? null : l; }, 5000);
      t.ok(left !== null, 'ssh: no runner is left', left === null ? { left: await fx.runners() } : undefined);
    }
    await sleep(0);
  }
}, { timeout: 240 });
