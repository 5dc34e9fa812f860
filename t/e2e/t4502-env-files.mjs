// sandbox_file_read / write / patch / search in the machine's own view:
// symlinks resolve inside the machine (reading a link to /etc/hostname gives
// the machine's hostname, writes through / and dangling links land inside
// it, a search does not follow links out of the workspace); mode 750 kept
// by write and patch, no temporary file left (also after a blocked write);
// JSON/YAML/Python/TOML validation with line and column; a 10 MB file paged
// to its last line; BOM, escapes, binary; replace and unified-diff patches;
// ripgrep and the grep fallback; safety advisories.
//
// The body is a function of the backend (SG_TEST_BACKEND, default docker).
import fs from 'node:fs';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { backendFromEnv } from '../lib/backends.mjs';

// setup() starts what the backend needs and gives sandgate's arguments.

async function body(srv, be) {
  const sh = async (command) => (await srv.tool('run_command', { command })).stdout;
  const call = (tool, args) => srv.call(tool, args);
  const tool = (name, args) => srv.tool(name, args);
  const noTemps = async (dir, label) => {
    const names = await sh(`ls -A ${dir}`);
    t.ok(!/\.sg-[0-9a-f]+|sandgate-check/.test(names), `${label}: no temporary file is left behind`, { names });
  };

  const ws = (await sh('pwd')).trim();
  const w = await tool('sandbox_file_write', { path: 'hello.txt', content: 'hello\nworld\n' });
  t.hasFields(w, { status: 'ok', bytes_written: 12, lint: null }, 'write: ok, bytes_written');
  t.is(w.path, `${ws}/hello.txt`, 'write: a relative path is under the workspace');
  const r = await tool('sandbox_file_read', { path: 'hello.txt' });
  t.hasFields(r, { status: 'ok', output: '1|hello\n2|world\n', total_lines: 2, truncated: false }, 'read: numbered lines, no phantom last line');
  t.like(r.hint, /End of file - total 2 lines/, 'read: end-of-file hint');

  // ---- symlinks resolve in the machine -------------------------------------------------
  const uniq = `escaped-${process.pid}-${Date.now()}.txt`;
  const target = `/tmp/newfile-${process.pid}-${Date.now()}`;
  await sh(`ln -s /etc/hostname leak; ln -s / rootlink; ln -s ${target} dangling`);
  const hostname = (await sh(be.container ? 'hostname' : 'cat /etc/hostname')).trim();
  const leak = await tool('sandbox_file_read', { path: 'leak' });
  t.is(leak.output, `1|${hostname}\n`, `reading leak gives the machine's own hostname (${hostname})`);
  const esc = await call('sandbox_file_write', { path: `rootlink/tmp/${uniq}`, content: 'inside\n' });
  if (esc.isError && be.name === 'fc') {
    // the FC emulator maps the sandbox to a host directory and refuses
    // what would leave it: refused is as good as inside
    t.like(errorText(esc), /leaves the sandbox/, 'writing through rootlink: the FC sandbox refuses to leave its root');
  } else {
    t.ok(!esc.isError, 'writing through rootlink succeeds', { text: errorText(esc) });
    t.is(await sh(`cat /tmp/${uniq}`), 'inside\n', 'writing through rootlink lands inside the machine');
  }
  if (be.container) t.ok(!fs.existsSync(`/tmp/${uniq}`), '... and not on the host');
  await sh(`rm -f /tmp/${uniq}`);
  await tool('sandbox_file_write', { path: 'dangling', content: 'via dangling\n' });
  t.is(await sh(`cat ${target}; test -L dangling && echo still-a-link; rm -f ${target}`), 'via dangling\nstill-a-link\n',
    'writing a dangling link creates its target inside the machine');
  const root = await tool('sandbox_file_search', { pattern: 'root:' });
  t.hasFields(root, { status: 'ok', results: [] }, 'a search for root: over the workspace does not follow links out of it');
  const hasRg = (await sh('command -v rg || true')).trim() !== '';
  t.is(root.tool, hasRg ? 'rg' : 'grep', `the search used ${hasRg ? 'ripgrep' : 'grep (no rg on this machine)'}`);

  // ---- mode, atomicity, validation ----------------------------------------------------------
  await sh("printf '#!/bin/sh\\necho old\\n' > s.sh && chmod 750 s.sh");
  await tool('sandbox_file_write', { path: 's.sh', content: '#!/bin/sh\necho new\n' });
  t.is(await sh('stat -c %a s.sh; ./s.sh'), '750\nnew\n', 'write keeps mode 750 and the script prints the new text');
  const p1 = await tool('sandbox_file_patch', { mode: 'replace', path: 's.sh', old_string: 'echo new', new_string: 'echo newer' });
  t.hasFields(p1, { status: 'ok', matches: 1, fuzzy: false }, 'patch replace: one exact match');
  t.like(p1.diff, /-echo new\n\+echo newer/, 'patch replace: the diff of the change');
  t.is(await sh('stat -c %a s.sh; ./s.sh'), '750\nnewer\n', 'patch keeps mode 750 and the script prints the new text');
  await noTemps(ws, 'after write and patch');

  await tool('sandbox_file_write', { path: 'cfg.json', content: '{"a": 1}\n' });
  const bad = await call('sandbox_file_write', { path: 'cfg.json', content: '{"a": 1,\n "b": }\n' });
  t.ok(bad.isError, 'invalid JSON is blocked');
  t.like(errorText(bad), /line 2, column \d+/, 'the error gives line and column', { text: errorText(bad) });
  t.is(await sh('cat cfg.json'), '{"a": 1}\n', 'the file is unchanged');
  await noTemps(ws, 'after a blocked write');
  const badYaml = await call('sandbox_file_write', { path: 'x.yaml', content: 'a: 1\nb: [1, 2\n' });
  t.ok(badYaml.isError && /YAML.*line \d+, column \d+/.test(errorText(badYaml)), 'invalid YAML is blocked with line and column', { text: errorText(badYaml) });
  t.hasFields((await tool('sandbox_file_write', { path: 'x.yml', content: 'a: [1, 2]\n' })).lint, { ok: true, checked: 'yaml' }, 'valid YAML: lint ok');
  const badPy = await call('sandbox_file_write', { path: 'm.py', content: 'def f(:\n    pass\n' });
  t.ok(badPy.isError && /Python.*line 1, column \d+/.test(errorText(badPy)), 'invalid Python is blocked with line and column (python3 in the machine)', { text: errorText(badPy) });
  t.is(await sh('test -e m.py && echo exists || echo absent'), 'absent\n', 'a blocked new file is not created');
  const badToml = await call('sandbox_file_write', { path: 'p.toml', content: 'a = 1\nb = \n' });
  t.ok(badToml.isError && /TOML/.test(errorText(badToml)), 'invalid TOML is blocked', { text: errorText(badToml) });
  t.hasFields((await tool('sandbox_file_write', { path: 'ok.py', content: 'print(1)\n' })).lint, { ok: true, checked: 'python' }, 'valid Python: lint ok');
  if (be.mutableBin) {
    const py = (await sh('command -v python3')).trim();
    await sh(`mv ${py} ${py}.off`);
    const nopy = await tool('sandbox_file_write', { path: 'n.py', content: 'def f(:\n' });
    t.ok(nopy.lint && nopy.lint.ok === null && /not validated/.test(nopy.lint.note), 'without python3 the write goes ahead, noted as not validated', nopy);
    await sh(`mv ${py}.off ${py}`);
  }

  // ---- large files, BOM, escapes, binary, missing -------------------------------------------------
  await sh('seq 1 1500000 > big.txt');
  const size = Number((await sh('wc -c < big.txt')).trim());
  t.cmp(size, '>', 10e6, `a 10 MB file (${size} bytes)`);
  const head = await tool('sandbox_file_read', { path: 'big.txt', limit: 3 });
  t.hasFields(head, { output: '1|1\n2|2\n3|3\n', total_lines: 1500000, truncated: true }, 'big file: first page, total_lines');
  t.like(head.hint, /offset=4/, 'big file: the hint says where to continue');
  const tail = await tool('sandbox_file_read', { path: 'big.txt', offset: 1499998, limit: 10 });
  t.hasFields(tail, { output: '1499998|1499998\n1499999|1499999\n1500000|1500000\n', truncated: false }, 'big file: paged to its last line');
  await sh("printf '\\357\\273\\277bom line\\n\\033[31mred\\033[0m text\\r\\n' > e.txt");
  t.hasFields(await tool('sandbox_file_read', { path: 'e.txt' }), { output: '1|bom line\n2|red text\n', bom: true }, 'BOM and terminal escapes are removed');
  await sh("printf 'a\\000b' > bin.dat");
  t.hasFields(await tool('sandbox_file_read', { path: 'bin.dat' }), { status: 'binary' }, 'a binary file is reported, not dumped');
  await sh('touch missing.bak');
  const miss = await tool('sandbox_file_read', { path: 'missing.txt' });
  t.is(miss.status, 'not_found', 'a missing file: not_found');
  t.ok((miss.suggestions || []).includes(`${ws}/missing.bak`), 'with suggestions', miss);
  const long = await tool('sandbox_file_read', { path: 'long.txt' }).catch(() => null);
  t.is(long?.status, 'not_found', 'not_found is a result, not an error');

  // ---- patches ----------------------------------------------------------------------------------
  await tool('sandbox_file_write', { path: 'code.py', content: 'x = 1\ny = 2\nx = 1\n\nclass A:\n    def f(self):\n        return 1\n' });
  const amb = await call('sandbox_file_patch', { mode: 'replace', path: 'code.py', old_string: 'x = 1', new_string: 'x = 3' });
  t.ok(amb.isError && /lines 1 and 3/.test(errorText(amb)), 'an ambiguous match lists the candidate lines', { text: errorText(amb) });
  t.hasFields(await tool('sandbox_file_patch', { mode: 'replace', path: 'code.py', old_string: 'x = 1', new_string: 'x = 3', replace_all: true }),
    { matches: 2 }, 'replace_all');
  const tol = await tool('sandbox_file_patch', { mode: 'replace', path: 'code.py', old_string: 'def f(self):\n    return 1', new_string: 'def f(self):\n    return 2' });
  t.hasFields(tol, { fuzzy: true, strategy: 'whitespace' }, 'indentation-tolerant match');
  t.is(await sh('cat code.py'), 'x = 3\ny = 2\nx = 3\n\nclass A:\n    def f(self):\n        return 2\n', 'the replacement is re-indented');
  const diff = '--- a/code.py\n+++ b/code.py\n@@ -1,3 +1,3 @@\n x = 3\n-y = 2\n+y = 20\n x = 3\n@@ -2,2 +2,3 @@\n class A:\n+    """doc"""\n     def f(self):\n';
  const pd = await tool('sandbox_file_patch', { mode: 'patch', patch: diff });
  t.is(pd.files?.[0]?.hunks, 2, 'a unified diff with two hunks applies');
  t.cmp(pd.files?.[0]?.max_offset, '>', 0, 'the second hunk at an offset');
  t.is(await sh('cat code.py'), 'x = 3\ny = 20\nx = 3\n\nclass A:\n    """doc"""\n    def f(self):\n        return 2\n', 'the patched text');
  const failing = await call('sandbox_file_patch', { mode: 'patch', patch: '--- a/code.py\n+++ b/code.py\n@@ -1,2 +1,2 @@\n-nothing like this\n+z\n' });
  t.ok(failing.isError && /hunk 1 of 1/.test(errorText(failing)), 'a hunk that does not apply is an error naming it', { text: errorText(failing) });
  t.like(await sh('cat code.py'), /^x = 3\ny = 20/, '... and the file is unchanged');
  await sh("printf 'one\\r\\ntwo\\r\\n' > crlf.txt");
  await tool('sandbox_file_patch', { mode: 'replace', path: 'crlf.txt', old_string: 'one\ntwo\n', new_string: 'one\n2\n' });
  t.is(await sh('od -c crlf.txt | head -2 | tr -s " "'), (await sh("printf 'one\\r\\n2\\r\\n' | od -c | head -2 | tr -s ' '")), 'a CRLF file stays CRLF');
  const newf = await tool('sandbox_file_patch', { mode: 'patch', patch: '--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1,2 @@\n+made\n+by diff\n' });
  t.is(newf.files?.[0]?.created, true, 'a diff can create a file');
  t.is(await sh('cat sub/new.txt'), 'made\nby diff\n', '... with parent directories');
  await noTemps(ws, 'after patches');

  // ---- search ----------------------------------------------------------------------------------
  const s1 = await tool('sandbox_file_search', { pattern: 'hello', path: '.' });
  t.ok(s1.results.some((x) => /hello\.txt$/.test(x.path) && x.line === 1 && x.snippet === 'hello'), 'content search: path, line, snippet', s1);
  const s2 = await tool('sandbox_file_search', { pattern: 'y = 20', context: 1, file_glob: '*.py' });
  t.is(s2.results.length, 1, 'glob filter');
  t.deepEqual(s2.results[0]?.context_before?.map((c) => c.text), ['x = 3'], 'context lines before');
  t.deepEqual(s2.results[0]?.context_after?.map((c) => c.text), ['x = 3'], 'context lines after');
  const s3 = await tool('sandbox_file_search', { pattern: 'x = 3', output_mode: 'count' });
  t.ok(Object.entries(s3.results).some(([k, v]) => /code\.py$/.test(k) && v === 2), 'count mode', s3);
  const s4 = await tool('sandbox_file_search', { pattern: 'new.txt', search_type: 'files' });
  t.ok(s4.results.some((x) => /sub\/new\.txt$/.test(x)), 'files mode finds by name', s4);
  const s5 = await tool('sandbox_file_search', { pattern: '[0-9]', path: 'big.txt', limit: 5, offset: 10 });
  t.is(s5.results.length, 5, 'paging: limit');
  t.is(s5.results[0].line, 11, 'paging: offset');
  t.is(s5.truncated, true, 'paging: truncated');
  if (be.mutableBin) {
    const rg = (await sh('command -v rg')).trim();
    await sh(`mv ${rg} ${rg}.off`);
    const g = await tool('sandbox_file_search', { pattern: 'hello' });
    t.is(g.tool, 'grep', 'without rg the search falls back to grep');
    t.ok(g.results.some((x) => /hello\.txt$/.test(x.path)), '... and finds the same');
    t.hasFields(await tool('sandbox_file_search', { pattern: 'root:' }), { results: [] }, 'grep does not follow links out of the workspace either');
    const gf = await tool('sandbox_file_search', { pattern: '*.sh', search_type: 'files' });
    t.is(gf.tool, 'find', 'files mode falls back to find');
    t.ok(gf.results.some((x) => /s\.sh$/.test(x)), '... and finds s.sh');
    await sh(`mv ${rg}.off ${rg}`);
  }
  const badRe = await call('sandbox_file_search', { pattern: '(' });
  t.ok(badRe.isError, 'a bad regular expression is an error, not an empty success', { text: errorText(badRe) });

  // ---- advisories -----------------------------------------------------------------------------------
  const env = await tool('sandbox_file_write', { path: '.env', content: 'TOKEN=x\n' });
  t.like(env.safety_category || '', /secret-bearing/, '.env gets a safety advisory');
  t.ok(typeof env.warning === 'string', '... with a warning text');
  if (be.container) {
    await sh('mkdir -p ~/.ssh && echo k > ~/.ssh/id_test && ln -s ~/.ssh/id_test keylink');
    t.like((await tool('sandbox_file_read', { path: 'keylink' })).safety_category || '', /credential directory/, 'a link into ~/.ssh is flagged by where it resolves');
    const home = (await sh('printf %s "$HOME"'));
    t.is((await tool('sandbox_file_read', { path: '~/.ssh/id_test' })).path, `${home}/.ssh/id_test`, '~ is the machine user\'s home');
  }
}

t.run(async () => {
  const be = backendFromEnv();
  if (!be) await t.bailOut(`unknown SG_TEST_BACKEND ${process.env.SG_TEST_BACKEND}`);
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  const srv = await sdkClient(be.args, be.env);
  await body(srv, be);
  await srv.close();
}, { timeout: 240 });
