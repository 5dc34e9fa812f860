// Every slot of fc.so, including those no MCP tool reaches yet (streams with
// SendInput/CloseStdin/SendSignal, stat, remove, attach, list,
// keepalive, destroy twice), driven by t/fc/fc-slots (the plugin's code with
// a fake host API) against the FC emulator; under valgrind when it is
// installed (SG_TEST_VALGRIND=0 turns that off), so the plugin is also
// checked for leaks and memory errors.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { t } from '../lib/sg.mjs';
import { startEmulator } from '../fc/emu.mjs';

t.run(async () => {
  const build = process.env.SG_TEST_BUILDDIR || path.dirname(process.env.SANDGATE_BIN || '.');
  const driver = path.join(build, 't', 'fc', 'fc-slots');
  if (!fs.existsSync(driver)) await t.bailOut(`${driver} is missing: build it with "make check" (or make t/fc/fc-slots)`);
  const emu = await startEmulator();
  // A sanitizer build checks itself (and valgrind cannot run it): the driver
  // then runs on its own, with ASan's leak checker.
  const sanitized = /libasan|libubsan/.test(spawnSync('ldd', [driver]).stdout?.toString() ?? '');
  const vg = !sanitized && process.env.SG_TEST_VALGRIND !== '0' &&
    spawnSync('valgrind', ['--version']).status === 0;
  const cmd = vg ? 'valgrind' : driver;
  const args = vg ? ['--leak-check=full', '--errors-for-leak-kinds=definite,indirect',
    '--show-leak-kinds=definite,indirect', '--error-exitcode=99', driver] : [];
  t.diag(vg ? 'running fc-slots under valgrind' : sanitized ? 'running fc-slots (sanitizer build)' : 'running fc-slots (no valgrind)');
  const child = spawn(cmd, args, {
    env: { ...process.env, FCT_BASE_URL: emu.base, FCT_API_KEY: emu.apiKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((r) => child.on('close', (c) => r(c)));
  let n = 0;
  for (const line of out.split('\n')) {
    const m = /^(ok|not ok) \d+ - (.*)$/.exec(line);
    if (m) { n++; t.ok(m[1] === 'ok', `fc-slots: ${m[2]}`); }
    else if (/^Bail out!/.test(line)) await t.bailOut(`fc-slots: ${line}`);
  }
  t.cmp(n, '>=', 43, `fc-slots ran its steps (${n})`);
  t.ok(code === 0, `fc-slots exited 0${vg ? ' (valgrind: no errors, no definite or indirect leaks)' : ''}`,
    { code, stderr: err.split('\n').filter((l) => /==\d+==/.test(l)).slice(-30).join('\n') });
  const st = await emu.state();
  t.is(st.sandboxes.length, 0, 'fc-slots left no sandbox behind');
}, { timeout: 300 });
