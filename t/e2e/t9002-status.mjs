// sandgate status --json, field by field, with the Docker engine out of
// reach (docker.host on a socket that does not exist), a configuration file,
// the FC key and a bearer token in the environment (neither ever printed),
// a client entry that runs this binary and one that runs another; then a
// plugin that fails to load, a default backend that is not loaded, and a
// configuration that is not valid, each with its exit status.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { t, preflight, runCli, tmpdir, CLOUD_TOOLS } from '../lib/sg.mjs';

const KEY = `sg-test-fc-key-${crypto.randomBytes(8).toString('hex')}`;
const TOKEN = `sg-test-token-${crypto.randomBytes(8).toString('hex')}`;
const ENV = { ABX_SANDBOX_API_KEY: KEY, SANDGATE_SERVER_AUTH_TOKENS: TOKEN };
const DOWN = ['--set', 'docker.host=unix:///nonexistent'];

function parse(r, name) {
  try {
    return JSON.parse(r.stdout);
  } catch (e) {
    t.fail(`${name}: stdout is JSON`, { error: e.message, stdout: r.stdout, stderr: r.stderr });
    return {};
  }
}

const secretFree = (r, name) => t.ok(![KEY, TOKEN].some((s) => (r.stdout + r.stderr).includes(s)),
  `${name}: neither the FC key nor the bearer token is printed`);

