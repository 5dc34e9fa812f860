// run_code keeps its state (issue 18), through the official SDK client: a
// kernel per sandbox and language, the same result shape on every backend.
// x = 41 then x + 1 is 42 as a result; an import and a function persist;
// stdout and stderr in order; a matplotlib figure is one image/png block of
// the figure's size; a timeout interrupts and keeps x; one process (the
// same pid); a kernel that dies comes back saying so once; reset clears;
// two sandboxes keep their own x; JavaScript globals persist; a cancel
// mid-loop leaves the kernel usable; output_files lists what the code
// wrote; shell is the sandbox's persistent bash; typescript and r say what
// they need.
//
// The body is a function of the backend (SG_TEST_BACKEND, default docker).
// With the backend's runner off (SANDGATE_DOCKER_RUNNER or
// SANDGATE_SSH_RUNNER = false: make check-fallback) there is no kernel: each
// call then runs once and says stateful: false.
import fs from 'node:fs';
import { t, preflight, sdkClient, resultData, errorText, sleep, waitFor } from '../lib/sg.mjs';
import { backendFromEnv } from '../lib/backends.mjs';

const mainText = (r) => r.results?.find((x) => x.is_main_result)?.text;

/** Signature, first chunk type and IHDR size of a base64 PNG. */
function pngInfo(b64) {
  const buf = Buffer.from(b64 ?? '', 'base64');
  if (buf.length < 24) return { png: false };
  return {
    png: buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
    chunk: buf.subarray(12, 16).toString('latin1'),
    size: `${buf.readUInt32BE(16)}x${buf.readUInt32BE(20)}`,
  };
}

function runnerOff(be) {
  const v = be.name === 'docker' ? process.env.SANDGATE_DOCKER_RUNNER
    : be.name === 'ssh' ? process.env.SANDGATE_SSH_RUNNER : undefined;
  return /^(false|no|off|0)$/i.test(v ?? '');
}

