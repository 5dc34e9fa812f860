// The man pages render under groff -ww without a warning; sandgate.ini(5)
// documents every configuration key (`sandgate config` with every backend
// loaded is the list) and sandgate(1) every command of --help; the systemd
// unit passes systemd-analyze verify (with the man pages it names).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { t, runCli, tmpdir } from '../lib/sg.mjs';

const run = promisify(execFile);
const PAGES = ['sandgate.1', 'sandgate.ini.5', 'sandgate-plugin.7'];

async function sh(cmd, args, opts = {}) {
  try {
    const r = await run(cmd, args, { maxBuffer: 16 << 20, ...opts });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    if (e.code === 'ENOENT') await t.bailOut(`${cmd} is not installed (apt-get install ${cmd === 'groff' ? 'groff-base' : cmd}; etc/setup.sh does)`);
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? e.message };
  }
}

/** "[section]" -> set of keys documented as ".B key" under .SS "[section]". */
function documented(text) {
  const out = new Map();
  let cur = null;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const ss = /^\.SS "\[(.+)\]"$/.exec(lines[i]);
    if (ss) { cur = ss[1]; out.set(cur, new Set()); continue; }
    if (/^\.S[HS] /.test(lines[i])) cur = null;
    const k = /^\.B ([a-z_.A-Z]+)$/.exec(lines[i]);
    if (cur && k && /^\.(TP|TQ)$/.test(lines[i - 1])) out.get(cur).add(k[1]);
  }
  return out;
}

t.run(async () => {
  const src = process.env.SG_TEST_SRCDIR;
  for (const p of PAGES) {
    const r = await sh('groff', ['-ww', '-man', '-z', path.join(src, 'doc', p)]);
    t.ok(r.code === 0 && r.stderr === '', `${p}: groff -ww -man renders it without a warning`, r.stderr);
  }

  const cfg = await runCli(['--set', 'plugin.load=docker,ssh,fc,local', 'config']);
  t.is(cfg.code, 0, 'sandgate config exits 0', cfg.stderr);
  const doc = documented(fs.readFileSync(path.join(src, 'doc', 'sandgate.ini.5'), 'utf8'));
  let sec = null;
  for (const line of cfg.stdout.split('\n')) {
    const s = /^\[(.+)\]$/.exec(line);
    if (s) { sec = s[1].replace('.*', '.NAME'); continue; }
    const k = /^([^ ]+) = /.exec(line);
    if (!k || !sec) continue;
    const key = k[1].replace('.*', '.NAME');
    t.ok(doc.get(sec)?.has(key), `sandgate.ini(5) documents [${sec}] ${key}`);
  }

  const help = (await runCli(['--help'])).stdout;
  const page1 = fs.readFileSync(path.join(src, 'doc', 'sandgate.1'), 'utf8');
  const cmds = [...help.split('Commands:')[1].split('Options:')[0].matchAll(/^ {2}([a-z]+)/gm)].map((m) => m[1]);
  t.cmp(cmds.length, '>=', 10, `--help lists ${cmds.length} commands`);
  for (const c of cmds) t.like(page1, new RegExp(`^\\.(B|BI|TP\\n\\.B) "?${c}\\b`, 'm'), `sandgate(1) documents the command ${c}`);

  // systemd-analyze verify checks the ExecStart binary and the man pages named
  // in Documentation=: the unit points at the built binary, MANPATH at the pages
  let have = true;
  try { await run('systemd-analyze', ['--version']); } catch { have = false; }
  if (!have) {
    t.diag('systemd-analyze is not installed: etc/sandgate.service not verified');
    return;
  }
  const dir = tmpdir();
  for (const p of PAGES) {
    const sect = path.join(dir, 'man', `man${p.slice(-1)}`);
    fs.mkdirSync(sect, { recursive: true });
    fs.copyFileSync(path.join(src, 'doc', p), path.join(sect, p));
  }
  const unit = path.join(dir, 'sandgate.service');
  fs.writeFileSync(unit, fs.readFileSync(path.join(src, 'etc', 'sandgate.service'), 'utf8')
    .replace('/usr/local/bin/sandgate', fs.realpathSync(process.env.SANDGATE_BIN)));
  const v = await sh('systemd-analyze', ['verify', unit], { env: { ...process.env, MANPATH: path.join(dir, 'man') } });
  t.ok(v.code === 0 && v.stderr.trim() === '', 'etc/sandgate.service passes systemd-analyze verify', v.stderr);
}, { timeout: 60 });
