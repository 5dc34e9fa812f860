// The audit writer writes rows in batches (one transaction per window of at
// most 100 ms) and loses none on a clean stop: stdin EOF right after 50 calls
// answered back to back, SIGTERM over stdio and over HTTP right after a call,
// and `sandgate call` (which wrote no row at all before) each leave every
// row in the database.  A crash (SIGKILL) loses at most the last window: a
// row whose call ended 300 ms before is there.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, runCli, tmpdir, fakeBackendArgs, sleep } from '../lib/sg.mjs';
import { startHttp, connect } from '../http/lib.mjs';

const execFileP = promisify(execFile);

t.run(async () => {
  await preflight({ docker: false });
  const fake = await fakeBackendArgs();
  const db = path.join(tmpdir(), 'state', 'sandgate', 'audit.db');
  const count = async (marker) => {
    if (!fs.existsSync(db)) return 0;
    const { stdout } = await execFileP('sqlite3', [db, `SELECT COUNT(*) FROM audit WHERE details LIKE '%${marker}%'`]);
    return Number(stdout.trim());
  };

  // ---- stdin EOF right after 50 calls
  const a = await sdkClient(fake, {}, { name: 'eof' });
  for (let i = 0; i < 50; i++) await a.tool('run_command', { command: `echo eof-${i}` });
  await a.close(5000);
  t.is(await count('eof-'), 50, 'stdin EOF right after the last reply: all 50 rows are written');

  // ---- SIGTERM (stdio) right after a call
  const b = await sdkClient(fake, {}, { name: 'sigterm' });
  await b.tool('run_command', { command: 'echo term-1' });
  b.proc.killNow('SIGTERM');
  const bx = await b.proc.waitExit(10000);
  t.is(bx.code, 0, 'stdio: SIGTERM ends the server with status 0', bx);
  t.is(await count('term-1'), 1, 'stdio: the row of the call just before SIGTERM is written');

  // ---- SIGKILL 300 ms after a call: the window (100 ms) has passed
  const c = await sdkClient(fake, {}, { name: 'sigkill' });
  await c.tool('run_command', { command: 'echo kill-1' });
  await sleep(300);
  c.proc.killNow('SIGKILL');
  await c.proc.waitExit(10000);
  t.is(await count('kill-1'), 1, 'a crash 300 ms after the call loses nothing: the batch window is at most 100 ms');

  // ---- HTTP: SIGTERM right after a call
  const srv = await startHttp({ args: fake });
  const h = await connect(srv.url, { quiet: true });
  await h.tool('run_command', { command: 'echo http-1' });
  const st = await srv.stop('SIGTERM', 20000);
  t.is(st?.code, 0, 'HTTP: SIGTERM ends the server with status 0', st);
  t.is(await count('http-1'), 1, 'HTTP: the row of the call just before SIGTERM is written');
  await h.close();

  // ---- sandgate call
  const r = await runCli([...fake, 'call', 'run_command', JSON.stringify({ command: 'echo call-1' })]);
  t.is(r.code, 0, 'sandgate call exits 0', { stderr: r.stderr.slice(-600) });
  t.is(await count('call-1'), 1, 'sandgate call writes its row like a session');
}, { timeout: 120 });
