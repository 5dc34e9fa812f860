// A sandbox that expired on the cloud side: every tool on it says it expired
// or was killed (fc.so checks a data-plane 502 with GET /sandboxes/{id}); an
// expired default stops being the default and the next call without
// sandbox_id creates a new one and says so (sandbox_created: true).  The
// keepalive (POST /sandboxes/{id}/timeout) rides beside calls, at most once
// per [fc] keepalive_interval, never delaying them, and keeps a short-lived
// sandbox alive while it is used.
import { t, preflight, sdkClient, errorText, sleep } from '../lib/sg.mjs';
import { startEmulator } from '../fc/emu.mjs';

const GONE = /expired or was killed/;

t.run(async () => {
  await preflight({ docker: false });
  const emu = await startEmulator();
  const srv = await sdkClient(emu.args(['--set', 'fc.keepalive_interval=1']), emu.env());

  // ---- the default sandbox expires ----
  const first = await srv.tool('run_command', { command: 'echo one' });
  t.is(first.sandbox_created, true, 'the first call creates the default sandbox');
  await emu.expire(first.sandbox_id);
  const failed = await srv.call('run_command', { command: 'echo two' });
  t.ok(failed.isError, 'a call on the expired default: isError');
  t.like(errorText(failed), GONE, 'the error says it expired or was killed', { text: errorText(failed) });
  t.like(errorText(failed), new RegExp(first.sandbox_id), 'and names the sandbox');
  const next = await srv.tool('run_command', { command: 'echo three' });
  t.ok(next.sandbox_created === true && next.sandbox_id !== first.sandbox_id,
    'the next call without sandbox_id creates a new default and says so');
  t.is(next.stdout, 'three\n', 'and runs there');
  const stale = await srv.call('run_command', { command: 'true', sandbox_id: first.sandbox_id });
  t.ok(stale.isError && /not found/.test(errorText(stale)), 'the expired id is no longer addressable', { text: errorText(stale) });

  // ---- every tool detects it ----
  const tools = [
    ['read_file', { path: '/etc/hostname' }],
    ['write_file', { path: '/tmp/x', content: 'x' }],
    ['list_files', { path: '/tmp' }],
    ['run_code', { code: 'print(1)' }],
    ['run_command', { command: 'true' }],
  ];
  for (const [tool, args] of tools) {
    const sb = await srv.tool('create_sandbox', {});
    await emu.expire(sb.sandbox_id);
    const r = await srv.call(tool, { ...args, sandbox_id: sb.sandbox_id });
    t.ok(r.isError && GONE.test(errorText(r)), `${tool} on an expired sandbox: "expired or was killed"`, { text: errorText(r) });
  }
  // create_sandbox made the last one the default: it is gone, so a new one comes
  const fresh = await srv.tool('list_files', {});
  t.is(fresh.sandbox_created, true, 'after the expired default: list_files creates a new one');

  // ---- keepalive ----
  const short = await srv.tool('create_sandbox', { timeout: 3 });
  let st = await emu.state();
  const timeoutsBefore = st.log.filter((l) => l.op === 'timeout' && l.sandbox === short.sandbox_id).length;
  const t0 = Date.now();
  for (let i = 0; i < 14; i++) {
    await srv.tool('run_command', { command: 'true' });
    await sleep(400);
  }
  const elapsed = (Date.now() - t0) / 1000;
  st = await emu.state();
  t.ok(st.sandboxes.some((s) => s.id === short.sandbox_id),
    `a 3 s sandbox used for ${elapsed.toFixed(1)} s is still alive: the keepalive pushed its expiry`);
  const sent = st.log.filter((l) => l.op === 'timeout' && l.sandbox === short.sandbox_id).length - timeoutsBefore;
  t.ok(sent >= 2 && sent <= Math.ceil(elapsed) + 1,
    `keepalives: ${sent} for 14 calls in ${elapsed.toFixed(1)} s, at most one per second`);

  await emu.faults([{ op: 'timeout', delayMs: 3000, times: 5 }]);
  await sleep(1100);
  const t1 = Date.now();
  await srv.tool('run_command', { command: 'true' });
  t.cmp(Date.now() - t1, '<', 1500, 'a slow keepalive does not delay the call it rides with');
  await emu.clearFaults();

  // ---- none for a killed sandbox ----
  // the kill takes 1.5 s, past the interval, so the end of the kill_sandbox
  // call would push one: it is not sent (a set-timeout of a killed sandbox
  // could only fail, and its 404 was a warning in the log)
  const doomed = await srv.tool('create_sandbox', { timeout: 60 });
  await emu.faults([{ op: 'kill', delayMs: 1500, times: 1 }]);
  await sleep(1100);
  const killed = await srv.tool('kill_sandbox', { sandbox_id: doomed.sandbox_id });
  t.is(killed.success, true, 'kill_sandbox: done', { killed });
  await sleep(1500);
  await emu.clearFaults();
  st = await emu.state();
  const killAt = st.log.findIndex((l) => l.op === 'kill' && l.sandbox === doomed.sandbox_id);
  t.ok(killAt >= 0, 'the kill reached the platform');
  const late = st.log.slice(killAt + 1).filter((l) => l.op === 'timeout' && l.sandbox === doomed.sandbox_id);
  t.is(late.length, 0, 'no keepalive of the sandbox after its kill', { late });
  await srv.close();
}, { timeout: 150 });
