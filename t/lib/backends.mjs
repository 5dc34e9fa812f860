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
    setup: async () => ({ args: ['--set', 'sandbox.default_backend=local'], env: {} }),
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
