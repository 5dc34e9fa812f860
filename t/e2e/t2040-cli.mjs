// The command line: --version, --help, tools, call (exit 0 ok / 1 tool error /
// 2 usage), call --keep and --sandbox-id, --set before or after the subcommand.
import { t, preflight, runCli, containersOfServer, containerOf, CLOUD_TOOLS } from '../lib/sg.mjs';

function json(text) {
  try { return JSON.parse(text); } catch { return undefined; }
}

t.run(async () => {
  await preflight();
  const v = await runCli(['--version']);
  t.is(v.code, 0, '--version exits 0');
  t.like(v.stdout, /\d+\.\d+\.\d+/, '--version prints a version');

  const h = await runCli(['--help']);
  t.is(h.code, 0, '--help exits 0');
  t.like(h.stdout + h.stderr, /stdio/, '--help mentions stdio');
  t.like(h.stdout + h.stderr, /call/, '--help mentions call');

  const tl = await runCli(['tools']);
  t.is(tl.code, 0, 'tools exits 0');
  const tj = json(tl.stdout);
  const list = Array.isArray(tj) ? tj : tj?.tools;
  t.ok(Array.isArray(list), 'tools prints a JSON tool list', { stdout: tl.stdout.slice(0, 500) });
  for (const n of CLOUD_TOOLS) t.ok((list ?? []).some((x) => x.name === n), `tools lists ${n}`);

  for (const [args, what] of [[['--set', 'log.level=debug', 'tools'], 'before'], [['tools', '--set', 'log.level=debug'], 'after']]) {
    const r = await runCli(args);
    t.is(r.code, 0, `--set ${what} the subcommand is accepted`, { stderr: r.stderr.slice(-500) });
    t.ok(json(r.stdout), `--set ${what} the subcommand: stdout is still only JSON`);
  }
  const envd = await runCli(['tools'], { SANDGATE_LOG_LEVEL: 'debug' });
  t.is(envd.code, 0, 'SANDGATE_LOG_LEVEL=debug is accepted');
  const badset = await runCli(['--set', 'log.level=deafening', 'tools']);
  t.isnt(badset.code, 0, 'a bad config value stops sandgate');
  t.like(badset.stderr, /level/, 'the error names the bad key', { stderr: badset.stderr.slice(-500) });

  const ok = await runCli(['call', 'run_command', '{"command":"echo hi"}']);
  t.is(ok.code, 0, 'call run_command exits 0', { stderr: ok.stderr.slice(-800) });
  const oj = json(ok.stdout);
  t.is(oj?.stdout, 'hi\n', 'call prints the structured result JSON', { stdout: ok.stdout });
  t.is((await containersOfServer(ok.pid)).length, 0, 'call without --keep leaves no container');

  const nz = await runCli(['call', 'run_command', '{"command":"exit 3"}']);
  t.is(nz.code, 0, 'a command exiting 3 is not a tool error (exit 0)');
  t.is(json(nz.stdout)?.exit_code, 3, '... and its exit_code is 3');

  const te = await runCli(['call', 'read_file', '{"path":"/no/such/file"}']);
  t.is(te.code, 1, 'a tool error exits 1', { stdout: te.stdout, stderr: te.stderr.slice(-500) });

  const u1 = await runCli(['call', 'run_command', 'not json']);
  t.is(u1.code, 2, 'call with invalid JSON arguments exits 2');
  const u2 = await runCli(['call']);
  t.is(u2.code, 2, 'call without a tool exits 2');
  const u3 = await runCli(['no-such-subcommand']);
  t.is(u3.code, 2, 'an unknown subcommand exits 2');
  const u4 = await runCli(['--no-such-option']);
  t.is(u4.code, 2, 'an unknown option exits 2');

  const keep = await runCli(['call', '--keep', 'create_sandbox', '{}']);
  t.is(keep.code, 0, 'call --keep create_sandbox exits 0', { stderr: keep.stderr.slice(-800) });
  const sid = json(keep.stdout)?.sandbox_id;
  t.like(sid, /\S/, 'call --keep prints the sandbox_id');
  const kc = sid ? await containerOf(sid) : null;
  t.ok(kc?.running, '--keep: the sandbox is still running after sandgate exited');
  if (sid) {
    const again = await runCli(['call', '--sandbox-id', sid, 'run_command', '{"command":"echo again"}']);
    t.is(again.code, 0, 'call --sandbox-id reaches the kept sandbox', { stderr: again.stderr.slice(-800) });
    t.is(json(again.stdout)?.sandbox_id, sid, '--sandbox-id: the result names that sandbox');
    t.is(json(again.stdout)?.stdout, 'again\n', '--sandbox-id: the command ran there');
    t.ok((await containerOf(sid))?.running, '--sandbox-id: the sandbox it did not create survives the call');
    const kill = await runCli(['call', 'kill_sandbox', JSON.stringify({ sandbox_id: sid })]);
    t.is(kill.code, 0, 'call kill_sandbox of the kept sandbox exits 0', { stderr: kill.stderr.slice(-800) });
    t.ok(!(await containerOf(sid))?.running, 'the kept sandbox is gone after kill_sandbox');
  }
}, { timeout: 180 });
