// SSH authentication failures say what was tried and why each failed: a key
// the server does not know, an encrypted key without a passphrase, a wrong
// passphrase, a missing key file, no agent.  The right passphrase (from the
// environment, the normal SANDGATE_SSH_PASSPHRASE rule) and an ssh-agent
// holding the key both work.
import { t, preflight, sdkClient, errorText } from '../lib/sg.mjs';
import { startSshd, sshArgs, sshEnv, sshPreflight, startAgent } from '../ssh/sshd.mjs';

t.run(async () => {
  await preflight({ docker: false });
  await sshPreflight();
  const s = await startSshd();
  const who = `${s.user}@127.0.0.1:${s.port}`;

  // One sandgate per configuration; the first call creates the sandbox and
  // so connects.
  async function attempt(name, sets, env = {}) {
    const srv = await sdkClient(sshArgs(s, sets), sshEnv(env), { name });
    const res = await srv.call('run_command', { command: 'echo ok' });
    await srv.close();
    return res;
  }

  const wrong = await attempt('wrong key', { 'ssh.default_key': s.wrongKey });
  const wt = errorText(wrong);
  t.ok(wrong.isError, 'a key the server does not know: an error');
  t.like(wt, new RegExp(`authentication as ${who.replace(/\./g, '\\.')} failed`), '... saying that authentication as user@host:port failed');
  t.like(wt, /ssh-agent: none \(SSH_AUTH_SOCK is not set\)/, '... that no agent was there');
  t.like(wt, new RegExp(`key ${s.wrongKey} \\(ssh-ed25519\\): rejected by the server`), '... and that the key (with its type) was rejected');

  const enc = await attempt('encrypted key, no passphrase', { 'ssh.default_key': s.keyEnc });
  t.ok(enc.isError, 'an encrypted key without a passphrase: an error');
  t.like(errorText(enc), /it is encrypted and no passphrase is set \(\[ssh\] passphrase or SANDGATE_SSH_PASSPHRASE\)/,
    '... saying the key is encrypted and how to give the passphrase', { text: errorText(enc) });
  t.unlike(errorText(enc), /PRIVATE KEY|correct horse/, '... without key material or the passphrase in it');

  const bad = await attempt('wrong passphrase', { 'ssh.default_key': s.keyEnc }, { SANDGATE_SSH_PASSPHRASE: 'not it' });
  t.ok(bad.isError && /passphrase is wrong/.test(errorText(bad)), 'a wrong passphrase: an error that says so', { text: errorText(bad) });
  t.unlike(errorText(bad), /not it/, '... without echoing the passphrase');

  const good = await attempt('right passphrase', { 'ssh.default_key': s.keyEnc }, { SANDGATE_SSH_PASSPHRASE: s.passphrase });
  t.ok(!good.isError && good.structuredContent?.stdout === 'ok\n', 'the right passphrase from SANDGATE_SSH_PASSPHRASE works', { text: errorText(good) });

  const none = await attempt('missing key file', { 'ssh.default_key': `${s.dir}/no_such_key` });
  t.ok(none.isError && /no_such_key: cannot read it: No such file or directory/.test(errorText(none)),
    'a missing key file: an error naming it', { text: errorText(none) });

  const pub = await attempt('public key file', { 'ssh.default_key': `${s.key}.pub` });
  t.ok(pub.isError && /not a private key file/.test(errorText(pub)), 'a .pub file as key: an error saying it is not a private key',
    { text: errorText(pub) });

  // ssh-agent: no key configured, the agent holds the right one
  const agent = await startAgent(s.key);
  const viaAgent = await attempt('agent', { 'ssh.default_key': '' }, { SSH_AUTH_SOCK: agent.sock });
  t.ok(!viaAgent.isError && viaAgent.structuredContent?.stdout === 'ok\n', 'ssh-agent (SSH_AUTH_SOCK) authenticates', { text: errorText(viaAgent) });
  const wrongAgent = await startAgent(s.wrongKey);
  const viaWrong = await attempt('agent with a wrong key', { 'ssh.default_key': '' }, { SSH_AUTH_SOCK: wrongAgent.sock });
  t.ok(viaWrong.isError && /ssh-agent: the server rejected its 1 key\(s\)/.test(errorText(viaWrong)),
    'an agent whose keys are rejected: the error says so', { text: errorText(viaWrong) });
  t.like(errorText(viaWrong), /identity files: none configured/, '... and that no identity file was there to try');
}, { timeout: 180 });
