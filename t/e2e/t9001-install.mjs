// sandgate install / uninstall for every JSON client, into the test's own
// HOME, XDG_CONFIG_HOME and workspace: a new file; a file with other servers
// and keys, whose order, values and mode survive; an entry replaced in
// place; a file that is not strict JSON, left byte-identical; --dry-run;
// --name and --args; uninstall that leaves the others; the FC key in env of
// private files only, and never printed; codex and hermes only with --print.
// Then the entry each file holds is started the way the client would start
// it (command, args and env from the file, nothing inherited but HOME and
// PATH) with the official SDK client: it lists the tools, and one runs a
// command in a Docker sandbox.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { t, preflight, runCli, tmpdir, sdk, trackSandbox, CLOUD_TOOLS } from '../lib/sg.mjs';

const KEY = `sg-test-fc-key-${crypto.randomBytes(8).toString('hex')}`;
const home = () => path.join(tmpdir(), 'home');
const ws = () => path.join(tmpdir(), 'ws');

const TARGETS = {
  cursor: { file: () => path.join(home(), '.cursor', 'mcp.json'), key: 'mcpServers', shared: false },
  claude: { file: () => path.join(tmpdir(), 'config', 'Claude', 'claude_desktop_config.json'), key: 'mcpServers', shared: false },
  vscode: { file: () => path.join(ws(), '.vscode', 'mcp.json'), key: 'servers', shared: true },
  'claude-code': { file: () => path.join(ws(), '.mcp.json'), key: 'mcpServers', shared: true },
  windsurf: { file: () => path.join(home(), '.codeium', 'windsurf', 'mcp_config.json'), key: 'mcpServers', shared: false },
  gemini: { file: () => path.join(home(), '.gemini', 'settings.json'), key: 'mcpServers', shared: false },
};

// fc.so is loaded so that its key is known; the key comes from the environment
const ENV = { ABX_SANDBOX_API_KEY: KEY };
const PRE = ['--set', 'plugin.load=docker,fc'];

function install(target, extra = [], env = {}) {
  return runCli([...PRE, 'install', '--target', target, '--workspace', ws(), ...extra], { ...ENV, ...env });
}

const read = (f) => fs.readFileSync(f, 'utf8');
const mode = (f) => fs.statSync(f).mode & 0o777;
const noKey = (r, name) => t.ok(!(r.stdout + r.stderr).includes(KEY), `${name}: the FC key is not printed`);

function checkEntry(target, entry, name) {
  const spec = TARGETS[target];
  const bin = fs.realpathSync(process.env.SANDGATE_BIN);
  const pdir = fs.realpathSync(process.env.SANDGATE_PLUGIN_DIR);
  t.is(entry?.command, bin, `${name}: command is the absolute path of the running binary`);
  const args = entry?.args ?? [];
  const i = args.indexOf(`plugin.dir=${pdir}`);
  t.ok(i > 0 && args[i - 1] === '--set', `${name}: args carry --set plugin.dir=${pdir} (an uninstalled build)`, { args });
  const j = args.indexOf('plugin.load=docker,fc');
  t.ok(j > 0 && args[j - 1] === '--set', `${name}: args carry the --set plugin.load of the install command`, { args });
  t.ok(args.includes('stdio'), `${name}: args run stdio`, { args });
  t.is(entry?.type, spec.shared ? 'stdio' : undefined, `${name}: "type" is ${spec.shared ? '"stdio"' : 'absent'}`);
  if (spec.shared) {
    t.is(entry?.env, undefined, `${name}: no env in a shared workspace file (the FC key stays out)`);
  } else {
    t.is(entry?.env?.ABX_SANDBOX_API_KEY, KEY, `${name}: env has ABX_SANDBOX_API_KEY (a private file)`);
  }
}

// ---- the installed entry starts ------------------------------------------------------

const SAN_RE = /ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:/;

