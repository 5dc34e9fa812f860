// sandgate deploy --target fc: the artifact's files and their modes, the
// manifest parsed field by field, the token's sources and their precedence
// (--generate-token, --auth-token-file, ABX_MCP_AUTH_TOKEN, generated), the
// region's (--region > ALIBABA_CLOUD_REGION_ID > cn-hangzhou), and neither
// the token nor the FC key in anything printed.  (The image itself is built
// and run by t9004.)
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { t, preflight, runCli, tmpdir } from '../lib/sg.mjs';

const KEY = `sg-test-fc-key-${crypto.randomBytes(8).toString('hex')}`;
const mode = (f) => fs.statSync(f).mode & 0o777;
let seq = 0;

async function deploy(args, env = {}) {
  const dir = path.join(tmpdir(), `out-${++seq}`);
  const r = await runCli(['deploy', '--target', 'fc', '--output-dir', dir, ...args],
    { ABX_MCP_AUTH_TOKEN: null, ALIBABA_CLOUD_REGION_ID: null, ABX_SANDBOX_API_KEY: null, E2B_API_KEY: null, ...env });
  const token = fs.existsSync(path.join(dir, 'auth-token')) ? fs.readFileSync(path.join(dir, 'auth-token'), 'utf8').trim() : null;
  const manifest = fs.existsSync(path.join(dir, 'manifest.json')) ? JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')) : null;
  return { r, dir, token, manifest, json: args.includes('--json') ? JSON.parse(r.stdout || 'null') : null };
}

const secretFree = (d, name, extra = []) => t.ok(![d.token, KEY, ...extra].some((s) => s && (d.r.stdout + d.r.stderr).includes(s)),
  `${name}: neither the token nor the FC key is printed`);

