// A slow FC create (cold starts take 60-90 s) sends notifications/progress
// to a client that gave a progress token, for create_sandbox and for a lazy
// default; none without a token.  A cancelled run_command returns at once
// and fc.so kills the process in the sandbox (SendSignal SIGKILL), since
// envd keeps a process whose stream went away.
import { t, preflight, sdkClient, rawServer, sleep } from '../lib/sg.mjs';
import { startEmulator } from '../fc/emu.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const emu = await startEmulator();
  const srv = await sdkClient(emu.args(), emu.env());

  await emu.faults([{ op: 'create', delayMs: 3500 }]);
  const seen = [];
  const t0 = Date.now();
  const made = await srv.call('create_sandbox', {}, { onprogress: (p) => seen.push({ ...p, at: Date.now() - t0 }) });
  t.ok(!made.isError, `create_sandbox took ${Date.now() - t0} ms and succeeded`);
  t.cmp(seen.length, '>=', 3, `progress notifications arrived during the slow create (${seen.length})`);
  t.ok(seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress), 'progress grows', { seen });
  t.ok(seen.some((p) => /creating an FC sandbox/.test(p.message ?? '')), 'with a message saying what happens', { seen });

  await srv.tool('kill_sandbox', {});
  await emu.faults([{ op: 'create', delayMs: 2500 }]);
  const lazy = [];
  const r = await srv.call('run_command', { command: 'echo lazy' }, { onprogress: (p) => lazy.push(p) });
  t.ok(!r.isError && r.structuredContent.sandbox_created, 'a lazy default create');
  t.cmp(lazy.length, '>=', 2, `... reports progress too (${lazy.length})`);

  // without a token: no notifications at all (raw client to see every line)
  const raw = await rawServer(emu.args(), emu.env());
  await raw.initialize();
  await emu.faults([{ op: 'create', delayMs: 2000 }]);
  const res = await raw.request('tools/call', { name: 'create_sandbox', arguments: {} }, { timeout: 30000 });
  t.ok(!res.result?.isError, 'create without a progress token');
  t.is(raw.messages().filter((m) => m.method === 'notifications/progress').length, 0, 'no progress notifications without a token');
  await raw.close();

  // ---- cancellation ----
  const ac = new AbortController();
  const t1 = Date.now();
  const pending = srv.call('run_command', { command: 'echo begun; sleep 120' }, { signal: ac.signal }).catch((e) => e);
  await sleep(1000);
  let st = await emu.state();
  const sb = st.sandboxes.find((s) => s.procs.some((p) => /sleep 120/.test((p.args ?? []).join(' '))));
  t.ok(sb, 'the command is running in the sandbox');
  ac.abort('test cancels');
  const e = await pending;
  t.ok(e instanceof Error, `the client sees its call cancelled (${Date.now() - t1} ms)`);
  let gone = false;
  for (let i = 0; i < 40 && !gone; i++) {
    await sleep(100);
    st = await emu.state();
    gone = !st.sandboxes.some((s) => s.procs.some((p) => /sleep 120/.test((p.args ?? []).join(' '))));
  }
  t.ok(gone, 'the cancelled command was killed in the sandbox');
  t.ok(st.log.some((l) => l.op === 'signal' && l.status === 200), 'through SendSignal');
  const after = await srv.tool('run_command', { command: 'echo after' });
  t.is(after.stdout, 'after\n', 'the sandbox works after the cancellation');
  await srv.close();
}, { timeout: 120 });
