// Concurrent lazy calls in a fresh session share ONE default sandbox.
import { t, preflight, sdkClient, containersOfServer, containersOfSession, LABEL_SESSION } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  for (const n of [3, 5]) {
    const srv = await sdkClient();
    const results = await Promise.all(Array.from({ length: n }, (_, i) =>
      srv.tool('run_command', { command: `sleep 0.5; echo ${i}` })));
    const ids = new Set(results.map((r) => r.sandbox_id));
    t.is(ids.size, 1, `${n} concurrent calls: all got the same sandbox_id`, { ids: [...ids] });
    t.is(results.filter((r) => r.sandbox_created === true).length, 1, `${n} concurrent calls: exactly one reports sandbox_created`);
    results.forEach((r, i) => t.is(r.stdout, `${i}\n`, `${n} concurrent calls: call ${i} got its own output`));
    const mine = await containersOfServer(srv.pid);
    t.is(mine.length, 1, `${n} concurrent calls: one container for this server`);
    const hash = mine[0]?.labels[LABEL_SESSION];
    if (hash) t.is((await containersOfSession(hash)).length, 1, `${n} concurrent calls: one container with the session label`);
    // the next call reuses it
    const again = await srv.tool('run_command', { command: 'true' });
    t.ok(ids.has(again.sandbox_id), `${n} concurrent calls: the next call reuses the shared sandbox`);
    await srv.close();
  }
  // concurrent calls of different tools
  const srv = await sdkClient();
  const mixed = await Promise.all([
    srv.tool('write_file', { path: '/workspace/m', content: 'm' }),
    srv.tool('list_files', {}),
    srv.tool('run_code', { code: 'print(2)' }),
  ]);
  t.is(new Set(mixed.map((r) => r.sandbox_id)).size, 1, 'write_file, list_files and run_code at once share one sandbox');
  t.is((await containersOfServer(srv.pid)).length, 1, 'one container for the mixed calls');
  await srv.close();
}, { timeout: 150 });
