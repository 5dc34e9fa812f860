// SIGTERM, SIGINT and SIGHUP end a stdio session cleanly: exit status 0 and
// every sandbox of the session destroyed.  (Found: SIGTERM used to land on a
// helper thread that did not block it, and the process died with 143.)
import { t, preflight, sdkClient, containersOfServer } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    const srv = await sdkClient([], {}, { name: `ended by ${sig}` });
    await srv.tool('create_sandbox', {});
    await srv.tool('run_command', { command: 'true' });
    t.is((await containersOfServer(srv.pid)).length, 1, `${sig}: the session has one sandbox`);
    const r = await srv.kill(sig);
    t.is(r.signal ?? null, null, `${sig}: the server was not killed by the signal`);
    t.is(r.code, 0, `${sig}: the server exits with status 0`);
    t.deepEqual((await containersOfServer(srv.pid)).map((c) => c.id), [], `${sig}: no sandbox of the session is left`);
  }
}, { timeout: 120 });
