// sshd killed mid-session: while it is down a call fails with a clear error;
// once it is back on the same port the next call reconnects transparently
// (the sandbox and its files are still there); a restart between two calls
// is not even noticed; a connection dropped while a command runs is an
// error that says so.
import fs from 'node:fs';
import { t, preflight, sdkClient, errorText, sleep } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const srv = await sdkClient(sshArgs(s), sshEnv());
  const sb = await srv.tool('create_sandbox', {});
  await srv.tool('write_file', { path: 'keep.txt', content: 'still here' });
  t.is((await srv.tool('run_command', { command: 'echo one' })).stdout, 'one\n', 'a command before the server dies');

  await s.kill();
  t.pass('killed sshd and all its connections (SIGKILL)');
  const down = await srv.call('run_command', { command: 'echo two' });
  t.ok(down.isError, 'while sshd is down, a call fails');
  t.like(errorText(down), new RegExp(`cannot connect to 127\\.0\\.0\\.1:${s.port} .*Connection refused`),
    '... with a clear error: cannot connect, connection refused', { text: errorText(down) });
  const downRead = await srv.call('read_file', { path: 'keep.txt' });
  t.ok(downRead.isError && /Connection refused/.test(errorText(downRead)), 'file calls fail the same way', { text: errorText(downRead) });

  await s.restart();
  t.pass(`restarted sshd on the same port ${s.port}`);
  const back = await srv.call('run_command', { command: 'echo three; pwd' });
  t.ok(!back.isError, 'the next call after the restart succeeds (reconnected)', { text: errorText(back) });
  t.is(back.structuredContent?.stdout, `three\n${sb.workspace}\n`, '... in the same sandbox');
  t.is((await srv.tool('read_file', { path: 'keep.txt' })).content, 'still here', '... whose files survived');

  // a restart between two calls: the pooled connections are dead, the
  // call reconnects without an error
  await s.restart();
  const quiet = await srv.call('run_command', { command: 'echo four' });
  t.ok(!quiet.isError && quiet.structuredContent?.stdout === 'four\n', 'a restart between calls is invisible to the next call',
    { text: errorText(quiet) });
  await s.restart();
  const quietFile = await srv.call('write_file', { path: 'keep.txt', content: 'rewritten' });
  t.ok(!quietFile.isError, '... also for SFTP calls', { text: errorText(quietFile) });
  t.is(fs.readFileSync(`${sb.workspace}/keep.txt`, 'utf8'), 'rewritten', '... which did their work');

  // the connection dies while a command runs
  const running = srv.call('run_command', { command: 'echo started; sleep 30; echo never' });
  await sleep(1500);
  await s.kill();
  const cut = await running;
  t.ok(cut.isError && /dropped while the command ran/.test(errorText(cut)),
    'a connection dropped during a command: an error that says so', { text: errorText(cut) });
  await s.restart();
  t.is((await srv.tool('run_command', { command: 'echo five' })).stdout, 'five\n', 'and the next call reconnects');

  await srv.tool('kill_sandbox', {});
  t.ok(!fs.existsSync(sb.workspace), 'kill_sandbox still removes the directory');
  await srv.close();

  // a server that stops answering (its connection processes frozen): the
  // keepalives go unanswered and the call fails after three intervals
  const ka = await sdkClient(sshArgs(s, { 'ssh.keepalive_interval': 1 }), sshEnv(), { name: 'keepalive 1 s' });
  t.is((await ka.tool('run_command', { command: 'echo alive' })).stdout, 'alive\n', 'keepalive_interval 1: a command runs');
  const hung = ka.call('run_command', { command: 'sleep 60', timeout: 120 });
  await sleep(800);
  await s.freeze();
  const h0 = Date.now();
  const frozen = await hung;
  const took = Date.now() - h0;
  await s.thaw();
  t.ok(frozen.isError && /no answer from the server for \d+ s \(3 keepalive intervals\)/.test(errorText(frozen)),
    'a frozen server: the call fails saying the keepalives went unanswered', { text: errorText(frozen) });
  t.cmp(took, '<', 10000, `... after about three intervals (${took} ms)`);
  t.is((await ka.tool('run_command', { command: 'echo again' })).stdout, 'again\n', 'the next call uses a new connection');
  await ka.close();
}, { timeout: 180 });
