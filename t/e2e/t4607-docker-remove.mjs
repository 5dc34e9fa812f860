// docker_remove leaves nothing behind: the container, its anonymous volume,
// the processes its shells and execs ran (none left on the host), its
// shells in status, and with the last machine its network; purge also
// removes its share directory (the workspace stays).  A removed machine is
// "not found" afterwards.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { t, preflight, sdkClient, resultData, errorText, tmpdir, docker, waitFor } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, container, networkExists, buildImage, PID } from '../lib/docker.mjs';

const hostProcs = (marker) => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(marker));

async function volumeExists(v) {
  try { await docker(['volume', 'inspect', v]); return true; } catch { return false; }
}

t.run(async () => {
  await preflight();
  const img = await buildImage(`sgt-vol-${PID}:1`, 'FROM sandgate/base:1\nVOLUME /data\nCMD ["/bin/sleep", "infinity"]\n');
  const work = path.join(tmpdir(), 'work');
  const net = uniq('sgt-net');
  const srv = await sdkClient(dockerArgs(), {}, { name: 'sandgate' });
  const name = uniq('t4607');
  t.is(resultData(await envFlat(srv, 'docker_run', { name, image: img })).status, 'running', 'docker_run of an image with a VOLUME');
  const c = await container(`sandgate-${name}`);
  const vol = c?.Mounts?.find((m) => m.Type === 'volume' && m.Destination === '/data')?.Name;
  t.ok(vol && await volumeExists(vol), 'the container has an anonymous volume at /data', c?.Mounts);
  const marker = `${3000 + (PID % 1000)}.5`;
  await srv.tool('sandbox_shell_exec', { machine: name, command: `echo d > /data/x; echo s > /share/${name}/s; echo w > /workspace/w; sleep ${marker} &` });
  await srv.tool('sandbox_shell_exec', { machine: name, command: `sleep ${marker}`, wait: false });
  // the second shell is not waited for (wait: false): its sleep starts
  // when that shell gets to it
  const running = () => hostProcs(`sleep ${marker}`).length;
  await waitFor(() => running() >= 2, 15000);
  t.cmp(running(), '>=', 2, 'its shells run processes (seen on the host)');
  t.ok(fs.existsSync(path.join(work, '_share', name, 's')), 'it has a share directory');

  const r = resultData(await envFlat(srv, 'docker_remove', { machine: name, purge: true }));
  t.hasFields(r, { status: 'removed', purged: true, machine: name }, 'docker_remove purge=true');
  t.is(await container(c.Id), null, 'the container is gone');
  t.ok(!(await volumeExists(vol)), 'its anonymous volume is gone');
  t.deepEqual(hostProcs(`sleep ${marker}`), [], 'no process of its shells or execs is left');
  t.ok(!fs.existsSync(path.join(work, '_share', name)), 'purge removed its share directory');
  t.is(fs.readFileSync(path.join(work, name, 'w'), 'utf8'), 'w\n', 'its workspace stays on the host');
  t.ok(!(await networkExists(net)), 'the network went with the last machine');
  const st = await srv.tool('sandbox_env', { action: 'status' });
  t.ok(!st.shells.some((s) => s.machine === name) && !st.machines.some((m) => m.name === name), 'status lists neither it nor its shells');
  const gone = await envFlat(srv, 'docker_logs', { machine: name });
  t.ok(gone.isError && /not found/.test(errorText(gone)), 'the removed machine is "not found"', errorText(gone));
  const ps = resultData(await envFlat(srv, 'docker_ps', { all: true }));
  t.ok(!ps.containers.some((x) => x.name === name), 'docker_ps does not list it');

  // without purge the share stays; a new machine of the name gets its files back
  t.is(resultData(await envFlat(srv, 'docker_run', { name })).status, 'running', 'docker_run of the name again');
  t.is((await srv.tool('sandbox_shell_exec', { machine: name, command: 'cat /workspace/w' })).output, 'w\n',
    '... finds the workspace it left');
  await srv.tool('sandbox_shell_exec', { machine: name, command: `echo kept > /share/${name}/k` });
  t.is(resultData(await envFlat(srv, 'docker_remove', { machine: name })).purged, false, 'docker_remove without purge');
  t.ok(fs.existsSync(path.join(work, '_share', name, 'k')), '... keeps the share directory');
  await srv.close();
}, { timeout: 240 });
