// create_sandbox makes the new sandbox the default; an explicit sandbox_id
// addresses that sandbox and does not change the default; earlier sandboxes
// stay alive.
import { t, preflight, sdkClient, containerOf } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const lazy = await srv.tool('run_command', { command: 'echo lazy > /tmp/name' });
  t.is(lazy.sandbox_created, true, 'first call lazily made sandbox L');

  const n1 = await srv.tool('create_sandbox', {});
  t.isnt(n1.sandbox_id, lazy.sandbox_id, 'create_sandbox made a new sandbox N1');
  const d1 = await srv.tool('run_command', { command: 'cat /tmp/name 2>/dev/null; echo n1 > /tmp/name' });
  t.is(d1.sandbox_id, n1.sandbox_id, 'after create_sandbox, calls without sandbox_id use N1');
  t.is(d1.stdout, '', 'N1 is a different machine (no file from L)');
  t.ok(d1.sandbox_created !== true, 'no lazy creation reported once a default exists');

  const n2 = await srv.tool('create_sandbox', {});
  const e1 = await srv.tool('run_command', { command: 'cat /tmp/name', sandbox_id: n1.sandbox_id });
  t.is(e1.sandbox_id, n1.sandbox_id, 'explicit sandbox_id N1 addresses N1');
  t.is(e1.stdout, 'n1\n', '... and runs there');
  const d2 = await srv.tool('run_command', { command: 'true' });
  t.is(d2.sandbox_id, n2.sandbox_id, 'the explicit call did not change the default (N2)');

  const eL = await srv.tool('run_command', { command: 'cat /tmp/name', sandbox_id: lazy.sandbox_id });
  t.is(eL.stdout, 'lazy\n', 'the first sandbox L is still alive and addressable');
  for (const tool of [['read_file', { path: '/tmp/name', sandbox_id: lazy.sandbox_id }],
    ['list_files', { path: '/tmp', sandbox_id: lazy.sandbox_id }],
    ['write_file', { path: '/tmp/w', content: 'w', sandbox_id: lazy.sandbox_id }],
    ['run_code', { code: 'print(3)', sandbox_id: lazy.sandbox_id }]]) {
    const r = await srv.tool(...tool);
    t.is(r.sandbox_id, lazy.sandbox_id, `${tool[0]} with explicit sandbox_id uses L`);
  }
  const d3 = await srv.tool('list_files', {});
  t.is(d3.sandbox_id, n2.sandbox_id, 'the default is still N2 after explicit calls of every tool');
  for (const id of [lazy.sandbox_id, n1.sandbox_id, n2.sandbox_id]) {
    t.ok((await containerOf(id))?.running, `sandbox ${id.slice(0, 12)} is running`);
  }
  await srv.close();
}, { timeout: 120 });
