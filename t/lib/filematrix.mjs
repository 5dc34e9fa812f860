// The file-tool body t4080 (Docker) and t7041 (SSH) run on each backend,
// with the runner and with it off: what t4033, t4004 and t7001 leave out.
// Exact bytes (sha256) for 0 and 1 byte and 1 MiB of every byte value under
// a name with spaces, quotes, a newline, a leading dash and non-ASCII
// letters; list_files gives that name exactly; mode 750 kept across
// sandbox_file_write and sandbox_file_patch; a reader loop in the sandbox
// during write_file calls only ever sees one whole version or the other.
import { createHash } from 'node:crypto';
import { t } from './sg.mjs';

const MiB = 1024 * 1024;
export const sha = (b) => createHash('sha256').update(b).digest('hex');

/**
 * srv: the client; where: { sandbox_id } for the cloud tools; ws: an
 * absolute directory in the sandbox to work in; how: the label of the run;
 * writes: how many writes the reader loop sees (the archive way is slow).
 */
export async function fileMatrix(srv, id, ws, how, writes = 10) {
  const t0 = Date.now();
  const lap = (what) => t.diag(`${how}: ${what} at ${Date.now() - t0} ms`);
  const sh = async (command, timeout = 60) => (await srv.tool('run_command', { sandbox_id: id, command, timeout }, { timeout: timeout * 1000 + 30000 })).stdout;
  const dir = `${ws}/ü dir`;
  const name = `-naïve 'q' "x"\nline ✓`;
  const all = Buffer.alloc(MiB);
  for (let i = 0; i < all.length; i++) all[i] = (i * 2654435761 + (i >>> 8)) & 0xff;

  for (const [n, buf] of [['0', Buffer.alloc(0)], ['1', Buffer.from([0xff])], ['1M', all]]) {
    const p = `${dir}/${name}${n}`;
    const w = await srv.tool('write_file', { sandbox_id: id, path: p, content: buf.toString('base64'), encoding: 'base64' }, { timeout: 120000 });
    t.is(w.bytes_written, buf.length, `${how}: write_file of ${buf.length} bytes to a name with a newline`);
    const r = await srv.tool('read_file', { sandbox_id: id, path: p, encoding: 'base64' }, { timeout: 120000 });
    t.is(sha(Buffer.from(r.content ?? '', 'base64')), sha(buf), `${how}: ... read_file gives them back exactly`);
  }
  t.is((await sh(`cat "${dir}"/-na*1M | sha256sum`)).split(' ')[0], sha(all), `${how}: ... and the sandbox has them (sha256)`);
  lap('bytes');
  const l = await srv.tool('list_files', { sandbox_id: id, path: dir });
  t.deepEqual((l.files ?? []).map((f) => [f.name, f.size]), [[`${name}0`, 0], [`${name}1`, 1], [`${name}1M`, MiB]],
    `${how}: list_files: the names exactly, with sizes`);

  const kept = `${dir}/kept 'x'.txt`;
  await sh(`printf 'one\\n' > "${dir}/kept 'x'.txt" && chmod 750 "${dir}/kept 'x'.txt"`);
  t.is((await srv.tool('sandbox_file_write', { machine: id, path: kept, content: 'two\n' })).status, 'ok', `${how}: sandbox_file_write over mode 750`);
  t.is((await srv.tool('sandbox_file_patch', { machine: id, mode: 'replace', path: kept, old_string: 'two', new_string: 'three' })).status, 'ok',
    `${how}: sandbox_file_patch`);
  t.is(await sh(`stat -c %a "${dir}/kept 'x'.txt"; cat "${dir}/kept 'x'.txt"`), '750\nthree\n', `${how}: mode 750 kept across write and patch, content exact`);

  lap('modes');
  // a reader loop during writes: every read is one whole version
  const A = Buffer.alloc(64 * 1024, 0x61), B = Buffer.alloc(64 * 1024, 0x62);
  await srv.tool('write_file', { sandbox_id: id, path: `${ws}/flip`, content: A.toString('base64'), encoding: 'base64' });
  const reader = sh(`cd "${ws}" && i=0; while [ ! -e stop ] && [ $i -lt 3000 ]; do { sha256sum < flip || echo missing; } 2>/dev/null; sleep 0.01; i=$((i+1)); done | sort | uniq -c`, 120);
  for (let i = 0; i < writes; i++) {
    const v = i % 2 ? A : B;
    await srv.tool('write_file', { sandbox_id: id, path: `${ws}/flip`, content: v.toString('base64'), encoding: 'base64' });
  }
  await srv.tool('write_file', { sandbox_id: id, path: `${ws}/stop`, content: '' });
  lap('writes');
  const seen = (await reader).trim().split('\n').filter(Boolean).map((x) => x.trim().split(/\s+/)[1]);
  t.cmp(seen.length, '>=', 1, `${how}: the reader read`);
  lap('reader');
  t.deepEqual(seen.filter((h) => h !== sha(A) && h !== sha(B)), [], `${how}: a reader during ${writes} writes saw only whole versions (${seen.length} kinds)`);
  t.is(await sh(`ls -A "${dir}" | grep -c '^\\.' || true`), '0\n', `${how}: no temporary file left beside the targets`);
}
