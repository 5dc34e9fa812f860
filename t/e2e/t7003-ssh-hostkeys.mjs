// Host keys against known_hosts: strict refuses an unknown key and a changed
// key with the SHA256 fingerprint (as ssh-keygen -l prints it) and how to
// trust it; accept-new records the key in a line OpenSSH accepts; @revoked
// refuses; off is allowed but logged; a host known by its ed25519 key is not
// refused for offering ECDSA; a host key that changes while sandgate runs
// (rekey + restart) is refused on the reconnect.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, tmpdir, sleep } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, sh } from '../ssh/sshd.mjs';

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// The server's stderr file is written by a stream that may lag its exit.
async function stderrOf(srv) {
  let last = null;
  for (let i = 0; i < 40; i++) {
    let now = null;
    try { now = fs.readFileSync(srv.stderrPath, 'utf8'); } catch { /* not yet */ }
    if (now !== null && now === last) return now;
    last = now;
    await sleep(50);
  }
  return last ?? '';
}

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd({ ecdsa: true });
  const name = `[127.0.0.1]:${s.port}`;
  const kh = (file, text) => { const p = path.join(tmpdir(), file); if (text !== undefined) fs.writeFileSync(p, text); return p; };

  async function attempt(label, sets, env = {}) {
    const srv = await sdkClient(sshArgs(s, sets), sshEnv(env), { name: label });
    const res = await srv.call('run_command', { command: 'echo ok' });
    await srv.close();
    return { res, text: errorText(res), stderr: await stderrOf(srv) };
  }

  // the fixture's known_hosts holds only the ed25519 key, the server also has ECDSA
  const known = await attempt('known ed25519, server also ECDSA', {});
  t.ok(!known.res.isError && known.res.structuredContent?.stdout === 'ok\n',
    'a host known by its ed25519 key is accepted though it also offers ECDSA', { text: known.text });

  const unknown = await attempt('unknown host', { 'ssh.known_hosts': kh('empty_known_hosts', '') });
  t.ok(unknown.res.isError, 'strict: an unknown host key is refused');
  t.like(unknown.text, /host key of .* is not known/, '... saying the key is not known');
  t.ok(unknown.text.includes(s.hostFp), `... with the SHA256 fingerprint ${s.hostFp}`, { text: unknown.text });
  t.like(unknown.text, new RegExp(`ssh-keyscan -p ${s.port} -t ed25519 127\\.0\\.0\\.1 >> `), '... how to trust it (ssh-keyscan)');
  t.like(unknown.text, /host_key_policy = accept-new/, '... and the accept-new alternative');

  const missingFile = kh('sub/accepted_known_hosts');
  const acc = await attempt('accept-new', { 'ssh.known_hosts': missingFile, 'ssh.host_key_policy': 'accept-new' });
  t.ok(!acc.res.isError && acc.res.structuredContent?.stdout === 'ok\n', 'accept-new: an unknown key is accepted', { text: acc.text });
  const line = fs.existsSync(missingFile) ? fs.readFileSync(missingFile, 'utf8') : '';
  t.like(line, new RegExp(`^${esc(name)} ssh-ed25519 AAAA\\S+\\n$`), '... and recorded as one known_hosts line', { line });
  t.ok(acc.stderr.includes(s.hostFp) && /recorded the new ED25519 host key/.test(acc.stderr), '... and logged with its fingerprint');
  const f = await sh(`ssh-keygen -F '${name}' -f '${missingFile}'`);
  t.is(f.code, 0, 'ssh-keygen -F finds the recorded key');
  const o = await sh(`ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile='${missingFile}' -o HostKeyAlgorithms=ssh-ed25519 -i '${s.key}' -p ${s.port} ${s.user}@127.0.0.1 true`);
  t.is(o.code, 0, 'OpenSSH in strict mode accepts the recorded line', o);
  const again = await attempt('strict after accept-new', { 'ssh.known_hosts': missingFile });
  t.ok(!again.res.isError, 'strict mode accepts the key accept-new recorded', { text: again.text });

  const other = await sh(`rm -f '${tmpdir()}/other' '${tmpdir()}/other.pub'; ssh-keygen -q -t ed25519 -N '' -f '${tmpdir()}/other' && cut -d' ' -f1,2 '${tmpdir()}/other.pub'`);
  const changedFile = kh('changed_known_hosts', `# a comment\n\n${name} ${other.stdout.trim()}\n`);
  const changed = await attempt('changed key', { 'ssh.known_hosts': changedFile });
  t.ok(changed.res.isError, 'strict: a changed host key is refused');
  t.like(changed.text, /WARNING: host key of .* has CHANGED/, '... with a warning that the key CHANGED');
  t.ok(changed.text.includes(s.hostFp), '... the new SHA256 fingerprint', { text: changed.text });
  t.ok(changed.text.includes(`${changedFile}:3`), '... the known_hosts file and line of the old key', { text: changed.text });
  t.like(changed.text, new RegExp(`ssh-keygen -R '${esc(name)}' -f`), '... and how to remove the old key');
  const accChanged = await attempt('changed key, accept-new', { 'ssh.known_hosts': changedFile, 'ssh.host_key_policy': 'accept-new' });
  t.ok(accChanged.res.isError && /CHANGED/.test(accChanged.text), 'accept-new still refuses a changed key');

  const pubKey = fs.readFileSync(s.knownHosts, 'utf8').trim().split(' ').slice(1).join(' ');
  const revokedFile = kh('revoked_known_hosts', `${name} ${pubKey}\n@revoked ${name} ${pubKey}\n@cert-authority *.example ${other.stdout.trim()}\nthis line is not understood\n`);
  const revoked = await attempt('revoked key', { 'ssh.known_hosts': revokedFile });
  t.ok(revoked.res.isError && /@revoked/.test(revoked.text) && revoked.text.includes(s.hostFp),
    'a key marked @revoked is refused, with its fingerprint (other marker and bad lines are skipped)', { text: revoked.text });

  const off = await attempt('policy off', { 'ssh.known_hosts': kh('empty_known_hosts'), 'ssh.host_key_policy': 'off' });
  t.ok(!off.res.isError, 'host_key_policy = off connects to an unknown host', { text: off.text });
  t.like(off.stderr, /warning: \[ssh\] host key checking is OFF/, '... and logs a warning');

  // a host key that changes under a running sandgate
  const srv = await sdkClient(sshArgs(s), sshEnv(), { name: 'rekeyed' });
  t.is((await srv.tool('run_command', { command: 'echo before' })).stdout, 'before\n', 'connected with the known key');
  const newFp = await s.rekey();
  await s.restart();
  const after = await srv.call('run_command', { command: 'echo after' });
  t.ok(after.isError && /CHANGED/.test(errorText(after)) && errorText(after).includes(newFp),
    `after the server got a new host key (${newFp}), the reconnect is refused as CHANGED`, { text: errorText(after) });
  await srv.close();
}, { timeout: 180 });
