// t4506-run-code-kernel.mjs on the ssh backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'ssh';
await import('./t4506-run-code-kernel.mjs');
