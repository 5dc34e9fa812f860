// stdout and stderr are kept apart and exact: 51 bytes on stdout, then a line
// on stderr, then a line on stdout (with and without pauses between them, so
// the engine sends them in one frame or in several).
import { t, preflight, sdkClient } from '../lib/sg.mjs';

const B51 = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNO';

t.run(async () => {
  await preflight();
  t.is(B51.length, 51, 'the fixture is 51 bytes');
  // a result budget above 2 x 65537 bytes: the streams come back whole (doc/results.md)
  const srv = await sdkClient(['--set', 'server.max_result_bytes=262144']);
  const variants = [
    ['no pauses', `printf '%s' '${B51}'; echo to-stderr >&2; echo to-stdout`],
    ['pauses', `printf '%s' '${B51}'; sleep 0.3; echo to-stderr >&2; sleep 0.3; echo to-stdout`],
    ['python unbuffered', `python3 -u -c "import sys; sys.stdout.write('${B51}'); sys.stdout.flush(); sys.stderr.write('to-stderr\\n'); sys.stderr.flush(); print('to-stdout')"`],
  ];
  for (const [what, command] of variants) {
    const r = await srv.tool('run_command', { command });
    t.is(r.stdout, `${B51}to-stdout\n`, `${what}: stdout is exact`);
    t.is(r.stderr, 'to-stderr\n', `${what}: stderr is exact`);
    t.is(r.exit_code, 0, `${what}: exit_code 0`);
  }
  // frame boundaries: many small writes to both streams
  const many = await srv.tool('run_command', {
    command: 'i=0; while [ $i -lt 200 ]; do printf o; printf e >&2; i=$((i+1)); done',
  });
  t.is(many.stdout, 'o'.repeat(200), '200 one-byte writes to stdout arrive whole');
  t.is(many.stderr, 'e'.repeat(200), '200 one-byte writes to stderr arrive whole');
  // sizes around common buffer boundaries
  for (const n of [4095, 4096, 4097, 65535, 65536, 65537]) {
    const r = await srv.tool('run_command', { command: `head -c ${n} /dev/zero | tr '\\0' x; head -c ${n} /dev/zero | tr '\\0' y >&2` });
    t.ok(r.stdout.length === n && r.stderr.length === n && /^x*$/.test(r.stdout) && /^y*$/.test(r.stderr),
      `${n} bytes on each stream arrive exact`, { stdout: r.stdout.length, stderr: r.stderr.length });
  }
  await srv.close();
}, { timeout: 120 });
