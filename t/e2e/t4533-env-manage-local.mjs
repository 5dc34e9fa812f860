// t4503-env-manage.mjs on the local backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'local';
await import('./t4503-env-manage.mjs');
