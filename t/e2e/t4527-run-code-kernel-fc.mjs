// t4507-run-code-kernel.mjs on the fc backend (its body is written per backend).
process.env.SG_TEST_BACKEND = 'fc';
await import('./t4507-run-code-kernel.mjs');
