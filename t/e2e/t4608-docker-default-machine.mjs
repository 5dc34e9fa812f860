// [default_machine] enabled: the machine is there before the first call and
// is the session's default; a restarted sandgate re-adopts the surviving
// container (not a new one), also without its record; with an image that
// is not there, or whose command exits at once, the server refuses to
// start, says why, and never answers a client (stdio and HTTP).
import path from 'node:path';
import { t, preflight, sdkClient, runCli, resultData, tmpdir } from '../lib/sg.mjs';
import { uniq, dockerArgs, container, buildImage, PID } from '../lib/docker.mjs';

const INIT = `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't4608', version: '1' } } })}\n`;

t.run(async () => {
  await preflight();
  const name = uniq('t4608dm');
  const dm = (n, extra = {}) => dockerArgs({ 'default_machine.enabled': 'true', 'default_machine.name': n,
    'default_machine.purpose': 'the default', 'default_machine.backend': 'docker', ...extra });
  const args = dm(name);
  const a = await sdkClient(args, {}, { name: 'first sandgate' });
  const c0 = await container(`sandgate-${name}`);
  t.ok(c0?.State?.Running, 'the default machine runs before the first tool call', c0?.State);
  const ex = await a.tool('sandbox_shell_exec', { command: 'hostname; echo hi > /workspace/mark' });
  t.is(ex.sandbox_id, c0?.Id, 'the first call without a machine runs on it');
  t.is(ex.output, `${name}\n`, '... (its hostname is its name)');
  t.ok(!ex.sandbox_created, '... nothing was created lazily');
  const st = await a.tool('sandbox_env', { action: 'status' });
  t.is(st.default_machine, c0?.Id, 'status: it is the session\'s default machine');
  t.ok(st.machines.some((m) => m.name === name && m.purpose === 'the default' && m.persistent), '... listed with its purpose');
  await a.kill('SIGKILL');

  const b = await sdkClient(args, {}, { name: 'restarted sandgate' });
  t.is((await container(`sandgate-${name}`))?.Id, c0.Id, 'after kill -9 and a restart the same container is the default machine');
  t.is((await b.tool('sandbox_shell_exec', { command: 'cat /workspace/mark' })).output, 'hi\n', '... with its files');
  await b.kill('SIGKILL');
  const c = await sdkClient(args, { XDG_STATE_HOME: path.join(tmpdir(), 'state2') }, { name: 'sandgate without the record' });
  t.is((await c.tool('sandbox_shell_exec', { command: 'cat /workspace/mark' })).sandbox_id, c0.Id,
    'a sandgate without the record re-adopts the labelled container');
  await c.tool('sandbox_env', { action: 'docker_remove', machine: name });
  await c.close();

  // fail-closed
  const bad = uniq('t4608bad');
  const missing = `sgt-missing-${PID}:9`;
  const r1 = await runCli([...dm(bad, { 'docker.default_image': missing }), 'stdio'], {}, { input: INIT, timeout: 120000 });
  t.is(r1.code, 1, 'stdio with an image that is not there: sandgate exits 1', r1.stderr.slice(-800));
  t.like(r1.stderr, new RegExp(`cannot provision the default machine '${bad}'.*image ${missing} is not on this docker daemon`),
    '... and says why', r1.stderr.slice(-800));
  t.is(r1.stdout, '', '... before answering any client (no reply to initialize)');
  t.is(await container(`sandgate-${bad}`), null, '... and leaves no container');
  const r2 = await runCli([...dm(bad, { 'docker.default_image': missing }), '--set', 'server.port=0', 'http'], {}, { timeout: 120000 });
  t.is(r2.code, 1, 'http with an image that is not there: sandgate exits 1');
  t.ok(!/listening on/.test(r2.stderr) && /cannot provision the default machine/.test(r2.stderr), '... without listening', r2.stderr.slice(-600));
  const exits = await buildImage(`sgt-exits-${PID}:1`, 'FROM sandgate/base:1\nCMD ["true"]\n');
  const quick = uniq('t4608quick');
  const r3 = await runCli([...dm(quick, { 'docker.default_image': exits, 'docker.restart_policy_name': 'no' }), 'stdio'], {},
    { input: INIT, timeout: 120000 });
  t.is(r3.code, 1, 'an image whose command exits at once: sandgate exits 1');
  // the engine says "not running", or, when the exec raced the container's
  // exit, that the command could not start in it
  t.like(r3.stderr, /cannot provision the default machine .*it does not run commands: .*(not running|could not start the command in container)/,
    '... saying it does not run', r3.stderr.slice(-800));
  t.is(r3.stdout, '', '... before answering any client');
  t.is(await container(`sandgate-${quick}`), null, '... and removes the machine it made and could not use');
}, { timeout: 300 });