async function startEntry(entry, name, runCommand) {
  const { Client, StdioClientTransport } = await sdk();
  // what a client started from the desktop has: HOME and PATH, and the entry
  const env = {
    HOME: home(), PATH: process.env.PATH,
    XDG_STATE_HOME: path.join(tmpdir(), 'state'), XDG_CONFIG_HOME: path.join(tmpdir(), 'config'),
    ...entry.env,
  };
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']) if (process.env[k]) env[k] = process.env[k];
  const transport = new StdioClientTransport({ command: entry.command, args: entry.args, env, stderr: 'pipe', cwd: ws() });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; });
  const client = new Client({ name: 'sandgate-install-test', version: '1.0.0' }, { capabilities: {} });
  try {
    await client.connect(transport, { timeout: 30000 });
    const { tools } = await client.listTools(undefined, { timeout: 30000 });
    const names = tools.map((x) => x.name);
    t.ok(CLOUD_TOOLS.every((n) => names.includes(n)), `${name}: the entry starts and lists the tools (${names.length})`, { names });
    if (runCommand) {
      const res = await client.callTool({ name: 'run_command', arguments: { command: 'echo entry-ok' } }, undefined, { timeout: 120000 });
      trackSandbox(res.structuredContent?.sandbox_id);
      t.is(res.structuredContent?.stdout, 'entry-ok\n', `${name}: a command runs in a Docker sandbox through the entry (its backends load)`,
        { result: res, stderr: stderr.slice(-2000) });
    }
  } catch (e) {
    t.fail(`${name}: the entry starts`, { error: e.message, stderr: stderr.slice(-2000) });
  } finally {
    await client.close().catch(() => {});
  }
  t.ok(!SAN_RE.test(stderr), `${name}: no sanitizer report`, stderr.slice(-3000));
}

// ---- one target -----------------------------------------------------------------------

async function newFile(target) {
  const spec = TARGETS[target];
  const f = spec.file();
  const dry = await install(target, ['--dry-run']);
  t.is(dry.code, 0, `${target}: --dry-run exits 0`, { stderr: dry.stderr });
  t.like(dry.stdout, /would add/, `${target}: --dry-run says what it would do`);
  t.ok(!fs.existsSync(f), `${target}: --dry-run creates no file`);
  noKey(dry, `${target} --dry-run`);

  const r = await install(target);
  t.is(r.code, 0, `${target}: install into no file exits 0`, { stdout: r.stdout, stderr: r.stderr });
  noKey(r, `${target} install`);
  const doc = JSON.parse(read(f));
  t.deepEqual(Object.keys(doc), [spec.key], `${target}: the new file holds only "${spec.key}"`);
  checkEntry(target, doc[spec.key]?.sandgate, `${target} new file`);
  t.is(mode(f), spec.shared ? 0o644 & ~process.umask() : 0o600,
    `${target}: a new file has mode ${spec.shared ? '0644 less the umask' : '0600 (it holds a secret)'}`);
  if (spec.shared) t.ok(!read(f).includes(KEY), `${target}: the key is nowhere in the workspace file`);

  const before = read(f);
  const again = await install(target, ['--json']);
  t.is(JSON.parse(again.stdout || '{}').action, 'unchanged', `${target}: a second install changes nothing`, { stdout: again.stdout });
  t.is(read(f), before, `${target}: ... and leaves the bytes as they were`);
  return doc[spec.key].sandgate;
}

