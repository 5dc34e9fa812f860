// A sandgate that is not root, on a host where it may not make cgroups (the
// shipped systemd unit: DynamicUser, ProtectControlGroups), still limits its
// jails' processes: RLIMIT_NPROC is its own user's tasks at the jail's start
// plus [local] pids (the jails run as that user, who runs other things too),
// and details.limits says so.  A configured rlimit above the hard limit
// sandgate was given comes down to it instead of failing every create.
// Here: root's test runs the server as nobody, in a mount namespace whose
// /sys/fs/cgroup is gone, with a hard limit of 1024 open files.
import { t, preflight, sdkClient, tmpdir } from '../lib/sg.mjs';
import fs from 'node:fs';
import path from 'node:path';

const WRAP = ['unshare', '-m', 'sh', '-c',
  'mount --make-rprivate / && umount -R /sys/fs/cgroup && ulimit -n 1024 && ' +
  'exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"', 'sh'];

const FORKS = `python3 -c '
import os, time
n = 0
try:
    while n < 700:
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
    print("all", n)
except OSError as e:
    print("stopped", n, e.errno)
'`;

t.run(async () => {
  await preflight({ docker: false });
  const dir = path.join(tmpdir(), 'nobody'); // the server's home and state: nobody's to write
  fs.chmodSync(tmpdir(), 0o755);
  fs.mkdirSync(dir, { mode: 0o777 });
  fs.chmodSync(dir, 0o777);
  const srv = await sdkClient(['--set', 'sandbox.default_backend=local', '--set', 'local.open_files=4096'],
    { SANDGATE_LOCAL_SPARE: '0', HOME: dir, XDG_STATE_HOME: `${dir}/state`, XDG_CONFIG_HOME: `${dir}/cfg` },
    { wrap: WRAP, cwd: dir });
  const box = await srv.tool('create_sandbox', {});
  const lim = box.details?.limits ?? {};
  t.is(lim.cgroup, 'none', 'no cgroups where they cannot be made', { lim });
  t.is(lim.pids, 512, 'pids: 512, as configured');
  t.like(lim.note ?? '', /pids is RLIMIT_NPROC, sandgate's user's tasks at a jail's start plus pids/, '... and the note says how', { lim });
  t.is(lim.open_files, 1024, 'open_files 4096 above the hard limit of 1024: 1024, and the create works');

  const who = await srv.tool('run_command', { command: 'id -u; grep -E "^Max (processes|open files)" /proc/self/limits' });
  const [uid, procs, files] = who.stdout.trim().split('\n');
  t.is(uid, '65534', 'the jail runs as sandgate\'s own user');
  const nproc = Number(procs.split(/\s+/)[2]);
  t.ok(nproc > 512 && nproc < 512 + 200, `RLIMIT_NPROC is 512 more than the user's tasks: ${nproc}`, { procs });
  t.like(files, /^Max open files\s+1024\s+1024\b/, 'RLIMIT_NOFILE 1024', { files });

  const bomb = await srv.tool('run_command', { command: FORKS, timeout: 60 });
  const m = /^stopped (\d+) 11$/.exec(bomb.stdout.trim());
  t.ok(m, 'forking stops with EAGAIN before 700', bomb);
  t.ok(m && Number(m[1]) >= 256 && Number(m[1]) <= 512, `... after at most 512 (${m?.[1]})`);
  const after = await srv.tool('run_command', { command: 'sleep 4; echo still here' });
  t.is(after.stdout, 'still here\n', 'once they ended, the sandbox runs commands again');
  await srv.close();
}, { timeout: 120 });
