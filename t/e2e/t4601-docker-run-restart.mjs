// docker_run makes a named machine (container sandgate-<name>) that survives
// sandgate: after kill -9 and a restart, docker_ps lists the same container
// and a shell opens in it; a sandgate whose record lacks it (another state
// directory) adopts the labelled container on docker_ps; docker_run of the
// same name re-attaches with a note (already running, or started when it
// was stopped).
import path from 'node:path';
import { t, preflight, sdkClient, resultData, errorText, tmpdir } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, container } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const args = dockerArgs();
  const name = uniq('t4601');
  const a = await sdkClient(args, {}, { name: 'first sandgate' });
  const run = resultData(await envFlat(a, 'docker_run', { name, purpose: 'survives restarts' }));
  t.is(run.status, 'running', 'docker_run: the machine runs');
  t.is(run.container, `sandgate-${name}`, 'its container is [docker] container_name_prefix (default sandgate-) + name');
  const c0 = await container(`sandgate-${name}`);
  t.ok(c0?.State?.Running, 'docker ps on the host shows it running', c0?.State);
  t.is(run.sandbox_id, c0?.Id, 'sandbox_id is the container id');
  await a.tool('sandbox_shell_exec', { command: 'echo kept > /workspace/mark', machine: name });
  await a.kill('SIGKILL');
  t.pass('killed the first sandgate with SIGKILL');

  const b = await sdkClient(args, {}, { name: 'restarted sandgate' });
  const ps = resultData(await envFlat(b, 'docker_ps'));
  const row = ps.containers?.find((x) => x.name === name);
  t.is(row?.id, c0.Id, 'after the restart docker_ps lists the same container id', ps);
  t.hasFields(row ?? {}, { status: 'running', purpose: 'survives restarts', container: `sandgate-${name}` }, '... running, with its purpose');
  const sh = await b.tool('sandbox_shell_exec', { command: 'cat /workspace/mark', machine: name });
  t.is(sh.output, 'kept\n', 'a shell opens in it and sees what the first sandgate wrote');
  t.is(sh.sandbox_id, c0.Id, '... in the same container');
  const again = resultData(await envFlat(b, 'docker_run', { name }));
  t.is(again.note, 'reattached to existing container (already running)', 'docker_run of the same name re-attaches, with the note');
  t.is(again.sandbox_id, c0.Id, '... to the same container');
  await b.kill('SIGKILL');

  // another deployment of the same user (another work_home) on this engine
  const other = uniq('t4601o');
  const o = await sdkClient(dockerArgs({ 'storage.work_home': path.join(tmpdir(), 'other-work') }),
    { XDG_STATE_HOME: path.join(tmpdir(), 'state3') }, { name: 'another deployment' });
  t.is(resultData(await envFlat(o, 'docker_run', { name: other })).status, 'running', 'another deployment runs a machine');
  await o.close();

  // a sandgate with another state directory has no record of it
  const c = await sdkClient(args, { XDG_STATE_HOME: path.join(tmpdir(), 'state2') }, { name: 'sandgate without the record' });
  const none = await c.tool('sandbox_env', { action: 'machine_list' });
  t.ok(!none.machines.some((m) => m.name === name), 'a sandgate without the record does not list it before docker_ps');
  const ps2 = resultData(await envFlat(c, 'docker_ps'));
  t.deepEqual(ps2.adopted, [name], 'docker_ps adopts the labelled container the record lacks (not another deployment\'s)', ps2);
  t.is(ps2.containers?.find((x) => x.name === name)?.id, c0.Id, '... the same container id');
  t.deepEqual(resultData(await envFlat(c, 'docker_ps')).adopted, [], 'a second docker_ps adopts nothing more');
  t.is((await c.tool('sandbox_shell_exec', { command: 'cat /workspace/mark', machine: name })).output, 'kept\n',
    'a shell opens in the adopted machine');

  t.is(resultData(await envFlat(c, 'docker_stop', { machine: name })).status, 'stopped', 'docker_stop');
  t.is((await container(c0.Id))?.State?.Running, false, '... the container is stopped');
  const ps3 = resultData(await envFlat(c, 'docker_ps'));
  t.ok(!ps3.containers.some((x) => x.name === name), 'docker_ps leaves out stopped machines');
  t.is(resultData(await envFlat(c, 'docker_ps', { all: true })).containers.find((x) => x.name === name)?.status, 'exited',
    'docker_ps all=true lists it as exited');
  const started = resultData(await envFlat(c, 'docker_run', { name }));
  t.is(started.note, 'reattached to existing container (started; was stopped)', 'docker_run of a stopped machine starts it, with the note');
  t.is(started.status, 'running', '... and it runs');
  t.is((await container(c0.Id))?.State?.Running, true, '... on the host too');
  const theirs = await envFlat(c, 'docker_run', { name: other });
  t.ok(theirs.isError && /not found among yours, and the container name sandgate-t4601o-\d+ is in use/.test(errorText(theirs)),
    'docker_run of the other deployment\'s name is not a re-attach', errorText(theirs));
  t.is(resultData(await envFlat(c, 'docker_remove', { machine: name })).status, 'removed', 'docker_remove');
  t.is(await container(c0.Id), null, 'the container is gone');
  await c.close();
}, { timeout: 240 });
