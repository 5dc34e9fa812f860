// The host paths a named machine sees, and no others: work_home/<name> at
// /workspace; the share root read-only at /share with /share/<self>
// writable and a peer's /share/<peer> not; the admin machine gets every
// workspace at /host (and no /share).  Volume or bind options in any
// parameter are refused by name; the admin writes inside the workspaces but
// cannot rename, link or make names beside them (the engine follows a
// swapped bind source at a restart); a link planted in work_home from the
// host is never followed: a new machine through it, or a start of a
// machine whose directory was swapped for one, is refused.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, resultData, errorText, tmpdir } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, container } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const work = path.join(tmpdir(), 'work');
  const admin = uniq('t4605admin');
  const srv = await sdkClient(dockerArgs({ 'docker.admin_machine': admin }), {}, { name: 'sandgate' });
  const a = uniq('t4605a');
  const b = uniq('t4605b');
  for (const n of [a, b, admin]) t.is(resultData(await envFlat(srv, 'docker_run', { name: n })).status, 'running', `docker_run ${n}`);
  const sh = (m, command) => srv.tool('sandbox_shell_exec', { machine: m, command });

  const binds = (c) => (c?.Mounts ?? []).filter((m) => m.Type === 'bind').map((m) => `${m.Source}:${m.Destination}:${m.RW ? 'rw' : 'ro'}`).sort();
  t.deepEqual(binds(await container(`sandgate-${a}`)), [
    `${work}/${a}:/workspace:rw`, `${work}/_share:/share:ro`, `${work}/_share/${a}:/share/${a}:rw`,
  ].sort(), 'a machine binds exactly its workspace, the share root (ro) and its own share (rw)');
  t.deepEqual(binds(await container(`sandgate-${admin}`)), [`${work}/${admin}:/workspace:rw`, `${work}:/host:rw`].sort(),
    'the admin machine binds its workspace and work_home at /host, no share');

  t.is((await sh(a, `echo from-a > /share/${a}/note && cat /share/${a}/note`)).output, 'from-a\n', '/share/<self> is writable');
  const peer = await sh(a, `echo x > /share/${b}/intrude; echo rc=$?`);
  t.like(peer.output, /Read-only file system[\s\S]*rc=1/, '/share/<peer> is not', peer.output);
  t.like((await sh(a, 'touch /share/top; echo rc=$?')).output, /rc=1/, 'the share root is read-only');
  t.is((await sh(b, `cat /share/${a}/note`)).output, 'from-a\n', 'a peer reads what a machine shares');
  t.is(fs.readFileSync(path.join(work, '_share', a, 'note'), 'utf8'), 'from-a\n', '... which lives in work_home/_share/<name> on the host');
  await sh(b, 'echo b-work > /workspace/wb');
  const ls = await sh(admin, `ls /host; cat /host/${b}/wb`);
  t.ok([a, b, admin, '_share'].every((n) => ls.output.split('\n').includes(n)), 'the admin machine sees every workspace under /host', ls.output);
  t.like(ls.output, /b-work/, '... and their files');

  // volume or bind options, whatever parameter they come in
  const refused = async (what, r, re) => t.ok(r.isError && re.test(errorText(r)), what, errorText(r));
  await refused('docker_run volumes is refused by name', await envFlat(srv, 'docker_run', { name: uniq('t4605v'), volumes: ['/:/host'] }),
    /docker_run has no parameter 'volumes'/);
  await refused('machine_create options.binds is refused, saying why',
    await envFlat(srv, 'machine_create', { name: uniq('t4605w'), backend: 'docker', options: { binds: ['/etc:/etc'] } }),
    /'binds' is refused: sandgate mounts no host path/);
  await refused('machine_create with a flat mounts parameter is refused too',
    await envFlat(srv, 'machine_create', { name: uniq('t4605x'), backend: 'docker', mounts: [{ Source: '/', Target: '/h' }] }),
    /'mounts' is refused/);
  await refused('a ports entry holding a path is refused', await envFlat(srv, 'docker_run', { name: uniq('t4605y'), ports: ['/:/host'] }),
    /port '\/:\/host' is not valid/);
  await refused('a HostConfig smuggled into machine_create options is refused',
    await envFlat(srv, 'machine_create', { name: uniq('t4605z'), backend: 'docker', options: { HostConfig: { Binds: ['/:/h'] } } }),
    /'HostConfig' is refused/);
  for (const n of ['t4605v', 't4605w', 't4605x', 't4605y', 't4605z']) t.is(await container(`sandgate-${uniq(n)}`), null, `no container ${n} was made`);

  // the admin machine writes in the workspaces, never the names beside them:
  // the engine resolves a bind source by its path at each start, its own
  // restarts included, so a workspace renamed and replaced with a link to /
  // gave its machine the host's root at its next restart
  t.is((await sh(admin, `echo from-admin > /host/${b}/by-admin && cat /host/${b}/by-admin`)).output, 'from-admin\n',
    'the admin machine writes inside a peer\'s workspace');
  const swap = await sh(admin, `mv /host/${b} /host/${b}.x 2>&1; ln -s / /host/evil 2>&1; mkdir /host/new 2>&1; ` +
    `mv /host/_share/${a} /host/_share/x 2>&1; true`);
  t.is(swap.output.split('\n').filter((l) => /Permission denied/.test(l)).length, 4,
    'it cannot rename a workspace, make a link or a directory beside them, or rename a share', swap.output);
  const st = fs.statSync(work);
  t.ok(st.uid !== 0 && st.uid !== 65534, `work_home belongs to a uid no account has (${st.uid})`);
  const become = await sh(admin, `setpriv --reuid=${st.uid} --regid=${st.gid} --clear-groups mv /host/${b} /host/${b}.x 2>&1; ` +
    `chown root /host 2>&1; true`);
  t.is(become.output.split('\n').filter((l) => /Operation not permitted/.test(l)).length, 2,
    '... nor become their owner, nor take them', become.output);
  t.ok(fs.statSync(path.join(work, b)).isDirectory() && !fs.existsSync(path.join(work, 'evil')), '... and nothing moved on the host');

  // links planted in work_home (from the host: an operator's slip, another
  // process) are not followed
  const evil = uniq('t4605evil');
  fs.symlinkSync('/', path.join(work, evil));
  await refused('a machine whose workspace would be a planted link is refused',
    await envFlat(srv, 'docker_run', { name: evil }), /is a symbolic link: sandgate never follows one/);
  t.is(await container(`sandgate-${evil}`), null, '... and not made');
  await envFlat(srv, 'docker_stop', { machine: b });
  fs.renameSync(path.join(work, b), path.join(work, `${b}.moved`));
  fs.symlinkSync('/etc', path.join(work, b));
  await refused('starting a machine whose workspace was swapped for a link is refused',
    await envFlat(srv, 'docker_start', { machine: b }), /mount .* changed: .*symbolic link/);
  t.is((await container(`sandgate-${b}`))?.State?.Running, false, '... it stays stopped');
  fs.unlinkSync(path.join(work, b));
  fs.renameSync(path.join(work, `${b}.moved`), path.join(work, b));
  t.is(resultData(await envFlat(srv, 'docker_start', { machine: b })).status, 'running', 'with its directory back it starts');
  for (const n of [a, b, admin]) await envFlat(srv, 'docker_remove', { machine: n });
  await srv.close();
}, { timeout: 240 });
