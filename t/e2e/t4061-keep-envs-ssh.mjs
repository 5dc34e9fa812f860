// t4060-keep-envs.mjs on the ssh backend.
process.env.SG_TEST_BACKEND = 'ssh';
await import('./t4060-keep-envs.mjs');
