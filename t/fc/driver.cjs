// The FC emulator's stand-in for the JavaScript kernel: runs the code read
// from stdin; the value of the last expression is the main result (fd 3,
// NDJSON), an exception an `error` line.
'use strict';
const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');

const emit = (o) => fs.writeSync(3, `${JSON.stringify(o)}\n`);
const code = fs.readFileSync(0, 'utf8');
(async () => {
  try {
    let v = vm.runInThisContext(code, { filename: '<cell>' });
    if (v && typeof v.then === 'function') v = await v;
    if (v !== undefined) emit({ type: 'result', is_main_result: true, text: util.inspect(v) });
  } catch (e) {
    emit({ type: 'error', name: e?.name ?? 'Error', value: String(e?.message ?? e), traceback: String(e?.stack ?? e) });
  }
})();