t.run(async () => {
  await preflight({ docker: false });
  const bin = fs.realpathSync(process.env.SANDGATE_BIN);
  const cfgDir = path.join(tmpdir(), 'config', 'sandgate');
  fs.mkdirSync(cfgDir, { recursive: true });
  const ini = path.join(cfgDir, 'sandgate.ini');
  fs.writeFileSync(ini, '; test\n[sandbox]\ntimeout = 120\n', { mode: 0o600 });

  // a cursor entry that runs this binary, a claude one that runs another
  const inst = await runCli(['install', '--target', 'cursor']);
  t.is(inst.code, 0, 'install --target cursor exits 0', { stderr: inst.stderr });
  const claude = path.join(tmpdir(), 'config', 'Claude', 'claude_desktop_config.json');
  fs.mkdirSync(path.dirname(claude), { recursive: true });
  fs.writeFileSync(claude, JSON.stringify({ mcpServers: { sandgate: { command: '/usr/bin/false', args: ['stdio'] } } }));

  const ver = await runCli(['--version']);
  const [, version, abi] = /^sandgate (\S+) \(plugin ABI (\S+)\)/.exec(ver.stdout) ?? [];
  const tl = JSON.parse((await runCli(['tools'])).stdout).tools.map((x) => x.name);

  const r = await runCli([...DOWN, '--set', 'plugin.load=docker,fc', 'status', '--json'], ENV);
  secretFree(r, 'status --json');
  const st = parse(r, 'status --json');
  t.is(st.version, version, `version is the one of --version (${version})`);
  t.is(st.plugin_abi, abi, `plugin_abi is the one of --version (${abi})`);
  t.is(st.binary, bin, 'binary is the running binary');
  t.is(st.installed, false, 'installed is false for the build tree');

  t.is(st.config?.file, ini, 'config.file is the file read');
  t.is(st.config?.valid, true, 'config.valid is true');
  const key = (s, k) => (st.config?.keys ?? []).find((x) => x.section === s && x.key === k);
  t.deepEqual(key('sandbox', 'timeout'), { section: 'sandbox', key: 'timeout', source: `${ini}:3`, value: '120', secret: false },
    'config.keys: sandbox.timeout from the file, with its line');
  t.deepEqual(key('docker', 'host'), { section: 'docker', key: 'host', source: '--set', value: 'unix:///nonexistent', secret: false },
    'config.keys: docker.host from --set');
  t.deepEqual(key('plugin', 'dir'), { section: 'plugin', key: 'dir', source: 'environment SANDGATE_PLUGIN_DIR', value: process.env.SANDGATE_PLUGIN_DIR, secret: false },
    'config.keys: plugin.dir from the environment');
  t.deepEqual(key('fc', 'api_key'), { section: 'fc', key: 'api_key', source: 'environment ABX_SANDBOX_API_KEY', set: true, secret: true },
    'config.keys: fc.api_key is a secret: set, no value');
  t.is(key('sandbox', 'command_timeout'), undefined, 'config.keys: a key at its default is not listed');

  t.deepEqual(st.transports, [{ name: 'stdio' },
    { name: 'http', url: 'http://127.0.0.1:8010/mcp', bearer_tokens: ['environment SANDGATE_SERVER_AUTH_TOKENS'] }],
  'transports: stdio, and http with its URL and where its tokens come from');

  t.is(st.plugins?.path?.[0], process.env.SANDGATE_PLUGIN_DIR, 'plugins.path: [plugin] dir first');
  t.deepEqual((st.plugins?.loaded ?? []).map((p) => [p.name, p.abi, typeof p.version, p.path]),
    [['docker', abi, 'string', path.join(process.env.SANDGATE_PLUGIN_DIR, 'docker.so')],
      ['fc', abi, 'string', path.join(process.env.SANDGATE_PLUGIN_DIR, 'fc.so')]],
    'plugins.loaded: docker and fc, in load order, with ABI, version and path');
  t.deepEqual(st.plugins?.failed, [], 'plugins.failed is empty');

  t.deepEqual(st.tools?.names, tl, 'tools.names is the list of sandgate tools');
  t.is(st.tools?.count, tl.length, 'tools.count');
  t.ok(CLOUD_TOOLS.every((n) => st.tools?.names?.includes(n)), 'tools include the cloud tools');

  t.deepEqual((st.backends ?? []).map((b) => b.name), ['docker', 'fc'], 'backends: one per loaded plugin');
  const docker = (st.backends ?? []).find((b) => b.name === 'docker');
  t.ok(docker && docker.usable !== true && typeof docker.why === 'string' && docker.why.length > 0,
    'backends: docker with its engine out of reach is not reported usable, and says why', docker);
  // no default_backend set: chosen by the probes, and none is usable here
  t.hasFields(st.default_backend ?? {}, { name: null, loaded: false, usable: false, source: 'probe', ok: false },
    'default_backend: none usable (the engine is out of reach, the FC endpoint too)');
  t.like(st.default_backend?.why ?? '', /no backend is usable: .*docker: cannot connect/, '... and why, backend by backend');
  t.is(r.code, st.default_backend?.ok ? 0 : 1, `exit status ${r.code}: 0 exactly when the default backend is not known to be unusable`);
  t.is(st.exit_status, r.code, 'exit_status is the exit status');

  const client = (n) => (st.clients ?? []).find((c) => c.target === n);
  t.deepEqual(client('cursor')?.entries, [{ name: 'sandgate', command: bin, runs_this_binary: true }],
    'clients: cursor has sandgate, running this binary');
  t.is(client('cursor')?.installed, true, 'clients: cursor installed');
  t.deepEqual(client('claude')?.entries, [{ name: 'sandgate', command: '/usr/bin/false', runs_this_binary: false }],
    'clients: claude has a sandgate entry that runs another binary');
  t.deepEqual([client('vscode')?.exists, client('vscode')?.installed], [false, false], 'clients: vscode has no file');
  t.is(client('vscode')?.file, path.join(tmpdir(), '.vscode', 'mcp.json'), 'clients: vscode is looked for in the current directory');
  t.is(client('codex')?.installed, null, 'clients: codex is not read (TOML)');
  t.deepEqual((st.clients ?? []).map((c) => c.target), ['cursor', 'claude', 'vscode', 'claude-code', 'windsurf', 'gemini', 'codex', 'hermes'],
    'clients: every target');

  const txt = await runCli([...DOWN, '--set', 'plugin.load=docker,fc', 'mcp', 'status'], ENV);
  secretFree(txt, 'status (text)');
  t.is(txt.code, r.code, 'sandgate mcp status (text) exits as status --json does');
  t.like(txt.stdout, /fc\.api_key = \(secret, set\)\t\(environment ABX_SANDBOX_API_KEY\)/, 'the text shows the key only as set');
  t.like(txt.stdout, /cursor +~\/\.cursor\/mcp\.json: 'sandgate' runs this binary/, 'the text shows the cursor entry');
  const gj = await runCli(['--json', 'mcp', 'status', ...DOWN], ENV);
  t.is(parse(gj, '--json mcp status').version, version, 'sandgate --json mcp status (the seed\'s spelling) prints JSON');

  const bad = await runCli([...DOWN, '--set', 'plugin.load=docker,nosuch', 'status', '--json'], ENV);
  const bs = parse(bad, 'a missing plugin');
  t.deepEqual((bs.plugins?.failed ?? []).map((f) => f.name), ['nosuch'], 'plugins.failed names the plugin that did not load');
  t.like(bs.plugins?.failed?.[0]?.error ?? '', /plugin 'nosuch' \(\[plugin\] load\) is not on the plugin path/, '... with the loader\'s message');
  t.deepEqual((bs.plugins?.loaded ?? []).map((p) => p.name), ['docker'], '... and the others are still loaded');

  const ssh = await runCli([...DOWN, '--set', 'plugin.load=docker,fc', '--set', 'sandbox.default_backend=ssh', 'status', '--json'], ENV);
  const ss = parse(ssh, 'default backend not loaded');
  t.is(ssh.code, 1, 'status exits 1 when the default backend is not loaded');
  t.deepEqual([ss.default_backend?.name, ss.default_backend?.loaded, ss.default_backend?.ok], ['ssh', false, false],
    'default_backend: ssh, not loaded, not ok');

  const inv = await runCli(['--set', 'sandbox.timeout=soon', 'status', '--json'], ENV);
  const is = parse(inv, 'invalid configuration');
  t.is(inv.code, 3, 'status exits 3 when the configuration is not valid');
  t.is(is.config?.valid, false, 'config.valid is false');
  t.like(is.config?.error ?? '', /timeout/, 'config.error names the key');
  secretFree(inv, 'invalid configuration');
}, { timeout: 120 });
