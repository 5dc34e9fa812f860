// doc/errors.md is the catalogue of the errors tools return: each entry is
// triggered here once (on the local backend, where the backend does not
// matter; Docker for a default sandbox removed behind sandgate's back; a
// second bearer token over HTTP for the shared machine), and its message
// must hold the entry's cause and fix, with the value the caller sent where
// the entry names one ({v}).  An entry without a trigger, or a trigger
// without an entry, fails: the catalogue and the code cannot drift apart.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, tmpdir, trackSandbox, removeContainers } from '../lib/sg.mjs';
import { startHttp, connect } from '../http/lib.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];

/** The rows of the catalogue table: {id, cause, fix}, backquotes taken off. */
function catalogue() {
  const text = fs.readFileSync(path.join(process.env.SG_TEST_SRCDIR, 'doc', 'errors.md'), 'utf8');
  const body = text.split('<!-- catalogue:')[1] ?? '';
  const rows = [];
  for (const line of body.split('\n')) {
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    if (cells.length !== 5 || cells[0] === 'id' || /^-+$/.test(cells[0])) continue;
    const strip = (s) => s.replace(/^`|`$/g, '');
    rows.push({ id: cells[0], code: strip(cells[2]), cause: strip(cells[3]), fix: strip(cells[4]) });
  }
  return rows;
}