async function schema(srv) {
  const rc = (await srv.client.listTools()).tools.find((x) => x.name === 'run_code');
  const props = rc?.inputSchema?.properties ?? {};
  t.like(props.language?.description ?? '', /python \(stateful kernel.*javascript \(stateful kernel.*shell \(the persistent bash\).*typescript \(one run per call; needs Node >= 22\.6.*r \(one run per call; needs Rscript\)/,
    'the schema says which languages are stateful and what each needs');
  t.is(props.reset?.type, 'boolean', 'the schema has reset');
}

async function kernels(srv, be) {
  const code = (args) => srv.tool('run_code', args);
  const sb = (await srv.tool('create_sandbox', {})).sandbox_id;

  const a = await code({ code: 'x = 41' });
  t.hasFields(a, { stateful: true, exit_code: 0, timed_out: false, stdout: '', stderr: '', results: [],
    output_files: [], kernel_restarted: false }, `${be.name}: x = 41 runs in a kernel`);
  t.deepEqual((await code({ code: 'x + 1' })).results, [{ text: '42', is_main_result: true, formats: ['text'] }],
    'x + 1 then returns 42 as the main result');
  await code({ code: 'import json' });
  t.is(mainText(await code({ code: 'json.dumps({"a": [1, 2]})' })), '\'{"a": [1, 2]}\'', 'an import persists');
  await code({ code: 'def twice(v):\n    return 2 * v\n' });
  t.is(mainText(await code({ code: 'twice(21)' })), '42', 'a function defined in one call runs in the next');

  const io = await code({ code: 'import sys\nfor i in range(3):\n    print("out", i)\n    print("err", i, file=sys.stderr)\n' });
  t.hasFields(io, { stdout: 'out 0\nout 1\nout 2\n', stderr: 'err 0\nerr 1\nerr 2\n' }, 'stdout and stderr, each in order');

  const fig = await srv.call('run_code', { code: 'import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 3, 2])\nplt.show()' });
  const imgs = (fig.content ?? []).filter((c) => c.type === 'image');
  t.is(imgs.length, 1, 'a matplotlib figure: one image block', { result: resultData(fig) });
  t.is(imgs[0]?.mimeType, 'image/png', 'the block is image/png');
  t.hasFields(pngInfo(imgs[0]?.data), { png: true, chunk: 'IHDR', size: '400x300' }, 'its bytes are a PNG of the figure\'s size (4x3 in at 100 dpi)');
  t.ok(resultData(fig)?.results?.some((r) => r.formats?.includes('png')), 'the figure is a results entry with png among its formats');

  const t0 = Date.now();
  const loop = await code({ code: 'while True: pass', timeout: 2 });
  const took = Date.now() - t0;
  t.hasFields(loop, { timed_out: true, exit_code: 124 }, 'while True with timeout 2: timed_out, exit 124');
  t.cmp(took, '<', 5000, `... and it returned within 5 s (${took} ms)`);
  t.is(mainText(await code({ code: 'x' })), '41', 'x is still 41 after the timeout');

  const p1 = mainText(await code({ code: 'import os\nos.getpid()' }));
  const p2 = mainText(await code({ code: 'os.getpid()' }));
  t.ok(/^\d+$/.test(p1 ?? '') && p1 === p2, `os.getpid() is the same in two calls (${p1}, ${p2})`);

  const died = await code({ code: 'import os\nos._exit(1)' });
  t.hasFields(died, { kernel_died: true, exit_code: 1 }, 'os._exit(1): the call says its kernel died');
  const after = await code({ code: 'x' });
  t.is(after.error?.name, 'NameError', 'then x is a NameError');
  t.hasFields(after, { kernel_restarted: true }, '... with kernel_restarted true');
  t.like(after.kernel_restart_reason ?? '', /\S/, `... and why: ${after.kernel_restart_reason}`);
  t.is((await code({ code: 'x = 41' })).kernel_restarted, false, 'the restart is said once');

  await code({ code: 'y = 1' });
  const reset = await code({ code: '"y" in globals()', reset: true });
  t.is(mainText(reset), 'False', 'reset: true clears the state');
  t.is(reset.kernel_restarted, false, 'a reset is no restart');

  await code({ code: 'globalThis.n = 1', language: 'javascript' });
  t.is(mainText(await code({ code: 'n + 1', language: 'javascript' })), '2', 'JavaScript: globalThis.n = 1 then n + 1 is 2');

  const wf = await code({ code: 'with open("kernel-out.txt", "w") as f:\n    f.write("hello")\nopen("kernel-out.txt").read()' });
  t.deepEqual((wf.output_files ?? []).map((f) => [f.name, f.size]), [['kernel-out.txt', 5]],
    'output_files lists the file the code wrote (not one it read)');

  await code({ code: 'z = 5' });
  const ac = new AbortController();
  const pending = srv.client.callTool({ name: 'run_code', arguments: { code: 'while True: pass', timeout: 600 } },
    undefined, { signal: ac.signal, timeout: 60000 });
  await sleep(1500);
  ac.abort();
  t.ok(await pending.then(() => false, () => true), 'a run_code cancelled mid-loop ends for the client');
  t.is(mainText(await code({ code: 'z' })), '5', 'the kernel then runs the next call, z kept (the loop was interrupted)');

  const sb2 = (await srv.tool('create_sandbox', {})).sandbox_id;
  await code({ code: 'x = "one"', sandbox_id: sb });
  await code({ code: 'x = "two"', sandbox_id: sb2 });
  t.is(mainText(await code({ code: 'x', sandbox_id: sb })), "'one'", 'two sandboxes: the first reads its own x');
  t.is(mainText(await code({ code: 'x', sandbox_id: sb2 })), "'two'", '... and the second its own');

  if (be.name === 'ssh') { // the target is this host: its kernel processes are ours to see
    const pid = mainText(await code({ code: 'import os\nos.getpid()', sandbox_id: sb }));
    t.ok(fs.existsSync(`/proc/${pid}`), `ssh: the kernel of the first sandbox runs (pid ${pid})`);
    await srv.tool('kill_sandbox', { sandbox_id: sb });
    t.ok(await waitFor(() => !fs.existsSync(`/proc/${pid}`), 5000), '... and ends with its sandbox (the runner stays)');
    t.is(mainText(await code({ code: 'x', sandbox_id: sb2 })), "'two'", 'the other sandbox\'s kernel lives on');
  }
  return sb2;
}

async function shellAndOthers(srv, be, sid) {
  const code = (args) => srv.tool('run_code', { sandbox_id: sid, ...args });
  await code({ code: 'cd /tmp && export SGV=7', language: 'shell' });
  t.hasFields(await code({ code: 'echo "$SGV $PWD"; echo oops >&2', language: 'shell' }),
    { stdout: '7 /tmp\n', stderr: 'oops\n', exit_code: 0, stateful: true }, 'shell: cwd and exports persist, stderr apart');
  t.is((await srv.tool('sandbox_shell_exec', { command: 'echo "$SGV"', machine: sid })).output, '7\n',
    'shell is the sandbox\'s persistent bash, the one sandbox_shell_exec uses');
  t.is((await code({ code: 'false', language: 'shell' })).exit_code, 1, 'shell: the exit status');
  t.hasFields(await code({ code: 'export SGW=8; sleep 30', language: 'shell', timeout: 2 }),
    { timed_out: true, exit_code: 124 }, 'shell: a timeout interrupts the command');
  t.is((await code({ code: 'echo "$SGW"', language: 'shell' })).stdout, '8\n', '... and the shell keeps its state');
  t.is((await code({ code: 'echo "${SGV:-unset}"', language: 'shell', reset: true })).stdout, 'unset\n',
    'shell with reset: true starts a fresh bash');
  t.is((await code({ code: 'exit 3', language: 'shell' })).exit_code, 3, 'shell: exit 3 ends that bash with status 3');
  const again = await code({ code: 'echo back', language: 'shell' });
  t.hasFields(again, { stdout: 'back\n', kernel_restarted: true }, '... and the next call runs in a new one, saying so');

  if (be.name !== 'fc') { // FC's code interpreter has a TypeScript kernel of its own
    const ts = await srv.call('run_code', { code: 'const a: number = 1; console.log(a)', language: 'typescript', sandbox_id: sid });
    t.ok(ts.isError, 'typescript without type stripping: an error', { result: resultData(ts) });
    t.like(errorText(ts), /Node >= 22\.6.*which has node v\d+/, 'it names what is missing and the node there', { text: errorText(ts) });
  }
  const r = await srv.call('run_code', { code: 'cat(1)', language: 'r', sandbox_id: sid });
  t.ok(r.isError && /Rscript/.test(errorText(r)), 'r without Rscript: an error naming Rscript', { text: errorText(r) });
}

async function stateless(srv, be) {
  const code = (args) => srv.tool('run_code', args);
  const a = await code({ code: 'x = 41\nprint(x + 1)' });
  t.hasFields(a, { stateful: false, stdout: '42\n', exit_code: 0 }, `${be.name} without its runner: run_code runs once, stateful: false`);
  const b = await code({ code: 'print(x)' });
  t.hasFields(b, { stateful: false, exit_code: 1 }, 'the next call has no x');
  t.like(b.stderr, /NameError/, '... a NameError on stderr');
  const loop = await code({ code: 'while True: pass', timeout: 2 });
  t.hasFields(loop, { timed_out: true, exit_code: 124, stateful: false }, 'a timeout still ends the run');
  const wf = await code({ code: 'open("fallback-out.txt", "w").write("hi")' });
  t.deepEqual((wf.output_files ?? []).map((f) => f.name), ['fallback-out.txt'], 'output_files without a kernel too');
  return (await srv.tool('create_sandbox', {})).sandbox_id;
}

t.run(async () => {
  const be = backendFromEnv();
  if (!be) await t.bailOut(`unknown SG_TEST_BACKEND ${process.env.SG_TEST_BACKEND}`);
  await preflight({ docker: be.name === 'docker' });
  Object.assign(be, await be.setup());
  const srv = await sdkClient(be.args, be.env);
  await schema(srv);
  const sid = runnerOff(be) ? await stateless(srv, be) : await kernels(srv, be);
  await shellAndOthers(srv, be, sid);
  await srv.close();
}, { timeout: 300 });
