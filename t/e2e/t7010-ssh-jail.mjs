// Jailed SSH sandboxes against a real sshd on this host: with [ssh]
// isolation = auto and bubblewrap there, each sandbox is a jail on the
// host with its directory at /workspace and the runner inside; tried from
// inside as an agent would, the host's /etc/shadow, the kernel's keyrings,
// inherited descriptors and other sandboxes'
// directories are out of reach and every file tool refuses ../ and links to
// them (the file tools go through the runner, never SFTP); a timed-out
// command and `sleep &` leave no process after kill_sandbox, and none after
// kill -9 of sandgate; two HTTP sessions with two tokens cannot read each
// other's files, with the runner setting on and off.  With isolation =
// none, create_sandbox says the sandboxes are not isolated (and the log,
// once), and the file tools still keep to the directory.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { t, preflight, sdkClient, errorText, tmpdir, trackSandbox, waitFor } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight } from '../ssh/sshd.mjs';
import { startHttp, connect } from '../http/lib.mjs';
import { checkKeyCalls, checkRunnerHeld } from '../lib/jailcheck.mjs';

const execFileP = promisify(execFile);
const SECRET = `private-${process.pid}-${Date.now()}`;
const MARK = `${process.pid}`;

async function hostProcs(text) {
  const { stdout } = await execFileP('ps', ['-eo', 'pid=,args=']);
  return stdout.split('\n').filter((l) => l.includes(text) && !l.includes('ps -eo')).map((l) => l.trim());
}

// The file tools pointed at p, a path to another sandbox's private file.
async function readTools(srv, sid, p) {
  const bad = [];
  const read = (name, res) => {
    const text = JSON.stringify(res.structuredContent ?? res.content ?? '');
    if (text.includes(SECRET)) bad.push(`${name} returned the secret`);
    else if (!res.isError && !/"results":\[\]|"status":"not_found"/.test(text)) bad.push(`${name} did not refuse: ${text.slice(0, 200)}`);
  };
  read('read_file', await srv.call('read_file', { path: p, sandbox_id: sid }));
  read('sandbox_file_read', await srv.call('sandbox_file_read', { path: p, machine: sid }));
  read('sandbox_file_search', await srv.call('sandbox_file_search', { pattern: 'private', path: p, machine: sid }));
  read('sandbox_file_patch', await srv.call('sandbox_file_patch', { mode: 'replace', path: p, old_string: SECRET, new_string: 'x', machine: sid }));
  const ls = await srv.call('list_files', { path: path.dirname(p), sandbox_id: sid });
  if (JSON.stringify(ls.structuredContent ?? '').includes('private.txt')) bad.push('list_files showed the other directory');
  return bad;
}

