// t4060-keep-envs.mjs on the local backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'local';
await import('./t4060-keep-envs.mjs');
