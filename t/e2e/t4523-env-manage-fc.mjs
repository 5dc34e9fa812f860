// t4503-env-manage.mjs on the fc backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'fc';
await import('./t4503-env-manage.mjs');