async function existingFile(target) {
  const spec = TARGETS[target];
  const f = spec.file();
  // other servers around an old sandgate entry, keys before and after, values
  // jansson could mangle (reals, unicode, escapes), and a 4-space indent
  const doc = {
    zeta: 1,
    theme: { 'ünïcödé': 'café \u2713', path: 'C:\\dir\\', ratio: 0.1, tiny: 1e-7, big: 12345678901234 },
    [spec.key]: {
      first: { command: 'npx', args: ['-y', 'first-server'], env: { TOKEN: 'other-secret' } },
      sandgate: { command: '/old/sandgate', args: ['stdio'] },
      last: { url: 'http://localhost:9/mcp' },
    },
    alpha: [true, false, null, 0.5],
  };
  const text = JSON.stringify(doc, null, 4) + '\n';
  fs.writeFileSync(f, text);
  fs.chmodSync(f, 0o640);

  const dry = await install(target, ['--dry-run']);
  t.like(dry.stdout, /would replace/, `${target}: --dry-run over an old entry says it would replace it`);
  t.is(read(f), text, `${target}: --dry-run leaves the file byte-identical`);

  const r = await install(target);
  t.is(r.code, 0, `${target}: install into a file with other servers exits 0`, { stderr: r.stderr });
  const out = read(f);
  const got = JSON.parse(out);
  t.deepEqual(Object.keys(got), Object.keys(doc), `${target}: the top-level keys keep their order`);
  t.deepEqual(Object.keys(got[spec.key]), ['first', 'sandgate', 'last'], `${target}: the servers keep their order, sandgate replaced in place`);
  for (const k of ['zeta', 'theme', 'alpha']) t.deepEqual(got[k], doc[k], `${target}: "${k}" keeps its value`);
  t.deepEqual(got[spec.key].first, doc[spec.key].first, `${target}: the other server keeps its value (and its env)`);
  t.deepEqual(got[spec.key].last, doc[spec.key].last, `${target}: the last server keeps its value`);
  t.ok(out.includes('"ratio": 0.1,') && out.includes('"tiny": 1e-7,') && out.includes('"alpha": [\n        true'),
    `${target}: reals are written as short as they read back, with the file's 4-space indent`, { out });
  checkEntry(target, got[spec.key].sandgate, `${target} existing file`);
  t.is(mode(f), 0o640, `${target}: the file keeps its mode 0640`);
  t.deepEqual(fs.readdirSync(path.dirname(f)).filter((n) => n.startsWith(`.${path.basename(f)}.`)), [], `${target}: no temporary file is left next to it`);

  // a second entry with its own server arguments
  const two = await install(target, ['--name', 'sandgate-fc', '--args', "--set 'sandbox.default_backend=fc'", '--', '--set', 'log.level=debug']);
  t.is(two.code, 0, `${target}: --name adds a second entry`, { stderr: two.stderr });
  const g2 = JSON.parse(read(f));
  t.deepEqual(Object.keys(g2[spec.key]), ['first', 'sandgate', 'last', 'sandgate-fc'], `${target}: the second entry goes last`);
  t.deepEqual(g2[spec.key]['sandgate-fc'].args.slice(-5), ['stdio', '--set', 'sandbox.default_backend=fc', '--set', 'log.level=debug'],
    `${target}: --args (quotes group) and the arguments after -- follow stdio`);

  const un = await runCli(['uninstall', '--target', target, '--workspace', ws()]);
  t.is(un.code, 0, `${target}: uninstall exits 0`, { stderr: un.stderr });
  const g3 = JSON.parse(read(f));
  t.deepEqual(Object.keys(g3[spec.key]), ['first', 'last', 'sandgate-fc'], `${target}: uninstall removes only its entry`);
  t.deepEqual(g3[spec.key].first, doc[spec.key].first, `${target}: ... and leaves the others as they were`);
  t.deepEqual(Object.keys(g3), Object.keys(doc), `${target}: ... and the top-level keys in their order`);
  t.is(mode(f), 0o640, `${target}: uninstall keeps the mode`);
  const un2 = await runCli(['uninstall', '--target', target, '--workspace', ws(), '--json']);
  t.is(un2.code, 0, `${target}: uninstall of an entry that is not there exits 0`);
  t.is(JSON.parse(un2.stdout || '{}').action, 'no such', `${target}: ... and says so`);
  const un3 = await runCli(['mcp', 'uninstall', '--target', target, '--workspace', ws(), '--name', 'sandgate-fc']);
  t.is(un3.code, 0, `${target}: sandgate mcp uninstall --name removes the second entry`, { stderr: un3.stderr });
  t.deepEqual(Object.keys(JSON.parse(read(f))[spec.key]), ['first', 'last'], `${target}: only the other servers are left`);
}

