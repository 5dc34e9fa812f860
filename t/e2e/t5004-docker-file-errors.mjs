// File tools on Docker name the cause of a failure with the path, through
// the runner and through plain docker exec: a symlink loop, a missing file,
// a file where a directory should be, a directory where a file should be.
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  for (const runner of ['true', 'false']) {
    const srv = await sdkClient(['--set', `docker.runner=${runner}`, '--set', 'sandbox.default_backend=docker']);
    await srv.tool('run_command', { command: 'cd /workspace && ln -s loop loop && echo x > f && mkdir d' });
    const cases = [
      ['read_file', { path: '/workspace/loop' }, /^\/workspace\/loop: too many levels of symbolic links \(a symbolic link loop\): fix or remove the link$/],
      ['read_file', { path: '/workspace/nope' }, /^no such file: \/workspace\/nope: list_files shows what is there$/],
      ['read_file', { path: '/workspace/f/x' }, /^\/workspace\/f\/x: not a directory: check each directory of the path$/],
      ['read_file', { path: '/workspace/d' }, /^\/workspace\/d is a directory: list it instead of reading it$/],
      ['write_file', { path: '/workspace/f/x', content: 'y' }, /^\/workspace\/f\/x: not a directory: check each directory of the path$/],
    ];
    for (const [tool, args, re] of cases) {
      const r = await srv.call(tool, args);
      t.ok(r.isError, `runner=${runner}: ${tool} ${args.path} is an error`);
      t.like(errorText(r), re, `runner=${runner}: ${tool} ${args.path} names the cause: ${errorText(r)}`);
    }
    await srv.close();
  }
}, { timeout: 60 });
