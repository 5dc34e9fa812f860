// Images and a machine's changes: docker_images (one row per tag),
// docker_image_history (layers), docker_commit (a machine as an image
// repo:tag, with progress; a bad tag says what it takes), docker_diff (A, C,
// D against the image, sorted) and docker_stats (one sample).
import { t, preflight, sdkClient, resultData, errorText, docker, IMAGE } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, trackImage, PID } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient(dockerArgs(), {}, { name: 'sandgate' });
  const name = uniq('t4611');
  t.is(resultData(await envFlat(srv, 'docker_run', { name })).status, 'running', 'docker_run');

  const imgs = resultData(await envFlat(srv, 'docker_images')).images;
  const base = imgs.find((i) => i.tag === IMAGE);
  const baseId = (await docker(['image', 'inspect', '--format', '{{.Id}}', IMAGE])).trim();
  t.is(base?.image_id, baseId.replace('sha256:', '').slice(0, 12), `docker_images lists ${IMAGE} with its 12-digit id`, base);
  t.ok(typeof base?.size_mb === 'number' && base.size_mb > 0 && /^\d{4}-\d\d-\d\dT/.test(base?.created), '... its size in MB and when it was made');
  const hist = resultData(await envFlat(srv, 'docker_image_history', { image: IMAGE }));
  t.is(hist.image, IMAGE, 'docker_image_history');
  t.is(hist.layer_count, hist.layers.length, '... layer_count counts the layers');
  t.is(hist.total_size_bytes, hist.layers.reduce((n, l) => n + l.size_bytes, 0), '... total_size_bytes sums them');
  t.ok(hist.layers.some((l) => l.tags?.includes(IMAGE)), '... the newest layer carries the tag');
  const none = await envFlat(srv, 'docker_image_history', { image: `sgt-none-${PID}:1` });
  t.ok(none.isError && /no image sgt-none-\d+:1 on this docker daemon/.test(errorText(none)), 'an unknown image is "not found"', errorText(none));

  await srv.tool('sandbox_shell_exec', { machine: name, command: 'echo new > /workspace/../opt/added.txt; echo x >> /etc/motd; rm /etc/issue' });
  const diff = resultData(await envFlat(srv, 'docker_diff', { machine: name }));
  t.ok(diff.changes.A.includes('/opt/added.txt'), 'docker_diff: an added file is A', diff.changes);
  t.ok(diff.changes.C.includes('/etc/motd') && diff.changes.C.includes('/etc'), '... a changed one C', diff.changes.C);
  t.ok(diff.changes.D.includes('/etc/issue'), '... a deleted one D', diff.changes.D);
  t.deepEqual(diff.changes.A, [...diff.changes.A].sort(), '... sorted');
  t.deepEqual(diff.summary, { added: diff.changes.A.length, changed: diff.changes.C.length, deleted: diff.changes.D.length }, '... with a summary');

  const stats = resultData(await envFlat(srv, 'docker_stats', { machine: name }));
  t.ok(typeof stats.cpu_percent === 'number' && stats.cpu_percent >= 0, 'docker_stats: cpu_percent', stats);
  t.ok(stats.memory.usage_bytes > 0 && stats.memory.limit_bytes >= stats.memory.usage_bytes, '... memory usage and limit');
  t.ok(stats.pids >= 1, '... pids');
  t.ok(['rx_bytes', 'tx_bytes'].every((k) => Number.isInteger(stats.network[k])) && Number.isInteger(stats.block_io.read_bytes), '... network and block I/O');

  const bad = await envFlat(srv, 'docker_commit', { machine: name, image_tag: 'NoTag' });
  t.ok(bad.isError && /image_tag must be 'repo:tag', got 'NoTag'/.test(errorText(bad)), 'docker_commit needs repo:tag', errorText(bad));
  // the images sandboxes start from are not any machine's to replace: every
  // later sandbox, of every session and credential, would start from it
  const baseBefore = (await docker(['image', 'inspect', '--format', '{{.Id}}', 'sandgate/base:1'])).trim();
  for (const [tool, tagged] of [['docker_commit', 'sandgate/base:1'], ['docker_commit', 'sandgate/mine:2'], ['docker_build', 'sandgate/base:1'],
    ['docker_commit', 'docker.io/sandgate/base:1'], ['docker_build', 'index.docker.io/sandgate/base:1']]) {
    const build = tool === 'docker_build' ? { context_dir: '/workspace', dockerfile: '/workspace/Dockerfile' } : {};
    const r = await envFlat(srv, tool, { machine: name, image_tag: tagged, ...build });
    t.ok(r.isError && new RegExp(`image_tag '${tagged}' is (the image of \\[docker\\] template\\.base|in sandgate's own repository \\(sandgate/\\)): new sandboxes and machines start from it`).test(errorText(r)),
      `${tool} to ${tagged} is refused, naming why`, errorText(r));
  }
  t.is((await docker(['image', 'inspect', '--format', '{{.Id}}', 'sandgate/base:1'])).trim(), baseBefore, 'the base image is untouched');
  const tag = `sgt-commit-${PID}:snap`;
  trackImage(tag);
  const progress = [];
  const res = await srv.client.callTool({ name: 'sandbox_env', arguments: { action: 'docker_commit', machine: name, image_tag: tag } },
    undefined, { timeout: 300000, onprogress: (p) => progress.push(p) });
  const com = resultData(res);
  t.hasFields(com, { status: 'committed', image_tag: tag }, 'docker_commit', com);
  t.ok(progress.length >= 1, 'it sent progress notifications', progress);
  const id = (await docker(['image', 'inspect', '--format', '{{.Id}}', tag])).trim();
  t.is(com.image_id, id.replace('sha256:', '').slice(0, 12), 'the image exists with that id');
  const user = uniq('t4611u');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: user, image: tag })).status, 'running', 'a machine runs the committed image');
  t.is((await srv.tool('sandbox_shell_exec', { machine: user, command: 'cat /opt/added.txt; test -e /etc/issue; echo $?' })).output,
    'new\n1\n', '... with the committed changes');
  t.ok(resultData(await envFlat(srv, 'docker_images')).images.some((i) => i.tag === tag), 'docker_images lists it');
  for (const m of [name, user]) await envFlat(srv, 'docker_remove', { machine: m });
  await srv.close();
}, { timeout: 240 });
