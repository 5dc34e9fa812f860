// An SSH host whose sshd has no `sftp` subsystem (minimal images, some
// appliances): every file tool works, with the runner up through the runner
// (no further channel for the file calls once it runs; its upload itself
// goes through exec with stdin), and with [ssh] runner = false through exec
// with stdin (a channel per call).  Both ways: exact bytes for 0, 1 byte and
// 1 MiB of every byte value, a name with spaces, quotes, a newline, a
// leading dash and non-ASCII letters; list_files; mode 750 kept across
// sandbox_file_write and sandbox_file_patch; no temporary file left; the
// sandbox directory still confines; the log names the refused subsystem.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';

const MiB = 1024 * 1024;
const sha = (b) => createHash('sha256').update(b).digest('hex');
const mode = (p) => (fs.statSync(p).mode & 0o7777).toString(8);

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd({ noSftp: true });
  const sessions = () => (s.log().match(/Starting session: command/g) ?? []).length;
  const all = Buffer.alloc(MiB); // every byte value
  for (let i = 0; i < all.length; i++) all[i] = (i * 2654435761 + (i >>> 8)) & 0xff;

  for (const runner of ['true', 'false']) {
    const how = runner === 'true' ? 'runner' : 'exec';
    const srv = await sdkClient([...sshArgs(s, { 'ssh.runner': runner, 'log.level': 'info' }),
      '--set', 'server.max_result_bytes=8388608'], sshEnv());
    const sb = (await srv.call('create_sandbox', { backend: 'ssh' })).structuredContent;
    const id = sb.sandbox_id, ws = sb.workspace;
    // the runner (when on) starts with the first command: it is up before the file calls
    t.is((await srv.tool('run_command', { sandbox_id: id, command: 'echo up' })).stdout, 'up\n', `${how}: a command runs`);

    const dir = 'ü dir';
    const name = `-naïve 'q' "x"\nline ✓.bin`;
    const rel = `${dir}/${name}`;
    const w = await srv.tool('write_file', { sandbox_id: id, path: rel, content: all.toString('base64'), encoding: 'base64' }, { timeout: 120000 });
    t.is(w.bytes_written, all.length, `${how}: write_file of 1 MiB, every byte value, to a hard name (parents made)`);
    t.is(sha(fs.readFileSync(path.join(ws, dir, name))), sha(all), `${how}: ... exact on the host (sha256)`);
    const r = await srv.tool('read_file', { sandbox_id: id, path: rel, encoding: 'base64' }, { timeout: 120000 });
    t.is(sha(Buffer.from(r.content ?? '', 'base64')), sha(all), `${how}: read_file gives the same bytes`);

    for (const [n, content] of [['empty', ''], ['one', 'x'], ['  lead', 'y']]) {
      t.is((await srv.tool('write_file', { sandbox_id: id, path: `${dir}/${n}`, content })).bytes_written, content.length, `${how}: a ${content.length}-byte write`);
      t.is(fs.readFileSync(path.join(ws, dir, n), 'utf8'), content, `${how}: ... exact on the host`);
      t.hasFields(await srv.tool('read_file', { sandbox_id: id, path: `${dir}/${n}` }), { content, size: content.length }, `${how}: ... and read back`);
    }
    const l = await srv.tool('list_files', { sandbox_id: id, path: dir });
    t.deepEqual((l.files ?? []).map((f) => [f.name, f.size]), [['  lead', 1], [name, MiB], ['empty', 0], ['one', 1]],
      `${how}: list_files: the names exactly (leading blanks too), sorted, with sizes`);

    const kept = path.join(ws, dir, 'kept');
    fs.writeFileSync(kept, 'old\n');
    fs.chmodSync(kept, 0o750);
    t.is((await srv.tool('sandbox_file_write', { machine: id, path: kept, content: 'naïve\n' })).status, 'ok', `${how}: sandbox_file_write over a file of mode 750`);
    t.is(`${mode(kept)} ${fs.readFileSync(kept, 'utf8')}`, '750 naïve\n', `${how}: ... mode kept, content exact`);
    t.is((await srv.tool('sandbox_file_patch', { machine: id, mode: 'replace', path: kept, old_string: 'naïve', new_string: 'patched' })).status, 'ok',
      `${how}: sandbox_file_patch`);
    t.is(`${mode(kept)} ${fs.readFileSync(kept, 'utf8')}`, '750 patched\n', `${how}: ... mode kept, content exact`);
    t.is((await srv.tool('sandbox_file_read', { machine: id, path: kept })).output, '1|patched\n', `${how}: sandbox_file_read`);
    const found = await srv.tool('sandbox_file_search', { machine: id, pattern: 'patched', path: path.join(ws, dir) });
    t.like(JSON.stringify(found), /kept/, `${how}: sandbox_file_search finds it`);

    const out = await srv.call('read_file', { sandbox_id: id, path: '/etc/hostname' });
    t.ok(out.isError && /outside sandbox directory/.test(errorText(out)), `${how}: a path outside the sandbox directory is still refused`, errorText(out));
    // a write larger than the channel's window onto a directory: the script
    // refuses before reading its stdin, and its reason is the answer
    fs.mkdirSync(path.join(ws, dir, 'adir'));
    const big = await srv.call('write_file', { sandbox_id: id, path: `${dir}/adir`, content: 'z'.repeat(4 << 20) }, { timeout: 120000 });
    t.like(errorText(big), /is a directory/i, `${how}: a 4 MiB write onto a directory says it is one`, errorText(big));
    t.deepEqual(fs.readdirSync(path.join(ws, dir)).filter((f) => f.startsWith('.')), [], `${how}: no temporary file left`);

    // channels: through the runner the file calls open none, through exec one each
    const before = sessions();
    await srv.tool('write_file', { sandbox_id: id, path: 'again', content: 'again' });
    await srv.tool('read_file', { sandbox_id: id, path: 'again' });
    await srv.tool('list_files', { sandbox_id: id, path: '.' });
    const opened = sessions() - before;
    if (runner === 'true') t.is(opened, 0, 'runner: write, read and list open no channel');
    else t.cmp(opened, '>=', 3, `exec: write, read and list open a channel each (${opened})`);

    await srv.close();
    const log = fs.readFileSync(srv.stderrPath, 'utf8');
    t.is(log.split('\n').filter((x) => /has no SFTP subsystem \(no `Subsystem sftp`/.test(x)).length, 1,
      `${how}: the log names the refused subsystem, once`);
    t.unlike(log, /channels refused/, `${how}: never blamed on refused channels`);
  }
}, { timeout: 240 });
