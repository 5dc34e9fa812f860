// Docker backend failures are clear errors that name the cause and the fix,
// and the session keeps serving after them.
import { t, preflight, sdkClient, runCli, errorText } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient(['--set', 'docker.template.gone=sandgate/no-such-image:9']);
  const base = await sdkClient(['--set', 'docker.template.base=sandgate/no-such-base:9']);
  const b = await base.call('run_command', { command: 'true' });
  t.ok(b.isError, 'the default template without its image is an error');
  t.like(errorText(b), /image sandgate\/no-such-base:9 \(template base\) is not on this docker daemon: build it with `make image` \(etc\/image\/build\.sh\)/,
    'for the built-in template it says to run make image');
  await base.close();

  let r = await srv.call('create_sandbox', { template: 'gone' });
  t.ok(r.isError, 'a template whose image is missing is an error');
  t.like(errorText(r), /image sandgate\/no-such-image:9 \(template gone\) is not on this docker daemon: build or load it \(docker build \/ docker load\), sandgate never pulls/,
    'the error names the image and how to get it');

  r = await srv.call('create_sandbox', { template: 'nosuch' });
  t.ok(r.isError, 'an unknown template is an error');
  t.like(errorText(r), /no docker template nosuch: add \[docker\] template\.nosuch = <image>/, 'the error says how to define it');

  r = await srv.call('run_command', { command: 'echo still here' });
  t.ok(!r.isError, 'the session keeps serving');
  t.is(r.structuredContent?.stdout, 'still here\n', 'and runs commands in a new default sandbox');
  await srv.close();

  // the daemon's socket does not exist: the error names it and says dockerd
  // is not running (docker named as the default: a probe would pick another)
  const down = await runCli(['--set', 'sandbox.default_backend=docker', '--set', 'docker.host=unix:///run/sandgate-test-no-docker.sock', 'call', 'run_command', '{"command":"true"}']);
  t.is(down.code, 1, 'call exits 1 when the backend is down');
  t.like(down.stderr, /cannot connect to the docker daemon at \/run\/sandgate-test-no-docker\.sock: dockerd is not running/,
    'the error names the socket and that dockerd is not running');

  // a bad configuration value stops startup, naming the key and what it accepts
  const bad = await runCli(['--set', 'docker.api_timeout=abc', 'tools']);
  t.is(bad.code, 3, 'a bad value is a configuration error (exit 3)');
  t.like(bad.stderr, /\[docker\] api_timeout = 'abc' is not valid: expected a whole number/, 'naming the key and the accepted values');
}, { timeout: 120 });