async function nonStrict(target) {
  const spec = TARGETS[target];
  const f = spec.file();
  const text = `{\n  // my servers\n  "${spec.key}": {\n    "first": { "command": "npx", },\n  },\n}\n`;
  fs.writeFileSync(f, text);
  const r = await install(target);
  t.is(r.code, 1, `${target}: install into a file with comments and trailing commas exits 1`, { stdout: r.stdout, stderr: r.stderr });
  t.is(read(f), text, `${target}: ... and leaves it byte-identical`);
  t.like(r.stderr, /not strict JSON \(line 2 column \d+/, `${target}: ... and says why, with the place`);
  t.like(r.stdout, new RegExp(`"${spec.key}": \\{\\s*"sandgate": \\{`), `${target}: ... and prints the entry to paste`);
  noKey(r, `${target} non-strict`);
  if (!spec.shared) t.like(r.stdout, /"ABX_SANDBOX_API_KEY": "<ABX_SANDBOX_API_KEY>"/, `${target}: the key in the printed entry is a placeholder`);
  const un = await runCli(['uninstall', '--target', target, '--workspace', ws()]);
  t.is(un.code, 1, `${target}: uninstall from that file exits 1`);
  t.is(read(f), text, `${target}: ... and leaves it byte-identical too`);
  fs.rmSync(f);
}

t.run(async () => {
  await preflight();
  fs.mkdirSync(ws(), { recursive: true });
  const entries = {};
  for (const target of Object.keys(TARGETS)) {
    entries[target] = await newFile(target);
    await nonStrict(target);
  }
  // the entries written into new files start, as the client starts them
  for (const [target, entry] of Object.entries(entries)) await startEntry(entry, `${target} entry`, target === 'cursor');
  for (const target of Object.keys(TARGETS)) await existingFile(target);

  // a symlinked file stays a symlink (the target is written)
  const real = path.join(tmpdir(), 'dotfiles-cursor.json');
  fs.writeFileSync(real, '{"mcpServers": {}}\n');
  fs.rmSync(TARGETS.cursor.file());
  fs.symlinkSync(real, TARGETS.cursor.file());
  const sl = await install('cursor');
  t.is(sl.code, 0, 'cursor: install through a symlinked file exits 0', { stderr: sl.stderr });
  t.ok(fs.lstatSync(TARGETS.cursor.file()).isSymbolicLink(), 'cursor: the symlink is kept');
  t.ok(JSON.parse(read(real)).mcpServers.sandgate, 'cursor: the entry is in the file it points at');

  // codex and hermes: printed, never edited
  for (const [target, re, file] of [
    ['codex', /^\[mcp_servers\.sandgate\]\ncommand = ".+"\nargs = \[.*"stdio"\]\n\n\[mcp_servers\.sandgate\.env\]\n"ABX_SANDBOX_API_KEY" = "<ABX_SANDBOX_API_KEY>"\n/m, path.join(home(), '.codex', 'config.toml')],
    ['hermes', /^mcp_servers:\n {2}sandgate:\n {4}command: ".+"\n {4}args: \[.*"stdio"\]\n {4}env:\n {6}"ABX_SANDBOX_API_KEY": "<ABX_SANDBOX_API_KEY>"\n/m, path.join(home(), '.hermes', 'config.yaml')],
  ]) {
    const no = await install(target);
    t.is(no.code, 2, `${target}: install without --print exits 2`);
    t.like(no.stderr, /--print/, `${target}: ... and says to use --print`);
    const p = await install(target, ['--print']);
    t.is(p.code, 0, `${target} --print exits 0`, { stderr: p.stderr });
    t.like(p.stdout, re, `${target} --print prints the entry in the client's format`, { stdout: p.stdout });
    noKey(p, `${target} --print`);
    t.ok(!fs.existsSync(file), `${target}: no file is written`);
  }

  // usage errors
  const u1 = await runCli(['install']);
  t.is(u1.code, 2, 'install without --target exits 2');
  t.like(u1.stderr, /cursor, claude, vscode/, '... and lists the targets');
  const u2 = await runCli(['install', '--target', 'emacs']);
  t.is(u2.code, 2, 'an unknown --target exits 2');
  const u3 = await runCli(['install', '--target', 'cursor', '--name', 'a b']);
  t.is(u3.code, 2, 'a --name with a blank exits 2');
  const u4 = await runCli(['install', '--target', 'cursor', '--args', '"unclosed']);
  t.is(u4.code, 2, 'an unclosed quote in --args exits 2');
  const m = await runCli(['mcp', 'start']);
  t.is(m.code, 2, 'sandgate mcp start exits 2');
  t.like(m.stderr, /sandgate stdio/, '... and names the server command');
}, { timeout: 600 });
