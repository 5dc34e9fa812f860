// Fault: the runner killed (SIGKILL, from inside the sandbox) while it
// takes a large write_file (doc/faults.md; t8003 and t7008 kill it during
// run_command).  On docker (killed with `docker exec pkill` in the
// container) and ssh (its process on the loopback host): the call fails
// or had finished, the file holds the old content or the whole new one,
// never a mix, no temporary file is left, and the next calls work on a new
// runner in the same sandbox.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, docker, waitFor } from '../lib/sg.mjs';
import { backendFixture, tempNames } from '../lib/faults.mjs';

const BIG = 'N'.repeat(32 << 20);

t.run(async () => {
  await preflight();
  for (const name of ['docker', 'ssh']) {
    const fx = await backendFixture(name);
    const srv = await sdkClient(fx.args(name === 'docker' ? [] : ['--set', 'ssh.runner=true']),
      fx.env(name === 'docker' ? { SANDGATE_DOCKER_RUNNER: 'true' } : {}), { name });
    const sb = await srv.tool('create_sandbox', {});
    const sid = sb.sandbox_id;
    const ws = sb.workspace ?? fx.workspace;
    const keep = path.posix.join(ws, 'keep.txt');
    await srv.tool('write_file', { path: keep, content: 'old content' });
    const cid = name === 'docker' ? await fx.containerId(sid) : null;
    const kill = name === 'docker'
      ? () => docker(['exec', cid, 'pkill', '-KILL', '-f', 'sandgate-runner'])
      : async () => execFileSync('pkill', ['-KILL', '-f', `${fx.sshd.dir}/.*sandgate-runner`]);

    const w = srv.call('write_file', { path: keep, content: BIG });
    const began = await waitFor(async () => tempNames(await fx.list(sid, ws)).length > 0, 20000, 20);
    t.ok(began, `${name}: the upload began (its temporary file exists)`);
    await kill();
    const wr = await w;
    const now = await fx.read(sid, keep);
    if (wr.isError) {
      t.like(errorText(wr), /runner/, `${name}: runner killed during write_file: the call fails saying the runner went`, { text: errorText(wr) });
      t.is(now, 'old content', `${name}: the file keeps its old content`);
    } else {
      t.ok(now === BIG, `${name}: the write had finished before the kill: the file is whole`, { length: now?.length });
      t.ok(true, `${name}: (nothing to fail)`);
    }
    const next = await srv.call('run_command', { command: 'echo next' });
    t.is(next.structuredContent?.stdout, 'next\n', `${name}: the next call works`, { text: errorText(next) });
    t.is(next.structuredContent?.sandbox_id, sid, `${name}: ... in the same sandbox`);
    const r = await srv.call('read_file', { path: keep });
    t.ok(!r.isError && (r.structuredContent?.content === 'old content' || r.structuredContent?.content?.length === BIG.length),
      `${name}: read_file agrees`, { text: errorText(r).slice(0, 200) });
    const clean = await waitFor(async () => tempNames(await fx.list(sid, ws)).length === 0, 10000);
    t.ok(clean, `${name}: no temporary file is left`, clean ? undefined : { ls: await fx.list(sid, ws) });
    await srv.close();
    await fx.noMachineOf(srv.pid, `${name}: session end`);
  }
}, { timeout: 120 });
