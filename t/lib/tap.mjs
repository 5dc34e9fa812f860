// tap.mjs - a small TAP producer for sandgate's end-to-end tests.
//
// The tests are run by automake's tap-driver.sh (see t/Makefile.inc), which
// reads TAP from stdout and keeps stderr in the test's .log file.
//
//   import * as t from '../lib/tap.mjs';
//   t.run(async () => {
//     t.is(1 + 1, 2, 'adds');
//   }, { timeout: 120 });
//
// run() prints the plan at the end (done_testing style) unless plan() was
// called, runs the cleanup hooks (always: on success, failure, exception,
// timeout and SIGINT/SIGTERM), and exits 0 only when every test passed.
// An exception escaping the test body, or the watchdog firing, prints
// "Bail out!" so the driver reports the file as ERROR, never as passed.

import { isDeepStrictEqual, inspect } from 'node:util';

let count = 0;
let failed = 0;
let planned = null;
let finished = false;
const cleanups = [];  // run last-in first-out
const failureHooks = []; // extra diagnostics printed once when something failed

function out(line) {
  process.stdout.write(line + '\n');
}

function show(v) {
  if (typeof v === 'string') {
    const s = JSON.stringify(v);
    return s.length > 2000 ? `${s.slice(0, 2000)}... (${v.length} chars)` : s;
  }
  const s = inspect(v, { depth: 6, breakLength: 100, maxStringLength: 2000, maxArrayLength: 50 });
  return s;
}

/** Prints each line of the message as a TAP comment ("# ..."). */
export function diag(...msg) {
  const text = msg.map((m) => (typeof m === 'string' ? m : show(m))).join(' ');
  for (const line of text.split('\n')) out(`# ${line}`);
}

export const note = diag;

export function plan(n) {
  if (planned !== null) throw new Error('plan() called twice');
  planned = n;
  out(`1..${n}`);
}

