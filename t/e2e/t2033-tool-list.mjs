// tools/list is paid for on every turn of the model, and some clients refuse
// schemas they cannot read: the list is linted against the strictest
// clients' rules, with each [server] tools profile (all, cloud, env), and
// kept within its budget (8 KiB without outputSchema, 4 KiB of those).
// A tool outside the profile is neither listed nor callable.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, rawServer, runCli, CLOUD_TOOLS } from '../lib/sg.mjs';

const ENV_TOOLS = ['sandbox_shell_exec', 'sandbox_shell_read', 'sandbox_file_read', 'sandbox_file_write',
  'sandbox_file_patch', 'sandbox_file_search', 'sandbox_env', 'sandbox_audit_query'];
const HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];
const BUDGET = 8192;
const OUT_BUDGET = 4096;

// The rules, one message per breach: no union types, items on every array,
// every property typed and described, additionalProperties decided.
function lintSchema(s, where, out) {
  if (Array.isArray(s.type) || s.anyOf || s.oneOf || s.allOf) out.push(`${where}: a union type`);
  if (s.type === 'array' && !s.items) out.push(`${where}: an array without items`);
  if (s.type === 'object' && s.properties) {
    for (const [k, p] of Object.entries(s.properties)) {
      const at = `${where}.${k}`;
      if (typeof p.type !== 'string') out.push(`${at}: no single type`);
      if (typeof p.description !== 'string' || !p.description) out.push(`${at}: not described`);
      lintSchema(p, at, out);
    }
  }
  if (s.items) lintSchema(s.items, `${where}[]`, out);
}

function lint(tool) {
  const out = [];
  const s = tool.inputSchema;
  // what the tool is for, first: a verb, then a sentence
  if (!/^[A-Z][a-z]+ [^\n]*\.$/.test(tool.description)) out.push('the description is not a sentence opening with a verb');
  if (s?.type !== 'object') out.push('inputSchema is not an object schema');
  if (typeof s?.additionalProperties !== 'boolean') out.push('additionalProperties is not decided');
  lintSchema(s ?? {}, 'inputSchema', out);
  for (const req of s?.required ?? []) if (!s.properties?.[req]) out.push(`required ${req} is no property`);
  for (const [k, v] of Object.entries(tool.annotations ?? {})) {
    if (!HINTS.includes(k) || typeof v !== 'boolean') out.push(`annotation ${k}: ${JSON.stringify(v)}`);
  }
  if (tool.outputSchema?.type !== 'object') out.push('outputSchema is not an object schema');
  for (const [k, p] of Object.entries(tool.outputSchema?.properties ?? {})) {
    if (typeof p.type !== 'string') out.push(`outputSchema.${k}: no single type`);
  }
  return out;
}

async function listOf(profile) {
  const srv = await rawServer(profile ? ['--tools', profile] : []);
  await srv.initialize();
  const r = await srv.request('tools/list', undefined, { timeout: 30000 });
  return { srv, tools: r.result?.tools ?? [] };
}

const size = (v) => Buffer.byteLength(JSON.stringify(v));

t.run(async () => {
  await preflight({ docker: false });

  const { srv, tools } = await listOf(null);
  t.deepEqual(tools.map((x) => x.name), [...CLOUD_TOOLS, ...ENV_TOOLS], 'all: the cloud tools, then the env tools');
  for (const tool of tools) t.deepEqual(lint(tool), [], `${tool.name}: passes the lint`);
  const bare = tools.map(({ outputSchema, ...rest }) => rest);
  const listed = size({ tools: bare });
  const outs = tools.reduce((n, x) => n + size(x.outputSchema), 0);
  t.diag(`tools/list: ${listed} bytes without outputSchema, ${outs} bytes of outputSchema`);
  t.ok(listed <= BUDGET, `all: ${listed} bytes serialised, within ${BUDGET}`);
  t.ok(outs <= OUT_BUDGET, `all: output schemas ${outs} bytes, within ${OUT_BUDGET}`);
  const ro = tools.filter((x) => x.annotations?.readOnlyHint).map((x) => x.name).sort();
  t.deepEqual(ro, ['list_files', 'read_file', 'sandbox_audit_query', 'sandbox_file_read', 'sandbox_file_search',
    'sandbox_shell_read'], 'the read-only tools are the ones that only read');
  t.deepEqual(tools.filter((x) => x.annotations?.destructiveHint === false).map((x) => x.name), ['create_sandbox'],
    'create_sandbox is the one writer that destroys nothing');
  await srv.close();

  // doc/tools.md's table of profiles is what the server serves
  const doc = fs.readFileSync(path.join(process.env.SG_TEST_SRCDIR, 'doc', 'tools.md'), 'utf8');
  const documented = (profile) => [...(new RegExp(`^\\| \`${profile}\` \\| (.*) \\|$`, 'm').exec(doc)?.[1] ?? '')
    .matchAll(/`([a-z_]+)`/g)].map((m) => m[1]);
  for (const [profile, want] of [['cloud', CLOUD_TOOLS], ['env', ENV_TOOLS]]) {
    const p = await listOf(profile);
    t.deepEqual(p.tools.map((x) => x.name), want, `--tools ${profile}: only that family`);
    t.deepEqual(documented(profile), p.tools.map((x) => x.name), `doc/tools.md lists the ${profile} profile's tools`);
    const other = profile === 'cloud' ? 'sandbox_env' : 'run_command';
    const r = await p.srv.request('tools/call', { name: other, arguments: {} }, { timeout: 30000 });
    t.is(r.error?.code, -32602, `--tools ${profile}: ${other} cannot be called`);
    t.like(r.error?.message, new RegExp(`tool '${other}' is not served here: it is in the ${profile === 'cloud' ? 'env' : 'cloud'} family and this server has \\[server\\] tools = ${profile}`),
      `--tools ${profile}: the error names the family and the setting`);
    await p.srv.close();
  }

  const bad = await runCli(['--tools', 'nosuch', 'tools']);
  t.is(bad.code, 3, 'an unknown profile is a configuration error (exit 3)');
  t.like(bad.stderr, /\[server\] tools = 'nosuch' is not valid: expected all\|cloud\|env/, 'naming the key and the profiles');
}, { timeout: 120 });
