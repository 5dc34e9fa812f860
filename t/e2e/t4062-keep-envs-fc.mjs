// t4060-keep-envs.mjs on the fc backend.
process.env.SG_TEST_BACKEND = 'fc';
await import('./t4060-keep-envs.mjs');
