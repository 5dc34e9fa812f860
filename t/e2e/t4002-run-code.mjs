// run_code: python (the default), javascript, shell; exit codes and stderr;
// an exception in error (a kernel) or on stderr (stateful: false, no
// runner); a language whose interpreter the image lacks is a clear isError.
// State across calls: t4507.
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();

  const py = await srv.call('run_code', { code: 'print(6*7)', language: 'python' });
  t.ok(!py.isError, 'python: succeeds', { result: py });
  const p = py.structuredContent ?? {};
  t.is(p.stdout, '42\n', 'python print(6*7) prints 42\\n');
  t.is(p.stderr, '', 'python: stderr empty');
  t.is(p.exit_code, 0, 'python: exit_code 0');
  t.is(p.language, 'python', 'python: language python');
  t.like(p.interpreter, /python/i, 'python: interpreter names python');
  t.ok(Array.isArray(p.output_files), 'python: output_files is an array');
  t.like(p.sandbox_id, /\S/, 'python: has sandbox_id');

  const def = await srv.tool('run_code', { code: 'import sys\nprint(sys.version_info[0])' });
  t.is(def.stdout, '3\n', 'no language means python 3');
  t.is(def.language, 'python', 'default language is reported as python');

  const js = await srv.tool('run_code', { code: 'console.log([1, 2, 3].map((x) => x * 2).join(","));\nconsole.error("e");', language: 'javascript' });
  t.is(js.stdout, '2,4,6\n', 'javascript: stdout');
  t.is(js.stderr, 'e\n', 'javascript: stderr');
  t.is(js.exit_code, 0, 'javascript: exit_code 0');
  t.is(js.language, 'javascript', 'javascript: language');
  t.like(js.interpreter, /node/i, 'javascript: interpreter names node');

  const sh = await srv.tool('run_code', { code: 'echo $((6*7))\necho oops >&2\nexit 3', language: 'shell' });
  t.is(sh.stdout, '42\n', 'shell: stdout');
  t.is(sh.stderr, 'oops\n', 'shell: stderr');
  t.is(sh.exit_code, 3, 'shell: exit_code 3 is reported, not an isError');
  t.is(sh.language, 'shell', 'shell: language');

  const exc = await srv.call('run_code', { code: 'raise ValueError("boom")' });
  t.ok(!exc.isError, 'python exception: a result, not isError');
  t.isnt(exc.structuredContent?.exit_code, 0, 'python exception: non-zero exit_code');
  const e = exc.structuredContent ?? {};
  if (e.stateful) {
    t.hasFields(e.error ?? {}, { name: 'ValueError', value: 'boom' }, 'python exception in a kernel: error {name, value}');
    t.like(e.error?.traceback ?? '', /ValueError: boom/, 'python exception in a kernel: its traceback');
  } else {
    t.like(e.stderr, /ValueError: boom/, 'python exception without a kernel: traceback on stderr');
  }

  const multi = await srv.tool('run_code', { code: 'x = "héllo ✓"\nfor i in range(3):\n    print(i, x)\n' });
  t.is(multi.stdout, '0 héllo ✓\n1 héllo ✓\n2 héllo ✓\n', 'python: multi-line code with UTF-8 text');

  const t0 = Date.now();
  const slow = await srv.call('run_code', { code: 'import time\ntime.sleep(60)', timeout: 2 });
  const took = Date.now() - t0;
  t.cmp(took, '<', 10000, `run_code timeout 2 returns within 10 s (${took} ms)`);
  t.ok(slow.isError || slow.structuredContent?.exit_code !== 0, 'run_code timeout: not a success', { result: slow });

  const r = await srv.call('run_code', { code: 'cat(6*7)', language: 'r' });
  t.ok(r.isError === true, 'language r without an R interpreter in the image: isError', { result: r });
  t.like(errorText(r), /Rscript|\bR\b|\br\b/, 'the error names the language or interpreter', { text: errorText(r) });
  t.like(errorText(r), /not (installed|found|available)|missing|no such|cannot|\bno \S+ interpreter/i, 'the error says it is missing', { text: errorText(r) });

  await srv.close();
}, { timeout: 150 });
