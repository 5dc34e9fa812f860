// One machine record for every backend (run per backend: SG_TEST_BACKEND,
// default docker; t4061 and t4062 run it on ssh and fc):
//  - `sandgate call create_sandbox --keep` says "kept" and the sandbox is
//    reached by id from later processes (`call run_command --sandbox-id`,
//    `call kill_sandbox --sandbox-id`), found through the core's record;
//  - an id owned by another live session, or by another token, is "not
//    found", the same on every backend;
//  - create-time envs reach every later command and shell, in this process
//    and in the next, and their values are in no log line or audit row;
//  - the record (state.db) is private (0600).
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, runCli, sdkClient, errorText, tmpdir, trackSandbox, containerOf } from '../lib/sg.mjs';
import { startHttp, connect } from '../http/lib.mjs';
import { backendFromEnv } from '../lib/backends.mjs';

const SECRET = `v-${process.pid}-${Date.now().toString(36)}-s3cr3t`;

function stdoutJson(r) {
  try { return JSON.parse(r.stdout); } catch { return null; }
}

t.run(async () => {
  const be = backendFromEnv();
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  const stderrs = [];
  const cli = async (args) => {
    const r = await runCli([...be.args, ...args], be.env);
    stderrs.push(r.stderr);
    return r;
  };

  // ---- --keep, then the id from other processes ----
  const made = await cli(['call', 'create_sandbox', JSON.stringify({ envs: { SG_SECRET_A: SECRET, B: 'two' } }), '--keep']);
  const sb = stdoutJson(made);
  t.is(made.code, 0, 'call create_sandbox --keep exits 0', { stderr: made.stderr });
  t.is(sb?.backend, be.name, `the sandbox is on ${be.name}`);
  trackSandbox(sb?.sandbox_id);
  const id = sb?.sandbox_id ?? 'none';
  t.like(made.stderr, new RegExp(`kept sandbox ${id} \\(use --sandbox-id ${id}\\)`), '--keep says kept, with the id');

  const rc = await cli(['call', 'run_command', '{"command":"echo A=$SG_SECRET_A B=$B"}', '--sandbox-id', id]);
  t.is(rc.code, 0, 'call run_command --sandbox-id reaches it from a new process', { stderr: rc.stderr });
  t.is(stdoutJson(rc)?.stdout, `A=${SECRET} B=two\n`, '... and the create-time envs reach its command');
  t.is(stdoutJson(rc)?.sandbox_id, id, '... the same sandbox');
  const sh = await cli(['call', 'sandbox_shell_exec', JSON.stringify({ command: 'echo "shell sees $SG_SECRET_A"', machine: id })]);
  t.is(stdoutJson(sh)?.output, `shell sees ${SECRET}\n`, 'a persistent shell sees the create-time envs too', { stderr: sh.stderr });
  const own = await cli(['call', 'run_command', '{"command":"echo $SG_SECRET_A-$B","envs":{"B":"mine"}}', '--sandbox-id', id]);
  t.is(stdoutJson(own)?.stdout, `${SECRET}-mine\n`, "a call's own envs win over the create-time ones of the same name");

  // ---- ownership: another live session, another token ----
  const srv = await sdkClient(be.args, be.env, { name: 'live owner' });
  const live = await srv.tool('create_sandbox', {});
  trackSandbox(live.sandbox_id);
  const stolen = await cli(['call', 'run_command', '{"command":"true"}', '--sandbox-id', live.sandbox_id]);
  t.is(stolen.code, 1, "an id owned by another live session is refused");
  t.like(stolen.stderr, /not found/, '... as "not found"', { stderr: stolen.stderr });
  t.is((await srv.tool('run_command', { command: 'echo still mine' })).stdout, 'still mine\n', "... and the owner's sandbox is untouched");

  const tokens = path.join(tmpdir(), 'tokens');
  const TA = `token-a-${'a'.repeat(40)}`;
  fs.writeFileSync(tokens, `${TA}\n`, { mode: 0o600 });
  const http = await startHttp({ args: be.args, env: be.env, set: { auth_tokens_file: tokens } });
  const a = await connect(http.url, { token: TA, name: 'token A' });
  const other = await a.call('run_command', { command: 'true', sandbox_id: id });
  t.ok(other.isError && /not found/.test(errorText(other)), "another credential (a token) gets \"not found\" for the kept sandbox",
    { text: errorText(other) });
  const other2 = await a.call('run_command', { command: 'true', sandbox_id: live.sandbox_id });
  t.ok(other2.isError && /not found/.test(errorText(other2)), "... and for the live session's sandbox");
  await a.close();
  stderrs.push(http.stderr());
  await http.stop('SIGTERM');

  // ---- kill by id from another process ----
  const kill = await cli(['call', 'kill_sandbox', '--sandbox-id', id]);
  t.is(kill.code, 0, 'call kill_sandbox --sandbox-id ends it', { stderr: kill.stderr });
  t.hasFields(stdoutJson(kill) ?? {}, { success: true, sandbox_id: id }, '... with its id');
  const gone = await cli(['call', 'run_command', '{"command":"true"}', '--sandbox-id', id]);
  t.ok(gone.code === 1 && /not found/.test(gone.stderr), 'after the kill the id is not found', { stderr: gone.stderr });
  if (be.name === 'docker') t.is(await containerOf(id), null, 'the container is gone');

  // ---- the live session's envs in its own process ----
  const withEnv = await srv.tool('create_sandbox', { envs: { SG_SECRET_A: SECRET } });
  trackSandbox(withEnv.sandbox_id);
  t.is((await srv.tool('run_command', { command: 'printf %s "$SG_SECRET_A"' })).stdout, SECRET, 'envs reach run_command in the creating session');
  t.is((await srv.tool('sandbox_shell_exec', { command: 'printf "%s\\n" "$SG_SECRET_A"' })).output, `${SECRET}\n`,
    '... and its shell');
  await srv.close();
  stderrs.push(fs.readFileSync(srv.stderrPath, 'utf8'));

  // ---- no value in logs or audit rows; the record is private ----
  const state = path.join(tmpdir(), 'state', 'sandgate');
  const leaks = stderrs.filter((s) => s.includes(SECRET)).length;
  t.is(leaks, 0, `no log of the ${stderrs.length} processes holds the env value`);
  const audit = ['audit.db', 'audit.db-wal'].map((f) => path.join(state, f)).filter((f) => fs.existsSync(f));
  t.cmp(audit.length, '>=', 1, 'the audit database exists');
  t.ok(!audit.some((f) => fs.readFileSync(f).includes(SECRET)), 'no audit row holds the env value');
  const st = fs.statSync(path.join(state, 'state.db'));
  t.is(st.mode & 0o777, 0o600, 'state.db (which keeps the envs) is 0600');
  t.ok(!fs.existsSync(path.join(state, 'machines.json')), 'no machines.json: one record');
}, { timeout: 240 });
