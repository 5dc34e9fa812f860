// Images without bash: a persistent shell falls back to /bin/sh; an image
// without /bin/sh either needs docker_run's `shell` (the error says so),
// and with it shells, one-off commands and the file tools run in that
// shell (through plain docker exec: the runner needs /bin/sh).
import { t, preflight, sdkClient, resultData, errorText } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, buildImage, PID } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const nobash = await buildImage(`sgt-nobash-${PID}:1`,
    'FROM sandgate/base:1\nRUN ["/bin/bash", "-c", "rm -f /usr/bin/bash /usr/bin/rbash"]\nCMD ["/bin/sleep", "infinity"]\n');
  const nosh = await buildImage(`sgt-nosh-${PID}:1`,
    'FROM sandgate/base:1\nRUN ["/bin/bash", "-c", "rm -f /usr/bin/sh /usr/bin/bash /usr/bin/rbash"]\nCMD ["/bin/sleep", "infinity"]\n');
  const srv = await sdkClient(dockerArgs(), {}, { name: 'sandgate' });

  const a = uniq('t4612a');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: a, image: nobash })).status, 'running', 'docker_run of an image without bash');
  const r1 = await srv.tool('sandbox_shell_exec', { machine: a, command: 'echo $0; cd /tmp; export X=1' });
  t.like(r1.output, /^(\/bin\/)?sh\n$/, 'its persistent shell is /bin/sh (sh, through the runner)');
  t.is((await srv.tool('sandbox_shell_exec', { machine: a, command: 'pwd; echo $X' })).output, '/tmp\n1\n', '... and persistent');

  const b = uniq('t4612b');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: b, image: nosh })).status, 'running', 'docker_run of an image without /bin/sh');
  const r2 = await srv.call('sandbox_shell_exec', { machine: b, command: 'true' });
  t.ok(r2.isError && /could not start .*\/bin\/sh.*docker_run's `shell`/.test(errorText(r2)), 'a shell there fails, naming /bin/sh and docker_run\'s shell', errorText(r2));
  await envFlat(srv, 'docker_remove', { machine: b });

  const c = uniq('t4612c');
  const made = resultData(await envFlat(srv, 'docker_run', { name: c, image: nosh, shell: '/usr/bin/dash' }));
  t.is(made.status, 'running', 'docker_run with shell /usr/bin/dash');
  const r3 = await srv.tool('sandbox_shell_exec', { machine: c, command: 'echo $0; cd /etc; V=2' });
  t.is(r3.output, '/usr/bin/dash\n', 'its persistent shell is that shell');
  t.is((await srv.tool('sandbox_shell_exec', { machine: c, command: 'pwd; echo $V' })).output, '/etc\n2\n', '... and persistent');
  const w = await srv.tool('sandbox_file_write', { machine: c, path: '/workspace/d/f.txt', content: 'one\ntwo\n' });
  t.is(w.status, 'ok', 'sandbox_file_write works there');
  t.is((await srv.tool('sandbox_file_read', { machine: c, path: '/workspace/d/f.txt' })).output, '1|one\n2|two\n', 'sandbox_file_read too');
  const p = await srv.tool('sandbox_file_patch', { machine: c, mode: 'replace', path: '/workspace/d/f.txt', old_string: 'two', new_string: 'three' });
  t.is(p.matches, 1, 'sandbox_file_patch too');
  const rc = await srv.tool('run_command', { sandbox_id: c, command: 'cat /workspace/d/f.txt; echo $0' });
  t.is(rc.stdout, 'one\nthree\n/usr/bin/dash\n', 'run_command runs in that shell');
  const to = await srv.tool('run_command', { sandbox_id: c, command: 'sleep 30', timeout: 1 });
  t.is(to.timed_out, true, 'a timeout kills the command there too');
  const rn = resultData(await envFlat(srv, 'docker_runner', { machine: c }));
  if (process.env.SANDGATE_DOCKER_RUNNER === 'false') { // make check-fallback
    t.hasFields(rn, { runner: 'off' }, 'the runner is off ([docker] runner = false)');
  } else {
    t.hasFields(rn, { runner: 'fallback' }, 'the runner is not used (it runs commands with /bin/sh)');
    t.like(rn.reason ?? '', /shell is \/usr\/bin\/dash/, '... and says why');
  }
  const ins = resultData(await envFlat(srv, 'docker_inspect', { machine: c }));
  t.is(ins.labels?.['org.sandgate.shell'], '/usr/bin/dash', 'the shell is kept on the container (found again after a restart)');
  const bad = await envFlat(srv, 'docker_run', { name: uniq('t4612d'), shell: 'sh -x' });
  t.ok(bad.isError && /shell 'sh -x' must be a program/.test(errorText(bad)), 'a shell with blanks is refused', errorText(bad));
  for (const m of [a, c]) await envFlat(srv, 'docker_remove', { machine: m });
  await srv.close();
}, { timeout: 240 });
