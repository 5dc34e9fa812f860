// Files sandgate creates are 0600, and secrets in audit rows are keyed
// hashes.  An audit.db an older sandgate made 0644 (with its three unused
// indexes) is tightened, its -wal and -shm and the state database too; the
// log file at a configured path is created 0600; the per-install key
// <state dir>/audit.key is 0600 and 32 bytes.  env values, file contents and
// any value under a key that names a secret (here api_key, in a call that
// fails for it) become {hmac_sha256, len} under that key, never a plain
// SHA-256 that weak values would not survive; a second process (sandgate
// call, which now writes its row too) hashes with the same key.
import { createHash, createHmac } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, runCli, tmpdir, fakeBackendArgs } from '../lib/sg.mjs';

const execFileP = promisify(execFile);
const sql = async (db, q) => {
  const { stdout } = await execFileP('sqlite3', ['-json', db, q]);
  return stdout.trim() ? JSON.parse(stdout) : [];
};
const mode = (f) => (fs.statSync(f).mode & 0o777).toString(8);

t.run(async () => {
  await preflight({ docker: false });
  const fake = await fakeBackendArgs();
  const dir = path.join(tmpdir(), 'state', 'sandgate');
  const db = path.join(dir, 'audit.db');
  const log = path.join(tmpdir(), 'logs', 'sandgate.log');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(path.dirname(log), { mode: 0o700 });
  // what an older sandgate left: a 0644 database with five indexes
  await sql(db, 'PRAGMA journal_mode=WAL; CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, session TEXT, owner TEXT,'
    + ' machine TEXT, tool TEXT NOT NULL, action TEXT NOT NULL, status TEXT NOT NULL, duration_ms INTEGER, details TEXT, error TEXT);'
    + ' CREATE INDEX audit_ts ON audit(ts); CREATE INDEX audit_owner ON audit(owner); CREATE INDEX audit_action ON audit(action);'
    + ' CREATE INDEX audit_machine ON audit(machine); CREATE INDEX audit_status ON audit(status);');
  fs.chmodSync(db, 0o644);

  const secrets = { env: 'pw1', file: 'FILE-SECRET-4711', key: 'APIKEY-SECRET-0815' };
  const srv = await sdkClient(fake, {}, { preArgs: ['--set', `log.file=${log}`, '--set', 'log.level=debug'] });
  await srv.tool('run_command', { command: 'echo hi', envs: { TOKEN: secrets.env } });
  await srv.tool('write_file', { path: 'a.txt', content: secrets.file });
  const bad = await srv.call('run_command', { command: 'true', api_key: secrets.key });
  t.ok(bad.isError, 'a call with an unknown argument fails (and is audited)');
  const q = await srv.tool('sandbox_audit_query', {});

  // ---- modes, while the server has the database open (its -wal and -shm exist)
  for (const f of [db, `${db}-wal`, `${db}-shm`, path.join(dir, 'audit.key'), path.join(dir, 'state.db'), log]) {
    t.is(fs.existsSync(f) ? mode(f) : 'missing', '600', `${path.relative(tmpdir(), f)} is mode 0600`);
  }
  t.is(fs.statSync(path.join(dir, 'audit.key')).size, 32, 'the key is 32 bytes');
  const indexes = (await sql(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit' ORDER BY name")).map((r) => r.name);
  t.deepEqual(indexes, ['audit_machine', 'audit_owner'], 'the indexes no query uses are dropped');

  // ---- keyed hashes
  const key = fs.readFileSync(path.join(dir, 'audit.key'));
  const mac = (s) => createHmac('sha256', key).update(s).digest('hex');
  const sha = (s) => createHash('sha256').update(s).digest('hex');
  const byTool = (tool) => q.records.filter((r) => r.tool === tool);
  const envs = byTool('run_command')[0]?.details?.envs?.TOKEN;
  t.deepEqual(envs, { hmac_sha256: mac(secrets.env), len: 3 }, 'an env value is its HMAC-SHA256 under the install key, and its length');
  t.ok(envs && envs.hmac_sha256 !== sha(secrets.env) && !('sha256' in envs), 'not a plain SHA-256 (a weak value would not survive a dictionary)');
  t.deepEqual(byTool('write_file')[0]?.details?.content, { hmac_sha256: mac(secrets.file), len: secrets.file.length }, 'file content is keyed too');
  const keyed = byTool('run_command').find((r) => r.status === 'error');
  t.deepEqual(keyed?.details?.api_key, { hmac_sha256: mac(secrets.key), len: secrets.key.length }, 'a value under a key that names a secret (api_key) is keyed too');
  t.is(keyed?.details?.command, 'true', 'commands stay as they are');
  await srv.close();

  // ---- sandgate call writes its row, with the same key
  const r = await runCli([...fake, 'call', 'run_command', JSON.stringify({ command: 'true', envs: { TOKEN: secrets.env } })]);
  t.is(r.code, 0, 'sandgate call run_command exits 0', { stderr: r.stderr.slice(-800) });
  const rows = await sql(db, "SELECT details FROM audit WHERE tool = 'run_command' ORDER BY id DESC LIMIT 1");
  t.deepEqual(JSON.parse(rows[0]?.details ?? '{}').envs?.TOKEN, { hmac_sha256: mac(secrets.env), len: 3 },
    'sandgate call wrote its row, hashed with the same install key');

  // ---- no secret anywhere in the files
  const raw = Buffer.concat([db, `${db}-wal`, log].filter((f) => fs.existsSync(f)).map((f) => fs.readFileSync(f)));
  const leaked = Object.values(secrets).filter((s) => s.length > 3 && raw.includes(Buffer.from(s)));
  t.deepEqual(leaked, [], 'no content or secret value is in the database or the log');
}, { timeout: 120 });
