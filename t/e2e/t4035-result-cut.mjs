// Results that say what was cut (doc/results.md): a 10 MiB command output
// comes back as a bounded head and tail with "truncated" and "cut" (total
// bytes and lines, the kept ranges, the saved file and the read_file call
// for the rest), and is read to its last byte through those calls (sha256
// compared); read_file pages by default and gives more on request up to
// [sandbox] max_file_bytes; sandbox_file_read says what it cut (a long line,
// the result's budget); a shell's dropped middle is said; the budget is
// [server] max_result_bytes.
//
// The body is a function of the backend (SG_TEST_BACKEND, default docker).
import crypto from 'node:crypto';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { backendFromEnv } from '../lib/backends.mjs';

const N = 10 * 1024 * 1024;          // 1048576 lines of "%09d\n"
const BUDGET = 81920;                // [server] max_result_bytes default
const GEN = "awk 'BEGIN { for (i = 0; i < 1048576; i++) printf \"%09d\\n\", i }'";

function expected() {
  const b = Buffer.alloc(N);
  for (let i = 0; i < 1048576; i++) b.write(`${String(i).padStart(9, '0')}\n`, i * 10, 'latin1');
  return b;
}
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

async function body(srv) {
  const tool = (name, args) => srv.tool(name, args);
  const want = expected();

  // ---- run_command: head and tail inline, the whole saved ------------------------------------------
  const r = await tool('run_command', { command: `${GEN}; echo err >&2` });
  t.is(r.exit_code, 0, '10 MiB command: exit 0');
  t.is(r.truncated, true, 'truncated: true');
  t.is(r.stderr, 'err\n', 'stderr fits whole');
  t.is(r.cut?.stderr, undefined, '... and is not in cut');
  const c = r.cut?.stdout ?? {};
  const h = Math.floor((BUDGET - 4) / 10), tl = N - (BUDGET - 4 - h);
  t.hasFields(c, { total_bytes: N, total_lines: 1048576, kept: [[0, h], [tl, N]], kept_bytes: h + N - tl },
    'cut.stdout: total bytes and lines, the head and tail kept ([shell] head_size:tail_size)');
  t.like(c.path, /^\/tmp\/sandgate-output\/[0-9a-f]{16}\.stdout$/, 'the whole output is saved in the sandbox');
  t.deepEqual(c.rest, { tool: 'read_file', arguments: { path: c.path, offset: h, limit: BUDGET, sandbox_id: r.sandbox_id } },
    'rest: the read_file call for the next bytes');
  const marker = `\n[sandgate: bytes ${h}-${tl} of ${N} cut; all of it is in ${c.path}]\n`;
  t.is(r.stdout, want.subarray(0, h).toString() + marker + want.subarray(tl).toString(), 'stdout: exact head, marker, exact tail');
  t.cmp(Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr), '<=', BUDGET + 200, 'stdout+stderr within the budget');

  // ---- paged to the last byte --------------------------------------------------------------------
  const parts = [want.subarray(0, h)];
  let next = c.rest, pages = 0;
  for (; next && pages < 3; pages++) { // default pages: bounded
    const p = await tool(next.tool, next.arguments);
    t.is(Buffer.byteLength(p.content), BUDGET, `default page ${pages + 1}: ${BUDGET} bytes`);
    t.hasFields(p.cut?.content ?? {}, { total_bytes: N, kept_bytes: BUDGET, kept: [[next.arguments.offset, next.arguments.offset + BUDGET]] },
      `page ${pages + 1}: what it kept`);
    parts.push(Buffer.from(p.content));
    next = p.cut?.content?.rest;
  }
  while (next) { // asked explicitly: 4 MiB pages
    const p = await tool(next.tool, { ...next.arguments, limit: 4 << 20 });
    parts.push(Buffer.from(p.content));
    next = p.cut?.content?.rest;
    pages++;
    if (!next) t.ok(p.truncated === undefined && p.cut === undefined && p.size === N, 'the last page says nothing was cut', p.cut);
  }
  const all = Buffer.concat(parts);
  t.is(all.length, N, `read to its last byte in ${pages} calls`);
  t.is(sha(all), sha(want), 'sha256 of what was read equals the output\'s');

  // ---- read_file: bounded by default, more on request --------------------------------------------
  const d = await tool('read_file', { path: c.path });
  t.is(d.content.length, BUDGET, 'read_file without limit: one budget of bytes');
  t.deepEqual(d.cut?.content?.rest?.arguments, { path: c.path, offset: BUDGET, limit: BUDGET, sandbox_id: r.sandbox_id }, '... and the call for the rest');
  const big = await tool('read_file', { path: c.path, offset: N - 5, limit: 1 << 20 });
  t.ok(big.content === want.subarray(N - 5).toString() && big.offset === N - 5 && big.cut === undefined, 'offset near the end: the last bytes, nothing cut', big);
  const b64 = await tool('read_file', { path: c.path, encoding: 'base64' });
  t.is(b64.content.length, BUDGET, 'base64 page: encoded, within the budget');
  t.is(b64.cut?.content?.kept_bytes, BUDGET / 4 * 3, '... three quarters of it in bytes');
  t.is(b64.cut?.content?.rest?.arguments?.encoding, 'base64', '... and the rest asks for base64 again');
  const tooMuch = await srv.call('read_file', { path: c.path, limit: 64 * 1024 * 1024 + 1 });
  t.ok(tooMuch.isError && /'limit'.*max_file_bytes/.test(errorText(tooMuch)), 'limit above [sandbox] max_file_bytes: an error naming it', errorText(tooMuch));

  // ---- sandbox_file_read ------------------------------------------------------------------------
  await tool('run_command', { command: "awk 'BEGIN { s = \"\"; for (i = 0; i < 5000; i++) s = s \"x\"; print \"short\"; print s }' > long.txt" });
  const lr = await tool('sandbox_file_read', { path: 'long.txt' });
  t.is(lr.truncated, true, 'sandbox_file_read: a line cut at 2000 characters says truncated: true');
  t.hasFields(lr.cut?.output ?? {}, { lines_cut: [2], line_max_chars: 2000, total_lines: 2, kept_lines: [1, 2], rest: null },
    '... cut.output names the line');
  t.like(lr.cut?.output?.line_rest?.arguments?.command ?? '', /NR==2 .*substr\(\$0, 2001\)/, '... and the command that prints the rest of it');
  await tool('run_command', { command: "awk 'BEGIN { for (i = 1; i <= 2000; i++) { printf \"%04d\", i; for (j = 0; j < 99; j++) printf \"abcdefghij\"; print \"\" } }' > wide.txt" });
  const wr = await tool('sandbox_file_read', { path: 'wide.txt', limit: 2000 });
  const shown = wr.output.split('\n').length - 1;
  t.cmp(Buffer.byteLength(wr.output), '<=', BUDGET, 'sandbox_file_read of 2000 wide lines stays within the budget');
  t.is(shown, 82, '... 82 lines of 995 bytes (997 and 998 shown)');
  t.hasFields(wr, { truncated: true, total_lines: 2000 }, '... truncated: true');
  t.deepEqual(wr.cut?.output?.rest, { tool: 'sandbox_file_read', arguments: { path: wr.path, offset: 83, limit: 2000 } }, '... rest: the next page');

  // ---- list_files: entries within the budget, the rest by offset ------------------------------------
  await tool('run_command', { command: 'mkdir -p many && cd many && seq -f "file-%05g.txt" 1 3000 | xargs touch' });
  let lf = await tool('list_files', { path: 'many' });
  const names = lf.files.map((f) => f.name);
  t.hasFields(lf.cut?.files ?? {}, { total_entries: 3000, kept_entries: [0, names.length] }, `list_files of 3000 entries: ${names.length} kept, said in cut.files`);
  t.cmp(JSON.stringify(lf.files).length, '<=', BUDGET, '... within the budget');
  for (let guard = 0; lf.cut?.files?.rest && guard < 100; guard++) {
    const rest = lf.cut.files.rest;
    lf = await tool(rest.tool, rest.arguments);
    names.push(...lf.files.map((f) => f.name));
  }
  t.is(new Set(names).size === 3000 && names.length === 3000, true, 'following rest lists each entry once');

  // ---- sandbox_file_search: results within the budget ----------------------------------------------
  await tool('run_command', { command: "mkdir -p hay && awk 'BEGIN { for (i = 1; i <= 200; i++) { printf \"%04d needle \", i; for (j = 0; j < 99; j++) printf \"abcdefghij\"; print \"\" } }' > hay/h.txt" });
  let sr = await tool('sandbox_file_search', { pattern: 'needle', path: 'hay', limit: 200 });
  const k0 = sr.results.length;
  t.ok(k0 > 0 && k0 < 200 && sr.truncated === true, `a search of 200 wide matches keeps ${k0} (the budget)`);
  t.deepEqual(sr.cut?.results?.kept_entries, [0, k0], '... cut.results: the entries kept');
  t.cmp(JSON.stringify(sr.results).length, '<=', BUDGET, '... within the budget');
  let found = sr.results.length;
  for (let guard = 0; sr.cut?.results?.rest && guard < 50; guard++) {
    sr = await tool(sr.cut.results.rest.tool, sr.cut.results.rest.arguments);
    found += sr.results.length;
  }
  t.is(found, 200, 'following rest finds every match once');

  // ---- a shell's dropped middle ---------------------------------------------------------------------
  const se = await tool('sandbox_shell_exec', { command: 'seq 1 100000', max_output: 1000 });
  t.hasFields(se.cut?.output ?? {}, { total_bytes: 588895, kept_bytes: 588895 - se.dropped_bytes, rest: null }, 'sandbox_shell_exec: cut.output says what was dropped');
  t.is(se.truncated, true, '... truncated: true');
}

t.run(async () => {
  const be = backendFromEnv();
  if (!be) await t.bailOut(`unknown SG_TEST_BACKEND ${process.env.SG_TEST_BACKEND}`);
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  const srv = await sdkClient(be.args, be.env);
  await body(srv);
  await srv.close();
  // the budget is configurable
  const small = await sdkClient([...be.args, '--set', 'server.max_result_bytes=2048'], be.env);
  const s = await small.tool('run_command', { command: 'seq 1 2000' });
  t.hasFields(s.cut?.stdout ?? {}, { total_bytes: 8893, total_lines: 2000, kept: [[0, 204], [8893 - 1844, 8893]] }, 'max_result_bytes = 2048: 204 bytes of head, 1844 of tail');
  t.is((await small.tool('read_file', { path: s.cut?.stdout?.path })).content.length, 2048, '... and read_file pages of 2048 bytes');
  await small.close();
}, { timeout: 300 });
