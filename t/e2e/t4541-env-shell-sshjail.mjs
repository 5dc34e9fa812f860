// t4501-env-shell.mjs on SSH with each sandbox a bubblewrap jail on the host
// ([ssh] isolation = bwrap); its body is written per backend.
process.env.SG_TEST_BACKEND = 'sshjail';
await import('./t4501-env-shell.mjs');