async function writeTools(srv, sid, p, otherDir) {
  const bad = [];
  const before = fs.readdirSync(otherDir).sort().join(',');
  await srv.call('write_file', { path: p, content: 'overwritten', sandbox_id: sid });
  await srv.call('sandbox_file_write', { path: p, content: 'overwritten', machine: sid });
  await srv.call('write_file', { path: `${path.dirname(p)}/planted.txt`, content: 'planted', sandbox_id: sid });
  if (fs.readFileSync(path.join(otherDir, 'private.txt'), 'utf8') !== `${SECRET}\n`) bad.push('a write changed the other file');
  if (fs.readdirSync(otherDir).sort().join(',') !== before) bad.push('a write added a file to the other directory');
  return bad;
}

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const JAIL = { 'ssh.isolation': 'auto', 'log.level': 'info' };
  const srv = await sdkClient(sshArgs(s, JAIL), sshEnv());

  // ---- jails
  const a = await srv.tool('create_sandbox', {});
  const b = await srv.tool('create_sandbox', {});
  trackSandbox(a.sandbox_id);
  trackSandbox(b.sandbox_id);
  t.hasFields(a, { backend: 'ssh', workspace: '/workspace' }, 'isolation auto with bwrap on the host: the workspace is /workspace');
  t.hasFields(a.details ?? {}, { isolation: 'bwrap', workspace: '/workspace' }, 'details: isolation bwrap', a.details);
  const aDir = a.details?.directory, bDir = b.details?.directory;
  t.like(aDir ?? '', new RegExp(`^${s.root}/sg-[0-9a-f]{12}$`), 'details: the directory on the host, under [ssh] root');
  const run = async (command, sid = a.sandbox_id, extra = {}) => srv.tool('run_command', { command, sandbox_id: sid, ...extra });
  t.is((await run('pwd')).stdout, '/workspace\n', 'commands run in /workspace');
  t.like(fs.readFileSync(srv.stderrPath, 'utf8'), /runner \/[^\n]*sandgate-runner-[0-9a-f]{16} in ssh-default-[0-9a-f]{12} on /,
    'the runner runs inside the sandbox\'s jail (its own, started in the log)');
  const sftp = () => (s.log().match(/subsystem 'sftp'/g) ?? []).length;
  const sftp0 = sftp(); // the runner's upload, once per host, may have used it
  await srv.tool('write_file', { path: 'private.txt', content: `${SECRET}\n`, sandbox_id: b.sandbox_id });
  t.is(fs.readFileSync(path.join(bDir, 'private.txt'), 'utf8'), `${SECRET}\n`, 'B\'s file is in B\'s directory on the host');
  const shadow = await run('cat /etc/shadow 2>&1; echo "rc=$?"');
  t.ok(/rc=[1-9]/.test(shadow.stdout), 'the host\'s /etc/shadow cannot be read', shadow);
  t.like((await run('touch /usr/x /x 2>&1; true')).stdout, /Read-only file system[^]*Read-only file system/, '/usr and / are read-only');
  await checkKeyCalls(t, run); // the SSH login's session keyring, the user's
  t.deepEqual((await run('ls /proc/self/fd | tr "\\n" " "')).stdout.trim().split(' '), ['0', '1', '2', '3'],
    'a command has fds 0-2 (and ls its own 3)');
  t.is((await run('env | grep -cE "^(SSH_|XDG_RUNTIME_DIR=)"; true')).stdout, '0\n', 'nothing of sshd\'s session environment');
  await checkRunnerHeld(t, run);
  const byHost = await run(`cat ${bDir}/private.txt 2>/dev/null; ls ${s.root} 2>/dev/null; echo rc=$?`);
  t.ok(!byHost.stdout.includes(SECRET) && !byHost.stdout.includes(path.basename(bDir)) && /rc=[1-9]/.test(byHost.stdout),
    'B\'s directory is not visible in A', byHost);
  await run(`ln -s ${bDir}/private.txt hostlink; ln -s / rootlink`);
  const paths = [`../${path.basename(bDir)}/private.txt`, `${bDir}/private.txt`, 'hostlink', `rootlink${bDir}/private.txt`];
  for (const p of paths) t.deepEqual(await readTools(srv, a.sandbox_id, p), [], `every file tool refuses to read ${p}`);
  for (const p of paths) t.deepEqual(await writeTools(srv, a.sandbox_id, p, bDir), [], `no file tool writes B's directory through ${p}`);
  t.is(sftp(), sftp0, 'no SFTP session was opened for the jailed sandboxes\' files (they go through the runner)');

  // ---- processes end with kill_sandbox and with sandgate
  await run(`sleep 300.${MARK} & echo started`);
  await run(`sleep 301.${MARK}`, a.sandbox_id, { timeout: 1 });
  await srv.tool('sandbox_shell_exec', { command: `sleep 303.${MARK} &`, machine: a.sandbox_id });
  t.cmp((await hostProcs(`.${MARK}`)).length, '>=', 2, 'processes of A run on the host (in its jail)');
  await srv.tool('kill_sandbox', { sandbox_id: a.sandbox_id });
  t.ok(await waitFor(async () => (await hostProcs(`.${MARK}`)).length === 0, 5000),
    'after kill_sandbox no process of A is left: the background job, the timed-out command, the shell\'s', await hostProcs(`.${MARK}`));
  t.ok(!fs.existsSync(aDir), 'kill_sandbox removed A\'s directory');
  await run(`sleep 302.${MARK} & echo started`, b.sandbox_id);
  srv.proc.killNow('SIGKILL');
  t.ok(await waitFor(async () => (await hostProcs(`.${MARK}`)).length === 0, 10000),
    'after kill -9 of sandgate (its connection ends) no process of B is left', await hostProcs(`.${MARK}`));

  // ---- two HTTP sessions on one host, runner on and off
  const tokens = path.join(tmpdir(), 'tokens');
  const TA = `token-a-${'a'.repeat(40)}`, TB = `token-b-${'b'.repeat(40)}`;
  fs.writeFileSync(tokens, `${TA}\n${TB}\n`, { mode: 0o600 });
  for (const runner of ['true', 'false']) {
    const http = await startHttp({ args: sshArgs(s, { ...JAIL, 'ssh.runner': runner }), env: sshEnv(), set: { auth_tokens_file: tokens } });
    const sa = await connect(http.url, { token: TA, name: `agent A, runner ${runner}` });
    const sb = await connect(http.url, { token: TB, name: `agent B, runner ${runner}` });
    const mb = await sb.tool('create_sandbox', {});
    trackSandbox(mb.sandbox_id);
    await sb.tool('write_file', { path: 'private.txt', content: `${SECRET}\n` });
    const ma = await sa.tool('create_sandbox', {});
    trackSandbox(ma.sandbox_id);
    const otherDir = mb.details?.directory;
    const toB = `../${path.basename(otherDir)}/private.txt`;
    const byId = await sa.call('read_file', { path: 'private.txt', sandbox_id: mb.sandbox_id });
    t.ok(byId.isError && /not found/.test(errorText(byId)), `runner ${runner}: session A cannot name B's sandbox`);
    t.deepEqual(await readTools(sa, ma.sandbox_id, toB), [], `runner ${runner}: session A's file tools cannot read B's file`);
    t.deepEqual(await writeTools(sa, ma.sandbox_id, toB, otherDir), [], `runner ${runner}: ... nor write B's directory`);
    const cat = await sa.tool('run_command', { command: `cat ${otherDir}/private.txt ${toB} 2>&1; true` });
    t.ok(!cat.stdout.includes(SECRET), `runner ${runner}: nor its commands`, cat);
    await sa.close();
    await sb.close();
    await http.stop('SIGTERM');
  }

  // ---- isolation = none: said, and the file tools keep to the directory
  const none = await sdkClient(sshArgs(s, { 'ssh.isolation': 'none' }), sshEnv());
  const n1 = await none.tool('create_sandbox', {});
  const n2 = await none.tool('create_sandbox', {});
  trackSandbox(n1.sandbox_id);
  trackSandbox(n2.sandbox_id);
  t.hasFields(n1.details ?? {}, { isolation: 'none' }, 'isolation none: details say so', n1.details);
  t.like(n1.details?.warning ?? '', /not isolated from each other/, '... with a warning');
  t.is(fs.readFileSync(none.stderrPath, 'utf8').split('\n').filter((l) => /are not isolated from each other/.test(l)).length, 1,
    'and one log line says it');
  await none.tool('write_file', { path: 'private.txt', content: `${SECRET}\n`, sandbox_id: n2.sandbox_id });
  const toN2 = `../${path.basename(n2.workspace)}/private.txt`;
  for (const tool of ['read_file', 'list_files']) {
    const r = await none.call(tool, { path: tool === 'read_file' ? toN2 : path.dirname(toN2), sandbox_id: n1.sandbox_id });
    t.ok(r.isError && /outside sandbox directory/.test(errorText(r)), `isolation none: ${tool} of ../ to the other sandbox is refused`, { text: errorText(r) });
  }
  fs.symlinkSync(path.join(n2.workspace, 'private.txt'), path.join(n1.workspace, 'link'));
  const viaLink = await none.call('read_file', { path: 'link', sandbox_id: n1.sandbox_id });
  t.ok(viaLink.isError && !JSON.stringify(viaLink).includes(SECRET), 'isolation none: read_file through a link out is refused', { text: errorText(viaLink) });
  // a write follows a link (as on every backend) only where it stays in:
  // through the runner it was written outside, over SFTP the link replaced
  for (const tool of ['write_file', 'sandbox_file_write']) {
    const who = tool === 'write_file' ? { sandbox_id: n1.sandbox_id } : { machine: n1.sandbox_id };
    const out = await none.call(tool, { path: 'link', content: 'PWNED\n', ...who });
    t.is(fs.readFileSync(path.join(n2.workspace, 'private.txt'), 'utf8'), `${SECRET}\n`,
      `isolation none: ${tool} through a link out leaves the file outside as it was`, { text: errorText(out) });
  }
  const w = await none.call('write_file', { path: toN2, content: 'x', sandbox_id: n1.sandbox_id });
  t.ok(w.isError && fs.readFileSync(path.join(n2.workspace, 'private.txt'), 'utf8') === `${SECRET}\n`,
    'isolation none: write_file of ../ to the other sandbox is refused', { text: errorText(w) });
  t.is((await none.tool('read_file', { path: 'private.txt', sandbox_id: n2.sandbox_id })).content, `${SECRET}\n`, '... while its own file reads');
  await none.close();

  // a root another user could write (the default /tmp/sandgate-USER, made
  // first by someone else) is refused: they could swap a sandbox's
  // directory for one of their own and read what the agent writes
  const loose = path.join(tmpdir(), 'loose-root');
  fs.mkdirSync(loose);
  fs.chmodSync(loose, 0o1777);
  for (const iso of ['none', 'auto']) {
    const l = await sdkClient(sshArgs(s, { 'ssh.root': loose, 'ssh.isolation': iso }), sshEnv());
    const refused = await l.call('create_sandbox', {});
    t.ok(refused.isError && /the root [^ ]*loose-root is not this user's own directory \(another user's, a link, or writable by group or others\): remove it, or set \[ssh\] root/.test(errorText(refused)),
      `isolation ${iso}: a root writable by others is refused, naming the fix`, { text: errorText(refused) });
    await l.close();
  }
  t.deepEqual(fs.readdirSync(loose), [], '... and nothing was made in it');
}, { timeout: 300 });
