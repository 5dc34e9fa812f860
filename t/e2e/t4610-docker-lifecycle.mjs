// A machine's life: docker_run runs the image's own CMD (not sandgate's
// idle loop) and reports one that exits at once as exited with its exit
// code and last log lines (restarts included); docker_logs has stdout and
// stderr in order, tail, since, until and timestamps, also when stopped;
// docker_stop ends its shells and keeps it stopped, docker_start and
// docker_restart bring it back.
import { t, preflight, sdkClient, resultData, errorText, sleep } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, container, buildImage, PID } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const talker = await buildImage(`sgt-talker-${PID}:1`, 'FROM sandgate/base:1\n'
    + 'CMD ["/bin/sh", "-c", "echo out-1; sleep 0.3; echo err-1 >&2; sleep 0.3; echo out-2; exec sleep infinity"]\n');
  const srv = await sdkClient(dockerArgs(), {}, { name: 'sandgate' });
  const name = uniq('t4610');
  t.is(resultData(await envFlat(srv, 'docker_run', { name, image: talker })).status, 'running', 'docker_run of an image with its own CMD');
  const c = await container(`sandgate-${name}`);
  t.deepEqual(c?.Config?.Cmd, ['/bin/sh', '-c', 'echo out-1; sleep 0.3; echo err-1 >&2; sleep 0.3; echo out-2; exec sleep infinity'],
    'the container runs the image\'s CMD');
  await sleep(1000);
  t.deepEqual(c?.Config?.Entrypoint ?? null, null, '... with no entrypoint of sandgate\'s');
  const logs = resultData(await envFlat(srv, 'docker_logs', { machine: name }));
  t.is(logs.logs, 'out-1\nerr-1\nout-2\n', 'docker_logs: stdout and stderr, demultiplexed, in order');
  t.is(resultData(await envFlat(srv, 'docker_logs', { machine: name, tail: 1 })).logs, 'out-2\n', 'tail 1: the last line');
  const ts = resultData(await envFlat(srv, 'docker_logs', { machine: name, timestamps: true })).logs;
  t.like(ts, /^\d{4}-\d\d-\d\dT[\d:.]+Z out-1\n/, 'timestamps', ts);
  t.is(resultData(await envFlat(srv, 'docker_logs', { machine: name, since: '1h' })).logs, 'out-1\nerr-1\nout-2\n', 'since 1h: all of it');
  t.is(resultData(await envFlat(srv, 'docker_logs', { machine: name, until: '2020-01-01T00:00:00Z' })).logs, '', 'until 2020: nothing');
  const badTail = await envFlat(srv, 'docker_logs', { machine: name, tail: 0 });
  t.ok(badTail.isError, 'tail 0 is refused', errorText(badTail));
  const badSince = await envFlat(srv, 'docker_logs', { machine: name, since: 'yesterday' });
  t.ok(badSince.isError && /'since' must be RFC 3339/.test(errorText(badSince)), 'a since that is no time says what it takes', errorText(badSince));

  const sh = await srv.tool('sandbox_shell_exec', { machine: name, command: 'echo $$' });
  t.is(resultData(await envFlat(srv, 'docker_stop', { machine: name })).status, 'stopped', 'docker_stop');
  t.is((await container(c.Id))?.State?.Running, false, '... the container is stopped');
  const shells = (await srv.tool('sandbox_env', { action: 'shell_list', machine: name })).shells;
  t.ok(!shells.some((s) => s.shell_id === sh.shell_id), 'docker_stop ended its shells', shells);
  t.is(resultData(await envFlat(srv, 'docker_logs', { machine: name, tail: 2 })).logs, 'err-1\nout-2\n', 'docker_logs works on a stopped machine');
  const down = await srv.call('sandbox_shell_exec', { machine: name, command: 'true' });
  t.ok(down.isError && /not running: start it with sandbox_env docker_start/.test(errorText(down)), 'a command on a stopped machine says to start it', errorText(down));
  t.ok((await srv.tool('sandbox_env', { action: 'machine_list' })).machines.some((m) => m.name === name), '... and the machine is still known');
  t.is(resultData(await envFlat(srv, 'docker_start', { machine: name })).status, 'running', 'docker_start');
  t.is((await srv.tool('sandbox_shell_exec', { machine: name, command: 'echo back' })).output, 'back\n', 'commands run again');
  const runnerOff = process.env.SANDGATE_DOCKER_RUNNER === 'false'; // make check-fallback
  t.is(resultData(await envFlat(srv, 'docker_runner', { machine: name })).runner, runnerOff ? 'off' : 'active',
    runnerOff ? '... through plain exec ([docker] runner = false)' : '... through the runner still (a stop is no reason to fall back to plain exec)');
  const started = (await container(c.Id))?.State?.StartedAt;
  await sleep(1100);
  t.is(resultData(await envFlat(srv, 'docker_restart', { machine: name, timeout: 1 })).status, 'running', 'docker_restart');
  t.isnt((await container(c.Id))?.State?.StartedAt, started, '... the container started again');
  await sleep(1000);
  t.like(resultData(await envFlat(srv, 'docker_logs', { machine: name })).logs, /^out-1\nerr-1\nout-2\nout-1\nerr-1\nout-2\n/,
    '... its CMD ran again (the log has it twice more)');

  // a CMD that exits at once, with the restart policy's retries
  const quick = uniq('t4610q');
  const q = resultData(await envFlat(srv, 'docker_run', { name: quick, command: `echo quick-${PID}; sleep 0.2; echo oops >&2; sleep 0.2; exit 3` }));
  t.hasFields(q, { status: 'exited', running: false, exit_code: 3 }, 'a command that exits at once is reported as exited, with its exit code', q);
  t.like(q.logs ?? '', new RegExp(`^(quick-${PID}\\noops\\n){4}$`), '... and its last log lines (it ran 1 + 3 restarts)', q.logs);
  t.like(q.error ?? '', /container is 'exited' after start; exit_code=3; restarts=3/, '... and the reason');
  const dead = await srv.call('sandbox_shell_exec', { machine: quick, command: 'true' });
  t.ok(dead.isError && /not running/.test(errorText(dead)), 'it takes no command', errorText(dead));
  const again = resultData(await envFlat(srv, 'docker_run', { name: quick }));
  t.is(again.note, 'reattached to existing container (started; was stopped)', 'docker_run of it starts it again ...');
  t.is(again.status, 'exited', '... and says it exited again');
  for (const m of [name, quick]) await envFlat(srv, 'docker_remove', { machine: m });
  await srv.close();
}, { timeout: 240 });
