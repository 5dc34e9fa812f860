// A sandbox's container stopped or removed from outside while a command
// runs in it (plain docker exec, [docker] runner = false).  Stopped: the
// command was killed with the container, and the result says so (exit 137,
// SIGKILL).  Removed: the same, or, when docker dropped the exec instance
// with the container before its status was read, an error saying the
// container is gone; never that the engine died (it did not: the next call
// works).  The server keeps serving.  (The third case, a container whose
// main process ends while an exec starts, is t4608's: "not running".)
import { t, preflight, sdkClient, errorText, docker, sleep } from '../lib/sg.mjs';
import { dockerArgs, container } from '../lib/docker.mjs';

// Starts `sleep 30` in sandbox id and resolves once the container runs it,
// to { call } (wrapped: an async function returning the call's promise
// itself would wait for it).
async function sleeping(srv, id, what) {
  const call = srv.call('run_command', { command: 'echo started; sleep 30', sandbox_id: id });
  let seen = false;
  for (let i = 0; i < 100 && !seen; i++) {
    seen = /sleep 30/.test(await docker(['top', id]).catch(() => ''));
    if (!seen) await sleep(100);
  }
  t.ok(seen, `${what}: the command runs in the container`);
  return { call };
}

t.run(async () => {
  await preflight();
  const srv = await sdkClient(dockerArgs({ 'docker.runner': 'false', 'docker.restart_policy_name': 'no' }));

  const a = await srv.tool('create_sandbox', {});
  const { call: ra } = await sleeping(srv, a.sandbox_id, 'stopped');
  await docker(['stop', '-t', '1', a.sandbox_id]);
  const sa = (await ra).structuredContent ?? {};
  t.deepEqual([sa.exit_code, sa.stdout], [137, 'started\n'], 'stopped: the command was killed with its container (exit 137)', sa);
  t.is((await container(a.sandbox_id))?.State?.Running, false, 'stopped: the container is stopped (nothing restarted it)');

  const b = await srv.tool('create_sandbox', {});
  const { call: rb } = await sleeping(srv, b.sandbox_id, 'removed');
  await docker(['rm', '-f', b.sandbox_id]);
  const r = await rb;
  // Killed with the container (137) when the exec's status was read before
  // the removal finished; else no status is left, and the error says why.
  const killed = !r.isError && r.structuredContent?.exit_code === 137;
  t.ok(killed || new RegExp(`container ${b.sandbox_id} is gone \\(removed outside sandgate\\)`).test(errorText(r)),
    'removed: killed with the container (137), or an error saying the container is gone', r.isError ? errorText(r) : r.structuredContent);
  t.ok(!/engine died/.test(r.isError ? errorText(r) : ''), 'removed: ... never that the engine died');

  const next = await srv.tool('create_sandbox', {});
  t.is((await srv.tool('run_command', { command: 'echo ok', sandbox_id: next.sandbox_id })).stdout, 'ok\n',
    'the engine answers: a new sandbox runs commands');
  await srv.close();
}, { timeout: 90 });
