// The plugin path: a second plugin directory, given by [plugin] path (--set)
// and by SANDGATE_PLUGIN_PATH, holding symlinks to two test backends built
// from t/plugins/fake.c: fakepref (usable, preference 100) and fakeoff (not
// usable).  Next to the normal plugin directory, both load; `sandgate config`
// says which is usable and why not, and the default backend is the usable one
// with the highest preference (fakepref's 100 beats docker's 40), so a
// create_sandbox without a backend reaches it.  A group-writable plugin file
// is refused: named in [plugin] load it stops sandgate (exit 4), found by
// discovery it is skipped with a warning and the others load.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, runCli, tmpdir } from '../lib/sg.mjs';

const EXIT_PLUGIN = 4;

// "; NAME VERSION (ABI x.y) from PATH: usable, preference N" or
// "...: not usable: WHY" lines of `sandgate config`, in order.
function plugins(stdout) {
  const out = [];
  for (const line of stdout.split('\n')) {
    const m = /^; (\w+) (\S+) \(ABI ([\d.]+)\) from (.*?): (?:usable, preference (-?\d+)|not usable: (.*))$/.exec(line);
    if (m) out.push({ name: m[1], abi: m[3], path: m[4], preference: m[5] === undefined ? null : Number(m[5]), why: m[6] ?? null });
  }
  return out;
}

function defaultLine(stdout) {
  return stdout.split('\n').find((l) => l.startsWith('; default backend: ')) ?? '';
}

const OFF_WHY = (name) => `${name}: the fake is switched off: set [${name}] usable = true`;

