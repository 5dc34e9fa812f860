// t4507-run-code-kernel.mjs on the ssh backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'ssh';
await import('./t4507-run-code-kernel.mjs');
