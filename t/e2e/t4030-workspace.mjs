// Commands run in /workspace unless cwd says otherwise; list_files without a
// path lists /workspace; relative cwd and a missing cwd are handled.
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const pwd = await srv.tool('run_command', { command: 'pwd' });
  t.is(pwd.stdout, '/workspace\n', 'run_command runs in /workspace by default');
  const py = await srv.tool('run_code', { code: 'import os\nprint(os.getcwd())' });
  t.is(py.stdout, '/workspace\n', 'run_code runs in /workspace');
  const cwd = await srv.tool('run_command', { command: 'pwd', cwd: '/etc' });
  t.is(cwd.stdout, '/etc\n', 'cwd /etc is honoured');
  const back = await srv.tool('run_command', { command: 'pwd' });
  t.is(back.stdout, '/workspace\n', 'cwd does not stick to later calls');

  await srv.tool('run_command', { command: 'mkdir -p /workspace/proj/src && touch /workspace/proj/src/main.c' });
  await srv.tool('write_file', { path: '/workspace/top.txt', content: 'top' });
  const l = await srv.tool('list_files', {});
  t.is(l.path, '/workspace', 'list_files without path lists /workspace');
  const names = (l.files ?? []).map((f) => f.name).sort();
  t.deepEqual(names, ['proj', 'top.txt'], 'list_files without path shows the workspace entries');
  const full = (l.files ?? []).find((f) => f.name === 'top.txt');
  t.is(full?.path, '/workspace/top.txt', 'entries have absolute paths');

  const sub = await srv.tool('run_command', { command: 'ls', cwd: '/workspace/proj/src' });
  t.is(sub.stdout, 'main.c\n', 'cwd in a subdirectory of the workspace');
  const missing = await srv.call('run_command', { command: 'pwd', cwd: '/no/such/dir' });
  const md = missing.structuredContent;
  t.ok(missing.isError || (md && md.exit_code !== 0),
    'a cwd that does not exist is an error (isError or a non-zero exit), never a silent run elsewhere', { result: missing });
  if (missing.isError) t.like(errorText(missing), /no\/such\/dir|cwd/, 'the error names the cwd', { text: errorText(missing) });

  const made = await srv.tool('create_sandbox', {});
  t.is(made.workspace, '/workspace', 'create_sandbox reports workspace /workspace');
  const p2 = await srv.tool('run_command', { command: 'pwd; ls -A', sandbox_id: made.sandbox_id });
  t.is(p2.stdout, '/workspace\n', 'a new sandbox starts in an empty /workspace');
  await srv.close();
}, { timeout: 90 });
