// The FC emulator is trusted only because the official SDKs work against it:
// e2b and @e2b/code-interpreter (pinned in t/fc/package.json) create a
// sandbox, run commands, write, read and list files, run code and kill it,
// pointed at the emulator through apiUrl and sandboxUrl (every data-plane
// request to one URL, routed by the E2b-Sandbox-Id/-Port headers).  Also
// checks that the emulator is as strict as the service where it must be.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { t } from '../lib/sg.mjs';
import { startEmulator, PNG_1X1 } from '../fc/emu.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

async function loadSdk() {
  const req = createRequire(path.join(process.env.SG_TEST_DEPS ?? path.resolve(here, '..'), 'fc', 'package.json'));
  try {
    const ci = await import(pathToFileURL(req.resolve('@e2b/code-interpreter')).href);
    const e2b = await import(pathToFileURL(req.resolve('e2b')).href);
    return { Sandbox: ci.Sandbox, CommandExitError: e2b.CommandExitError, BaseSandbox: e2b.Sandbox };
  } catch (e) {
    return t.bailOut(`the E2B SDKs are not installed in t/fc/node_modules (${e.code ?? e.message}): `
      + 'run "npm --prefix t/fc ci --no-audit --no-fund" (.ci/run does)');
  }
}

async function raw(emu, method, p, headers = {}, body) {
  const r = await fetch(`${emu.base}${p}`, { method, headers, body });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

t.run(async () => {
  const { Sandbox, CommandExitError, BaseSandbox } = await loadSdk();
  const emu = await startEmulator();
  const opts = { apiKey: emu.apiKey, apiUrl: emu.base, sandboxUrl: emu.base, domain: 'fc.emulator.test',
    requestTimeoutMs: 30000 };

  const sbx = await Sandbox.create('code-interpreter-v1', opts);
  t.like(sbx.sandboxId, /^sbx-[0-9a-f-]{36}$/, `create: sandbox id ${sbx.sandboxId}`);

  const run = await sbx.commands.run('echo hello; echo err >&2; pwd', { timeoutMs: 20000 });
  t.hasFields(run, { stdout: 'hello\n/home/user\n', stderr: 'err\n', exitCode: 0 },
    'commands.run: stdout, stderr, exit code 0, cwd is the home');
  const env = await sbx.commands.run('printf %s "$GREETING"', { envs: { GREETING: 'hi there' }, cwd: '/tmp' });
  t.is(env.stdout, 'hi there', 'commands.run: envs reach the command');
  let exitErr;
  try { await sbx.commands.run('echo partial; exit 3'); } catch (e) { exitErr = e; }
  t.ok(exitErr instanceof CommandExitError && exitErr.exitCode === 3 && exitErr.stdout === 'partial\n',
    'commands.run: exit 3 raises CommandExitError with the code and output', { error: String(exitErr) });
  const slow = await sbx.commands.run('sleep 5; echo late', { timeoutMs: 1000 }).catch((e) => e);
  t.like(String(slow?.message ?? slow), /deadline|timeout|timed out/i,
    `commands.run: Connect-Timeout-Ms ends the process (${String(slow?.message ?? slow).slice(0, 80)})`);

  const info = await sbx.files.write('/home/user/dir/a.txt', 'content ✓\n');
  t.is(info.path, '/home/user/dir/a.txt', 'files.write: multipart upload, the answer names the path');
  t.is(await sbx.files.read('/home/user/dir/a.txt'), 'content ✓\n', 'files.read: the same bytes');
  const cat = await sbx.commands.run('cat /home/user/dir/a.txt');
  t.is(cat.stdout, 'content ✓\n', 'a file written through the file API is what a command reads');
  await sbx.commands.run('mkdir -p /home/user/dir/sub && printf 12345 > /home/user/dir/b.bin');
  const list = await sbx.files.list('/home/user/dir');
  const names = Object.fromEntries(list.map((e) => [e.name, e]));
  t.hasFields(names['a.txt'] ?? {}, { type: 'file', path: '/home/user/dir/a.txt' }, 'files.list: the written file');
  t.hasFields(names['b.bin'] ?? {}, { type: 'file', size: 5 }, 'files.list: a file a command made, size from an int64 string');
  t.hasFields(names.sub ?? {}, { type: 'dir' }, 'files.list: a directory (FILE_TYPE_DIRECTORY)');
  const missing = await sbx.files.read('/home/user/nope').catch((e) => e);
  t.like(String(missing?.message), /not (exist|found)/i, 'files.read of a missing file: a not-found error');

  const exec = await sbx.runCode('x = 6 * 7\nprint("out")\nx');
  t.deepEqual(exec.logs.stdout, ['out\n'], 'runCode: stdout');
  t.is(exec.results[0]?.text, '42', 'runCode: the last expression is the main result');
  t.is(exec.results[0]?.isMainResult, true, 'runCode: is_main_result');
  const png = await sbx.runCode(`import base64\nclass Img:\n    def _repr_png_(self):\n        return base64.b64decode("${PNG_1X1}")\nImg()`);
  t.is(png.results[0]?.png, PNG_1X1, 'runCode: a png result arrives as base64');
  await sbx.runCode('y = 41');
  t.is((await sbx.runCode('y + 1')).results[0]?.text, '42', 'runCode: names persist from call to call (one kernel per sandbox and language)');
  t.is((await sbx.runCode('typeof y', { language: 'javascript' })).results[0]?.text, "'undefined'",
    'runCode: each language has its own kernel');
  const boom = await sbx.runCode('1/0');
  t.is(boom.error?.name, 'ZeroDivisionError', 'runCode: an exception is an error with its name');
  const js = await sbx.runCode('[1, 2, 3].length * 2', { language: 'javascript' });
  t.is(js.results[0]?.text, '6', 'runCode javascript: the value');
  const sh = await sbx.runCode('echo from bash', { language: 'bash' });
  t.deepEqual(sh.logs.stdout, ['from bash\n'], 'runCode bash: stdout');

  t.ok(await sbx.isRunning(), 'isRunning: GET /health');
  await sbx.kill();
  const st = await emu.state();
  t.ok(!st.sandboxes.some((s) => s.id === sbx.sandboxId), 'kill: the sandbox is gone');
  t.is(await BaseSandbox.kill(sbx.sandboxId, opts), false, 'kill of a gone sandbox: 404 means false');
  t.cmp(st.counts.create, '==', 1, 'the SDK created once');
  const startLog = st.log.filter((l) => l.op === 'start');
  t.ok(startLog.length >= 5 && startLog.every((l) => l.status === 200), 'every SDK Start was accepted (enveloped)');

  // strictness
  const base = await Sandbox.create('base', opts);
  const b = await base.commands.run('echo base-ok');
  t.is(b.stdout, 'base-ok\n', 'template base runs commands');
  const noInterp = await raw(emu, 'POST', '/execute', { 'E2b-Sandbox-Id': base.sandboxId, 'E2b-Sandbox-Port': '49999',
    'X-Access-Token': (await emu.state()).sandboxes.find((s) => s.id === base.sandboxId).token,
    'Content-Type': 'application/json' }, '{"code":"1"}');
  t.is(noInterp.status, 404, 'template base has no code interpreter: /execute is 404');
  const token = (await emu.state()).sandboxes.find((s) => s.id === base.sandboxId).token;
  const hdr = { 'E2b-Sandbox-Id': base.sandboxId, 'E2b-Sandbox-Port': '49983' };
  const noTok = await raw(emu, 'GET', '/files?path=/etc/hostname', hdr);
  t.ok(noTok.status === 403 && /AccessDenied/.test(noTok.text), 'no X-Access-Token: 403 AccessDenied', noTok);
  const badTok = await raw(emu, 'GET', '/files?path=/etc/hostname', { ...hdr, 'X-Access-Token': 'wrong' });
  t.is(badTok.status, 401, 'a wrong X-Access-Token: 401');
  const rawStart = await raw(emu, 'POST', '/process.Process/Start', { ...hdr, 'X-Access-Token': token,
    'Content-Type': 'application/connect+json' }, JSON.stringify({ process: { cmd: '/bin/true' } }));
  t.ok(rawStart.status === 500 && /text\/plain/.test(rawStart.type), 'a raw-JSON Start: FC\'s 500 text/plain', rawStart);
  const octet = await raw(emu, 'POST', '/files?path=/tmp/x', { ...hdr, 'X-Access-Token': token,
    'Content-Type': 'application/octet-stream' }, 'x');
  t.is(octet.status, 400, 'an octet-stream upload: 400 (envd 0.5.2 takes multipart only)');
  const noKey = await raw(emu, 'GET', '/sandboxes');
  t.is(noKey.status, 401, 'the platform API without a key: 401');
  const bearer = await raw(emu, 'GET', `/sandboxes/${base.sandboxId}`, { Authorization: `Bearer ${emu.apiKey}` });
  t.ok(bearer.status === 200 && JSON.parse(bearer.text).envdAccessToken === token, 'Bearer works too; GET returns the token');
  const unknown = await raw(emu, 'GET', '/sandboxes/sbx-nope', { 'X-API-Key': emu.apiKey });
  t.is(unknown.status, 404, 'an unknown sandbox: 404');
  await emu.expire(base.sandboxId);
  const gone = await raw(emu, 'GET', '/files?path=/tmp', { ...hdr, 'X-Access-Token': token });
  t.is(gone.status, 502, 'an expired sandbox answers 502 on the data plane');
  const err = await base.commands.run('true').catch((e) => e);
  t.ok(err instanceof Error, `the SDK reports the expired sandbox: ${String(err?.message).slice(0, 100)}`);
}, { timeout: 120 });
