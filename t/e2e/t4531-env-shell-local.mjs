// t4501-env-shell.mjs on the local backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'local';
await import('./t4501-env-shell.mjs');
