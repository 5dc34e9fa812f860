// The plugin SDK, as a plugin author outside the tree uses it: `make
// install` (its SDK parts, staged with DESTDIR) installs <sandgate/plugin.h>,
// sandgate-plugin.pc, the man pages, the guide and the copy-me template
// (doc/plugin-template); the installed template, copied, builds with plain cc -Wall
// -Wextra -Werror against them through pkg-config (the guide's line, and the
// template's Makefile); the real loader loads it from [plugin] path; and
// every cloud tool reaches it, in one session (the SDK client) and across
// processes (`sandgate call --keep`, then --sandbox-id: the template's
// attach); run_code falls back to exec, a cancelled call ends its command,
// and persistent shells run on the template's stream group.
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, runCli, sdkClient, tmpdir, errorText, sleep } from '../lib/sg.mjs';

const run = promisify(execFile);

// The guide's build line (doc/plugin-guide.md, doc/plugin-template/example.c).
const CC_LINE = 'cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden ' +
  '-o example.so example.c $(pkg-config --cflags --libs sandgate-plugin)';

async function sh(cmd, args, opts = {}) {
  try {
    const r = await run(cmd, args, { maxBuffer: 16 << 20, ...opts });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    if (e.code === 'ENOENT') await t.bailOut(`${cmd} is not installed (apt-get install ${cmd === 'cc' ? 'gcc' : cmd}; etc/setup.sh does)`);
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? e.message };
  }
}

function find(dir, name) {
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) { const f = find(p, name); if (f) return f; } else if (d.name === name) return p;
  }
  return null;
}

const json = (s) => { try { return JSON.parse(s); } catch { return null; } };

