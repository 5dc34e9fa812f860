// A sandbox's lifetime is idle time: a call longer than the lifetime is not
// cut off by its own sandgate's expiry (a one-shot command, or a persistent
// shell's command waited for), and the lifetime counts from the end of the
// last call.  On local (no engine needed): a 3 s sandbox runs a 5 s command
// to its end, still answers 1 s after it, does the same through a shell,
// and is reaped once it has been idle for its lifetime.
import { t, preflight, sdkClient, sleep } from '../lib/sg.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];

t.run(async () => {
  await preflight({ docker: false });
  const srv = await sdkClient(LOCAL);
  const s = await srv.tool('create_sandbox', { timeout: 3 });
  const t0 = Date.now();
  const r = await srv.call('run_command', { command: 'sleep 5; echo done', sandbox_id: s.sandbox_id, timeout: 20 });
  t.hasFields(r.structuredContent ?? {}, { stdout: 'done\n', exit_code: 0 },
    `a command longer than the sandbox's lifetime runs to its end (${Date.now() - t0} ms)`, { error: r.isError && r.content });
  await sleep(1000);
  const again = await srv.call('run_command', { command: 'echo still', sandbox_id: s.sandbox_id });
  t.is(again.structuredContent?.stdout, 'still\n', 'the lifetime counts from the end of the call: 1 s later it answers');
  const t1 = Date.now();
  const sh = await srv.call('sandbox_shell_exec', { command: 'sleep 5; echo shell', machine: s.sandbox_id, timeout: 20 });
  t.hasFields(sh.structuredContent ?? {}, { output: 'shell\n', exit_code: 0 },
    `... and so does a shell's command (${Date.now() - t1} ms)`, { error: sh.isError && sh.content });
  // no call meanwhile: each would be a use; the reaper looks every second
  await sleep(8000);
  const late = await srv.call('run_command', { command: 'true', sandbox_id: s.sandbox_id });
  t.ok(late.isError, 'idle for its lifetime, it is reaped', { late });
  await srv.close();
}, { timeout: 90 });
