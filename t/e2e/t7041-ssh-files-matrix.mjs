// Every file tool on SSH (sshd with SFTP) with the runner and with
// [ssh] runner = false: the body of t/lib/filematrix.mjs (0, 1 byte and
// 1 MiB of every byte value under a name with a newline, quotes, a leading
// dash and UTF-8; list_files; mode 750 across write and patch; a reader loop
// during writes sees only whole versions).  t7040 does the same without SFTP.
import { t, preflight, sdkClient } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';
import { fileMatrix } from '../lib/filematrix.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  for (const runner of ['true', 'false']) {
    const how = runner === 'true' ? 'ssh runner' : 'ssh sftp';
    const srv = await sdkClient([...sshArgs(s, { 'ssh.runner': runner }), '--set', 'server.max_result_bytes=8388608'], sshEnv());
    const sb = (await srv.call('create_sandbox', { backend: 'ssh' })).structuredContent;
    await fileMatrix(srv, sb.sandbox_id, sb.workspace, how);
    await srv.close();
  }
}, { timeout: 300 });
