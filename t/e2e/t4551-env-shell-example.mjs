// t4501-env-shell.mjs on the plugin template (doc/plugin-template), built by t/lib/backends.mjs.
process.env.SG_TEST_BACKEND = 'example';
await import('./t4501-env-shell.mjs');
