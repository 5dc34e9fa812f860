// The seed's way of calling and configuring: sandbox_env actions with their
// parameters flat next to action (or under params, or both), unknown
// parameters an error that names them; an INI file with TOML-style quoted
// values, read without the quotes; [docker] container_name_prefix,
// admin_machine = "", restart_max_retry_count, [storage] share_subdir;
// [files] and [shell] keys honoured (and shown in the tools' schemas).
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, resultData, errorText, tmpdir } from '../lib/sg.mjs';
import { uniq, trackNetwork, container, PID } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const net = uniq('sgt-net');
  trackNetwork(net);
  const work = path.join(tmpdir(), 'work home');
  const ini = path.join(tmpdir(), 'seed.ini');
  fs.writeFileSync(ini, [
    '[docker]', `container_name_prefix = "sgq${PID}-"`, `auto_network = "${net}"`, 'default_image = "sandgate/base:1"',
    'restart_max_retry_count = 2', 'admin_machine = ""',
    '[storage]', `work_home = "${work}"`, 'share_subdir = "pub"',
    '[files]', 'default_read_limit = 3', 'max_read_limit = "4"', 'max_file_size = 2000', 'default_search_limit = 2',
    '[shell]', 'head_size = 100', 'tail_size = 100', 'max_output = 400', '',
  ].join('\n'));
  const srv = await sdkClient(['--config', ini], {}, { name: 'sandgate' });
  const name = 'admin'; // admin_machine = "": an ordinary name
  const cname = `sgq${PID}-${name}`;

  const help = resultData(await srv.call('sandbox_env', { action: 'docker_help' }));
  const ops = Object.fromEntries((help.operations ?? []).map((o) => [o.action, o]));
  for (const a of ['docker_run', 'docker_ps', 'docker_images', 'docker_image_history', 'docker_build', 'docker_commit',
    'docker_stop', 'docker_start', 'docker_restart', 'docker_remove', 'docker_inspect', 'docker_logs', 'docker_diff', 'docker_stats']) {
    t.ok(ops[a]?.params?.type === 'object' && ops[a].params.additionalProperties === false && ops[a].description,
      `docker_help describes ${a} with its exact parameters`, ops[a]);
  }
  t.deepEqual(Object.keys(ops.docker_run?.params?.properties ?? {}).sort(),
    ['command', 'env', 'image', 'name', 'ports', 'purpose', 'shell', 'workdir'], 'docker_run\'s parameters');
  const run = await srv.call('sandbox_env', { action: 'docker_run', name, purpose: 'flat' });
  t.ok(!run.isError, 'a flat docker_run works', errorText(run));
  t.is(resultData(run).container, cname, 'the quoted container_name_prefix is used without its quotes');
  const c = await container(cname);
  t.is(c?.HostConfig?.RestartPolicy?.MaximumRetryCount, 2, 'restart_max_retry_count is honoured');
  const binds = (c?.Mounts ?? []).map((m) => `${m.Source}:${m.Destination}`).sort();
  t.deepEqual(binds, [`${work}/${name}:/workspace`, `${work}/pub/${name}:/share/${name}`, `${work}/pub:/share`].sort(),
    'work_home (with a blank, quoted) and share_subdir = "pub" are honoured; admin_machine = "" gives no /host', binds);

  const mixed = resultData(await srv.call('sandbox_env', { action: 'docker_logs', machine: name, params: { tail: 5 } }));
  t.is(mixed.lines, 0, 'parameters flat and under params together work');
  const both = await srv.call('sandbox_env', { action: 'docker_logs', machine: name, params: { machine: name } });
  t.ok(both.isError && /parameter 'machine' is given both flat and under params/.test(errorText(both)), 'one given both ways is an error naming it', errorText(both));
  const typo = await srv.call('sandbox_env', { action: 'docker_run', name: uniq('t4609'), imgae: 'x' });
  t.ok(typo.isError && /docker_run has no parameter 'imgae': valid ones are .*image/.test(errorText(typo)), 'an unknown parameter is an error that names it', errorText(typo));
  const opt = await srv.call('sandbox_env', { action: 'machine_create', name: uniq('t4609'), backend: 'docker', colour: 'red' });
  t.ok(opt.isError && /has no parameter 'colour': it takes image, env/.test(errorText(opt)), 'machine_create on docker names an unknown option too', errorText(opt));
  const mc = await srv.call('sandbox_env', { action: 'machine_create', name: uniq('t4609m'), backend: 'docker', env: { K: 'v' }, workdir: '/tmp' });
  t.ok(!mc.isError, 'machine_create on docker takes docker_run\'s parameters', errorText(mc));
  t.is((await srv.tool('sandbox_shell_exec', { machine: uniq('t4609m'), command: 'echo $K; pwd' })).output, 'v\n/workspace\n',
    '... its env reaches the machine');
  t.is((await container(`sgq${PID}-${uniq('t4609m')}`))?.Config?.WorkingDir, '/tmp', '... and its workdir the container');

  // [files]
  const write = (p, content) => srv.call('sandbox_file_write', { machine: name, path: p, content });
  t.ok(!(await write('/workspace/ten.txt', Array.from({ length: 10 }, (_, i) => `line ${i + 1} needle`).join('\n') + '\n')).isError, 'write a 10-line file');
  const r1 = await srv.tool('sandbox_file_read', { machine: name, path: '/workspace/ten.txt' });
  t.hasFields(r1, { limit: 3, truncated: true, output: '1|line 1 needle\n2|line 2 needle\n3|line 3 needle\n' }, 'default_read_limit = 3');
  t.is((await srv.tool('sandbox_file_read', { machine: name, path: '/workspace/ten.txt', limit: 100 })).limit, 4, 'max_read_limit = "4" cuts a larger limit');
  const big = 'x'.repeat(2500);
  const wbig = await write('/workspace/big.txt', big);
  t.ok(wbig.isError && /more than \[files\] max_file_size \(2000\)/.test(errorText(wbig)), 'max_file_size bounds a write', errorText(wbig));
  await srv.tool('sandbox_shell_exec', { machine: name, command: 'head -c 2500 /dev/zero | tr "\\0" y > /workspace/big.txt' });
  t.hasFields(await srv.tool('sandbox_file_read', { machine: name, path: '/workspace/big.txt' }), { status: 'too_large', file_size: 2500, max_file_size: 2000 },
    '... and a read answers too_large');
  const found = await srv.tool('sandbox_file_search', { machine: name, pattern: 'needle', path: '/workspace' });
  t.is(found.results?.length, 2, 'default_search_limit = 2', found);
  const tools = (await srv.client.listTools()).tools;
  const rl = tools.find((x) => x.name === 'sandbox_file_read')?.inputSchema?.properties?.limit;
  t.hasFields(rl ?? {}, { default: 3, maximum: 4 }, 'sandbox_file_read\'s schema shows the configured limits');
  t.is(tools.find((x) => x.name === 'sandbox_shell_exec')?.inputSchema?.properties?.max_output?.default, 400, '... and sandbox_shell_exec\'s max_output');

  // [shell] head_size : tail_size
  const out = (await srv.tool('sandbox_shell_exec', { machine: name, command: 'head -c 1000 /dev/zero | tr "\\0" a; head -c 1000 /dev/zero | tr "\\0" b' })).output;
  t.ok(out.startsWith(`${'a'.repeat(200)}\n[sandgate: `) && out.endsWith('b'.repeat(200)) && !out.includes('ab'),
    'output over max_output = 400 keeps head and tail as head_size:tail_size (200 and 200)', out.length);
  for (const m of [name, uniq('t4609m')]) await srv.call('sandbox_env', { action: 'docker_remove', machine: m });
  await srv.close();
}, { timeout: 240 });
