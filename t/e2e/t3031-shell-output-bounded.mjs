// Output kept for a result is bounded however much a command writes: 1 GiB
// of shell output (sandbox_shell_exec on the local backend) leaves the
// server's peak RSS under 64 MiB above idle, and the result is the head
// and tail of max_output, with the bytes dropped counted (doc/results.md).
import fs from 'node:fs';
import { preflight, sleep } from '../lib/sg.mjs';
import { t, startHttp, connect } from '../http/lib.mjs';

const MIB = 1024 * 1024;
const kb = (pid, field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

t.run(async () => {
  await preflight({ docker: false });
  const srv = await startHttp({
    set: { 'sandbox.default_backend': 'local' },
    env: { SANDGATE_DOCKER_HOST: 'unix:///nonexistent/docker.sock', DOCKER_HOST: undefined },
  });
  const c = await connect(srv.url);
  const sb = await c.tool('create_sandbox', { backend: 'local' });
  await c.tool('sandbox_shell_exec', { command: 'echo warm', machine: sb.sandbox_id });
  await sleep(300);
  const idle = kb(srv.pid, 'VmRSS');
  fs.writeFileSync(`/proc/${srv.pid}/clear_refs`, '5'); // peak RSS := current RSS
  const t0 = Date.now();
  const r = await c.tool('sandbox_shell_exec', { command: 'yes abcdefghijklmnopqrstuvwxyz | head -c 1G; echo END', machine: sb.sandbox_id, timeout: 120 }, { timeout: 180000 });
  const took = Date.now() - t0;
  const peak = kb(srv.pid, 'VmHWM');
  const out = r.output ?? r.stdout ?? '';
  t.diag(`1 GiB in ${took} ms; idle ${idle} kB, peak ${peak} kB (+${peak - idle}); result keys ${Object.keys(r).join(',')}`);
  t.ok(out.length <= 50000 + 200, `the result holds at most max_output (50000) plus the marker line (${out.length} chars)`);
  t.like(out, /END\n?$/, 'the tail ends with the last line');
  t.ok(out.startsWith('abcdefghijklmnopqrstuvwxyz\n'), 'the head starts with the first line');
  if (process.env.ASAN_OPTIONS) t.pass('under AddressSanitizer RSS is said, not asserted');
  else t.cmp(peak - idle, '<', 64 * 1024, `peak RSS ${peak - idle} kB above idle, under 64 MiB for 1 GiB of output`);
  await c.tool('kill_sandbox', { sandbox_id: sb.sandbox_id });
  await c.close();
  await srv.stop();
});
