// The audit log: one SQLite row per tool call (cloud tools and sandbox_env
// tools, errors included, sandbox_audit_query itself not), content fields
// and envs values stored only as an HMAC-SHA256 under the install's key
// (<state dir>/audit.key) and the length, never the text; two
// sandgate processes share the file; sandbox_audit_query filters, pages and
// refuses bad bounds with the reference's messages.  Checked with the
// sqlite3 CLI on the file itself.  The body runs on the backend of
// SG_TEST_BACKEND (default docker).
import { createHmac } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, errorText, tmpdir } from '../lib/sg.mjs';
import { backendFromEnv } from '../lib/backends.mjs';

const execFileP = promisify(execFile);

async function sql(db, q) {
  const { stdout } = await execFileP('sqlite3', ['-json', db, q]);
  return stdout.trim() ? JSON.parse(stdout) : [];
}

t.run(async () => {
  const be = backendFromEnv();
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  try {
    await execFileP('sqlite3', ['-version']);
  } catch {
    await t.bailOut('the sqlite3 CLI is missing: apt-get install sqlite3 (.ci/run does)');
  }
  const db = path.join(tmpdir(), 'state', 'sandgate', 'audit.db');
  const keyFile = path.join(tmpdir(), 'state', 'sandgate', 'audit.key');
  const mac = (s) => createHmac('sha256', fs.readFileSync(keyFile)).update(s).digest('hex');
  const srv = await sdkClient(be.args, be.env);
  const secrets = ['SECRET-CONTENT-4417', 'TOPSECRET-WRITE-9', 'OLDSECRET-77', 'NEWSECRET-88', 'ENVSECRET-55',
    'CODESECRET-66', 'PATCHSECRET-99'];
  let calls = 0;
  const call = async (tool, args) => { calls++; return srv.call(tool, args); };

  await call('write_file', { path: 'a.txt', content: `${secrets[0]}\n` });
  await call('sandbox_file_write', { path: 'b.txt', content: `x ${secrets[1]} ${secrets[2]}\n` });
  await call('sandbox_file_patch', { mode: 'replace', path: 'b.txt', old_string: secrets[2], new_string: secrets[3] });
  await call('run_command', { command: 'printf %s "$TOKEN" | wc -c', envs: { TOKEN: secrets[4] } });
  await call('run_code', { code: `x = "${secrets[5]}"` });
  await call('sandbox_file_patch', { mode: 'patch', patch: `--- a/b.txt\n+++ b/b.txt\n@@ -1 +1,2 @@\n x ${secrets[1]} ${secrets[3]}\n+${secrets[6]}\n` });
  await call('sandbox_shell_exec', { command: 'echo audited' });
  await call('sandbox_env', { action: 'help' });
  const failed = await call('sandbox_file_read', { path: 'x', machine: 'no-such-machine' });
  t.ok(failed.isError, 'a failing call (it is audited as an error)');

  // a second process writes the same file at the same time
  const other = await sdkClient(be.args, be.env);
  await Promise.all([
    other.call('sandbox_env', { action: 'status' }),
    call('sandbox_env', { action: 'status' }),
  ]);
  calls++; // the other process's call
  // Rows are written by a writer thread after the reply; a process's own
  // queries wait for its queue, another process's rows are there once it
  // has flushed: at the latest when it exits.
  await other.close();

  const q = await srv.tool('sandbox_audit_query', {});
  t.is(q.total, calls, `sandbox_audit_query sees the ${calls} rows of this credential, from both processes`);
  t.deepEqual(q.window, [0, q.total], 'window [start, min(end,total)]');
  // this session's rows in the order of its calls; the other process's
  // row may come first (its writer may flush before this one's batch)
  const session = q.records.find((r) => r.tool === 'write_file')?.session;
  const first = q.records.filter((r) => r.session === session)[0] ?? {};
  t.hasFields(first, { tool: 'write_file', action: 'write_file', status: 'ok' }, "the session's first row is its first call");
  t.like(first.session, /^[0-9a-f]{16}$/, 'rows carry a hash of the session id');
  t.ok(Number.isInteger(first.duration_ms), 'rows carry duration_ms');
  t.ok(first.machine && typeof first.machine === 'string', 'rows carry the machine the call used');
  t.deepEqual(first.details?.content, { hmac_sha256: mac(`${secrets[0]}\n`), len: secrets[0].length + 1 }, 'content is stored as its keyed hash and length');
  const envRow = q.records.find((r) => r.tool === 'run_command');
  t.deepEqual(envRow?.details?.envs?.TOKEN, { hmac_sha256: mac(secrets[4]), len: secrets[4].length }, 'every envs value is hashed');
  t.ok(q.records.some((r) => r.tool === 'sandbox_env' && r.action === 'help'), 'sandbox_env rows carry the inner action');
  t.ok(q.records.some((r) => r.status === 'error' && r.machine === 'no-such-machine'), 'a failed call is a row with status error');
  t.ok(!q.records.some((r) => r.tool === 'sandbox_audit_query'), 'queries are not audited');
  const only = await srv.tool('sandbox_audit_query', { action: 'sandbox_file_patch' });
  t.is(only.total, 2, 'filter by action');
  const page = await srv.tool('sandbox_audit_query', { start: 1, end: 3 });
  t.is(page.records.length, 2, 'start/end page');
  t.is(page.records[0].id, q.records[1].id, 'the page starts at start');
  const tail = await srv.tool('sandbox_audit_query', { tail: 2 });
  t.hasFields(tail, { tail_size: 2, total: 2 }, 'tail bounds the window');
  for (const [args, re] of [
    [{ tail: 0 }, /tail must be in \(0, 100000\], got 0/],
    [{ tail: 100001 }, /tail must be in \(0, 100000\], got 100001/],
    [{ start: -1 }, /start must be >= 0, got -1/],
    [{ end: 0 }, /end must be >= 1, got 0/],
    [{ start: 5, end: 5 }, /end \(5\) must be > start \(5\)/],
    // past a double's exact whole numbers (1e300 once reached an undefined conversion)
    [{ tail: 1e300 }, /argument 'tail' is out of range: at most 2\^53/],
  ]) {
    const r = await srv.call('sandbox_audit_query', args);
    t.ok(r.isError && re.test(errorText(r)), `bad bounds ${JSON.stringify(args)}: ${re}`, { text: errorText(r) });
  }
  await srv.close();

  t.ok(fs.existsSync(db), `the audit database is ${db}`);
  const rows = await sql(db, 'SELECT tool, action, status, owner, session, machine, details FROM audit ORDER BY id');
  t.is(rows.length, calls, `the database has a row for every call (${calls})`);
  t.ok(rows.every((r) => r.owner && r.session && r.status), 'every row has owner, session and status');
  const mode = await sql(db, 'PRAGMA journal_mode');
  t.is(mode[0]?.journal_mode, 'wal', 'the database is in WAL mode');
  const raw = Buffer.concat(['', '-wal', '-shm'].filter((s) => fs.existsSync(db + s)).map((s) => fs.readFileSync(db + s)));
  const leaked = secrets.filter((s) => raw.includes(Buffer.from(s)));
  t.deepEqual(leaked, [], 'no file content, code, patch or env value is in the database files');
}, { timeout: 180 });
