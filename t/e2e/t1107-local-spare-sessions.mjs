// [local] spare in an HTTP server with two sessions: each create_sandbox
// that is a hit gets its own spare, never the other session's sandbox (not
// while it lives, not after it was killed), and cannot read its files.
import { t, preflight, errorText, trackSandbox, waitFor, SPARE_DEFAULT } from '../lib/sg.mjs';
import { startHttp, connect } from '../http/lib.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];
/** The spares a server's log says are ready, in order: {id, dir}. */
const readies = (text) => [...text.matchAll(/spare: (local-[0-9a-f]{12}) ready in (\S+) \(/g)]
  .map((m) => ({ id: m[1], dir: m[2] }));

t.run(async () => {
  await preflight({ docker: false });
  const http = await startHttp({ args: LOCAL, env: SPARE_DEFAULT });
  const ready = (n) => waitFor(() => readies(http.stderr()).length >= n, 30000);
  const a = await connect(http.url, { name: 'agent A' });
  const b = await connect(http.url, { name: 'agent B' });
  t.ok(await ready(1), 'a spare is ready');
  const sa = await a.tool('create_sandbox', {});
  trackSandbox(sa.sandbox_id);
  t.is(sa.sandbox_id, readies(http.stderr())[0].id, 'session A got the first spare');
  await a.tool('write_file', { path: 'secret.txt', content: 'A only' });
  t.ok(await ready(2), 'the refill is ready');
  const sb = await b.tool('create_sandbox', {});
  trackSandbox(sb.sandbox_id);
  t.is(sb.sandbox_id, readies(http.stderr())[1].id, 'session B got the refill');
  t.isnt(sb.sandbox_id, sa.sandbox_id, '... not A\'s sandbox');
  const rb = await b.call('read_file', { path: 'secret.txt' });
  t.ok(rb.isError, 'B\'s sandbox does not hold A\'s file', { text: errorText(rb) });
  const byId = await b.call('read_file', { path: 'secret.txt', sandbox_id: sa.sandbox_id });
  t.ok(byId.isError, 'B cannot reach A\'s sandbox by its id', { text: errorText(byId) });
  await a.tool('kill_sandbox', { sandbox_id: sa.sandbox_id });
  t.ok(await ready(3), 'another refill');
  const sb2 = await b.tool('create_sandbox', {});
  trackSandbox(sb2.sandbox_id);
  t.ok(![sa.sandbox_id, sb.sandbox_id].includes(sb2.sandbox_id), 'a killed sandbox is never handed out again', { sb2 });
  t.is((await b.tool('list_files', {})).files.length, 0, '... the new one is empty');
  await a.close();
  await b.close();
  const st = await http.stop('SIGTERM');
  t.is(st?.code, 0, 'the server ends cleanly');
}, { timeout: 120 });
