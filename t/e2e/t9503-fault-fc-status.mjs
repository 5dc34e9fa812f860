// Fault: the FC service answers 500, 502, 503 or 429 in the middle of a
// call (doc/faults.md), on each step of one:
//   run_command: process Start refused: the call fails naming the status
//     and the service's message; Start is never re-sent; nothing runs.
//   write_file: the upload refused, or the rename (Move, never re-sent: a
//     lost answer would make a second one fail) refused: the call fails
//     naming the status, the file keeps its old content, the temporary
//     file is removed.
//   read_file: retried after 502, 503 and 429 (success), 500 fails.
//   the session's end: the kill of its sandbox refused once: retried (502,
//   503, 429); after a 500 the sandbox is left to the service's own timeout
//   (the sandbox's lifetime: FC ends it) and its record to the reaper of
//   the user's next sandgate; the warning says so.
// Every time: no sanitizer report, no process left in the sandbox.
import fs from 'node:fs';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { backendFixture } from '../lib/faults.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const fx = await backendFixture('fc');
  const emu = fx.emu;
  const count = async (op) => (await emu.state()).counts[op] ?? 0;
  const ops = async (op) => (await emu.state()).log.filter((l) => l.op === op).length;
  for (const status of [500, 502, 503, 429]) {
    const retried = status !== 500;
    const srv = await sdkClient(fx.args(['--set', 'fc.retry_after_max=5']), fx.env(), { name: `HTTP ${status}` });
    const sb = await srv.tool('create_sandbox', { timeout: retried ? 300 : 4 });
    const sid = sb.sandbox_id;
    await srv.tool('write_file', { path: 'keep.txt', content: 'old content' });
    const fault = (op, extra = {}) => emu.faults([{ op, status, message: `injected ${status} on ${op}`,
      ...(status === 429 ? { retryAfter: 1 } : {}), ...extra }]);

    // run_command: Start refused
    let n0 = await count('start');
    await fault('start');
    let r = await srv.call('run_command', { command: 'sleep 3174' });
    t.ok(r.isError && new RegExp(`HTTP ${status}.*injected ${status} on start`).test(errorText(r)),
      `${status} on process Start: the call fails naming the status and the message`, { text: errorText(r) });
    t.is(await count('start') - n0, 1, `${status} on process Start: Start was sent once`);
    await fx.noProcess(sid, /^sleep 3174$/, `${status} on process Start`);

    // write_file: the upload refused
    await fault('files.write');
    r = await srv.call('write_file', { path: 'keep.txt', content: 'new content' });
    t.ok(r.isError && new RegExp(`HTTP ${status}`).test(errorText(r)), `${status} on the upload: the write fails`, { text: errorText(r) });
    t.is(await fx.read(sid, '/home/user/keep.txt'), 'old content', `${status} on the upload: the old content is intact`);
    await fx.noTemp(sid, '/home/user', `${status} on the upload`);

    // write_file: the rename refused (once, then for good)
    for (const times of [1, 10]) {
      n0 = await ops('move');
      await fault('move', { times });
      r = await srv.call('write_file', { path: 'keep.txt', content: `new content ${times}` });
      const content = await fx.read(sid, '/home/user/keep.txt');
      const moved = await ops('move') - n0;
      t.ok(r.isError && new RegExp(`HTTP ${status}`).test(errorText(r)), `${status} on Move (${times}): the write fails naming the status`, { text: errorText(r) });
      t.is(content, 'old content', `${status} on Move (${times}): the file holds its old content`);
      t.is(moved, 1, `${status} on Move (${times}): Move was sent once`);
      await emu.clearFaults();
      await fx.noTemp(sid, '/home/user', `${status} on Move (${times})`);
    }

    // read_file
    await fault('files.read');
    r = await srv.call('read_file', { path: 'keep.txt' });
    if (retried) t.ok(!r.isError && /content/.test(r.structuredContent?.content), `${status} on a read: retried, the read succeeds`, { text: errorText(r) });
    else t.ok(r.isError && /HTTP 500/.test(errorText(r)), '500 on a read: the read fails naming the status', { text: errorText(r) });
    await emu.clearFaults();

    // the session's end: the kill refused once
    await fault('kill');
    await srv.close();
    await emu.clearFaults();
    if (!retried) {
      t.like(fs.readFileSync(srv.stderrPath, 'utf8'), /warning: session end: fc: kill sandbox: HTTP 500: injected 500 on kill/,
        '500 on the kill at the session\'s end: the warning names it');
    }
    await fx.noMachineOf(srv.pid, `${status} on the kill at the session's end`, retried ? 10000 : 15000);
  }
}, { timeout: 240 });
