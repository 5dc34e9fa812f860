// Fault: sshd killed mid-call (SIGKILL of sshd and its connections), then
// restarted on the same port (doc/faults.md).  With the runner and with
// plain exec ([ssh] runner = false):
//   1. during run_command: the call fails saying the connection dropped
//      while the command ran; the command does not outlive its
//      connection; once sshd is back the next call reconnects, same
//      sandbox, files kept.
//   2. during a large write_file: the call fails; the file keeps its old
//      content; the temporary file is gone once a call reaches the host
//      again.
// Every time: no sanitizer report, no process of the command, and at the
// session's end no sandbox directory and no runner left.
import { t, preflight, sdkClient, errorText, waitFor } from '../lib/sg.mjs';
import { backendFixture, tempNames } from '../lib/faults.mjs';
import fs from 'node:fs';
import path from 'node:path';

t.run(async () => {
  await preflight({ docker: false });
  const fx = await backendFixture('ssh');
  const s = fx.sshd;
  for (const [mode, runner] of [['runner', 'true'], ['plain exec', 'false']]) {
    const srv = await sdkClient(fx.args(['--set', `ssh.runner=${runner}`]), fx.env(), { name: mode });
    const sb = await srv.tool('create_sandbox', {});
    const sid = sb.sandbox_id;
    const keep = path.join(sb.workspace, 'keep.txt');
    await srv.tool('write_file', { path: 'keep.txt', content: 'old content' });

    // ---- 1. during run_command
    const marker = runner === 'true' ? 3172 : 3173;
    const running = srv.call('run_command', { command: `echo started; sleep ${marker}; echo never` });
    const re = new RegExp(`^sleep ${marker}$`);
    t.ok(await waitFor(async () => (await fx.procs(sid, re)).length > 0, 15000), `${mode}: the command runs`);
    await s.kill();
    const cut = await running;
    t.ok(cut.isError && /dropped while the command ran|ended while the command ran/.test(errorText(cut)),
      `${mode}: sshd killed: the call fails saying the connection dropped while the command ran`, { text: errorText(cut) });
    await fx.noProcess(sid, re, `${mode}, sshd killed during run_command`);
    await s.restart();
    const back = await srv.call('run_command', { command: 'cat keep.txt' });
    t.ok(!back.isError && back.structuredContent?.stdout === 'old content' && back.structuredContent?.sandbox_id === sid,
      `${mode}: after the restart the next call works in the same sandbox`, { text: errorText(back) });

    // ---- 2. during a large write_file
    const w = srv.call('write_file', { path: 'keep.txt', content: 'N'.repeat(32 << 20) });
    const started = await waitFor(() => tempNames(fs.readdirSync(sb.workspace)).length > 0, 20000, 20);
    t.ok(started, `${mode}: the upload began (its temporary file exists)`);
    await s.kill();
    const wr = await w;
    t.ok(wr.isError, `${mode}: sshd killed during write_file: the call fails`, { text: errorText(wr).slice(0, 300) });
    t.is(fs.readFileSync(keep, 'utf8'), 'old content', `${mode}: the file keeps its old content`);
    await s.restart();
    const ls = await srv.call('list_files', {});
    t.ok(!ls.isError, `${mode}: after the restart list_files works`, { text: errorText(ls) });
    t.deepEqual(tempNames(fs.readdirSync(sb.workspace)), [], `${mode}: no temporary file is left once a call reached the host`);
    t.is((await srv.tool('read_file', { path: 'keep.txt' })).content, 'old content', `${mode}: read_file agrees`);

    await srv.close();
    await fx.noMachineOf(srv.pid, `${mode}: session end`);
    const runners = await waitFor(async () => { const l = await fx.runners(); return l.length ? null : l; }, 5000);
    t.ok(runners !== null, `${mode}: no runner of this sshd is left`, runners === null ? { left: await fx.runners() } : undefined);
  }
}, { timeout: 240 });
