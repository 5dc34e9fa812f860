// sandgate's JavaScript kernel (doc/kernel-protocol.md).  sandgate-runner
// starts it as `node -` with this program on stdin, then sends requests on
// fd 3 and reads events on fd 4; the code's stdout and stderr are fds 1 and
// 2.  Node's own modules only; it must run on Node 18 (Debian 12).
'use strict';
const fs = require('fs');
const net = require('net');
const path = require('path');
const url = require('url');
const util = require('util');
const vm = require('vm');
const Module = require('module');

const REQ = 3, EV = 4;
const LINE_MAX = 1000000;   // bytes of one event line: a runner frame holds 1 MiB
const ERROR_MAX = 65536;
const FILES_MAX = 200;
const C = fs.constants;
const WRITES = C.O_WRONLY | C.O_RDWR | C.O_APPEND | C.O_CREAT | C.O_TRUNC;

const root = process.cwd(); // output_files are the files written under here
let recording = false;
const written = new Set();
let cell = 0;
let busy = false;           // a call is running: SIGINT interrupts it
let interrupt = null;       // rejects the awaited value of the call

function send(word, obj) {
  const buf = Buffer.from((obj === undefined ? word : word + ' ' + JSON.stringify(obj)) + '\n');
  for (let off = 0; off < buf.length;)
    off += fs.writeSync(EV, buf, off);
}

// ---- output_files: the fs calls that open a file for writing ----------------

function note(p) {
  if (!recording || typeof p === 'number')
    return;
  try {
    written.add(path.resolve(p instanceof URL ? url.fileURLToPath(p) : String(p)));
  } catch (e) { /* not a path */ }
}

function writes(flags) {
  if (typeof flags === 'number')
    return (flags & WRITES) !== 0;
  return typeof flags === 'string' && /[wax+]/.test(flags);
}

function wrap(obj, name, before) {
  const f = obj[name];
  if (typeof f !== 'function')
    return;
  obj[name] = function (...a) { before(a); return f.apply(this, a); };
}

for (const o of [fs, fs.promises]) {
  for (const n of ['open', 'openSync'])
    wrap(o, n, a => writes(a[1]) && note(a[0]));
  for (const n of ['writeFile', 'writeFileSync', 'appendFile', 'appendFileSync', 'createWriteStream'])
    wrap(o, n, a => note(a[0]));
  for (const n of ['copyFile', 'copyFileSync', 'rename', 'renameSync'])
    wrap(o, n, a => note(a[1]));
}

// ---- one call ---------------------------------------------------------------------

class Results {
  constructor(cap) { this.left = cap; }
  add(item, what) {
    let line = JSON.stringify(item);
    if (line.length > Math.min(this.left, LINE_MAX)) {
      item = { omitted: `${what} of ${line.length} bytes passed the cap on rich output ` +
               `(${Math.max(this.left, 0)} bytes left of the call's cap, ${LINE_MAX} per result)` };
      line = JSON.stringify(item);
    }
    this.left -= line.length;
    send('result', item);
  }
}

const INTERRUPTED = 'ERR_SCRIPT_EXECUTION_INTERRUPTED'; // vm's breakOnSigint, too

function interrupted() {
  return Object.assign(new Error('Script execution interrupted.'), { code: INTERRUPTED });
}

// The value of a call that is a Promise is awaited; SIGINT ends the wait.
function settle(value) {
  if (!util.types.isPromise(value))
    return Promise.resolve(value);
  return new Promise((resolve, reject) => {
    interrupt = () => reject(interrupted());
    value.then(resolve, reject);
  });
}

function error(e) {
  let name = 'Error', value, trace = '';
  if (e && e.code === INTERRUPTED) {
    send('error', { name: 'Interrupted', value: 'the evaluation was interrupted (a timeout or a cancel)', traceback: '' });
    return;
  }
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    name = e.name || name;
    value = String(e.message);
    // The kernel's own frames and Node's internals are not the code's.
    trace = String(e.stack).split('\n')
      .filter(l => !/\((node:|\[stdin\])|at (node:|\[stdin\])/.test(l)).join('\n');
  } else {
    value = util.inspect(e);
  }
  if (trace.length > ERROR_MAX)
    trace = trace.slice(0, ERROR_MAX / 2) + '\n[...]\n' + trace.slice(-ERROR_MAX / 2);
  send('error', { name, value, traceback: trace });
}

function outputFiles() {
  const files = [];
  for (const p of written) {
    const rel = path.relative(root, p);
    if (rel.startsWith('..') || path.isAbsolute(rel))
      continue;
    try {
      const st = fs.statSync(p);
      if (st.isFile())
        files.push({ name: rel, path: p, size: st.size });
    } catch (e) { continue; }
    if (files.length >= FILES_MAX)
      break;
  }
  if (files.length)
    send('files', files);
}

function drained(stream) {
  if (!stream.writableLength)
    return Promise.resolve();
  return new Promise(resolve => stream.once('drain', resolve));
}

async function call(source, richCap) {
  const results = new Results(richCap);
  const filename = `<cell-${++cell}>`;
  let value;
  written.clear();
  recording = true;
  busy = true;
  try {
    value = vm.runInThisContext(source, { filename, breakOnSigint: true });
    value = await settle(value);
    if (value !== undefined)
      results.add({ text: util.inspect(value), is_main_result: true }, 'the value');
  } catch (e) {
    error(e);
  }
  busy = false;
  interrupt = null;
  recording = false;
  outputFiles();
  // Everything the code wrote comes before the end of the call.
  await drained(process.stdout);
  await drained(process.stderr);
  send('done');
}

// ---- the request loop -------------------------------------------------------------

// Each request: a line `exec <bytes> <rich cap>`, then the code.
function serve() {
  let buf = Buffer.alloc(0), want = null, queue = Promise.resolve();
  // A socket on the pipe reads it from the event loop (no thread pool hop).
  const input = new net.Socket({ fd: REQ, readable: true, writable: false });
  input.on('data', chunk => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      if (want === null) {
        const nl = buf.indexOf(10);
        if (nl < 0)
          return;
        const head = buf.slice(0, nl).toString().split(' ');
        buf = buf.slice(nl + 1);
        if (head.length !== 3 || head[0] !== 'exec')
          process.exit(2);
        want = { n: Number(head[1]), cap: Number(head[2]) };
      }
      if (buf.length < want.n)
        return;
      const source = buf.slice(0, want.n).toString(), cap = want.cap;
      buf = buf.slice(want.n);
      want = null;
      queue = queue.then(() => call(source, cap));
    }
  });
  input.on('end', () => process.exit(0));
  input.on('error', () => process.exit(1));
}

process.on('SIGINT', () => {
  if (busy && interrupt)
    interrupt();
});
// Like a REPL: an error thrown later by a callback is printed, not fatal.
process.on('uncaughtException', e => process.stderr.write(`Uncaught ${util.inspect(e)}\n`));
process.on('unhandledRejection', e => process.stderr.write(`Unhandled rejection ${util.inspect(e)}\n`));
globalThis.require = Module.createRequire(path.join(root, '[kernel]'));
send('hello', { language: 'javascript', pid: process.pid, interpreter: `node ${process.version}` });
serve();
