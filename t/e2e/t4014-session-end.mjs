// Session end (stdin EOF) destroys every sandbox the session created, and
// only those.
import { t, preflight, sdkClient, rawServer, containersOfServer, containersOfSession, containerOf, LABEL_SESSION } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const other = await sdkClient([], {}, { name: 'bystander' });
  const keep = await other.tool('create_sandbox', {});

  const srv = await sdkClient([], {}, { name: 'ending session' });
  const lazy = await srv.tool('run_command', { command: 'true' });
  const a = await srv.tool('create_sandbox', {});
  const b = await srv.tool('create_sandbox', { timeout: 600 });
  const killed = await srv.tool('create_sandbox', {});
  await srv.tool('kill_sandbox', { sandbox_id: killed.sandbox_id });
  const mine = await containersOfServer(srv.pid);
  t.is(mine.length, 3, 'the session has three live sandboxes');
  const hash = mine[0]?.labels[LABEL_SESSION];
  t.is((await containersOfSession(hash)).length, 3, 'three containers carry the session label');

  const r = await srv.close(60000);
  t.cmp(r.ms, '<', 30000, 'the server exits within 30 s of stdin EOF');
  t.deepEqual((await containersOfSession(hash)).map((c) => c.id), [], 'no container with the session label is left');
  for (const id of [lazy.sandbox_id, a.sandbox_id, b.sandbox_id]) {
    t.ok(!(await containerOf(id)), `sandbox ${id.slice(0, 12)} is gone`);
  }
  t.ok((await containerOf(keep.sandbox_id))?.running, "another session's sandbox is untouched");

  // a session that ends while a lazy creation is still in flight leaves nothing either
  const raw = await rawServer([], {}, { name: 'ends mid-call' });
  await raw.initialize();
  raw.sendRequest('tools/call', { name: 'run_command', arguments: { command: 'sleep 2' } });
  await new Promise((res) => setTimeout(res, 300));
  await raw.close(60000);
  t.deepEqual((await containersOfServer(raw.pid)).map((c) => c.id), [], 'EOF during the first call: no container left');

  await other.close();
}, { timeout: 150 });