t.run(async () => {
  await preflight({ docker: false });
  const build = process.env.SG_TEST_BUILDDIR;
  const src = process.env.SG_TEST_SRCDIR;
  const tmp = tmpdir();

  // 1. make install's SDK parts, staged
  const dest = path.join(tmp, 'dest');
  const env = { ...process.env };
  for (const k of ['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES']) delete env[k];
  const inst = await sh('make', ['-C', build, `DESTDIR=${dest}`,
    'install-sandgateincludeHEADERS', 'install-pkgconfigDATA', 'install-man', 'install-dist_docDATA',
    'install-dist_plugintemplateDATA'], { env });
  t.is(inst.code, 0, 'make install (header, pkg-config file, man pages, docs, template) DESTDIR=... exits 0', inst.stderr);
  const guide = find(dest, 'plugin-guide.md');
  t.ok(guide?.endsWith(path.join('share', 'doc', 'sandgate', 'plugin-guide.md')), 'the guide is installed in share/doc/sandgate', { guide });
  const installedTemplate = path.join(path.dirname(guide ?? dest), 'plugin-template');
  t.deepEqual(fs.existsSync(installedTemplate) ? fs.readdirSync(installedTemplate).sort() : [], ['Makefile', 'example.c'],
    'the template is installed beside it, in plugin-template/');
  for (const [page, sect] of [['sandgate.1', 'man1'], ['sandgate.ini.5', 'man5'], ['sandgate-plugin.7', 'man7']]) {
    t.ok(find(dest, page)?.endsWith(path.join('share', 'man', sect, page)), `the man page ${page} is installed in share/man/${sect}`);
  }
  const header = find(dest, 'plugin.h');
  const pc = find(dest, 'sandgate-plugin.pc');
  t.ok(header?.endsWith(path.join('include', 'sandgate', 'plugin.h')), 'the header is installed as include/sandgate/plugin.h', { header });
  t.ok(header && fs.readFileSync(header, 'utf8') === fs.readFileSync(path.join(src, 'include', 'sandgate', 'plugin.h'), 'utf8'),
    'the installed header is the tree\'s');
  t.ok(pc?.endsWith(path.join('pkgconfig', 'sandgate-plugin.pc')), 'sandgate-plugin.pc is installed in lib/pkgconfig', { pc });
  if (!header || !pc) return;
  const pcEnv = { ...env, PKG_CONFIG_PATH: path.dirname(pc), PKG_CONFIG_SYSROOT_DIR: dest };
  const flags = await sh('pkg-config', ['--cflags', 'sandgate-plugin'], { env: pcEnv });
  t.is(flags.code, 0, 'pkg-config --cflags sandgate-plugin exits 0', flags.stderr);
  t.ok(flags.stdout.split(/\s+/).includes(`-I${path.dirname(path.dirname(header))}`),
    'its --cflags name the installed include directory', { cflags: flags.stdout });

  // 2. the template, copied out of the tree, built against them
  const work = path.join(tmp, 'mybackend');
  fs.cpSync(installedTemplate, work, { recursive: true });
  for (const f of fs.readdirSync(work)) fs.chmodSync(path.join(work, f), 0o644);
  const cc = await sh('sh', ['-c', CC_LINE], { cwd: work, env: pcEnv });
  t.ok(cc.code === 0 && cc.stderr === '', `the guide's line builds example.so without a warning: ${CC_LINE}`, cc.stderr);
  const mk = await sh('make', ['-C', work, 'CFLAGS=-O2 -Werror', 'clean', 'example.so'], { env: pcEnv });
  t.ok(mk.code === 0 && !/warning/.test(mk.stderr), 'the template\'s Makefile builds it too (-O2 -Werror)', mk.stderr);
  const plugdir = path.join(tmp, 'plugins');
  fs.mkdirSync(plugdir, { mode: 0o700 });
  fs.copyFileSync(path.join(work, 'example.so'), path.join(plugdir, 'example.so'));
  fs.chmodSync(path.join(plugdir, 'example.so'), 0o755);
  const nm = spawnSync('nm', ['-D', '--defined-only', path.join(plugdir, 'example.so')], { encoding: 'utf8' });
  t.deepEqual(nm.stdout.split('\n').filter((l) => / [A-TV-Z] /.test(l) && !/ _/.test(l)).map((l) => l.split(' ')[2]),
    ['sg_backend'], 'example.so exports exactly one symbol, sg_backend');

  // 3. the real loader, through [plugin] path
  const ini = path.join(tmp, 'sandgate.ini');
  fs.writeFileSync(ini, `[plugin]\npath = ${plugdir}\nload = example\n\n[sandbox]\ndefault_backend = example\n`);
  const cfg = await runCli(['--config', ini, 'config']);
  t.is(cfg.code, 0, 'sandgate config with [plugin] path and load = example exits 0', cfg.stderr);
  t.ok(cfg.stdout.split('\n').includes(`; example 1.0 (ABI 2.2) from ${path.join(plugdir, 'example.so')}: not usable: ` +
    'example: the template backend runs commands unconfined on this host, so it is never chosen by probe: ' +
    'name it (create_sandbox backend "example", or [sandbox] default_backend)'),
    'config lists example 1.0, ABI 2.2, from [plugin] path, and its probe\'s refusal', cfg.stdout);
  t.like(cfg.stdout, /\n\[example\]\nroot = \t; default\n/, 'its key [example] root is registered, without a default');

  // 4. every cloud tool in one session
  const srv = await sdkClient([], { SG_TEST_SECRET: 'must-not-leak' }, { preArgs: ['--config', ini] });
  const c = await srv.tool('create_sandbox', {});
  const ws = c.workspace;
  t.like(c.sandbox_id, /^ex-[0-9a-f]{12}$/, 'create_sandbox: an example id');
  t.is(c.backend, 'example', 'create_sandbox: on the example backend');
  t.is(c.template, 'directory', 'create_sandbox: template "directory"');
  t.is(ws, path.join(tmp, 'state', 'sandgate', 'example', c.sandbox_id), 'the workspace is <state dir>/example/<id>');
  t.is(c.url, `file://${ws}`, 'the url is the directory');
  t.is(fs.statSync(ws).mode & 0o777, 0o700, 'the directory is made, mode 0700');

  let r = await srv.tool('run_command', { command: 'printf "hello\\n"; printf "oops\\n" >&2; exit 3' });
  t.deepEqual([r.stdout, r.stderr, r.exit_code, r.timed_out], ['hello\n', 'oops\n', 3, false],
    'run_command: exact stdout, stderr and exit code 3');
  r = await srv.tool('run_command', { command: 'pwd; echo "$HOME $FOO ${SG_TEST_SECRET-unset}"', envs: { FOO: 'bar' } });
  t.is(r.stdout, `${ws}\n${ws} bar unset\n`, 'run_command: runs in the workspace, gets envs, never sandgate\'s environment');
  r = await srv.tool('run_command', { command: 'echo start; sleep 30', timeout: 1 });
  t.deepEqual([r.stdout, r.exit_code, r.timed_out], ['start\n', 124, true], 'run_command: a timeout keeps the partial output');

  const code = await srv.tool('run_code', { language: 'python', code: 'print(6 * 7)' });
  t.deepEqual([code.stdout, code.exit_code, code.stateful], ['42\n', 0, false],
    'run_code without a code slot: the core runs it once through exec');

  // cancellation: the client aborts, the command's process ends
  const ac = new AbortController();
  const pending = srv.client.callTool({ name: 'run_command', arguments: { command: 'echo $$ > pid; exec sleep 31' } },
    undefined, { signal: ac.signal });
  const pidFile = path.join(ws, 'pid');
  const until = async (ok, ms) => { for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (ok()) return true; return ok(); };
  t.ok(await until(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').endsWith('\n'), 10000), 'the command to cancel is running');
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  ac.abort('e2e');
  await t.rejects(() => pending, 'the aborted call rejects');
  t.ok(await until(() => !fs.existsSync(`/proc/${pid}`) || /^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8')), 5000),
    'the cancelled command\'s process ends within 5 s');
  fs.unlinkSync(pidFile);
  await srv.client.ping();

  const text = 'line one\nline two\n';
  const w = await srv.tool('write_file', { path: 'notes/a.txt', content: text });
  t.deepEqual(w, { success: true, path: `${ws}/notes/a.txt`, bytes_written: 18, sandbox_id: c.sandbox_id }, 'write_file: a relative path lands in the workspace');
  t.is(fs.readFileSync(path.join(ws, 'notes', 'a.txt'), 'utf8'), text, 'write_file: the bytes are on disk');
  const rd = await srv.tool('read_file', { path: `${ws}/notes/a.txt` });
  t.deepEqual([rd.content, rd.encoding, rd.size], [text, 'utf-8', 18], 'read_file: the exact content back');
  const out = await srv.call('write_file', { path: '/tmp/example-escape.txt', content: 'x' });
  t.ok(out.isError && errorText(out).includes(`path /tmp/example-escape.txt is outside the machine's directory ${ws}`),
    'write_file outside the workspace is refused, naming both', errorText(out));
  const dots = await srv.call('read_file', { path: 'notes/../../x' });
  t.ok(dots.isError && errorText(dots).includes('has a ".." component'), 'a ".." component is refused', errorText(dots));
  const miss = await srv.call('read_file', { path: 'nope.txt' });
  t.ok(miss.isError && errorText(miss).includes(`cannot open ${ws}/nope.txt: No such file or directory`),
    'read_file of a missing file: the error names it', errorText(miss));

  const l1 = await srv.tool('list_files', {});
  t.deepEqual(l1.files.map((f) => [f.name, f.path, f.type]), [['notes', `${ws}/notes`, 'dir']], 'list_files: the workspace holds notes/');
  const l2 = await srv.tool('list_files', { path: 'notes' });
  t.deepEqual(l2.files.map((f) => [f.name, f.type, f.size, f.mode]), [['a.txt', 'file', 18, 0o644]], 'list_files notes: a.txt, 18 bytes, 0644');

  // the stream group: a persistent shell keeps its directory and variables
  const sh1 = await srv.tool('sandbox_shell_exec', { command: 'cd notes && X=kept; echo err >&2' });
  t.deepEqual([sh1.output, sh1.exit_code], ['err\n', 0], 'sandbox_shell_exec: output and status of the first command');
  const sh2 = await srv.tool('sandbox_shell_exec', { command: 'pwd; echo "$X"', shell_id: sh1.shell_id });
  t.deepEqual([sh2.output, sh2.shell_id], [`${ws}/notes\nkept\n`, sh1.shell_id], 'the same shell: its cwd and variables persist');
  const sc = await srv.tool('run_code', { language: 'shell', code: 'echo "$((6 * 7))"' });
  t.deepEqual([sc.stdout, sc.stateful], ['42\n', true], 'run_code shell runs in a persistent shell on the stream group');

  const k = await srv.tool('kill_sandbox', {});
  t.deepEqual(k, { success: true, sandbox_id: c.sandbox_id }, 'kill_sandbox: the default sandbox');
  t.ok(!fs.existsSync(ws), 'kill_sandbox removes the directory');
  t.ok(!fs.existsSync(`${ws}.owner`), 'kill_sandbox removes the owner tag');
  const gone = await srv.call('run_command', { command: 'true', sandbox_id: c.sandbox_id });
  t.ok(gone.isError && errorText(gone).includes(c.sandbox_id), 'the killed sandbox is not found', errorText(gone));
  await srv.close();

  // 5. across processes: --keep, then another sandgate attaches
  const kc = await runCli(['--config', ini, 'call', '--keep', 'create_sandbox', '{}']);
  t.is(kc.code, 0, 'call --keep create_sandbox exits 0', kc.stderr.slice(-800));
  const sid = json(kc.stdout)?.sandbox_id;
  t.like(sid, /^ex-[0-9a-f]{12}$/, 'call --keep prints the example id');
  const tag = json(fs.readFileSync(path.join(tmp, 'state', 'sandgate', 'example', `${sid}.owner`), 'utf8'));
  t.deepEqual([tag?.id, tag?.persistent, tag?.lifetime], [sid, false, 300], 'the owner tag names the machine and its lifetime');
  t.like(tag?.owner ?? '', /^[^:]+:\d+:\d+$/, 'the owner tag holds host:pid:starttime');
  const again = await runCli(['--config', ini, 'call', '--sandbox-id', sid, 'run_command',
    '{"command":"echo again > f; cat f; ls"}']);
  t.is(again.code, 0, 'call --sandbox-id reaches the kept sandbox (attach)', again.stderr.slice(-800));
  t.deepEqual([json(again.stdout)?.sandbox_id, json(again.stdout)?.stdout], [sid, 'again\nf\n'],
    'the command ran in its directory');
  const kill = await runCli(['--config', ini, 'call', 'kill_sandbox', JSON.stringify({ sandbox_id: sid })]);
  t.is(kill.code, 0, 'call kill_sandbox of the kept sandbox exits 0', kill.stderr.slice(-800));
  t.ok(!fs.existsSync(path.join(tmp, 'state', 'sandgate', 'example', sid)), 'the kept sandbox\'s directory is gone');
}, { timeout: 180 });
