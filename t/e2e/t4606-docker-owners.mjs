// Credentials are walls (two bearer tokens over HTTP): each token's named
// machines live in work_home/<credential>/ and on a network of its own;
// the other token does not see them (docker_ps, docker_inspect, shells,
// the share, /host of its admin machine, DNS) and its docker_run of the
// same name is "not found" (never a re-attach).
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { preflight, resultData, errorText, tmpdir } from '../lib/sg.mjs';
import { t, startHttp, connect } from '../http/lib.mjs';
import { uniq, trackNetwork, container, networkExists } from '../lib/docker.mjs';

const sha = (s) => createHash('sha256').update(s).digest('hex');
/** host->call_credential of a token: the hash of its credential key "token:<16 hex>". */
const credOf = (token) => sha(`token:${sha(token).slice(0, 16)}`).slice(0, 16);

t.run(async () => {
  await preflight();
  const TA = `token-a-${'a'.repeat(40)}-${process.pid}`;
  const TB = `token-b-${'b'.repeat(40)}-${process.pid}`;
  const file = path.join(tmpdir(), 'tokens');
  fs.writeFileSync(file, `${TA}\n${TB}\n`, { mode: 0o600 });
  const net = uniq('sgt-net');
  const work = path.join(tmpdir(), 'work');
  const admin = uniq('t4606admin');
  const [ca, cb] = [credOf(TA), credOf(TB)];
  trackNetwork(`${net}-${ca}`);
  trackNetwork(`${net}-${cb}`);
  const srv = await startHttp({ set: { auth_tokens_file: file, 'docker.auto_network': net, 'storage.work_home': work,
    'docker.admin_machine': admin } });
  const a = await connect(srv.url, { token: TA, name: 'A' });
  const b = await connect(srv.url, { token: TB, name: 'B' });
  const env = async (c, action, params) => c.call('sandbox_env', { action, ...params });

  const name = uniq('t4606');
  const ra = resultData(await env(a, 'docker_run', { name }));
  t.is(ra.status, 'running', 'token A: docker_run');
  const ctr = await container(`sandgate-${name}`);
  t.is(ctr?.Config?.Labels?.['org.sandgate.credential'], ca, 'the container is labelled with A\'s credential');
  t.ok(Object.keys(ctr?.NetworkSettings?.Networks ?? {}).includes(`${net}-${ca}`), `it is on A's own network ${net}-${ca}`);
  t.ok(fs.statSync(path.join(work, ca, name)).isDirectory(), 'its workspace is work_home/<A\'s credential>/<name>');
  await a.tool('sandbox_shell_exec', { machine: name, command: `echo a-shared > /share/${name}/f; echo a-work > /workspace/w` });
  t.ok(fs.existsSync(path.join(work, ca, '_share', name, 'f')), '... its share work_home/<A>/_share/<name>');

  const ps = resultData(await env(b, 'docker_ps', { all: true }));
  t.ok(!ps.containers.some((x) => x.name === name), 'token B: docker_ps does not list A\'s machine', ps);
  t.deepEqual(ps.adopted, [], '... and adopts nothing of A\'s');
  for (const [action, params] of [['docker_inspect', { machine: name }], ['docker_logs', { machine: name }],
    ['docker_stop', { machine: name }], ['docker_remove', { machine: name }]]) {
    const r = await env(b, action, params);
    t.ok(r.isError && /not found/.test(errorText(r)), `token B: ${action} on A's machine is "not found"`, errorText(r));
  }
  const shB = await b.call('sandbox_shell_exec', { machine: name, command: 'true' });
  t.ok(shB.isError && /not found/.test(errorText(shB)), 'token B: a shell on A\'s machine is "not found"');
  const steal = await env(b, 'docker_run', { name });
  t.ok(steal.isError && /not found/.test(errorText(steal)), 'token B: docker_run of A\'s name is "not found"', errorText(steal));
  t.is((await container(`sandgate-${name}`))?.Id, ctr.Id, '... A\'s container is untouched (no re-attach, no new one)');

  const nb = uniq('t4606b');
  t.is(resultData(await env(b, 'docker_run', { name: nb })).status, 'running', 'token B: docker_run of its own machine');
  t.ok(Object.keys((await container(`sandgate-${nb}`))?.NetworkSettings?.Networks ?? {}).includes(`${net}-${cb}`),
    `it is on B's own network ${net}-${cb}`);
  const dns = await b.tool('sandbox_shell_exec', { machine: nb, command: `getent hosts ${name}; echo rc=$?` });
  t.like(dns.output, /rc=2/, 'B\'s machine cannot resolve A\'s by name (another network)', dns.output);
  const lsB = await b.tool('sandbox_shell_exec', { machine: nb, command: 'ls /share; ls /share/* 2>/dev/null | wc -l' });
  t.is(lsB.output, `${nb}\n0\n`, 'B\'s /share holds B\'s machines only', lsB.output);

  t.is(resultData(await env(a, 'docker_run', { name: admin })).status, 'running', 'token A: its admin machine');
  const host = (await a.tool('sandbox_shell_exec', { machine: admin, command: 'ls /host' })).output.split('\n').filter(Boolean).sort();
  t.deepEqual(host, ['_share', admin, name].sort(), 'A\'s admin machine sees A\'s workspaces only under /host', host);
  const psA = resultData(await env(a, 'docker_ps'));
  t.deepEqual(psA.containers.map((x) => x.name).sort(), [admin, name].sort(), 'token A: docker_ps lists A\'s two machines');

  for (const [c, n] of [[a, name], [a, admin], [b, nb]]) await env(c, 'docker_remove', { machine: n });
  t.ok(!(await networkExists(`${net}-${ca}`)) && !(await networkExists(`${net}-${cb}`)), 'both networks go with their last machines');
  await a.close();
  await b.close();
  const st = await srv.stop('SIGTERM');
  t.is(st?.code, 0, 'sandgate http exits 0');
}, { timeout: 240 });
