// Named machines share a network ([docker] auto_network): made on first use,
// peers resolve each other by machine name (getent hosts <peer>) and talk;
// the network goes when its last machine is removed.  Sandboxes from
// create_sandbox are not on it.
import { t, preflight, sdkClient, resultData } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, networkExists, container } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const args = dockerArgs();
  const net = uniq('sgt-net');
  t.ok(!(await networkExists(net)), `network ${net} does not exist before the first machine`);
  const srv = await sdkClient(args, {}, { name: 'sandgate' });
  const a = uniq('t4604a');
  const b = uniq('t4604b');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: a })).status, 'running', `docker_run ${a}`);
  t.ok(await networkExists(net), 'the network is made on first use');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: b, command: 'exec python3 -m http.server 8000 --directory /workspace' })).status,
    'running', `docker_run ${b} (a web server)`);
  await srv.tool('sandbox_file_write', { machine: b, path: '/workspace/hello.txt', content: `hello from ${b}\n` });
  const ip = (await container(`sandgate-${b}`))?.NetworkSettings?.Networks?.[net]?.IPAddress;
  t.ok(ip, `${b} has an address on ${net}`, ip);
  const res = await srv.tool('sandbox_shell_exec', { machine: a, command: `getent hosts ${b}` });
  t.is(res.exit_code, 0, `getent hosts ${b} inside ${a} succeeds`, res);
  t.is(res.output.trim().split(/\s+/)[0], ip, `... and gives ${b}'s address`);
  const fetch = await srv.tool('sandbox_shell_exec', { machine: a, timeout: 60,
    command: `for i in 1 2 3 4 5 6 7 8 9 10; do python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://${b}:8000/hello.txt').read().decode())" && break; sleep 1; done` });
  t.is(fetch.output, `hello from ${b}\n`, `${a} reaches ${b}'s server by name`);

  const sb = await srv.tool('create_sandbox', {});
  const sbNets = Object.keys((await container(sb.sandbox_id))?.NetworkSettings?.Networks ?? {});
  t.ok(!sbNets.includes(net), 'a create_sandbox sandbox is not on the machines\' network', sbNets);
  // the one bind is the runner's channel: its own directory, read-only
  // (doc/docker.md, "The runner's channel"); none with the runner off
  const binds = (await container(sb.sandbox_id))?.Mounts?.filter((m) => m.Type === 'bind') ?? [];
  const runnerOff = process.env.SANDGATE_DOCKER_RUNNER === 'false';
  t.deepEqual(binds.map((m) => [m.Destination, m.RW, /\/runner-chan\/[0-9a-f]{32}$/.test(m.Source)]),
    runnerOff ? [] : [['/run/sandgate', false, true]],
    `... and has no host mount${runnerOff ? '' : ' but its runner channel, read-only'}`);
  await srv.tool('kill_sandbox', { sandbox_id: sb.sandbox_id });

  await envFlat(srv, 'docker_remove', { machine: a });
  t.ok(await networkExists(net), 'the network stays while a machine uses it');
  await envFlat(srv, 'docker_remove', { machine: b });
  t.ok(!(await networkExists(net)), 'the network goes with the last machine');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: a })).status, 'running', 'a new machine ...');
  t.ok(await networkExists(net), '... makes it again');
  await envFlat(srv, 'docker_remove', { machine: a });
  t.ok(!(await networkExists(net)), '... and it goes again with it');
  await srv.close();
}, { timeout: 240 });
