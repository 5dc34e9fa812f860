// Every result is bounded (doc/results.md): a string a tool does not cut
// itself, here the diff of a patch that adds a 200 KB line, keeps its head
// within [server] max_result_bytes, on a character boundary, and says what
// was cut; the file itself is whole.
import { t, preflight, sdkClient } from '../lib/sg.mjs';

const BUDGET = 8192;

t.run(async () => {
  await preflight({ docker: false });
  const srv = await sdkClient(['--set', 'sandbox.default_backend=local', '--set', `server.max_result_bytes=${BUDGET}`]);
  await srv.tool('sandbox_file_write', { path: 'a.txt', content: 'one\ntwo\n' });
  const line = 'é'.repeat(100000); // 200000 bytes of two-byte characters
  const r = await srv.tool('sandbox_file_patch', { mode: 'replace', path: 'a.txt', old_string: 'two', new_string: line });
  const diffBytes = r.cut?.diff?.total_bytes;
  t.ok(diffBytes > 200000, `the whole diff was ${diffBytes} bytes`);
  t.is(r.truncated, true, 'the result says it was cut');
  const kept = Buffer.byteLength(r.diff);
  t.ok(kept <= BUDGET && kept >= BUDGET - 1, `the diff keeps ${kept} bytes (at most ${BUDGET}, a whole character less at worst)`);
  t.deepEqual(r.cut.diff.kept, [[0, kept]], 'the head is what was kept');
  t.is(r.cut.diff.kept_bytes, kept, 'kept_bytes says so');
  t.is(r.cut.diff.rest, null, 'no call returns the rest of a diff');
  t.ok(!r.diff.includes('\uFFFD'), 'no character is split');
  const back = await srv.tool('run_command', { command: 'wc -c < a.txt' });
  t.is(back.stdout.trim(), String(4 + 200000 + 1), 'the file holds the whole line');
  await srv.tool('sandbox_file_write', { path: 'b.txt', content: 'one\n' });
  const small = await srv.tool('sandbox_file_patch', { mode: 'replace', path: 'b.txt', old_string: 'one', new_string: 'uno' });
  t.ok(small.truncated === undefined && small.cut === undefined, 'a small result is not marked');
  await srv.close();
}, { timeout: 60 });
