// kill -9 of sandgate with SSH sandboxes alive, then a restart: once the
// sandboxes are reaped, no sandbox directory is left on the SSH host, as no
// container is left on Docker (t4041).  Two ways to a restart: after the
// sandboxes' lifetime passed (the new server reaps them), and before it
// (the new server adopts them, ends cleanly, and the next one reaps).
import fs from 'node:fs';
import { t, preflight, sdkClient, waitFor, resultData, sleep } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  for (const isolation of ['none', 'bwrap']) await round(s, isolation);
}, { timeout: 120 });

async function round(s, isolation) {
  const args = sshArgs(s, { 'ssh.isolation': isolation });
  t.diag(`[ssh] isolation = ${isolation}`);

  // A sandbox's directory on the host (details.directory), with a file in it.
  async function made(srv, n) {
    const dirs = [];
    for (let i = 0; i < n; i++) {
      const d = resultData(await srv.call('create_sandbox', { timeout: 3 }));
      await srv.tool('run_command', { sandbox_id: d.sandbox_id, command: 'echo x > keep.txt' });
      dirs.push(d.details?.directory ?? '');
    }
    return dirs;
  }

  const a = await sdkClient(args, sshEnv(), { name: 'first sandgate' });
  const dirs = await made(a, 2);
  t.ok(dirs.every((d) => d.startsWith('/') && fs.existsSync(`${d}/keep.txt`)), `${isolation}: two sandbox directories on the host`, { dirs });
  await a.kill('SIGKILL');
  await sleep(3500); // their lifetime passes while no sandgate runs
  const b = await sdkClient(args, sshEnv(), { name: 'restarted sandgate' });
  const gone = await waitFor(async () => dirs.every((d) => !fs.existsSync(d)), 15000, 300);
  t.ok(gone, `${isolation}: the restarted sandgate reaps them: no directory left`, { left: dirs.filter((d) => fs.existsSync(d)) });
  await b.close();

  const c = await sdkClient(args, sshEnv(), { name: 'third sandgate' });
  const dirs2 = await made(c, 1);
  await c.kill('SIGKILL');
  const d = await sdkClient(args, sshEnv(), { name: 'fourth sandgate (adopts, ends cleanly)' });
  await d.tool('run_command', { command: 'true' });
  await d.close();
  await sleep(3500);
  const e = await sdkClient(args, sshEnv(), { name: 'fifth sandgate' });
  const gone2 = await waitFor(async () => dirs2.every((x) => !fs.existsSync(x)), 15000, 300);
  t.ok(gone2, `${isolation}: adopted, then a clean end, then a restart: no directory left`, { left: dirs2.filter((x) => fs.existsSync(x)) });
  await e.close();
}
