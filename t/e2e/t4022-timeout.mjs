// A run_command timeout kills the whole process group: `sleep 300 & sleep
// 300; echo never` with timeout 2 returns timed_out within 5 s, and no
// sleep 300 is left in the container.
import { t, preflight, sdkClient, containerOf, psArgs, waitFor } from '../lib/sg.mjs';

const isSleep300 = (a) => /(^|\s)sleep 300$/.test(a) || /sleep 300 & sleep 300/.test(a);

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const warm = await srv.tool('run_command', { command: 'true' });
  const c = await containerOf(warm.sandbox_id);
  if (!c) await t.bailOut(`no container found for sandbox_id ${warm.sandbox_id}`);

  const t0 = Date.now();
  const res = await srv.call('run_command', { command: 'echo started; sleep 300 & sleep 300; echo never', timeout: 2 });
  const took = Date.now() - t0;
  t.cmp(took, '<', 5000, `the timeout result comes within 5 s (${took} ms)`);
  t.cmp(took, '>=', 1900, 'and not before the timeout');
  t.ok(!res.isError, 'a timeout is a result, not an isError', { result: res });
  const d = res.structuredContent ?? {};
  t.is(d.timed_out, true, 'timed_out: true');
  t.is(d.exit_code, 124, 'exit_code 124');
  t.is(d.stdout, 'started\n', 'output up to the timeout is kept, "never" is not printed');

  const left = await psArgs(c.id);
  const clean = !left.some(isSleep300)
    || await waitFor(async () => !(await psArgs(c.id)).some(isSleep300), 1000);
  t.ok(clean, 'no sleep 300 process remains in the container', { processes: left });

  // a detached grandchild in a new session is the command's business, but a
  // plain background job is part of the group and must die too
  const t1 = Date.now();
  const r2 = await srv.tool('run_command', { command: '(sleep 301; echo x) & wait', timeout: 1 });
  t.is(r2.timed_out, true, 'a subshell job: timed_out');
  t.cmp(Date.now() - t1, '<', 5000, 'a subshell job: returns within 5 s');
  const gone = await waitFor(async () => !(await psArgs(c.id)).some((a) => /sleep 301$/.test(a)), 2000);
  t.ok(gone, 'a subshell job: no sleep 301 remains');

  // output is not lost when a command times out while printing
  const r3 = await srv.tool('run_command', { command: 'i=0; while true; do echo $i; i=$((i+1)); sleep 0.1; done', timeout: 1 });
  t.is(r3.timed_out, true, 'a chatty command: timed_out');
  t.like(r3.stdout, /^0\n1\n2\n/, 'a chatty command: its output so far is returned');

  const ok = await srv.tool('run_command', { command: 'echo fine', timeout: 5 });
  t.hasFields(ok, { stdout: 'fine\n', timed_out: false, exit_code: 0 }, 'the sandbox still works after timeouts');
  await srv.close();
}, { timeout: 90 });
