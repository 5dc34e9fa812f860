// sandbox_env: help (core operations, one <backend>_help per plugin from its
// action table, also as the very first call while backends still load),
// status, machine_list, default_set, shell_new / shell_list / shell_remove,
// unknown actions; one registry and one default for both tool
// families; persistent machines: named, owned by the credential, kept after
// the session ends and found by the next sandgate process; ephemeral
// sandboxes stay private to their session.  What must outlive a process
// lives in the machine's workspace (a local jail's /tmp is its own).
//
// The body is a function of the backend (SG_TEST_BACKEND, default docker).
import { t, preflight, sdkClient, rawServer, resultData, errorText, docker, trackSandbox } from '../lib/sg.mjs';
import { backendFromEnv } from '../lib/backends.mjs';

// setup() starts what the backend needs and gives sandgate's arguments.

// help as the very first call, pipelined behind initialize: the backends
// load on a startup thread, and help must wait for them rather than list
// none.  A few fresh servers, since the race is a matter of timing.
async function earlyHelp(be) {
  let missing = 0;
  let topicErrors = 0;
  const runs = 6;
  for (let i = 0; i < runs; i++) {
    const raw = await rawServer(be.args, be.env, { name: `early help ${i}` });
    raw.sendRequest('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'early', version: '1' } }, 'init');
    raw.notify('notifications/initialized');
    raw.sendRequest('tools/call', { name: 'sandbox_env', arguments: { action: 'help' } }, 'help');
    raw.sendRequest('tools/call', { name: 'sandbox_env', arguments: { action: `${be.name}_help` } }, 'topic');
    const help = await raw.response('help');
    const topic = await raw.response('topic');
    if (!(`${be.name}_help` in (resultData(help?.msg?.result)?.more_help ?? {}))) missing++;
    if (!topic || topic.msg.result?.isError) topicErrors++;
    await raw.close();
  }
  t.is(missing, 0, `help as the first call lists ${be.name}_help (${runs} fresh servers)`);
  t.is(topicErrors, 0, `${be.name}_help as the first call answers (${runs} fresh servers)`);
}

const env = (srv, action, params) => srv.tool('sandbox_env', params === undefined ? { action } : { action, params });

async function body(srv, be) {
  const list = await srv.client.listTools();
  const names = list.tools.map((x) => x.name);
  for (const n of ['sandbox_shell_exec', 'sandbox_shell_read', 'sandbox_file_read', 'sandbox_file_write',
    'sandbox_file_patch', 'sandbox_file_search', 'sandbox_env', 'sandbox_audit_query']) {
    t.ok(names.includes(n), `tools/list has ${n}`);
  }

  const help = await env(srv, 'help');
  t.deepEqual(help.default_actions.map((a) => a.action), ['help', 'status'], 'help: default actions help and status');
  const ops = help.operations.map((o) => o.action);
  for (const op of ['machine_list', 'default_set', 'shell_new', 'shell_remove', 'shell_list', 'shell_interrupt']) {
    t.ok(ops.includes(op), `help lists ${op}`);
  }
  t.ok(`${be.name}_help` in help.more_help, `help has the topic ${be.name}_help`, help.more_help);
  const bh = await env(srv, `${be.name}_help`);
  t.is(bh.backend, be.name, `${be.name}_help names its backend`);
  t.ok(Array.isArray(bh.operations) && bh.operations.length > 0, `${be.name}_help lists operations`, bh);

  const st0 = await env(srv, 'status');
  t.hasFields(st0, { default_machine: null, machines: [], shells: [] }, 'status of a new session: nothing yet');

  const unknown = await srv.call('sandbox_env', { action: 'machine_switch' });
  t.ok(unknown.isError, 'an unknown action is an error');
  t.like(errorText(unknown), /Unknown action: machine_switch.*shell_new/, 'it answers with the valid actions');

  // one registry: a sandbox from create_sandbox is a machine, and the default
  const cs = await srv.tool('create_sandbox', {});
  const sid = cs.sandbox_id;
  const ex = await srv.tool('sandbox_shell_exec', { command: 'echo $((1+1))', machine: sid });
  t.is(ex.output, '2\n', 'machine= takes a sandbox_id from create_sandbox');
  const ex2 = await srv.tool('sandbox_shell_exec', { command: 'hostname' });
  t.is(ex2.sandbox_id, sid, 'create_sandbox made the default for the sandbox_env tools too');
  const st1 = await env(srv, 'status');
  t.is(st1.default_machine, sid, 'status: the default machine');
  t.hasFields(st1.machines[0] ?? {}, { sandbox_id: sid, backend: be.name, shells: 1, is_default: true, persistent: false }, 'status: the machine row');
  t.is(st1.shells.length, 1, 'status: one shell');
  t.hasFields(st1.shells[0] ?? {}, { is_default: true, status: 'idle', purpose: 'default' }, 'status: the shell row');

  // shells
  const sn = await env(srv, 'shell_new', { purpose: 'server' });
  t.like(sn.shell_id, /^sh_/, 'shell_new: a new shell_id');
  t.ok(Number.isInteger(sn.bash_pid), 'shell_new: its bash_pid');
  await srv.tool('sandbox_shell_exec', { command: 'cd /tmp', shell_id: sn.shell_id });
  const ws = ex2.output ? (await srv.tool('run_command', { command: 'pwd' })).stdout : '';
  t.is((await srv.tool('sandbox_shell_exec', { command: 'pwd' })).output, ws, 'the new shell is not the default: its cd stays there');
  t.is((await srv.tool('sandbox_shell_exec', { command: 'pwd', shell_id: sn.shell_id })).output, '/tmp\n', 'the new shell kept its cwd');
  const sl = await env(srv, 'shell_list');
  t.is(sl.shells.length, 2, 'shell_list: two shells');
  t.deepEqual(sl.shells.filter((x) => x.is_default).map((x) => x.purpose), ['default'], 'shell_list: one default');
  t.hasFields(await env(srv, 'default_set', { shell_id: sn.shell_id }), { default_shell: { machine: sid, shell_id: sn.shell_id } }, 'default_set shell_id');
  t.is((await srv.tool('sandbox_shell_exec', { command: 'pwd' })).output, '/tmp\n', 'the default shell changed');
  const both = await srv.call('sandbox_env', { action: 'default_set', params: { machine: sid, shell_id: sn.shell_id } });
  t.ok(both.isError && /exactly one/.test(errorText(both)), 'default_set with both is an error');
  t.hasFields(await env(srv, 'shell_remove', { shell_id: sn.shell_id }), { status: 'removed' }, 'shell_remove');
  t.is((await env(srv, 'shell_list')).shells.length, 1, 'one shell left');
  const gone = await srv.call('sandbox_shell_exec', { command: 'true', shell_id: sn.shell_id });
  t.ok(gone.isError && /not found/.test(errorText(gone)), 'a removed shell_id is not found');
  const fresh = await srv.tool('sandbox_shell_exec', { command: 'pwd' });
  t.is(fresh.output, ws, 'removing the default shell: the next exec makes a new default');

  // a persistent machine: named, usable by name from both families
  const name = `dev-${process.pid}`;
  const mc = await env(srv, 'machine_create', { name, backend: be.name, purpose: 'e2e persistent' });
  trackSandbox(mc.sandbox_id);
  t.hasFields(mc, { name, status: 'running', backend: be.name }, 'machine_create: a persistent machine');
  t.is((await srv.tool('run_command', { command: `echo by-name > mark-${process.pid}; echo ok`, sandbox_id: name })).stdout, 'ok\n',
    'a cloud tool takes the machine name as sandbox_id');
  t.is((await srv.tool('sandbox_file_read', { path: `mark-${process.pid}`, machine: name })).output, '1|by-name\n', 'and machine= takes it too');
  t.hasFields(await env(srv, 'default_set', { machine: name }), { default_machine: mc.sandbox_id }, 'default_set machine');
  t.is((await srv.tool('run_command', { command: `cat mark-${process.pid}` })).stdout, 'by-name\n', 'default_set changed the default of the cloud tools too');
  const ml = await env(srv, 'machine_list');
  t.hasFields(ml.machines.find((m) => m.name === name) ?? {}, { persistent: true, purpose: 'e2e persistent', is_default: true }, 'machine_list: the persistent machine');
  const dup = await srv.call('sandbox_env', { action: 'machine_create', params: { name } });
  t.ok(dup.isError && /exists/.test(errorText(dup)), 'a second machine of the same name is refused');
  if (be.name === 'ssh') {
    const lab = `lab-${process.pid}`;
    const sc = await env(srv, 'ssh_connect', { name: lab, purpose: 'ssh e2e' });
    trackSandbox(sc.sandbox_id);
    t.hasFields(sc, { name: lab, status: 'running', backend: 'ssh' }, 'ssh_connect: a persistent SSH machine on the default target');
    t.is((await srv.tool('sandbox_shell_exec', { command: 'echo over-ssh', machine: lab })).output, 'over-ssh\n', 'a shell on it');
    t.hasFields(await env(srv, 'ssh_disconnect', { machine: lab }), { status: 'stopped' }, 'ssh_disconnect');
    t.is((await env(srv, 'shell_list', { machine: lab })).shells.length, 0, '... ended its shells');
    t.hasFields(await env(srv, 'ssh_reconnect', { machine: lab }), { status: 'running' }, 'ssh_reconnect');
    const adhoc = await srv.call('sandbox_env', { action: 'ssh_connect', params: { name: 'x', host: '192.0.2.1' } });
    t.ok(adhoc.isError && /target/.test(errorText(adhoc)), 'an ad-hoc host is refused with how to configure a target');
    const typo = await srv.call('sandbox_env', { action: 'ssh_reconnect', params: { machine: lab, machnie: lab } });
    t.ok(typo.isError && /ssh_reconnect has no parameter 'machnie': valid ones are machine/.test(errorText(typo)),
      'an unknown parameter of a plugin action is refused by name', { text: errorText(typo) });
    const none = await srv.call('sandbox_env', { action: 'ssh_remove', params: {} });
    t.ok(none.isError && /ssh_remove needs params\.machine/.test(errorText(none)), 'a required parameter is asked for', { text: errorText(none) });
    const dk = await srv.tool('create_sandbox', { backend: 'docker' });
    trackSandbox(dk.sandbox_id);
    const other = await srv.call('sandbox_env', { action: 'ssh_disconnect', params: { machine: dk.sandbox_id } });
    t.ok(other.isError && /ssh_disconnect only works on ssh machines/.test(errorText(other)),
      'an ssh action on another backend\'s machine is refused', { text: errorText(other) });
    await srv.tool('kill_sandbox', { sandbox_id: dk.sandbox_id });
    await srv.tool('sandbox_env', { action: 'default_set', params: { machine: name } });
    // The actions are ssh.so's own: its help topic lists them, the core's help does not.
    const sh = await env(srv, 'ssh_help');
    t.deepEqual(sh.operations.map((o) => o.action).filter((a) => a.startsWith('ssh_')),
      ['ssh_connect', 'ssh_disconnect', 'ssh_reconnect', 'ssh_remove'], 'ssh_help lists the plugin\'s four actions');
    t.ok(!(await env(srv, 'help')).operations.some((o) => o.action.startsWith('ssh_')), 'the core\'s help names no ssh action');
    t.hasFields(await env(srv, 'ssh_remove', { machine: lab }), { machine: lab, status: 'removed', target: 'default' },
      'ssh_remove: its target is the SSH target, not the machine name');
  }
  return { sid, name, pid: mc.sandbox_id };
}

t.run(async () => {
  const be = backendFromEnv();
  if (!be) await t.bailOut(`unknown SG_TEST_BACKEND ${process.env.SG_TEST_BACKEND}`);
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  await earlyHelp(be);
  const srv = await sdkClient(be.args, be.env);
  const { sid, name, pid } = await body(srv, be);

  // another process of the same user: ephemeral sandboxes stay private,
  // persistent machines are shared by the credential
  const other = await sdkClient(be.args, be.env);
  const priv = await other.call('run_command', { command: 'true', sandbox_id: sid });
  t.ok(priv.isError, "another session cannot use this session's ephemeral sandbox");
  t.is((await other.tool('run_command', { command: `cat mark-${process.pid}`, sandbox_id: name })).stdout, 'by-name\n',
    'another process of the same credential finds the persistent machine by name');
  await other.close();

  await srv.close();
  if (be.name === 'docker') {
    const left = JSON.parse(await docker(['inspect', '--type', 'container', pid]))[0];
    t.ok(left?.State?.Running, 'the persistent machine survives its session');
    const eph = await docker(['ps', '-a', '-q', '--filter', `id=${sid}`]);
    t.is(eph.trim(), '', 'the ephemeral sandbox ended with its session');
  }
  // a restart finds it again (its record), and removing it ends it
  const again = await sdkClient(be.args, be.env);
  const ml = await again.tool('sandbox_env', { action: 'machine_list' });
  t.ok(ml.machines.some((m) => m.name === name && m.persistent), 'after a restart machine_list has the persistent machine', ml);
  t.is((await again.tool('sandbox_shell_exec', { command: `cat mark-${process.pid}`, machine: name })).output, 'by-name\n', 'and it still holds its files');
  t.hasFields(await again.tool('sandbox_env', { action: 'machine_remove', params: { machine: name } }), { status: 'removed' }, 'machine_remove');
  t.ok(!(await again.tool('sandbox_env', { action: 'machine_list' })).machines.some((m) => m.name === name), 'it is gone from machine_list');
  await again.close();
}, { timeout: 180 });
