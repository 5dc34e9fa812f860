// SSH with [ssh] runner = false (plain exec): a command that leaves a
// background job holding its stdout and stderr returns when the command
// ends, not when the job does (sshd keeps the channel open while the job
// holds the pipes: the wrapper's end marker says the command ended), with
// the command's exact output and exit status; the job is the sandbox's and
// kill_sandbox leaves nothing of it on the host.  The runner path does the
// same (t7011, t8005).
import { t, preflight, sdkClient, waitFor, resultData } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sh, procPattern as pat, hostProcs as procs } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const srv = await sdkClient(sshArgs(s, { 'ssh.runner': 'false' }), sshEnv());
  const tag = `sgbg${process.pid}x${Date.now()}`;
  const d = resultData(await srv.call('create_sandbox', {}));
  const id = d.sandbox_id;
  await srv.tool('write_file', { sandbox_id: id, path: `${tag}.sh`, content: 'sleep 30\n' });

  const timed = async (command) => {
    const t0 = Date.now();
    const r = await srv.tool('run_command', { sandbox_id: id, command, timeout: 30 });
    return [r, (Date.now() - t0) / 1000];
  };
  let [r, took] = await timed(`sh ./${tag}.sh & echo started`);
  t.hasFields(r, { stdout: 'started\n', stderr: '', exit_code: 0, timed_out: false },
    'a job holding stdout and stderr: the command\'s output and exit 0');
  t.ok(took < 2, `... back when the command ends (${took} s, the job sleeps 30 s)`);

  [r, took] = await timed(`(sh ./${tag}.sh >/dev/null 2>&1 &); echo ok`);
  t.is(r.stdout, 'ok\n', 'a job that let go of the output: ok');
  t.ok(took < 2, `... back at once too (${took} s)`);

  [r, took] = await timed(`printf 'a\\n\\n'; printf 'e\\n\\n' >&2; sh ./${tag}.sh & printf 'b'; exit 3`);
  t.hasFields(r, { stdout: 'a\n\nb', stderr: 'e\n\n', exit_code: 3 },
    'the bytes are exact around the end (newlines kept, no newline added) and the exit status is the command\'s');
  t.ok(took < 2, `... in ${took} s`);

  [r, took] = await timed(`sh ./${tag}.sh & kill -9 $$`);
  t.hasFields(r, { exit_code: 137, signal: 9 }, 'a command killed by SIGKILL with a job left: exit_code 137, signal 9');

  t.ok(await waitFor(async () => (await procs(tag)).length >= 4, 3000), 'the four jobs run on the host');
  await srv.tool('kill_sandbox', { sandbox_id: id });
  const gone = await waitFor(async () => (await procs(tag)).length === 0, 3000);
  t.ok(gone, 'kill_sandbox left no process of the jobs on the host', { left: await sh(`pgrep -af '${pat(tag)}' || true`) });
  await sh(`pkill -KILL -f '${pat(tag)}' || true`);
  await srv.close();
}, { timeout: 60 });
