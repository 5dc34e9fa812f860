// A 60 MB write_file on Docker peaks under 1.5 times the content in the
// server's RSS above idle (one whole copy), on both paths: through the container's runner
// (the content sent in frames straight from the decoded argument) and
// through the archive API (docker.runner = false: the tar's header and tail
// sent around the content, never a tar built in memory).  The decoded
// argument is the one whole copy: the message's pages go as it is decoded,
// also along a run without escapes (core/protocol/bulk.c, t4037).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { t, preflight, sdkClient } from '../lib/sg.mjs';

const MB = 1000 * 1000;
const kb = (pid, field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const sha = (s) => createHash('sha256').update(s).digest('hex');

t.run(async () => {
  await preflight();
  // plain text, few escapes: the decoding is t4037's; this is the backend's copy
  const content = '0123456789abcdef'.repeat(Math.ceil(60 * MB / 16));
  const bytes = content.length;
  for (const runner of ['true', 'false']) {
    const srv = await sdkClient(['--set', 'sandbox.default_backend=docker', '--set', `docker.runner=${runner}`]);
    const pid = srv.pid;
    await srv.tool('run_command', { command: 'true' }); // the sandbox (and its runner) exist before the measure
    await srv.tool('write_file', { path: '/workspace/warm.txt', content: 'x' });
    const idle = kb(pid, 'VmRSS');
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); // peak RSS := current RSS
    const t0 = Date.now();
    const w = await srv.tool('write_file', { path: '/workspace/big.txt', content }, { timeout: 120000 });
    const peak = kb(pid, 'VmHWM');
    t.is(w.bytes_written, bytes, `runner=${runner}: write_file of ${bytes} bytes (${Date.now() - t0} ms)`);
    const ratio = ((peak - idle) * 1024) / bytes;
    const rss = `runner=${runner}: peak RSS ${Math.round((peak - idle) / 1024)} MiB above idle, ${ratio.toFixed(2)} times the content`;
    if (process.env.ASAN_OPTIONS) {
      // AddressSanitizer's quarantine and shadow memory: its figure, not sandgate's
      t.diag(`${rss} under AddressSanitizer: not measured against the content`);
    } else {
      // one whole copy (the decoded argument) and change; a second is 2
      t.cmp(ratio, '<', 1.5, `${rss}: under 1.5 (one copy, never two)`);
    }
    const sum = await srv.tool('run_command', { command: 'sha256sum < /workspace/big.txt; stat -c %s /workspace/big.txt' });
    t.is(sum.stdout, `${sha(content)}  -\n${bytes}\n`, `runner=${runner}: the file in the sandbox has the same sha256 and size`);
    await srv.close();
  }
}, { timeout: 300 });
