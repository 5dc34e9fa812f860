// Shutdown always works, whatever a worker is blocked on.  The backend is
// the fake that works (t/plugins/fake.c, FAKE_WORKS), whose command "hang"
// never returns and ignores cancellation: a stuck backend call.
//  - stdio, end of input: the call gets [server] shutdown_grace, is then
//    cancelled and abandoned 2 s later; the server exits 0.
//  - stdio, SIGTERM: the same without the grace.
//  - stdio, SIGTERM during the grace of an end of input: cancelled at once.
//  - HTTP, SIGTERM: within the grace period (plus the cancellation's 2 s).
//  - a second SIGTERM or SIGINT, over stdio and HTTP, ends the server at
//    once (exit status 128 + the signal), the audit rows written.
// Each server first makes a normal call, whose audit row must be there.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, rawServer, tmpdir, fakeBackendArgs, sleep } from '../lib/sg.mjs';
import { startHttp, request, initSession } from '../http/lib.mjs';

const execFileP = promisify(execFile);
const V = '2025-11-25';

t.run(async () => {
  await preflight({ docker: false });
  const fake = await fakeBackendArgs();
  const db = path.join(tmpdir(), 'state', 'sandgate', 'audit.db');
  const rows = async (marker) => {
    if (!fs.existsSync(db)) return 0;
    const { stdout } = await execFileP('sqlite3', [db, `SELECT COUNT(*) FROM audit WHERE details LIKE '%${marker}%'`]);
    return Number(stdout.trim());
  };

  /** A stdio server with one normal call done and one stuck call running. */
  async function stuckStdio(name, grace) {
    const r = await rawServer([], {}, { name, preArgs: [...fake, '--set', `server.shutdown_grace=${grace}`] });
    await r.initialize();
    await r.tool('run_command', { command: `echo ${name}` });
    r.sendRequest('tools/call', { name: 'run_command', arguments: { command: 'hang' } });
    await sleep(500);
    return r;
  }
  const exitOf = async (r, ms) => {
    const t0 = Date.now();
    try {
      const info = await r.proc.waitExit(ms);
      return { ...info, ms: Date.now() - t0 };
    } catch {
      r.kill('SIGKILL');
      await r.proc.waitExit(5000).catch(() => {});
      return { code: null, signal: 'still running', ms: Date.now() - t0 };
    }
  };

  // ---- stdio: end of input with a stuck call (grace 1 s)
  {
    const r = await stuckStdio('eof-stuck', 1);
    const t0 = Date.now();
    r.proc.child.stdin.end();
    const x = await exitOf(r, 15000);
    t.is(x.code, 0, 'stdio EOF with a stuck call: exit status 0', x);
    t.cmp(Date.now() - t0, '<', 1000 + 2000 + 1500, `within the grace (1 s) and the cancellation's 2 s (${x.ms} ms)`);
    t.like(fs.readFileSync(r.stderrPath, 'utf8'), /1 call\(s\) still running 2000 ms after their cancellation: abandoned/, 'the log says the call was abandoned');
    t.is(await rows('eof-stuck'), 1, "the earlier call's audit row is written");
  }

  // ---- stdio: SIGTERM with a stuck call (no grace for signals)
  {
    const r = await stuckStdio('term-stuck', 30);
    const t0 = Date.now();
    r.kill('SIGTERM');
    const x = await exitOf(r, 15000);
    t.is(x.code, 0, 'stdio SIGTERM with a stuck call: exit status 0', x);
    t.cmp(Date.now() - t0, '<', 2000 + 1500, `within the cancellation's 2 s (${x.ms} ms)`);
    t.is(await rows('term-stuck'), 1, "the earlier call's audit row is written");
  }

  // ---- stdio: SIGTERM during the 30 s grace of an end of input
  {
    const r = await stuckStdio('eof-then-term', 30);
    r.proc.child.stdin.end();
    await sleep(500);
    const t0 = Date.now();
    r.kill('SIGTERM');
    const x = await exitOf(r, 15000);
    t.is(x.code, 0, 'stdio EOF, then SIGTERM during the grace: exit status 0', x);
    t.cmp(Date.now() - t0, '<', 2000 + 1500, `the signal ends the grace: out within the cancellation's 2 s (${x.ms} ms)`);
  }

  // ---- stdio: a second signal ends it at once
  {
    const r = await stuckStdio('twice', 30);
    r.proc.child.stdin.end(); // the stop has begun, with a 30 s grace
    await sleep(300);
    r.kill('SIGTERM'); // the first signal: no more grace, 2 s to cancel
    await sleep(100);
    const t0 = Date.now();
    r.kill('SIGINT');
    const x = await exitOf(r, 15000);
    t.is(x.code, 128 + 2, 'stdio: a second signal (SIGINT) ends the server with status 130', x);
    t.cmp(Date.now() - t0, '<', 1200, `at once (${x.ms} ms)`);
    t.is(await rows('twice'), 1, 'the audit rows were written on the way out');
  }

  // ---- HTTP: SIGTERM with a stuck call (grace 2 s)
  const stuckHttp = async (name, grace) => {
    const srv = await startHttp({ args: fake, set: { shutdown_grace: grace } });
    const sid = await initSession(srv.url);
    const ok = await request(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_command', arguments: { command: `echo ${name}` } } }, sid, version: V });
    t.ok(ok.status === 200, `${name}: a normal call over HTTP`, ok.text);
    const hung = request(srv.url, { body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'hang' } } }, sid, version: V })
      .catch((e) => ({ error: e.message }));
    await sleep(500);
    return { srv, hung };
  };
  {
    const { srv, hung } = await stuckHttp('http-stuck', 2);
    const t0 = Date.now();
    const st = await srv.stop('SIGTERM', 20000);
    t.is(st?.code, 0, 'HTTP SIGTERM with a stuck call: exit status 0', st);
    t.cmp(Date.now() - t0, '<', 2000 + 2000 + 2000, `within the grace (2 s) and the cancellation's 2 s (${st?.ms} ms)`);
    t.like(srv.stderr(), /still running 2000 ms after their cancellation: abandoned/, 'the log says the call was abandoned');
    await hung;
    t.is(await rows('http-stuck'), 1, "the earlier call's audit row is written");
  }
  {
    const { srv, hung } = await stuckHttp('http-twice', 30);
    const first = srv.stop('SIGTERM', 20000);
    await sleep(500);
    const t0 = Date.now();
    const st = await srv.stop('SIGTERM', 10000);
    t.is(st?.code, 128 + 15, 'HTTP: a second SIGTERM during the 30 s grace ends the server with status 143', st);
    t.cmp(Date.now() - t0, '<', 1200, `at once (${Date.now() - t0} ms)`);
    await first;
    await hung;
    t.is(await rows('http-twice'), 1, 'the audit rows were written on the way out');
  }
}, { timeout: 180 });
