// etc/sandgate.ini.example documents every configuration key sandgate knows,
// in its own section and with its built-in default: `sandgate config` (with
// every backend loaded) is the list, so a key added without a word in the
// example fails here.
import fs from 'node:fs';
import path from 'node:path';
import { t, runCli } from '../lib/sg.mjs';

const sources = new Map(); // "section.key" -> where sandgate config says the value came from

function sections(text, commented) {
  const out = new Map();
  let cur = null;
  for (const raw of text.split('\n')) {
    const line = commented ? raw.replace(/^;(?=\S)/, '') : raw;
    const s = /^\[([^\]]+)\]\s*$/.exec(line);
    if (s) { cur = s[1]; if (!out.has(cur)) out.set(cur, new Map()); continue; }
    const kv = /^([A-Za-z0-9_.*-]+) = ?(.*?)(\t; (.*))?$/.exec(line);
    if (kv && cur) {
      out.get(cur).set(kv[1], kv[2]);
      if (kv[4] !== undefined) sources.set(`${cur}.${kv[1]}`, kv[4]);
    }
  }
  return out;
}

t.run(async () => {
  const r = await runCli(['--set', 'plugin.load=docker,ssh,fc,local', 'config']);
  t.is(r.code, 0, 'sandgate config exits 0', { stderr: r.stderr });
  const have = sections(r.stdout, false);
  t.cmp(have.size, '>=', 10, `sandgate config lists ${have.size} sections`);
  const example = sections(fs.readFileSync(path.join(process.env.SG_TEST_SRCDIR, 'etc', 'sandgate.ini.example'), 'utf8'), true);
  for (const [sec, keys] of have) {
    // "ssh.target.*" is documented as an example section "ssh.target.NAME"
    const docSec = sec.endsWith('.*') ? [...example.keys()].find((s) => s.startsWith(sec.slice(0, -1))) : sec;
    t.ok(docSec && example.has(docSec), `section [${sec}] is in the example`);
    const doc = example.get(docSec) ?? new Map();
    for (const [key, value] of keys) {
      if (key.endsWith('*')) {
        t.ok([...doc.keys()].some((k) => k.startsWith(key.slice(0, -1))), `[${sec}] ${key} has an example`);
        continue;
      }
      t.ok(doc.has(key), `[${sec}] ${key} is documented`);
      // where the value is the built-in default, the example shows that default
      if (doc.has(key) && sources.get(`${sec}.${key}`) === 'default') {
        t.is(doc.get(key), value, `[${sec}] ${key}: the example gives the default '${value}'`);
      }
    }
  }
  // and the example names no key sandgate does not know
  for (const [sec, keys] of example) {
    const known = have.get(sec) ?? have.get([...have.keys()].find((s) => s.endsWith('.*') && sec.startsWith(s.slice(0, -1))));
    t.ok(known, `example section [${sec}] is a real section`);
    for (const key of keys.keys()) {
      const ok = known && (known.has(key) || [...known.keys()].some((k) => k.endsWith('*') && key.startsWith(k.slice(0, -1))));
      t.ok(ok, `example key [${sec}] ${key} is a real key`);
    }
  }
}, { timeout: 60 });