t.run(async () => {
  await preflight(); // Docker for default-gone only
  const rows = catalogue();
  t.cmp(rows.length, '>=', 20, `doc/errors.md lists ${rows.length} errors`);

  const c = await sdkClient(LOCAL);
  const call = (tool, args) => c.client.callTool({ name: tool, arguments: args });
  // each trigger resolves { res, sent }: the result and the value the caller sent
  const triggers = {
    'unknown-argument': async () => ({ res: await call('run_command', { command: 'true', bogus: 1 }), sent: 'bogus' }),
    'missing-argument': async () => ({ res: await call('run_command', {}), sent: 'command' }),
    'wrong-type': async () => ({ res: await call('run_command', { command: 'true', timeout: 'abc' }), sent: 'timeout' }),
    'out-of-range': async () => ({ res: await call('run_command', { command: 'true', timeout: 0 }), sent: 'timeout' }),
    'bad-enum': async () => ({ res: await call('run_code', { code: '1', language: 'cobol' }), sent: 'cobol' }),
    'empty-command': async () => ({ res: await call('run_command', { command: '' }), sent: null }),
    'sandbox-not-found': async () => ({ res: await call('run_command', { command: 'true', sandbox_id: 'no-such-box' }), sent: 'no-such-box' }),
    'machine-not-found': async () => ({ res: await call('sandbox_shell_exec', { command: 'true', machine: 'no-such-dev' }), sent: 'no-such-dev' }),
    'remove-not-found': async () => ({ res: await call('sandbox_env', { action: 'machine_remove', params: { machine: 'no-such-lab' } }), sent: 'no-such-lab' }),
    'no-default-to-kill': async () => ({ res: await call('kill_sandbox', {}), sent: null }),
    'unknown-backend': async () => ({ res: await call('create_sandbox', { backend: 'no-such-backend' }), sent: 'no-such-backend' }),
    'shell-not-found': async () => ({ res: await call('sandbox_shell_read', { shell_id: 'sh_000000000000' }), sent: 'sh_000000000000' }),
    'unknown-action': async () => ({ res: await call('sandbox_env', { action: 'frobnicate' }), sent: 'frobnicate' }),
    'file-not-found': async () => ({ res: await call('read_file', { path: '/no/such/file' }), sent: '/no/such/file' }),
    'patch-ambiguous': async () => {
      await call('sandbox_file_write', { path: 'three.txt', content: 'x\nx\nx\n' });
      return { res: await call('sandbox_file_patch', { mode: 'replace', path: 'three.txt', old_string: 'x', new_string: 'y' }), sent: '/workspace/three.txt' };
    },
    'patch-not-found': async () => ({ res: await call('sandbox_file_patch', { mode: 'replace', path: 'three.txt', old_string: 'zzz', new_string: 'y' }), sent: '/workspace/three.txt' }),
    'hunk-fails': async () => ({ res: await call('sandbox_file_patch', { mode: 'patch', patch: '--- a/three.txt\n+++ b/three.txt\n@@ -1,1 +1,1 @@\n-q\n+r\n' }), sent: 'three.txt' }),
    'invalid-json': async () => ({ res: await call('sandbox_file_write', { path: 'c.json', content: '{"a":' }), sent: '/workspace/c.json' }),
    'invalid-toml': async () => ({ res: await call('sandbox_file_write', { path: 'c.toml', content: 'a = = 1\n' }), sent: '/workspace/c.toml' }),
    'invalid-python': async () => ({ res: await call('sandbox_file_write', { path: 'c.py', content: 'def (:\n' }), sent: '/workspace/c.py' }),
    'invalid-yaml': async () => ({ res: await call('sandbox_file_write', { path: 'c.yaml', content: 'a: [1\n' }), sent: '/workspace/c.yaml' }),
    'bad-search-pattern': async () => ({ res: await call('sandbox_file_search', { pattern: 'f(' }), sent: 'f(' }),
    'default-set-arguments': async () => ({ res: await call('sandbox_env', { action: 'default_set', params: {} }), sent: null }),
    'default-gone': async () => {
      // on Docker, where a container removed behind sandgate's back is seen at the next call:
      // create_sandbox makes the session's default, docker rm -f takes it away
      const d = await sdkClient(['--set', 'sandbox.default_backend=docker']);
      const sb = (await d.client.callTool({ name: 'create_sandbox', arguments: {} })).structuredContent;
      trackSandbox(sb?.sandbox_id);
      await removeContainers([sb?.sandbox_id]);
      const res = await d.client.callTool({ name: 'run_command', arguments: { command: 'true' } });
      await d.close();
      return { res, sent: sb?.sandbox_id, noSandboxId: true };
    },
    'remove-shared': async () => {
      const file = path.join(tmpdir(), 'catalogue-tokens');
      const TA = `tok-a-${'a'.repeat(32)}`;
      const TB = `tok-b-${'b'.repeat(32)}`;
      fs.writeFileSync(file, `${TA}\n${TB}\n`, { mode: 0o600 });
      const shared = `cat-shared-${process.pid}`;
      const srv = await startHttp({ args: LOCAL, set: { auth_tokens_file: file, shared_machines: shared } });
      const a = await connect(srv.url, { token: TA });
      const b = await connect(srv.url, { token: TB });
      const mc = await a.tool('sandbox_env', { action: 'machine_create', params: { name: shared } });
      trackSandbox(mc.sandbox_id);
      const res = await b.call('sandbox_env', { action: 'machine_remove', params: { machine: shared } });
      await a.tool('sandbox_env', { action: 'machine_remove', params: { machine: shared } });
      await a.close();
      await b.close();
      await srv.stop();
      return { res, sent: shared };
    },
  };

  for (const row of rows) {
    const trig = triggers[row.id];
    t.ok(trig, `${row.id}: the test triggers it`);
    if (!trig) continue;
    const { res, sent, noSandboxId } = await trig();
    const text = errorText(res);
    t.ok(res.isError, `${row.id}: the tool answers isError`, { text });
    const cause = sent === null ? row.cause : row.cause.replaceAll('{v}', sent);
    const fix = sent === null ? row.fix : row.fix.replaceAll('{v}', sent);
    t.ok(text.includes(cause), `${row.id}: the message holds the cause "${cause}"`, { text });
    t.ok(text.includes(fix), `${row.id}: the message holds the fix "${fix}"`, { text });
    if (sent !== null) t.ok(text.includes(sent), `${row.id}: it names what the caller sent ('${sent}')`, { text });
    if (row.cause.includes('{v}') || row.fix.includes('{v}')) t.ok(sent !== null, `${row.id}: the trigger knows what it sent`);
    if (noSandboxId) t.unlike(text, /sandbox_id/, `${row.id}: a call without sandbox_id is not told about sandbox_id`);
    if (/machine '\{v\}'/.test(row.cause)) t.unlike(text, /sandbox_id '/, `${row.id}: a machine the caller named is not called sandbox_id`);
  }
  for (const id of Object.keys(triggers)) t.ok(rows.some((r) => r.id === id), `trigger ${id} has its entry in doc/errors.md`);
  await c.close();
}, { timeout: 180 });