t.run(async () => {
  await preflight({ docker: false });
  const version = /^sandgate (\S+)/.exec((await runCli(['--version'])).stdout)?.[1];

  const d = await deploy(['--custom-domain', 'mcp.example.com', '--json'], { ABX_SANDBOX_API_KEY: KEY, ALIBABA_CLOUD_REGION_ID: 'cn-shanghai' });
  t.is(d.r.code, 0, 'deploy --target fc exits 0', { stderr: d.r.stderr });
  secretFree(d, 'deploy --json');
  const files = ['Dockerfile', 'manifest.json', 'auth-token', 'client-config.json', 'DEPLOY.md'];
  t.deepEqual(fs.readdirSync(d.dir).sort(), [...files].sort(), 'the artifact holds its five files and nothing else');
  for (const f of files) {
    const want = ['auth-token', 'manifest.json'].includes(f) ? 0o600 : 0o644;
    t.is(mode(path.join(d.dir, f)), want, `${f} has mode 0${want.toString(8)}`);
  }
  t.like(d.token ?? '', /^[0-9a-f]{64}$/, 'a generated token: 64 hex digits');
  t.deepEqual(d.json?.token, { source: 'generated', length: 64 }, 'the JSON output gives the token\'s source and length only');

  const m = d.manifest ?? {};
  t.is(m.manifest, 'sandgate-fc/1', 'manifest: its format');
  t.is(m.function_name, 'sandgate-mcp', 'manifest: function_name defaults to sandgate-mcp');
  t.is(m.region, 'cn-shanghai', 'manifest: region from ALIBABA_CLOUD_REGION_ID');
  t.is(d.json?.region_source, 'environment ALIBABA_CLOUD_REGION_ID', '... and the output says where it came from');
  t.is(m.runtime, 'custom-container', 'manifest: runtime custom-container');
  t.deepEqual(m.custom_container, { image: `registry.cn-shanghai.aliyuncs.com/sandgate/sandgate-mcp:${version}`,
    port: 9000, command: ['/usr/local/bin/sandgate', 'http'] }, 'manifest: the container image, port and command');
  t.is(m.memory_mb, 512, 'manifest: memory 512 MB by default');
  t.is(m.timeout_s, 600, 'manifest: timeout 600 s by default');
  t.deepEqual(m.environment_variables, { ABX_MCP_AUTH_TOKEN: d.token, ABX_DEFAULT_TEMPLATE: 'base', SANDGATE_FC_REGION: 'cn-shanghai', ABX_SANDBOX_API_KEY: KEY },
    'manifest: the environment holds the token, the template, the region and the FC key');
  t.deepEqual(m.http_trigger, { trigger_name: 'http', trigger_type: 'http', auth_type: 'anonymous', methods: ['POST', 'GET', 'DELETE'], path: '/mcp' },
    'manifest: an HTTP trigger with POST, GET and DELETE');
  t.deepEqual([m.session_affinity?.enabled, m.session_affinity?.type, m.session_affinity?.header], [true, 'MCP_STREAMABLE', 'Mcp-Session-Id'],
    'manifest: session affinity on Mcp-Session-Id');
  t.is(m.custom_domain?.domain_name, 'mcp.example.com', 'manifest: the custom domain');
  t.deepEqual(d.json?.manifest?.environment_variables?.ABX_MCP_AUTH_TOKEN, '<secret: 64 characters, generated>', 'the printed manifest masks the token');

  const dockerfile = fs.readFileSync(path.join(d.dir, 'Dockerfile'), 'utf8');
  t.like(dockerfile, /^ARG BASE_IMAGE=debian:12$/m, 'Dockerfile: the base image is an argument, debian:12 by default');
  t.like(dockerfile, /^FROM \$\{BASE_IMAGE\} AS build$/m, 'Dockerfile: builds from source FROM the base image');
  t.like(dockerfile, /autoreconf -fi .*\n.*\n.*configure/, 'Dockerfile: autoreconf, configure');
  t.like(dockerfile, /^EXPOSE 9000$/m, 'Dockerfile: exposes the manifest\'s port');
  t.like(dockerfile, /^CMD \["\/usr\/local\/bin\/sandgate", "http"\]$/m, 'Dockerfile: runs sandgate http');
  t.ok(!dockerfile.includes(d.token), 'Dockerfile: no token in the image');
  const cc = JSON.parse(fs.readFileSync(path.join(d.dir, 'client-config.json'), 'utf8'));
  t.deepEqual(cc, { mcpServers: { 'sandgate-mcp': { type: 'streamable-http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer <BEARER_TOKEN>' } } } },
    'client-config.json: the endpoint, the token left to fill in');
  const steps = fs.readFileSync(path.join(d.dir, 'DEPLOY.md'), 'utf8');
  t.like(steps, /docker build -f \S+\/Dockerfile -t \S+ \S+/, 'DEPLOY.md: the build command');
  t.like(steps, /POST, GET and DELETE/, 'DEPLOY.md: the trigger\'s methods');
  t.like(steps, /MCP Streamable HTTP affinity/, 'DEPLOY.md: session affinity');
  t.is(d.json?.steps, steps, 'the printed steps are DEPLOY.md');
  t.ok(!steps.includes(d.token) && !steps.includes(KEY), 'DEPLOY.md: no secret');

  // text output
  const txt = await deploy([], { ABX_SANDBOX_API_KEY: KEY });
  t.is(txt.r.code, 0, 'deploy (text) exits 0');
  secretFree(txt, 'deploy (text)');
  t.like(txt.r.stdout, /Bearer token: generated, 64 characters, in .*auth-token \(not shown\)/, 'the text says where the token is, not what');
  t.like(txt.r.stdout, /Manual steps/, 'the text prints the manual steps');
  t.is(txt.manifest?.region, 'cn-hangzhou', 'region: cn-hangzhou by default');

  // precedence
  const reg = await deploy(['--region', 'cn-beijing', '--json'], { ALIBABA_CLOUD_REGION_ID: 'cn-shanghai' });
  t.is(reg.manifest?.region, 'cn-beijing', 'region: --region beats ALIBABA_CLOUD_REGION_ID');
  const envTok = `env-token-${crypto.randomBytes(12).toString('hex')}`;
  const e1 = await deploy(['--json'], { ABX_MCP_AUTH_TOKEN: envTok });
  t.is(e1.token, envTok, 'token: ABX_MCP_AUTH_TOKEN when no option is given');
  t.is(e1.json?.token?.source, 'from ABX_MCP_AUTH_TOKEN', '... and the output says so');
  secretFree(e1, 'token from the environment');
  const fileTok = `file-token-${crypto.randomBytes(12).toString('hex')}`;
  const tf = path.join(tmpdir(), 'token');
  fs.writeFileSync(tf, `# the deploy token\n\n  ${fileTok}  \nsecond-line-ignored\n`, { mode: 0o600 });
  const f1 = await deploy(['--auth-token-file', tf], { ABX_MCP_AUTH_TOKEN: envTok });
  t.is(f1.token, fileTok, 'token: --auth-token-file beats ABX_MCP_AUTH_TOKEN (its first line that is not a comment, trimmed)');
  secretFree(f1, 'token from a file', [fileTok, envTok]);
  const g1 = await deploy(['--generate-token'], { ABX_MCP_AUTH_TOKEN: envTok });
  t.ok(/^[0-9a-f]{64}$/.test(g1.token ?? '') && g1.token !== envTok, 'token: --generate-token beats ABX_MCP_AUTH_TOKEN');
  const g2 = await deploy([]);
  t.ok(g2.token && g2.token !== txt.token, 'token: each generated token is new');
  const both = await deploy(['--generate-token', '--auth-token-file', tf]);
  t.is(both.r.code, 2, '--generate-token with --auth-token-file exits 2');
  const short = path.join(tmpdir(), 'short');
  fs.writeFileSync(short, 'abc\n');
  const sh = await deploy(['--auth-token-file', short]);
  t.is(sh.r.code, 2, 'a token shorter than 16 characters exits 2');
  t.ok(!fs.existsSync(sh.dir), '... and writes nothing');

  // the other options
  const o = await deploy(['--name', 'my_fn', '--memory', '1024', '--timeout', '300', '--template', 'code-interpreter-v1',
    '--no-session-affinity', '--image', 'registry.example.com/ns/sg:1', '--base-image', 'sandgate/base:1', '--json']);
  t.is(o.r.code, 0, 'deploy with every option exits 0', { stderr: o.r.stderr });
  t.deepEqual([o.manifest?.function_name, o.manifest?.memory_mb, o.manifest?.timeout_s, o.manifest?.environment_variables?.ABX_DEFAULT_TEMPLATE,
    o.manifest?.session_affinity, o.manifest?.custom_container?.image, o.manifest?.custom_domain],
  ['my_fn', 1024, 300, 'code-interpreter-v1', { enabled: false }, 'registry.example.com/ns/sg:1', null], 'the manifest follows the options');
  t.like(fs.readFileSync(path.join(o.dir, 'Dockerfile'), 'utf8'), /^ARG BASE_IMAGE=sandgate\/base:1$/m, '--base-image sets the Dockerfile\'s default');
  t.is(o.manifest?.environment_variables?.ABX_SANDBOX_API_KEY, undefined, 'no FC key given: none in the manifest');
  t.like(o.json?.steps ?? '', /add ABX_SANDBOX_API_KEY/, '... and the steps say to add it');
  const alias = await deploy(['--api-key', KEY]);
  t.is(alias.manifest?.environment_variables?.ABX_SANDBOX_API_KEY, KEY, '--api-key (the seed\'s spelling) gives the FC key');
  secretFree(alias, '--api-key');

  for (const [args, what] of [[['--memory', '64'], 'a memory below 128 MB'], [['--timeout', 'soon'], 'a timeout that is not a number'],
    [['--name', '9lives'], 'a function name starting with a digit'], [['--region', 'cn hangzhou'], 'a region with a blank']]) {
    const b = await deploy(args);
    t.is(b.r.code, 2, `${what} exits 2`);
  }
  const nt = await runCli(['deploy', '--output-dir', path.join(tmpdir(), 'x')]);
  t.is(nt.code, 2, 'deploy without --target exits 2');
  const ot = await runCli(['deploy', '--target', 'lambda']);
  t.is(ot.code, 2, 'deploy --target lambda exits 2');
  t.like(ot.stderr, /--target fc/, '... and names the target there is');
  const mc = await runCli(['mcp', 'deploy', '--target', 'fc', '--output-dir', path.join(tmpdir(), 'mcp-alias')]);
  t.is(mc.code, 0, 'sandgate mcp deploy (the seed\'s spelling) works too');
}, { timeout: 120 });
