// SSH sandboxes without a jail ([ssh] isolation = none), in both runner
// modes: a write whose path has ../ past a directory it makes
// (new/../../x) is refused, and so is one through a dangling link the same
// write would bring to life (new/../q/L/../../x, L -> ../new): they were
// checked as the sandbox directory and written one level above it.  A
// path too long for the SFTP check is refused rather than checked cut short.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, resultData } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  for (const runner of ['true', 'false']) {
    const srv = await sdkClient(sshArgs(s, { 'ssh.runner': runner, 'ssh.isolation': 'none' }), sshEnv());
    const d = resultData(await srv.call('create_sandbox', {}));
    const up = path.dirname(d.workspace);
    const esc = `climb-${process.pid}-${runner}`;
    fs.mkdirSync(path.join(d.workspace, 'q'));
    fs.symlinkSync('../nl', path.join(d.workspace, 'q', 'L'));
    for (const [p, what] of [[`nn/../../${esc}-a`, 'past a directory it makes'],
      [`nl/../q/L/../../${esc}-b`, 'through a dangling link it would bring to life']]) {
      const r = await srv.call('write_file', { sandbox_id: d.sandbox_id, path: p, content: 'PWNED\n' });
      t.ok(r.isError && /\.\. past a part that is not there yet/.test(errorText(r)),
        `runner=${runner}: a write of ../ ${what} is refused`, { text: errorText(r) });
      t.deepEqual(fs.readdirSync(up).filter((n) => n.startsWith(esc)), [], `runner=${runner}: ... nothing is written above the directory`);
    }
    t.deepEqual(fs.readdirSync(d.workspace).sort(), ['q'], `runner=${runner}: ... nor a directory made in it`);
    fs.writeFileSync(path.join(up, `${esc}-c`), 'SECRET\n');
    const long = `${'./'.repeat(520)}${'../'.repeat(20)}${path.join(up, `${esc}-c`).slice(1)}`;
    const r = await srv.call('read_file', { sandbox_id: d.sandbox_id, path: long });
    t.ok(r.isError && !JSON.stringify(r).includes('SECRET'), `runner=${runner}: a read of a long path leading out is refused`, { text: errorText(r).slice(-160) });
    fs.rmSync(path.join(up, `${esc}-c`));
    await srv.tool('kill_sandbox', { sandbox_id: d.sandbox_id });
    await srv.close();
  }
}, { timeout: 60 });
