// The FC emulator's stand-in for the JavaScript kernel, kept per sandbox:
// executions come as JSON lines {"code", "env"} on stdin and run as scripts
// in this one context (var, functions and globalThis persist); events go
// to fd 3 as JSON lines: `hello` (the pid), `stdout`/`stderr` (what
// console and process.stdout write), `result` (the value of the last
// expression, a Promise awaited), `error`, and `done` after each
// execution.  SIGINT stops a running script.
'use strict';
const fs = require('node:fs');
const readline = require('node:readline');
const util = require('node:util');
const vm = require('node:vm');

const emit = (o) => fs.writeSync(3, `${JSON.stringify(o)}\n`);
const streams = { stdout: process.stdout.write, stderr: process.stderr.write };
for (const name of Object.keys(streams)) {
  process[name].write = (chunk, enc, cb) => {
    emit({ type: name, text: typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8') });
    if (typeof enc === 'function') enc();
    else if (typeof cb === 'function') cb();
    return true;
  };
}
process.on('SIGINT', () => {}); // between executions an interrupt is nothing

async function run(req) {
  const saved = {};
  for (const [k, v] of Object.entries(req.env || {})) { saved[k] = process.env[k]; process.env[k] = String(v); }
  try {
    let v = vm.runInThisContext(req.code || '', { filename: '<cell>', breakOnSigint: true });
    if (v && typeof v.then === 'function') v = await v;
    if (v !== undefined) emit({ type: 'result', is_main_result: true, text: util.inspect(v) });
  } catch (e) {
    emit({ type: 'error', name: e?.name ?? 'Error', value: String(e?.message ?? e), traceback: String(e?.stack ?? e) });
  }
  for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
  emit({ type: 'done' });
}

const queue = [];
let busy = false;
async function next() {
  if (busy || !queue.length) return;
  busy = true;
  await run(queue.shift());
  busy = false;
  next();
}
emit({ type: 'hello', pid: process.pid });
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  try { queue.push(JSON.parse(line)); } catch { return; }
  next();
});
