// t4507-run-code-kernel.mjs on the local backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'local';
await import('./t4507-run-code-kernel.mjs');
