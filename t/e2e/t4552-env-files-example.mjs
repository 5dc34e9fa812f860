// t4502-env-files.mjs on the plugin template (doc/plugin-template), built by t/lib/backends.mjs.
process.env.SG_TEST_BACKEND = 'example';
await import('./t4502-env-files.mjs');
