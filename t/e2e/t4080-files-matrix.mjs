// Every file tool on Docker with the runner and with [docker] runner = false
// (the archive way): the body of t/lib/filematrix.mjs (0, 1 byte and 1 MiB of
// every byte value under a name with a newline, quotes, a leading dash and
// UTF-8; list_files; mode 750 across write and patch; a reader loop during
// writes sees only whole versions).
import { t, preflight, sdkClient, resultData } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat } from '../lib/docker.mjs';
import { fileMatrix } from '../lib/filematrix.mjs';

t.run(async () => {
  await preflight();
  for (const runner of ['true', 'false']) {
    const how = runner === 'true' ? 'docker runner' : 'docker archive';
    const srv = await sdkClient(dockerArgs({ 'docker.runner': runner, 'server.max_result_bytes': String(8 * 1024 * 1024) }), {}, { name: 'sandgate' });
    const m = uniq(`t4080-${runner}`);
    t.is(resultData(await envFlat(srv, 'docker_run', { name: m })).status, 'running', `${how}: docker_run`);
    // the archive way takes seconds a write on a loaded machine: fewer of them
    await fileMatrix(srv, m, '/workspace', how, runner === 'true' ? 10 : 4);
    const ops = resultData(await envFlat(srv, 'docker_runner', { machine: m }));
    if (runner === 'true') t.cmp(ops.file_ops ?? 0, '>=', 20, `${how}: the file tools went through the runner (${ops.file_ops} file operations)`);
    else t.is(ops.file_ops ?? 0, 0, `${how}: no runner file operation`);
    await envFlat(srv, 'docker_remove', { machine: m });
    await srv.close();
  }
}, { timeout: 300 });
