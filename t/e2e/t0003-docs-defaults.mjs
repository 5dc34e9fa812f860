// The defaults the documents give are the server's: every "| key | default |"
// table in doc/*.md (its section is the last `[section]` named above it),
// and every one-word "(default X)" of sandgate.ini(5) is compared with
// `sandgate config` (every backend loaded), whose values marked "; default"
// are the built-in ones; t0001 holds etc/sandgate.ini.example to the same.
// A default changed in the code and not in a document, or the other way
// round, fails.
import fs from 'node:fs';
import path from 'node:path';
import { t, runCli } from '../lib/sg.mjs';

/** "section.key" -> built-in default, from `sandgate config`. */
function builtins(text) {
  const out = new Map();
  let sec = null;
  for (const line of text.split('\n')) {
    const s = /^\[(.+)\]$/.exec(line);
    if (s) { sec = s[1]; continue; }
    const kv = /^([^ ;]+) = ?(.*?)\t; default$/.exec(line);
    if (kv && sec) out.set(`${sec}.${kv[1]}`, kv[2]);
  }
  return out;
}

/** A documented default as the configuration would hold it. */
function norm(v) {
  const s = v.trim().replace(/^`|`$/g, '').replace(/\\-/g, '-');
  if (s === 'unset') return '';
  const m = /^(\d+) (KiB|MiB|GiB)$/.exec(s);
  if (m) return String(Number(m[1]) * { KiB: 1024, MiB: 1 << 20, GiB: 1 << 30 }[m[2]]);
  return s;
}

/** The documented value v stands for the built-in b ("none" for an empty one). */
function same(v, b) {
  return norm(v) === b || (norm(v) === 'none' && b === '');
}

/** [{where, key: "section.key", value}] from the markdown tables of one file. */
function mdTables(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const out = [];
  let section = null;
  for (let i = 0; i < lines.length; i++) {
    for (const m of lines[i].matchAll(/`\[([a-z_.]+)\]/g)) section = m[1];
    if (!/^\| key \| default \|/.test(lines[i])) continue;
    for (i += 2; i < lines.length && lines[i].startsWith('|'); i++) {
      const cells = lines[i].split('|').slice(1, -1).map((c) => c.trim());
      const key = cells[0].replace(/`/g, '');
      out.push({ where: `${path.basename(file)}:${i + 1}`, key: `${section}.${key}`, value: cells[1] });
    }
  }
  return out;
}

/** [{where, key, value}] of the "(default X)" in sandgate.ini(5) where X is one word. */
function manDefaults(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const out = [];
  let sec = null;
  let key = null;
  for (let i = 0; i < lines.length; i++) {
    const ss = /^\.SS "\[(.+)\]"$/.exec(lines[i]);
    if (ss) { sec = ss[1].replace('.NAME', '.*'); key = null; continue; }
    if (/^\.S[HS] /.test(lines[i])) { sec = null; continue; }
    const k = /^\.B ([a-z_]+)$/.exec(lines[i]);
    if (k && /^\.(TP|TQ)$/.test(lines[i - 1] ?? '')) { key = k[1]; continue; }
    const d = /\(default ([^ ()]+)\)/.exec(lines[i]);
    if (d && sec && key) out.push({ where: `sandgate.ini.5:${i + 1}`, key: `${sec}.${key}`, value: d[1] });
  }
  return out;
}

t.run(async () => {
  const src = process.env.SG_TEST_SRCDIR;
  const r = await runCli(['--set', 'plugin.load=docker,ssh,fc,local', 'config'], {
    SANDGATE_SERVER_AUTH_TOKENS: undefined, ABX_MCP_AUTH_TOKEN: undefined,
  });
  t.is(r.code, 0, 'sandgate config exits 0', { stderr: r.stderr });
  const def = builtins(r.stdout);
  t.cmp(def.size, '>=', 40, `sandgate config gives ${def.size} built-in defaults`);

  const md = fs.readdirSync(path.join(src, 'doc')).filter((f) => f.endsWith('.md'))
    .flatMap((f) => mdTables(path.join(src, 'doc', f)));
  t.cmp(md.length, '>=', 15, `${md.length} defaults in the tables of doc/*.md`);
  for (const d of md) {
    t.ok(def.has(d.key), `${d.where}: [${d.key.replace('.', '] ')} is a key sandgate knows`);
    if (def.has(d.key)) t.ok(same(d.value, def.get(d.key)), `${d.where}: ${d.key} defaults to '${def.get(d.key)}'`, { documented: d.value });
  }

  const man = manDefaults(path.join(src, 'doc', 'sandgate.ini.5'));
  t.cmp(man.length, '>=', 20, `${man.length} one-word defaults in sandgate.ini(5)`);
  for (const d of man) {
    if (!def.has(d.key)) continue; // a default described by a plugin section pattern: t9010 checks the keys
    t.ok(same(d.value, def.get(d.key)), `${d.where}: ${d.key} defaults to '${def.get(d.key)}'`, { documented: d.value });
  }

}, { timeout: 60 });
