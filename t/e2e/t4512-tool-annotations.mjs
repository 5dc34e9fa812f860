// The annotations of tools/list are true of what the tools do, checked on a
// sandbox (the local backend: the hints do not depend on it): every tool
// marked readOnlyHint leaves every file as it was (path, size, mode, mtime,
// content); the idempotent writers give the same files when called twice;
// create_sandbox (destructiveHint false) leaves the sandboxes there were.
import { t, preflight, sdkClient } from '../lib/sg.mjs';

// path, type, size, mode, mtime and content hash of everything in the
// workspace and /tmp (atime is not a change: reading sets it).
const SNAP = "cd / && find workspace tmp -xdev -printf '%p %y %s %m %T@\\n' | sort && " +
  "find workspace tmp -xdev -type f -exec sha256sum {} + | sort";
const CONTENT = "cd / && find workspace -xdev -printf '%p %y %s %m\\n' | sort && " +
  'find workspace -xdev -type f -exec sha256sum {} + | sort';

t.run(async () => {
  await preflight({ docker: false });
  const srv = await sdkClient(['--set', 'sandbox.default_backend=local']);
  const tools = Object.fromEntries((await srv.client.listTools()).tools.map((x) => [x.name, x]));
  const sb = (await srv.tool('create_sandbox', {})).sandbox_id;
  const snap = async (cmd = SNAP) => (await srv.tool('run_command', { command: cmd, sandbox_id: sb })).stdout;
  await srv.tool('run_command', { sandbox_id: sb, command: 'mkdir -p d/e && printf "one\\ntwo\\n" > d/a.txt && printf x > d/e/b.py' });
  await srv.tool('sandbox_shell_exec', { machine: sb, command: 'echo started' });

  // one call of each read-only tool, with arguments that reach the files
  const reads = {
    read_file: { path: 'd/a.txt', sandbox_id: sb },
    list_files: { path: 'd', sandbox_id: sb },
    sandbox_file_read: { path: 'd/a.txt', machine: sb },
    sandbox_file_search: { pattern: 'two', path: 'd', machine: sb },
    sandbox_shell_read: { machine: sb },
    sandbox_audit_query: {},
  };
  const ro = Object.keys(tools).filter((n) => tools[n].annotations?.readOnlyHint).sort();
  t.deepEqual(ro, Object.keys(reads).sort(), 'each read-only tool has a call here');
  const before = await snap();
  t.like(before, /workspace\/d\/a\.txt f 8 /, 'the snapshot sees the files');
  for (const name of ro) {
    const r = await srv.call(name, reads[name]);
    t.ok(!r.isError, `${name}: answered`, r.content?.[0]?.text);
    t.is(await snap(), before, `${name} (readOnlyHint) changed no file`);
  }

  // idempotentHint: a second identical call changes nothing the first did not
  const idem = Object.keys(tools).filter((n) => tools[n].annotations?.idempotentHint).sort();
  t.deepEqual(idem, ['kill_sandbox', 'sandbox_file_write', 'write_file'], 'the idempotent tools');
  for (const [name, args] of [['write_file', { path: 'd/w.txt', content: 'same', sandbox_id: sb }],
    ['sandbox_file_write', { path: 'd/c.json', content: '{"a": 1}', machine: sb }]]) {
    await srv.tool(name, args);
    const once = await snap(CONTENT);
    await srv.tool(name, args);
    t.is(await snap(CONTENT), once, `${name} twice: the same files as once`);
  }

  // destructiveHint false: creating a sandbox leaves the others as they were
  t.is(tools.create_sandbox.annotations?.destructiveHint, false, 'create_sandbox is not destructive');
  const files = await snap(CONTENT);
  const other = (await srv.tool('create_sandbox', {})).sandbox_id;
  t.is(await snap(CONTENT), files, 'a second create_sandbox left the first sandbox\'s files');
  const k1 = await srv.call('kill_sandbox', { sandbox_id: other });
  const k2 = await srv.call('kill_sandbox', { sandbox_id: other });
  t.ok(!k1.isError && k2.isError, 'kill_sandbox twice: the second finds nothing more to do');
  t.is(await snap(CONTENT), files, 'and the first sandbox is untouched');
  await srv.close();
}, { timeout: 120 });
