// The backends the sandbox_env tests run on (SG_TEST_BACKEND=docker|ssh|sshjail|fc|local):
// each says what its sandboxes are and starts what it needs (an sshd on
// loopback, the FC emulator), returning sandgate's extra arguments and
// environment.
export const backends = {
  docker: { name: 'docker', container: true, mutableBin: true, setup: async () => ({ args: [], env: {} }) },
  ssh: {
    name: 'ssh',
    container: false, // the "remote" is this host: never rename its binaries
    mutableBin: false,
    setup: async () => {
      const { startSshd, sshArgs, sshEnv, sshPreflight } = await import('../ssh/sshd.mjs');
      await sshPreflight();
      const s = await startSshd();
      return { args: sshArgs(s), env: sshEnv() };
    },
  },
  // ssh with each sandbox a bubblewrap jail on the host ([ssh] isolation = bwrap)
  sshjail: {
    name: 'ssh',
    container: true, // a jail: private /tmp, its own hostname, /usr read-only
    mutableBin: false,
    setup: async () => {
      const { startSshd, sshArgs, sshEnv, sshPreflight } = await import('../ssh/sshd.mjs');
      await sshPreflight();
      const s = await startSshd();
      return { args: sshArgs(s, { 'ssh.isolation': 'bwrap' }), env: sshEnv() };
    },
  },
  local: {
    name: 'local',
    container: true, // a bubblewrap jail: private /tmp, its own hostname
    mutableBin: false, // ... over the host's read-only /usr
    // with a spare, as users get it ([local] spare unset)
    setup: async () => ({ args: ['--set', 'sandbox.default_backend=local'], env: { SANDGATE_LOCAL_SPARE: undefined } }),
  },
  // the plugin template (doc/plugin-template), built here with cc against
  // the tree's header: a directory on this host, nothing isolated
  example: {
    name: 'example',
    container: false, // this host: its /tmp, its hostname
    mutableBin: false,
    setup: async () => {
      const [{ execFileSync }, fs, path, { tmpdir }] = await Promise.all([
        import('node:child_process'), import('node:fs'), import('node:path'), import('./sg.mjs')]);
      const src = process.env.SG_TEST_SRCDIR;
      const dir = path.join(tmpdir(), 'example-plugin');
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const jansson = execFileSync('pkg-config', ['--cflags', '--libs', 'jansson'], { encoding: 'utf8' })
        .trim().split(/\s+/).filter(Boolean);
      execFileSync('cc', ['-std=c11', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC', '-fvisibility=hidden',
        `-I${path.join(src, 'include')}`, '-o', path.join(dir, 'example.so'),
        path.join(src, 'doc', 'plugin-template', 'example.c'), ...jansson]);
      return { args: ['--set', `plugin.path=${dir}`, '--set', 'sandbox.default_backend=example'], env: {} };
    },
  },
  fc: {
    name: 'fc',
    container: true, // each sandbox is its own bubblewrap root in the emulator
    mutableBin: false, // ... over the host's read-only /usr
    setup: async () => {
      const { startEmulator } = await import('../fc/emu.mjs');
      const emu = await startEmulator();
      return { args: emu.args([]), env: emu.env() };
    },
  },
};

/** The backend named by SG_TEST_BACKEND (default docker). */
export function backendFromEnv() {
  return backends[process.env.SG_TEST_BACKEND || 'docker'];
}