function escapeName(name) {
  // '#' starts a directive (SKIP/TODO) in TAP; keep names on one line
  return String(name ?? '').replace(/#/g, '\\#').replace(/[\r\n]+/g, ' ');
}

/** The core assertion: ok(cond, name, details). details are shown on failure. */
export function ok(cond, name, details) {
  if (finished) {
    // an assertion after the plan was printed would corrupt the TAP stream
    process.stderr.write(`tap: assertion after the end of the test: ${name}\n`);
    return !!cond;
  }
  count++;
  const good = !!cond;
  out(`${good ? 'ok' : 'not ok'} ${count} - ${escapeName(name)}`);
  if (!good) {
    failed++;
    // the test file's line, when the stack still has it (not across awaits in helpers)
    const where = (new Error().stack ?? '').split('\n').slice(2)
      .find((l) => l.includes('file://') && !l.includes('/lib/tap.mjs') && !l.includes('/lib/sg.mjs'));
    diag(`  Failed test '${name}'`);
    if (where) diag(`  at ${where.trim().replace(/^at (.*\()?file:\/\//, '').replace(/\)$/, '')}`);
    if (details !== undefined) {
      if (typeof details === 'object' && details !== null && !Array.isArray(details)) {
        for (const [k, v] of Object.entries(details)) diag(`  ${k}: ${show(v)}`);
      } else {
        diag(`  ${show(details)}`);
      }
    }
  }
  return good;
}

export function pass(name) { return ok(true, name); }
export function fail(name, details) { return ok(false, name, details); }

/** Strict equality (Object.is semantics for NaN, === otherwise). */
export function is(got, expected, name) {
  return ok(got === expected || (Number.isNaN(got) && Number.isNaN(expected)), name, { got, expected });
}

export function isnt(got, unexpected, name) {
  return ok(got !== unexpected, name, { got, 'expected anything but': unexpected });
}

/** Deep structural equality (node:util isDeepStrictEqual). */
export function deepEqual(got, expected, name) {
  return ok(isDeepStrictEqual(got, expected), name, { got, expected });
}

/** got must be a string matching re. */
export function like(got, re, name) {
  return ok(typeof got === 'string' && re.test(got), name, { got, 'expected to match': String(re) });
}

export function unlike(got, re, name) {
  return ok(typeof got === 'string' && !re.test(got), name, { got, 'expected not to match': String(re) });
}

const ops = {
  '<': (a, b) => a < b, '<=': (a, b) => a <= b, '>': (a, b) => a > b,
  '>=': (a, b) => a >= b, '==': (a, b) => a === b, '!=': (a, b) => a !== b,
};

/** cmp(3, '<=', 5, 'name') */
export function cmp(got, op, expected, name) {
  const f = ops[op];
  if (!f) throw new Error(`cmp: unknown operator ${op}`);
  return ok(f(got, expected), name, { got, [`expected ${op}`]: expected });
}

/** obj must have every key of `subset` with a deep-equal value. */
export function hasFields(obj, subset, name) {
  const missing = {};
  for (const [k, v] of Object.entries(subset)) {
    if (obj === null || typeof obj !== 'object' || !isDeepStrictEqual(obj[k], v)) {
      missing[k] = { got: obj?.[k], expected: v };
    }
  }
  return ok(Object.keys(missing).length === 0, name, { mismatched: missing, object: obj });
}

/** Awaits fn and checks that it rejects; returns the error (or undefined). */
export async function rejects(fn, name, check) {
  try {
    await fn();
  } catch (e) {
    if (check) {
      const why = check(e);
      ok(why === true || why === undefined, name, { error: e?.message ?? e, check: why });
    } else {
      pass(name);
    }
    return e;
  }
  fail(name, 'expected the promise to reject, it resolved');
  return undefined;
}

/** Registers fn (may be async) to run when the test file ends, however it ends. */
export function onCleanup(fn) { cleanups.push(fn); }

/** Registers fn (may be async) to print extra diagnostics when a test failed. */
export function onFailure(fn) { failureHooks.push(fn); }

export function failures() { return failed; }

async function runCleanups() {
  while (cleanups.length) {
    const fn = cleanups.pop();
    try {
      await Promise.race([
        Promise.resolve().then(fn),
        new Promise((_, rej) => setTimeout(() => rej(new Error('cleanup took longer than 60 s')), 60000).unref()),
      ]);
    } catch (e) {
      process.stderr.write(`tap: cleanup failed: ${e?.stack ?? e}\n`);
    }
  }
}

async function runFailureHooks() {
  while (failureHooks.length) {
    const fn = failureHooks.shift();
    try { await fn(); } catch (e) { process.stderr.write(`tap: failure hook failed: ${e?.stack ?? e}\n`); }
  }
}

let ending = null;

async function finish(bail) {
  if (ending) return ending;
  ending = (async () => {
    if (bail || failed) await runFailureHooks();
    await runCleanups();
    if (bail) {
      finished = true;
      out(`Bail out! ${String(bail).replace(/[\r\n]+/g, ' ')}`);
      process.exit(255);
    }
    finished = true;
    if (count === 0) {
      // "1..0" would read as "skipped": a file that tested nothing is an error
      out('Bail out! no test was run');
      process.exit(255);
    }
    if (planned === null) out(`1..${count}`);
    else if (planned !== count) {
      out(`# planned ${planned} tests but ran ${count}`);
      process.exit(255);
    }
    if (failed) out(`# failed ${failed} of ${count} tests`);
    process.exit(failed ? 1 : 0);
  })();
  return ending;
}

/** Stops the file at once with a "Bail out!" after running the cleanups. */
export async function bailOut(reason) {
  await finish(reason || 'bailed out');
  // finish() exits; this never returns
  await new Promise(() => {});
}

/**
 * Runs the test body.  opts.timeout (seconds, default 120, or SG_TEST_TIMEOUT)
 * is a watchdog: when it fires the file bails out, after cleanup.
 */
export function run(main, opts = {}) {
  const timeout = Number(process.env.SG_TEST_TIMEOUT || opts.timeout || 120);
  const started = Date.now();
  const watchdog = setTimeout(() => {
    diag(`watchdog: the test did not finish within ${timeout} s`);
    finish(`timed out after ${timeout} s`);
  }, timeout * 1000);
  process.on('unhandledRejection', (e) => {
    diag(`unhandled rejection: ${e?.stack ?? e}`);
    finish(`unhandled rejection: ${e?.message ?? e}`);
  });
  process.on('uncaughtException', (e) => {
    diag(`uncaught exception: ${e?.stack ?? e}`);
    finish(`uncaught exception: ${e?.message ?? e}`);
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      diag(`caught ${sig}`);
      finish(`interrupted by ${sig}`);
    });
  }
  // a broken stdout pipe (the driver died) must not hang the cleanups
  process.stdout.on('error', () => {});
  (async () => {
    try {
      await main();
    } catch (e) {
      diag(`exception: ${e?.stack ?? e}`);
      clearTimeout(watchdog);
      await finish(`exception: ${e?.message ?? e}`);
      return;
    }
    clearTimeout(watchdog);
    diag(`finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await finish(null);
  })();
}
