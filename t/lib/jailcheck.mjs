// What a command in a jail must not do to the machinery around it, tried
// the same way where sandgate jails (t1102 on local, t7010 on SSH):
// `run(command)` runs a shell command in a jailed sandbox and resolves
// run_command's result.

/**
 * The kernel's keyrings are not namespaced (a jail would see the session
 * keyring it was started from and share its user's): the jails' seccomp
 * filter makes add_key and keyctl fail with ENOSYS.
 */
export async function checkKeyCalls(t, run) {
  const keys = await run(`python3 -c '
import ctypes, os
nr = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
l = ctypes.CDLL(None, use_errno=True)
for name, args in (("add_key", (nr[0], b"user", b"k", b"v", 1, -3)), ("keyctl", (nr[1], 0, -3, 0))):
    ctypes.set_errno(0)
    print(name, l.syscall(*args), ctypes.get_errno())
'`);
  t.is(keys.stdout, 'add_key -1 38\nkeyctl -1 38\n', 'add_key and keyctl fail with ENOSYS in the jail', keys);
}

/**
 * The runner is the jail's init and not dumpable: a command can neither
 * stop, kill or end it nor open its pipes to speak to sandgate in its place;
 * a job started before the signals outlives them (a runner that ends takes
 * the jail along).
 */
export async function checkRunnerHeld(t, run) {
  await run('sleep 7771 >/dev/null 2>&1 &');
  const hijack = await run('kill -STOP 1; kill -KILL 1; kill -TERM 1; kill -HUP 1; kill -INT 1; ' +
    '(cat /proc/1/fd/0 </dev/null; : >> /proc/1/fd/1) 2>&1 | sed "s/^.*: //"; true');
  t.is(hijack.stdout, 'Permission denied\nPermission denied\n', 'the runner\'s descriptors are closed to commands', hijack);
  t.is((await run('echo alive')).stdout, 'alive\n', 'after kill -STOP, -KILL, -TERM, -HUP and -INT to pid 1 the runner still answers');
  t.is((await run('ps -eo args | grep -c "^sleep 7771"; pkill -f "^sleep 7771"; true')).stdout, '1\n',
    '... the same runner: a job started before is still there (a runner that ends takes the jail along)');
}
