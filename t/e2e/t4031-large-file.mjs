// A 4 MiB write_file works over stdio and read_file returns it exactly
// (asked for with limit: the default page is bounded, doc/results.md).
import { createHash } from 'node:crypto';
import { t, preflight, sdkClient, checkResultShape, resultData } from '../lib/sg.mjs';

const MiB = 1024 * 1024;

function text(n) {
  // printable, line-structured, not compressible to nothing, deterministic
  let s = '';
  let i = 0;
  while (s.length < n) s += `${String(i++).padStart(8, '0')} the quick brown fox jumps over the lazy dog ✓\n`;
  return Buffer.from(s).subarray(0, n).toString('utf8').replace(/\uFFFD+$/, '');
}

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const content = text(4 * MiB);
  const bytes = Buffer.byteLength(content);
  t.cmp(bytes, '>=', 4 * MiB - 4, `the payload is 4 MiB of UTF-8 (${bytes} bytes)`);
  const t0 = Date.now();
  const w = await srv.tool('write_file', { path: '/workspace/big.txt', content }, { timeout: 120000 });
  t.is(w.bytes_written, bytes, `write_file of 4 MiB: bytes_written (${Date.now() - t0} ms)`);
  const sum = await srv.tool('run_command', { command: 'sha256sum /workspace/big.txt; stat -c %s /workspace/big.txt' });
  const [hash, size] = [sum.stdout.split(' ')[0], sum.stdout.trim().split('\n')[1]];
  t.is(hash, createHash('sha256').update(content).digest('hex'), 'the file in the sandbox has the same sha256');
  t.is(Number(size), bytes, 'the file in the sandbox has the same size');
  const t1 = Date.now();
  // the content is written into the reply where it stands, not copied
  // (core/protocol/dump.h, struct sg_bytes): in the text block too
  const rr = await srv.call('read_file', { path: '/workspace/big.txt', limit: bytes }, { timeout: 120000 });
  checkResultShape(rr, 'read_file of 4 MiB');
  const r = resultData(rr);
  t.is(r.size, bytes, `read_file of 4 MiB: size (${Date.now() - t1} ms)`);
  t.is(r.encoding, 'utf-8', 'read_file: utf-8');
  t.ok(r.content === content, 'read_file returns the 4 MiB exactly', r.content === content ? undefined
    : { gotLength: r.content?.length, expectedLength: content.length });

  // binary: the write carries 4 MiB as base64; the read back is 3 MiB, because a
  // result holds its content twice (text and structuredContent) and the SDK
  // client's line buffer is 10 MiB by default
  const bin = Buffer.alloc(4 * MiB);
  for (let i = 0; i < bin.length; i++) bin[i] = (i * 2654435761) >>> 24;
  const wb = await srv.tool('write_file', { path: '/workspace/big.bin', content: bin.toString('base64'), encoding: 'base64' }, { timeout: 120000 });
  t.is(wb.bytes_written, bin.length, 'a 4 MiB binary write (base64): bytes_written');
  const sb = await srv.tool('run_command', { command: 'sha256sum < /workspace/big.bin' });
  t.is(sb.stdout.split(' ')[0], createHash('sha256').update(bin).digest('hex'), 'the 4 MiB binary file is exact in the sandbox');
  const part = bin.subarray(0, 3 * MiB);
  await srv.tool('run_command', { command: 'head -c 3145728 /workspace/big.bin > /workspace/part.bin' });
  const rbr = await srv.call('read_file', { path: '/workspace/part.bin', encoding: 'base64', limit: 3 * MiB }, { timeout: 120000 });
  checkResultShape(rbr, 'read_file of 3 MiB (base64)');
  const rb = resultData(rbr);
  t.is(rb.encoding, 'base64', 'read_file of 3 MiB: base64');
  t.ok(Buffer.from(rb.content ?? '', 'base64').equals(part), 'a 3 MiB binary file reads back exactly (base64)');
  // a large base64 content is decoded where it lies: one that is not
  // base64 past its first megabytes is refused whole, the file untouched
  const bad = bin.toString('base64');
  const badRes = await srv.call('write_file', { path: '/workspace/big.bin', encoding: 'base64',
    content: `${bad.slice(0, 3 * MiB)}!${bad.slice(3 * MiB + 1)}` }, { timeout: 120000 });
  t.ok(badRes.isError && /'content' is not valid base64/.test(badRes.content?.[0]?.text ?? ''),
    'a 5 MiB content that is not base64 near its end: refused, naming the argument', badRes.content);
  const sb2 = await srv.tool('run_command', { command: 'sha256sum < /workspace/big.bin' });
  t.is(sb2.stdout.split(' ')[0], createHash('sha256').update(bin).digest('hex'), '... and the file is as it was');
  await srv.client.ping();
  t.pass('the server is still responsive after the large transfers');
  await srv.close();
}, { timeout: 180 });
