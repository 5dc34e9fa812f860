// The core treats every backend as an equal: nothing under core/ or
// transports/ names one.  No string literal in their C code is a backend's
// name ("docker"), or starts with one as a section, action or topic does
// ("ssh.target.", "docker_help", "fc-"), and no name comparison is made
// against a literal.  Comments may mention backends; code may not.
// `sandgate deploy --target fc` (core/cli/deploy*.c) names the cloud
// platform sandgate itself is deployed onto, not a backend: it is left out.
import fs from 'node:fs';
import path from 'node:path';
import { t } from '../lib/sg.mjs';

const src = process.env.SG_TEST_SRCDIR;

// The backends: every plugin folder whose code defines the sg_backend
// descriptor (not the runner, nor code the plugins share), and local.
const names = new Set(['local']);
for (const d of fs.readdirSync(path.join(src, 'plugins'), { withFileTypes: true })) {
  if (!d.isDirectory()) continue;
  const dir = path.join(src, 'plugins', d.name);
  if (fs.readdirSync(dir).some((f) => f.endsWith('.c') &&
      /struct sg_backend sg_backend\b/.test(fs.readFileSync(path.join(dir, f), 'utf8'))))
    names.add(d.name);
}

// C source without comments, string literals kept, line numbers intact.
function code(text) {
  let out = '';
  for (let i = 0; i < text.length;) {
    if (text.startsWith('/*', i)) {
      const end = text.indexOf('*/', i + 2);
      const body = text.slice(i, end < 0 ? text.length : end + 2);
      out += body.replace(/[^\n]/g, ' ');
      i += body.length;
    } else if (text.startsWith('//', i)) {
      const end = text.indexOf('\n', i);
      i = end < 0 ? text.length : end;
    } else if (text[i] === '"' || text[i] === "'") {
      const q = text[i];
      let j = i + 1;
      while (j < text.length && text[j] !== q) j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else {
      out += text[i++];
    }
  }
  return out;
}

function* literals(c) {
  const re = /"((?:[^"\\\n]|\\.)*)"/g;
  let m;
  while ((m = re.exec(c))) yield { text: m[1], line: c.slice(0, m.index).split('\n').length };
}

t.run(async () => {
  const files = [];
  for (const dir of ['core', 'transports']) {
    const walk = (d) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (/\.[ch]$/.test(e.name) && !/^deploy(_files)?\.c$/.test(e.name)) files.push(p);
      }
    };
    walk(path.join(src, dir));
  }
  t.cmp(files.length, '>', 20, `${files.length} C files under core/ and transports/`);
  t.ok(names.has('docker') && names.has('ssh') && names.has('fc'), `backends: ${[...names].join(', ')}`);
  const hits = [];
  for (const f of files) {
    const c = code(fs.readFileSync(f, 'utf8'));
    for (const { text, line } of literals(c)) {
      for (const n of names) {
        if (text === n || text.startsWith(`${n}.`) || text.startsWith(`${n}_`) || text.startsWith(`${n}-`))
          hits.push(`${path.relative(src, f)}:${line}: "${text}"`);
      }
    }
    const cmp = /str(?:n|case)?cmp\s*\([^;]*?name[^;]*?,\s*"([^"]*)"/g;
    let m;
    while ((m = cmp.exec(c)))
      if (names.has(m[1])) hits.push(`${path.relative(src, f)}: compares a name with "${m[1]}"`);
  }
  t.deepEqual(hits, [], 'no backend name in the core\'s code');

  // The check itself catches what it looks for.
  const probe = code('/* "docker" in a comment */ x = "docker"; if (!strcmp(b->name, "ssh")) y = "fc_help";');
  t.deepEqual([...literals(probe)].map((l) => l.text), ['docker', 'ssh', 'fc_help'],
    'the scanner sees literals outside comments only');
}, { timeout: 30 });
