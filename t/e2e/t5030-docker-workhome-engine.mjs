// work_home on the engine's side: sandgate runs in a mount namespace of its
// own with a tmpfs over work_home (its view is empty, the engine's is the
// real directory), so it makes, checks and purges the named machines'
// directories through helper containers.  The machines still get their
// workspace and share mounts: what one writes, another reads, and the
// engine's host holds it while sandgate's view stays empty.  A link planted
// on the engine's side is refused as the local walk refuses it.  docker_build
// reads its Dockerfile and context from the machine through the engine.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { t, preflight, sdkClient, resultData, errorText, tmpdir } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, container, trackImage, PID } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  try { execFileSync('unshare', ['-m', 'true']); } catch (e) {
    await t.bailOut(`unshare -m does not work here (${e.message.split('\n')[0]}): the test needs util-linux's unshare and CAP_SYS_ADMIN`);
  }
  const work = path.join(tmpdir(), 'work');
  fs.mkdirSync(work, { recursive: true });
  // sandgate in its own mount namespace, a tmpfs over work_home there
  const wrap = path.join(tmpdir(), 'sandgate-hidden-work');
  fs.writeFileSync(wrap, '#!/bin/sh\nexec unshare -m --propagation private sh -c ' +
    `'mount -t tmpfs sgt "$0" && exec "$@"' '${work}' '${process.env.SANDGATE_BIN}' "$@"\n`, { mode: 0o755 });
  const real = process.env.SANDGATE_BIN;
  process.env.SANDGATE_BIN = wrap;
  const srv = await sdkClient(dockerArgs(), {}, { name: 'sandgate' });
  process.env.SANDGATE_BIN = real;
  const own = (p) => path.join(`/proc/${srv.pid}/root`, p);
  t.is(fs.readdirSync(own(work)).length, 0, 'sandgate sees an empty tmpfs at work_home');

  const a = uniq('t5030a');
  const b = uniq('t5030b');
  for (const n of [a, b]) t.is(resultData(await envFlat(srv, 'docker_run', { name: n })).status, 'running', `docker_run ${n}`);
  const sh = (m, command) => srv.tool('sandbox_shell_exec', { machine: m, command });
  t.is((await sh(a, `echo from-a > /share/${a}/note && echo ws-a > /workspace/f && cat /share/${a}/note`)).output,
    'from-a\n', 'a writes its share and workspace');
  t.is((await sh(b, `cat /share/${a}/note`)).output, 'from-a\n', 'another machine reads it through /share');
  t.is(fs.readFileSync(path.join(work, '_share', a, 'note'), 'utf8'), 'from-a\n', 'the engine\'s host holds the share file');
  t.is(fs.readFileSync(path.join(work, a, 'f'), 'utf8'), 'ws-a\n', '... and the workspace file');
  t.is(fs.readdirSync(own(work)).length, 0, 'sandgate\'s own view of work_home stayed empty');

  // docker_build: the Dockerfile and the context come through the engine
  const tag = `sgt-whe-${PID}:1`;
  trackImage(tag);
  await sh(a, `mkdir -p /workspace/app/sub && printf 'ctx\\n' > /workspace/app/sub/data.txt && printf 'FROM sandgate/base:1\\nCOPY sub/data.txt /data.txt\\n' > /workspace/app/Dockerfile`);
  const built = resultData(await envFlat(srv, 'docker_build', { machine: a, image_tag: tag, context_dir: '/workspace/app', dockerfile: '/workspace/app/Dockerfile' }));
  t.is(built.status, 'built', 'docker_build from a workspace sandgate cannot see', built);
  t.is(execFileSync('docker', ['run', '--rm', '--network', 'none', tag, 'cat', '/data.txt']).toString(), 'ctx\n',
    '... with the context\'s file in the image');
  const nodir = resultData(await envFlat(srv, 'docker_build', { machine: a, image_tag: tag, context_dir: '/workspace/none', dockerfile: '/workspace/app/Dockerfile' }));
  t.is(nodir.error_kind, 'bad_path', 'a missing context_dir is bad_path', nodir);

  // a stop and start checks the mounts through the engine again
  await envFlat(srv, 'docker_stop', { machine: b });
  t.is(resultData(await envFlat(srv, 'docker_start', { machine: b })).status, 'running', 'b starts again');
  t.is((await sh(b, `cat /share/${a}/note`)).output, 'from-a\n', '... with its mounts');

  const evil = uniq('t5030evil');
  fs.symlinkSync('/', path.join(work, evil));
  const r = await envFlat(srv, 'docker_run', { name: evil });
  t.ok(r.isError && /is a symbolic link: sandgate never follows one/.test(errorText(r)),
    'a link planted on the engine\'s side is refused', errorText(r));
  t.is(await container(`sandgate-${evil}`), null, '... and no container is made');

  const rm = resultData(await envFlat(srv, 'docker_remove', { machine: a, purge: true }));
  t.is(rm.purged, true, 'docker_remove purge says purged', JSON.stringify(rm));
  t.is(fs.existsSync(path.join(work, '_share', a)), false, '... and the share directory is gone on the engine\'s host');
  await envFlat(srv, 'docker_remove', { machine: b });
  const left = execFileSync('docker', ['ps', '-aq', '--filter', 'label=org.sandgate.helper']).toString().trim();
  t.is(left, '', 'no helper container is left');
  await srv.close();
}, { timeout: 120 });
