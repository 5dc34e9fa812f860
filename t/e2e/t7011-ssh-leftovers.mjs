// SSH sandboxes without a jail ([ssh] isolation = none) leave no process on
// the host: a background job of run_command, one that moved to another
// directory and one in its own session are killed with kill_sandbox, in both
// runner modes.  (Jobs that hold the output: t7020.)
import { t, preflight, sdkClient, waitFor, resultData } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sh, procPattern as pat, hostProcs as procs } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  for (const runner of ['true', 'false']) {
    const srv = await sdkClient(sshArgs(s, { 'ssh.runner': runner }), sshEnv());
    const tag = `sgleft${process.pid}r${runner}x${Date.now()}`;
    const d = resultData(await srv.call('create_sandbox', {}));
    await srv.tool('write_file', { sandbox_id: d.sandbox_id, path: `${tag}.sh`, content: 'sleep 300\n' });
    const t0 = Date.now();
    const r = await srv.tool('run_command', { sandbox_id: d.sandbox_id, timeout: 30,
      command: `echo started; exec >/dev/null 2>&1 </dev/null; sh ./${tag}.sh & cp ${tag}.sh /tmp/${tag}b.sh; (cd /tmp && sh ./${tag}b.sh &); setsid sh ./${tag}.sh &` });
    const took = (Date.now() - t0) / 1000;
    t.is(r.stdout, 'started\n', `runner=${runner}: the command answers`);
    t.ok(took < 2, `runner=${runner}: it returns when the command does (${took} s)`);
    t.ok(await waitFor(async () => (await procs(tag)).length >= 3, 3000), `runner=${runner}: the jobs run`);
    await srv.tool('kill_sandbox', { sandbox_id: d.sandbox_id });
    const gone = await waitFor(async () => (await procs(tag)).length === 0, 3000);
    t.ok(gone, `runner=${runner}: kill_sandbox left no process on the host`, { left: await sh(`pgrep -af '${pat(tag)}' || true`) });
    await sh(`pkill -KILL -f '${pat(tag)}' || true; rm -f /tmp/${tag}b.sh`);
    await srv.close();
  }
}, { timeout: 60 });
