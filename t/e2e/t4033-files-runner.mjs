// The file tools on Docker go through the container's runner (capability
// "files") when it is up: docker_runner's file_ops counts them, and with
// `make check-fallback` ([docker] runner = false) the same bytes go the
// archive way with file_ops 0.  Both ways: exact bytes (every byte value,
// several runner chunks, 0 bytes), names in UTF-8 with spaces, quotes and a
// leading dash, a kept mode, and a file past [docker] file_cap refused with
// a message that names the sizes.
import { createHash } from 'node:crypto';
import { t, preflight, sdkClient, resultData, errorText } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat } from '../lib/docker.mjs';

const MiB = 1024 * 1024;
const CAP = 4 * MiB;
const sha = (b) => createHash('sha256').update(b).digest('hex');

t.run(async () => {
  await preflight();
  const runnerOff = process.env.SANDGATE_DOCKER_RUNNER === 'false';
  // results whole: the file transport's exact bytes are the point, not the cut (t4035)
  const srv = await sdkClient(dockerArgs({ 'docker.file_cap': String(CAP), 'server.max_result_bytes': String(8 * MiB) }), {},
    { name: 'sandgate' });
  const m = uniq('t4033');
  t.is(resultData(await envFlat(srv, 'docker_run', { name: m })).status, 'running', 'docker_run');
  const ops = async () => resultData(await envFlat(srv, 'docker_runner', { machine: m }));
  const sh = async (command) => (await srv.tool('run_command', { sandbox_id: m, command })).stdout;
  const before = (await ops()).file_ops ?? 0;

  const dir = '/workspace/ü dir';
  const name = `${dir}/-naïve 'q' "x" ✓.bin`;
  const all = Buffer.alloc(3 * MiB); // every byte value, past one runner chunk
  for (let i = 0; i < all.length; i++) all[i] = (i * 2654435761 + (i >>> 8)) & 0xff;
  const w = await srv.tool('write_file', { sandbox_id: m, path: name, content: all.toString('base64'), encoding: 'base64' }, { timeout: 120000 });
  t.is(w.bytes_written, all.length, 'write_file: 3 MiB binary to a UTF-8 name (parents made)');
  t.is((await sh(`cat "${dir}"/-na* | sha256sum`)).split(' ')[0], sha(all), '... exact in the container (sha256)');
  const r = await srv.tool('read_file', { sandbox_id: m, path: name, encoding: 'base64' }, { timeout: 120000 });
  t.ok(Buffer.from(r.content ?? '', 'base64').equals(all), 'read_file: the 3 MiB come back exactly');

  const l = await srv.tool('list_files', { sandbox_id: m, path: dir });
  t.deepEqual((l.files ?? []).map((f) => [f.name, f.size]), [[name.slice(dir.length + 1), all.length]],
    'list_files: the UTF-8 name exactly, with its size');

  const e = await srv.tool('write_file', { sandbox_id: m, path: `${dir}/empty`, content: '' });
  t.is(e.bytes_written, 0, 'a 0-byte write');
  t.is(await sh(`stat -c %s "${dir}/empty"`), '0\n', '... is a 0-byte file');
  t.hasFields(await srv.tool('read_file', { sandbox_id: m, path: `${dir}/empty` }), { content: '', size: 0 }, '... and reads back empty');

  await sh(`printf old > "${dir}/kept"; chmod 750 "${dir}/kept"`);
  const sw = await srv.tool('sandbox_file_write', { machine: m, path: `${dir}/kept`, content: 'naïve\n' });
  t.is(sw.status, 'ok', 'sandbox_file_write over a file of mode 750');
  t.is(await sh(`stat -c %a "${dir}/kept"; cat "${dir}/kept"`), '750\nnaïve\n', '... keeps the mode, new content exact');
  t.is((await srv.tool('sandbox_file_read', { machine: m, path: `${dir}/kept` })).output, '1|naïve\n', 'sandbox_file_read of it');
  t.is(await sh(`ls -A "${dir}" | grep -c '^\\.' || true`), '0\n', 'no temporary file left beside the targets');

  const big = await srv.call('write_file', { sandbox_id: m, path: '/workspace/big', content: Buffer.alloc(CAP + 1, 0x61).toString('base64'), encoding: 'base64' }, { timeout: 120000 });
  t.ok(big.isError && /4194305 bytes are more than .*4194304.*file_cap/.test(errorText(big)), 'a write past file_cap: refused, naming the sizes and file_cap', errorText(big));
  t.is(await sh('test -e /workspace/big && echo there || echo absent'), 'absent\n', '... and nothing written');
  await sh(`head -c ${CAP + 1} /dev/zero > /workspace/big`);
  if (runnerOff) {
    const rb = await srv.call('read_file', { sandbox_id: m, path: '/workspace/big' });
    t.ok(rb.isError && /\/workspace\/big.*4194305 bytes.*4194304 allowed/.test(errorText(rb)), 'a read past file_cap: refused, naming the path and sizes', errorText(rb));
  } else {
    // The runner reads a part: a file past file_cap is read by pages, each at most file_cap.
    const p1 = await srv.tool('read_file', { sandbox_id: m, path: '/workspace/big', limit: 1000 });
    // NUL bytes are not text: they come back as base64, said so.
    t.hasFields(p1, { size: CAP + 1, encoding: 'base64', content: Buffer.alloc(1000).toString('base64') }, 'a file past file_cap: its first page of 1000 bytes, and its size');
    t.hasFields(p1.cut?.content?.rest?.arguments ?? {}, { path: '/workspace/big', offset: 1000, limit: 1000 }, '... and the call for the next page');
    const last = await srv.tool('read_file', { sandbox_id: m, path: '/workspace/big', offset: CAP - 2, limit: 1000 });
    t.hasFields(last, { size: CAP + 1, offset: CAP - 2, content: 'AAAA' }, 'the last page: the 3 bytes from offset file_cap - 2');
    t.is(last.cut, undefined, '... and nothing cut after it');
    // /proc files say size 0: a page from an offset is still the bytes from there.
    const ver = await sh('cat /proc/version');
    const pv = await srv.tool('read_file', { sandbox_id: m, path: '/proc/version', offset: 5, limit: 10 });
    t.hasFields(pv, { offset: 5, content: ver.slice(5, 15) }, 'a page of /proc/version from offset 5: those 10 bytes');
  }

  const after = await ops();
  if (runnerOff) {
    t.hasFields(after, { runner: 'off', file_ops: 0 }, 'the runner is off: the archive way, no runner file operation');
  } else {
    t.is(after.runner, 'active', 'the runner is active');
    // one WRITE per write, six READs of 512 KiB for the 3 MiB, one LIST, ...
    t.cmp(after.file_ops - before, '>=', 10, `the file tools went through the runner (${after.file_ops - before} file operations)`);
  }
  await envFlat(srv, 'docker_remove', { machine: m });
  await srv.close();
}, { timeout: 300 });