t.run(async () => {
  await preflight();
  const libs = path.join(process.env.SG_TEST_BUILDDIR, 't', 'plugins', '.libs');
  for (const n of ['fakepref', 'fakeoff']) {
    const f = path.join(libs, `${n}.so`);
    let st;
    try { st = fs.statSync(f); } catch {
      await t.bailOut(`${f} is missing: build the test plugins with "make check" (they are check_LTLIBRARIES)`);
    }
    if (st.mode & 0o022) await t.bailOut(`${f} is writable by group or others (the build's umask): run chmod go-w on it`);
  }
  const std = process.env.SANDGATE_PLUGIN_DIR;

  // A second plugin directory: symlinks to the built test backends.
  const links = path.join(tmpdir(), 'plugins2');
  fs.mkdirSync(links, { mode: 0o700 });
  for (const n of ['fakepref', 'fakeoff']) fs.symlinkSync(path.join(libs, `${n}.so`), path.join(links, `${n}.so`));

  for (const [how, args, env] of [
    ['--set plugin.path', ['--set', `plugin.path=${links}`], {}],
    ['SANDGATE_PLUGIN_PATH', [], { SANDGATE_PLUGIN_PATH: links }],
  ]) {
    const r = await runCli([...args, 'config'], env);
    t.is(r.code, 0, `${how}: sandgate config exits 0`, { stderr: r.stderr.slice(-1500) });
    const ps = plugins(r.stdout);
    // [plugin] dir first, then the path, each directory in name order
    t.deepEqual(ps.slice(0, 6).map((p) => p.name), ['docker', 'fc', 'local', 'ssh', 'fakeoff', 'fakepref'],
      `${how}: the plugins of both directories are loaded, the plugin dir first`);
    const pref = ps.find((p) => p.name === 'fakepref');
    const off = ps.find((p) => p.name === 'fakeoff');
    t.is(pref?.path, path.join(links, 'fakepref.so'), `${how}: fakepref is loaded through its symlink`);
    t.is(pref?.abi, '2.2', `${how}: fakepref is an ABI 2.2 plugin (built with this header)`);
    t.is(pref?.preference, 100, `${how}: fakepref is usable with preference 100`);
    t.is(off?.path, path.join(links, 'fakeoff.so'), `${how}: fakeoff is loaded through its symlink`);
    t.is(off?.why, OFF_WHY('fakeoff'), `${how}: config says fakeoff is not usable, and why`);
    t.is(ps.find((p) => p.name === 'docker')?.path, path.join(std, 'docker.so'), `${how}: docker still comes from the plugin dir`);
    t.is(ps.find((p) => p.name === 'docker')?.preference, 40, `${how}: docker is usable with preference 40`);
    const def = defaultLine(r.stdout);
    t.like(def, /^; default backend: fakepref \(chosen by probe: the usable backend with the highest preference \(100\); not usable: /,
      `${how}: the default backend is fakepref, chosen by probe`);
    t.ok(def.includes(OFF_WHY('fakeoff')), `${how}: the default line says why fakeoff was passed over`, { def });
    // the fakes' own keys are registered and documented
    t.like(r.stdout, /\n\[fakepref\]\n(?:.*\n)*?preference = 100\t; default\n/, `${how}: [fakepref] preference is listed with its default`);
  }

  // A machine made without naming a backend goes to the default.
  const c = await runCli(['--set', `plugin.path=${links}`, 'call', 'create_sandbox', '{}']);
  t.is(c.code, 1, 'create_sandbox on the default (fakepref) is a tool error (exit 1)', { stderr: c.stderr.slice(-1500) });
  t.ok(c.stderr.split('\n').includes('sandgate: create_sandbox: fake backend fakepref: no machines'),
    '... with fakepref\'s own message', { stderr: c.stderr.slice(-1500) });

  // Switched off, fakepref gives way to docker.
  const o = await runCli(['--set', 'fakepref.usable=false', 'config'], { SANDGATE_PLUGIN_PATH: links });
  t.is(o.code, 0, 'fakepref.usable=false: config exits 0', { stderr: o.stderr.slice(-1500) });
  t.is(plugins(o.stdout).find((p) => p.name === 'fakepref')?.why, OFF_WHY('fakepref'), 'fakepref.usable=false: config says fakepref is not usable, and why');
  const od = defaultLine(o.stdout);
  t.like(od, /^; default backend: docker \(chosen by probe: the usable backend with the highest preference \(40\); not usable: /,
    'fakepref.usable=false: the default backend falls back to docker');
  t.ok(od.includes(OFF_WHY('fakepref')) && od.includes(OFF_WHY('fakeoff')), '... and the default line says why both fakes were passed over', { od });

  // A group-writable copy of a plugin, next to a good symlink.
  const gw = path.join(fs.realpathSync(tmpdir()), 'plugins-gw');
  fs.mkdirSync(gw, { mode: 0o700 });
  const gwFile = path.join(gw, 'fakeoff.so');
  fs.copyFileSync(path.join(libs, 'fakeoff.so'), gwFile);
  fs.chmodSync(gwFile, 0o664);
  fs.symlinkSync(path.join(libs, 'fakepref.so'), path.join(gw, 'fakepref.so'));
  const refusal = `plugin 'fakeoff': file '${gwFile}' is writable by group or others: run chmod go-w on it`;

  const named = await runCli(['--set', `plugin.path=${gw}`, '--set', 'plugin.load=docker,fakeoff', 'config']);
  t.is(named.code, EXIT_PLUGIN, 'a group-writable plugin named in [plugin] load stops sandgate (exit 4)', { stderr: named.stderr.slice(-1500) });
  t.ok(named.stderr.includes(`error: ${refusal}\n`), '... with the refusal naming the file and the fix', { stderr: named.stderr.slice(-1500) });
  t.is(named.stdout, '', '... and prints no configuration');

  const found = await runCli(['--set', `plugin.path=${gw}`, 'config']);
  t.is(found.code, 0, 'a group-writable plugin found by discovery does not stop sandgate', { stderr: found.stderr.slice(-1500) });
  t.ok(found.stderr.includes(`warning: skipping ${gwFile}: ${refusal}\n`), '... it is skipped with a warning that says why', { stderr: found.stderr.slice(-1500) });
  const fps = plugins(found.stdout);
  t.deepEqual(fps.slice(0, 5).map((p) => p.name), ['docker', 'fc', 'local', 'ssh', 'fakepref'], '... and the others still load');
  t.ok(!fps.some((p) => p.name === 'fakeoff'), '... without it');
  t.like(defaultLine(found.stdout), /^; default backend: fakepref \(/, '... and the default is still chosen among them');
}, { timeout: 120 });
