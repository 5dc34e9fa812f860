// write_file, read_file, list_files: round trips (UTF-8 and base64), parents
// created, overwrite, empty files, listings, and errors naming the path.
import { createHash } from 'node:crypto';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();

  const w = await srv.tool('write_file', { path: '/workspace/a.txt', content: 'hello\nworld\n' });
  t.hasFields(w, { success: true, path: '/workspace/a.txt', bytes_written: 12 }, 'write_file: success, path, bytes_written');
  const r = await srv.tool('read_file', { path: '/workspace/a.txt' });
  t.hasFields(r, { path: '/workspace/a.txt', content: 'hello\nworld\n', encoding: 'utf-8', size: 12 }, 'read_file: content, encoding utf-8, size');
  const cat = await srv.tool('run_command', { command: 'cat /workspace/a.txt' });
  t.is(cat.stdout, 'hello\nworld\n', 'the file is really in the sandbox');

  const uni = 'héllo ✓ 😀\n';
  const wu = await srv.tool('write_file', { path: '/workspace/uni.txt', content: uni });
  t.is(wu.bytes_written, Buffer.byteLength(uni), 'bytes_written counts UTF-8 bytes');
  const ru = await srv.tool('read_file', { path: '/workspace/uni.txt' });
  t.is(ru.content, uni, 'UTF-8 text round trip');
  t.is(ru.size, Buffer.byteLength(uni), 'size in bytes');

  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const wb = await srv.tool('write_file', { path: '/workspace/bin/all.bin', content: bytes.toString('base64'), encoding: 'base64' });
  t.is(wb.bytes_written, 256, 'base64 write: 256 bytes written (parent directory created)');
  const rb = await srv.tool('read_file', { path: '/workspace/bin/all.bin', encoding: 'base64' });
  t.is(rb.encoding, 'base64', 'base64 read: encoding base64');
  t.ok(Buffer.from(rb.content ?? '', 'base64').equals(bytes), 'base64 round trip of all 256 byte values');
  const rd = await srv.tool('read_file', { path: '/workspace/bin/all.bin' });
  t.is(rd.encoding, 'base64', 'non-UTF-8 content read as utf-8 comes back as base64');
  t.ok(Buffer.from(rd.content ?? '', 'base64').equals(bytes), '... with the exact bytes');
  const sum = await srv.tool('run_command', { command: 'sha256sum < /workspace/bin/all.bin' });
  t.is(sum.stdout.split(' ')[0], createHash('sha256').update(bytes).digest('hex'), 'the binary file is exact in the sandbox (sha256)');

  await srv.tool('write_file', { path: '/workspace/a.txt', content: 'short' });
  const ro = await srv.tool('read_file', { path: '/workspace/a.txt' });
  t.is(ro.content, 'short', 'overwrite replaces the whole file');

  const we = await srv.tool('write_file', { path: '/workspace/empty', content: '' });
  t.is(we.bytes_written, 0, 'an empty file: 0 bytes written');
  const re = await srv.tool('read_file', { path: '/workspace/empty' });
  t.hasFields(re, { content: '', size: 0 }, 'an empty file reads back empty');

  await srv.tool('write_file', { path: '/workspace/sub/deep/x.txt', content: 'x' });
  const l = await srv.tool('list_files', { path: '/workspace' });
  t.is(l.path, '/workspace', 'list_files: path');
  const byName = Object.fromEntries((l.files ?? []).map((f) => [f.name, f]));
  t.hasFields(byName['a.txt'] ?? {}, { name: 'a.txt', path: '/workspace/a.txt', type: 'file', size: 5 }, 'list_files: a.txt is a file of 5 bytes');
  t.hasFields(byName.sub ?? {}, { name: 'sub', path: '/workspace/sub', type: 'dir' }, 'list_files: sub is a dir');
  t.hasFields(byName.bin ?? {}, { type: 'dir' }, 'list_files: bin is a dir');
  t.ok(!byName['.'] && !byName['..'], 'list_files: no . or .. entries');
  const ld = await srv.tool('list_files', { path: '/workspace/sub/deep' });
  t.deepEqual((ld.files ?? []).map((f) => f.name), ['x.txt'], 'list_files of a nested directory');
  await srv.tool('run_command', { command: 'ln -sf /etc/hostname /workspace/link' });
  const ll = await srv.tool('list_files', {});
  t.is((ll.files ?? []).find((f) => f.name === 'link')?.type, 'symlink', 'list_files: a symlink is reported as symlink');

  const nf = await srv.call('read_file', { path: '/workspace/no-such-file' });
  t.ok(nf.isError, 'read_file of a missing file: isError');
  t.like(errorText(nf), /no-such-file/, 'the error names the path', { text: errorText(nf) });
  const dir = await srv.call('read_file', { path: '/workspace/sub' });
  t.ok(dir.isError, 'read_file of a directory: isError');
  const nl = await srv.call('list_files', { path: '/workspace/no-such-dir' });
  t.ok(nl.isError, 'list_files of a missing directory: isError');
  t.like(errorText(nl), /no-such-dir/, 'the error names the path', { text: errorText(nl) });
  const bad64 = await srv.call('write_file', { path: '/workspace/b', content: '***not base64***', encoding: 'base64' });
  t.ok(bad64.isError, 'write_file with invalid base64: isError');
  t.like(errorText(bad64), /base64|content/, 'the error names base64 or content', { text: errorText(bad64) });

  await srv.close();
}, { timeout: 150 });
