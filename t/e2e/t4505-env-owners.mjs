// Ownership over HTTP with two bearer tokens: a persistent machine belongs
// to the token that made it (the other token gets "not found" from every
// tool and does not see it in machine_list or status), survives the session
// that made it (DELETE) and is found by a new session of the same token;
// each token's sandbox_audit_query sees only its own rows; the operator's
// [server] shared_machines opens one machine to both (B uses it, only A
// removes it); audit rows are written over HTTP.
import fs from 'node:fs';
import path from 'node:path';
import { preflight, errorText, tmpdir, trackSandbox } from '../lib/sg.mjs';
import { t, startHttp, connect } from '../http/lib.mjs';

const env = (c, action, params) => c.tool('sandbox_env', params === undefined ? { action } : { action, params });

t.run(async () => {
  await preflight();
  const TA = `token-a-${'a'.repeat(40)}`;
  const TB = `token-b-${'b'.repeat(40)}`;
  const file = path.join(tmpdir(), 'tokens');
  fs.writeFileSync(file, `${TA}\n${TB}\n`, { mode: 0o600 });
  const shared = `shared-${process.pid}`;
  const srv = await startHttp({ set: { auth_tokens_file: file, shared_machines: shared } });
  const a = await connect(srv.url, { token: TA, name: 'A' });
  const b = await connect(srv.url, { token: TB, name: 'B' });

  const name = `mine-${process.pid}`;
  const pa = await env(a, 'machine_create', { name, purpose: 'token A only' });
  trackSandbox(pa.sandbox_id);
  const sh = await env(a, 'machine_create', { name: shared });
  trackSandbox(sh.sandbox_id);
  await a.tool('sandbox_shell_exec', { command: 'echo a-was-here > /tmp/who', machine: name });
  await a.tool('sandbox_file_write', { path: '/tmp/s.txt', content: 'for everyone\n', machine: shared });

  for (const [tool, args] of [
    ['sandbox_shell_exec', { command: 'true', machine: name }],
    ['sandbox_file_read', { path: '/tmp/who', machine: name }],
    ['run_command', { command: 'true', sandbox_id: name }],
    ['run_command', { command: 'true', sandbox_id: pa.sandbox_id }],
  ]) {
    const r = await b.call(tool, args);
    t.ok(r.isError && /not found/.test(errorText(r)), `token B: ${tool} on A's machine is "not found"`, { text: errorText(r) });
  }
  const bl = await env(b, 'machine_list');
  t.ok(!bl.machines.some((m) => m.name === name), "token B's machine_list does not show A's machine");
  t.ok(bl.machines.some((m) => m.name === shared), '... but shows the shared machine');
  t.is((await b.tool('sandbox_file_read', { path: '/tmp/s.txt', machine: shared })).output, '1|for everyone\n', 'token B uses the shared machine');
  // shared: usable by B, not removable by B (by name or by id, from either family)
  for (const [tool, args] of [
    ['sandbox_env', { action: 'machine_remove', params: { machine: shared } }],
    ['kill_sandbox', { sandbox_id: shared }],
    ['kill_sandbox', { sandbox_id: sh.sandbox_id }],
  ]) {
    const r = await b.call(tool, args);
    t.ok(r.isError, `token B: ${tool} ${JSON.stringify(args)} on the shared machine is refused`);
    t.like(errorText(r), new RegExp(`machine '${args.sandbox_id ?? shared}' is shared with you but was made by another credential: you may use it, not remove it`),
      '... naming the machine as B gave it, and what B may do', { text: errorText(r) });
  }
  t.is((await b.tool('sandbox_file_read', { path: '/tmp/s.txt', machine: shared })).output, '1|for everyone\n', 'the shared machine is still there for B');
  const bs = await env(b, 'status');
  t.ok(!bs.shells.some((s) => s.machine === name), "token B's status lists none of A's shells");

  const qa = await a.tool('sandbox_audit_query', {});
  const qb = await b.tool('sandbox_audit_query', {});
  t.cmp(qa.total, '>=', 4, `token A sees its rows (${qa.total}): audit works over HTTP`);
  t.ok(!qb.records.some((r) => r.action === 'machine_create' && r.details?.params?.name === name), "token B does not see A's rows");
  t.ok(qb.records.some((r) => r.status === 'error' && r.tool === 'run_command'), 'token B sees its own rows');
  t.ok(qb.records.some((r) => r.machine === shared), "token B sees A's rows on the shared machine");

  // the persistent machine outlives A's session
  await a.terminate();
  const a2 = await connect(srv.url, { token: TA, name: 'A again' });
  const ml = await env(a2, 'machine_list');
  t.ok(ml.machines.some((m) => m.name === name && m.persistent && m.purpose === 'token A only'),
    'a new session of token A finds the persistent machine', ml);
  t.is((await a2.tool('sandbox_file_read', { path: '/tmp/who', machine: name })).output, '1|a-was-here\n', '... with its files');
  await env(a2, 'machine_remove', { machine: name });
  await env(a2, 'machine_remove', { machine: shared });
  await a2.close();
  await b.close();
  const st = await srv.stop('SIGTERM');
  t.is(st?.code, 0, 'sandgate http exits 0 on SIGTERM');
}, { timeout: 180 });
