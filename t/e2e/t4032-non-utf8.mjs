// Output that is not UTF-8 comes back as valid JSON, with U+FFFD in place of
// the bad bytes; every stdout line stays valid UTF-8 JSON.
import { t, preflight, rawServer } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await rawServer();
  await srv.initialize();
  const r = await srv.tool('run_command', { command: "printf '\\377\\376'" });
  t.ok(typeof r.stdout === 'string', 'printf \\xff\\xfe: stdout is a string');
  t.ok(/^\uFFFD+$/.test(r.stdout), 'the bad bytes are replaced by U+FFFD', { stdout: r.stdout, codes: [...(r.stdout ?? '')].map((c) => c.codePointAt(0)) });
  const mixed = await srv.tool('run_command', { command: "printf 'ok \\303\\251 \\377 end\\n'; printf '\\200err\\n' >&2" });
  t.is(mixed.stdout, 'ok é \uFFFD end\n', 'valid UTF-8 around a bad byte is kept');
  t.is(mixed.stderr, '\uFFFDerr\n', 'stderr is sanitised the same way');
  const cut = await srv.tool('run_command', { command: "printf 'x\\342\\234'" });
  t.ok(cut.stdout.startsWith('x') && cut.stdout.slice(1).length >= 1 && /^\uFFFD+$/.test(cut.stdout.slice(1)),
    'a truncated multi-byte sequence at the end becomes U+FFFD', { stdout: cut.stdout });
  const nul = await srv.tool('run_command', { command: "printf 'a\\000b'" });
  t.is(nul.stdout, 'a\u0000b', 'a NUL byte survives as \\u0000');
  const py = await srv.tool('run_code', { code: "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe')" });
  t.ok(/^\uFFFD+$/.test(py.stdout), 'run_code output is sanitised too', { stdout: py.stdout });
  const ls = await srv.tool('run_command', { command: "touch \"/workspace/$(printf 'bad\\377name')\"" });
  t.is(ls.exit_code, 0, 'made a file with a non-UTF-8 name');
  const lf = await srv.callTool('list_files', {});
  t.ok(lf && (lf.isError || Array.isArray(lf.structuredContent?.files)), 'list_files with a non-UTF-8 file name answers with valid JSON');
  await srv.close(); // asserts every stdout line was valid UTF-8 JSON
}, { timeout: 90 });
