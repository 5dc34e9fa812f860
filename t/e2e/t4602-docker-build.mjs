// docker_build from a named machine's /workspace: the build output reaches
// the SDK client as progress notifications while it runs, and the image
// works; failures carry error_kind: bad_path (outside /workspace, "..", a
// link out), dockerfile_missing, base_image_not_found (FROM an image that
// is not there: nothing is pulled), build_failed with the end of the log;
// cancelling the call stops the build on the daemon.
import { t, preflight, sdkClient, resultData, docker, waitFor, sleep } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, trackImage, PID } from '../lib/docker.mjs';

async function imageExists(tag) {
  try { await docker(['image', 'inspect', tag]); return true; } catch { return false; }
}

/** Ids of running containers whose command line holds `marker`. */
async function runningWith(marker) {
  const out = await docker(['ps', '--no-trunc', '--format', '{{.ID}} {{.Command}}']);
  return out.split('\n').filter((l) => l.includes(marker)).map((l) => l.split(' ')[0]);
}

t.run(async () => {
  await preflight();
  const srv = await sdkClient(dockerArgs(), {}, { name: 'sandgate' });
  const name = uniq('t4602');
  const tag = `sgt-built-${PID}:1`;
  trackImage(tag);
  t.is(resultData(await envFlat(srv, 'docker_run', { name })).status, 'running', 'a builder machine runs');
  const write = (path, content) => srv.tool('sandbox_file_write', { machine: name, path, content });
  await write('/workspace/app/Dockerfile', `FROM sandgate/base:1\nCOPY data.txt /data.txt\nRUN echo built-${PID} > /built\nCMD ["/bin/sleep", "infinity"]\n`);
  await write('/workspace/app/data.txt', 'from the context\n');

  const progress = [];
  const res = await srv.client.callTool({ name: 'sandbox_env', arguments: {
    action: 'docker_build', machine: name, image_tag: tag, context_dir: '/workspace/app', dockerfile: '/workspace/app/Dockerfile',
  } }, undefined, { timeout: 300000, onprogress: (p) => progress.push(p) });
  const built = resultData(res);
  t.is(built.status, 'built', 'docker_build builds the image', built);
  t.ok(await imageExists(tag), `the engine has ${tag}`);
  t.ok(progress.some((p) => /^Step 1\/4 : FROM sandgate\/base:1/.test(p.message ?? '')),
    'the build output came as progress notifications while it ran (Step 1/4 : FROM ...)', progress.map((p) => p.message));
  t.ok(progress.length >= 4 && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
    `${progress.length} progress notifications, progress growing`);
  const user = uniq('t4602-user');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: user, image: tag })).status, 'running', 'a machine runs the built image');
  t.is((await srv.tool('sandbox_shell_exec', { machine: user, command: 'cat /built /data.txt' })).output,
    `built-${PID}\nfrom the context\n`, '... with what the Dockerfile and the context put there');

  // a RUN step is held by the sandboxes' memory and CPU limits (it had none)
  const LIM = 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || ' +
    'cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max';
  const mine = (await srv.tool('sandbox_shell_exec', { machine: name, command: LIM })).output.trim().split(/\s+/);
  await write('/workspace/lim/Dockerfile', `FROM sandgate/base:1\nRUN echo "limits: $(${LIM} | tr '\\n' ' ')"\n`);
  const limTag = `sgt-limits-${PID}:1`;
  trackImage(limTag);
  const lb = resultData(await envFlat(srv, 'docker_build', { machine: name, image_tag: limTag, context_dir: '/workspace/lim',
    dockerfile: '/workspace/lim/Dockerfile' }));
  const limSeen = /limits: (\d+)\s+(\S+)/.exec(lb.log_tail ?? '')?.slice(1); // the output, not the Step line
  t.deepEqual(limSeen?.slice(0, 2), mine.slice(0, 2), `a RUN step has a machine's memory and CPU limits (${mine.slice(0, 2).join(', ')})`);

  const kind = async (params, want, what) => {
    const r = resultData(await envFlat(srv, 'docker_build', { machine: name, image_tag: `sgt-never-${PID}:1`, ...params }));
    t.is(r.status, 'error', `${what}: status error`);
    t.is(r.error_kind, want, `${what}: error_kind ${want}`, r);
    return r;
  };
  await kind({ context_dir: '/etc' }, 'bad_path', 'a context outside /workspace');
  await kind({ context_dir: '/workspace/../etc' }, 'bad_path', 'a context with ..');
  await kind({ dockerfile: '/etc/passwd' }, 'bad_path', 'a Dockerfile outside /workspace');
  await srv.tool('sandbox_shell_exec', { machine: name, command: 'ln -s / /workspace/escape' });
  const link = await kind({ context_dir: '/workspace/escape' }, 'bad_path', 'a context through a link to /');
  t.like(link.error, /symbolic link/, '... which says why', link);
  await kind({ dockerfile: '/workspace/nothere/Dockerfile' }, 'dockerfile_missing', 'a missing Dockerfile');
  // ADD of a URL or a git repository: the engine fetches it from the host's
  // network (its loopback, a metadata address), which no sandbox reaches
  await write('/workspace/fetch/Dockerfile', 'FROM sandgate/base:1\nRUN true\nadd --chown=0:0 \\\n  http://127.0.0.1:9/secret /s\n');
  const fetch = await kind({ context_dir: '/workspace/fetch', dockerfile: '/workspace/fetch/Dockerfile' }, 'remote_source', 'ADD of a URL');
  t.like(fetch.error, /the Dockerfile's ADD on line 3 may fetch a URL or a git repository/, '... naming the line', fetch);
  await write('/workspace/fetch/Dockerfile', '# escape=`\nFROM sandgate/base:1\nADD `\n git@example.com:a/b.git /b\n');
  await kind({ context_dir: '/workspace/fetch', dockerfile: '/workspace/fetch/Dockerfile' }, 'remote_source', 'ADD of a git repository, escape `');
  // what the builder reads as the same (a review found each passing)
  for (const [df, what] of [
    ['FROM sandgate/base:1\nARG U=http://127.0.0.1:9/s\nADD $U /x\n', 'a URL through ARG'],
    ['FROM sandgate/base:1\nADD \\\n# a comment inside\n\n  http://127.0.0.1:9/s /x\n', 'a comment and an empty line inside the instruction'],
    ['FROM sandgate/base:1\n  # an indented comment ending in the escape \\\nADD http://127.0.0.1:9/s /x\n', 'after an indented comment'],
    ['FROM sandgate/base:1\nONBUILD ADD http://127.0.0.1:9/s /x\n', 'ONBUILD ADD'],
    ['\ufeff# escape=`\nFROM sandgate/base:1\nADD `\n  me@example.com:r.git /r\n', 'a byte-order mark, escape `, user@host:repo'],
  ]) {
    await write('/workspace/fetch/Dockerfile', df);
    await kind({ context_dir: '/workspace/fetch', dockerfile: '/workspace/fetch/Dockerfile' }, 'remote_source', `ADD: ${what}`);
  }
  await write('/workspace/fetch/Dockerfile', '# hello\n# escape=`\nFROM sandgate/base:1\nADD `\n  http://127.0.0.1:9/s /x\n');
  const late = resultData(await envFlat(srv, 'docker_build', { machine: name, image_tag: `sgt-never-${PID}:1`,
    context_dir: '/workspace/fetch', dockerfile: '/workspace/fetch/Dockerfile' }));
  t.isnt(late.error_kind, 'remote_source', 'a directive after another comment is no directive (as the builder reads it): ADD ` is a path', late);
  // a FIFO named as the Dockerfile held the call (and a worker) for good
  await srv.tool('sandbox_shell_exec', { machine: name, command: 'mkfifo /workspace/fifo.df' });
  const t0 = Date.now();
  const fifo = await kind({ dockerfile: '/workspace/fifo.df' }, 'bad_path', 'a FIFO as the Dockerfile');
  t.like(fifo.error, /is not a regular file/, `... said at once (${Date.now() - t0} ms)`, fifo);
  await write('/workspace/nobase/Dockerfile', `FROM sgt-no-such-base-${PID}:9\nRUN true\n`);
  const nb = await kind({ context_dir: '/workspace/nobase', dockerfile: '/workspace/nobase/Dockerfile' }, 'base_image_not_found', 'FROM a missing image');
  t.like(nb.log_tail ?? '', /Step 1\/2 : FROM sgt-no-such-base/, '... with the end of the build log');
  await write('/workspace/fails/Dockerfile', `FROM sandgate/base:1\nRUN echo failing-${PID} && exit 7\n`);
  const bf = await kind({ context_dir: '/workspace/fails', dockerfile: '/workspace/fails/Dockerfile' }, 'build_failed', 'a failing RUN');
  t.like(bf.log_tail ?? '', new RegExp(`failing-${PID}`), '... with the step\'s output in the log tail');
  t.like(bf.error ?? '', /returned a non-zero code: 7/, '... and the daemon\'s error');

  // cancellation: the RUN step's container goes away, no image is made
  const slowTag = `sgt-slow-${PID}:1`;
  trackImage(slowTag);
  const marker = `cancel-me-${PID}`;
  await write('/workspace/slow/Dockerfile', `FROM sandgate/base:1\nRUN echo ${marker} && sleep 120\n`);
  const ac = new AbortController();
  const seen = [];
  const slow = srv.client.callTool({ name: 'sandbox_env', arguments: {
    action: 'docker_build', machine: name, image_tag: slowTag, context_dir: '/workspace/slow', dockerfile: '/workspace/slow/Dockerfile',
  } }, undefined, { timeout: 300000, signal: ac.signal, onprogress: (p) => seen.push(p.message) }).then(() => 'resolved', (e) => e);
  const running = await waitFor(async () => (await runningWith(marker)).length > 0, 60000, 500);
  t.ok(running, 'the slow build\'s RUN step runs', seen);
  t.ok(seen.some((m) => new RegExp(marker).test(m ?? '')), '... and its output came as progress', seen);
  ac.abort();
  const outcome = await slow;
  t.ok(outcome instanceof Error, 'the cancelled call ends at once on the client', String(outcome));
  const stopped = await waitFor(async () => (await runningWith(marker)).length === 0, 30000, 500);
  t.ok(stopped, 'cancelling stops the build: its RUN container is gone within 30 s', await runningWith(marker));
  await sleep(500);
  t.ok(!(await imageExists(slowTag)), 'no image was made');
  t.is((await srv.tool('sandbox_env', { action: 'status' })).machines.length >= 2, true, 'sandgate still answers');
  await srv.close();
}, { timeout: 420 });
