// Isolation of local sandboxes, tried from inside as an agent would: the
// host's /etc/shadow and /root, descriptors of the host's, the kernel's
// keyrings, another sandbox's directory (by its host
// path, by ../ from the workspace, and through links made inside) and a
// server on the host's loopback are out of reach; every file tool refuses a
// ../ or link path to the other sandbox's file and never returns its bytes;
// two HTTP sessions with two tokens cannot reach each other's sandboxes.
// With [local] network = host the loopback server is reachable (the
// control: the refusal above is the network namespace, not a broken test).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, tmpdir, trackSandbox, SPARE_DEFAULT } from '../lib/sg.mjs';
import { startHttp, connect } from '../http/lib.mjs';
import { checkKeyCalls, checkRunnerHeld } from '../lib/jailcheck.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];
const SECRET = `private-${process.pid}-${Date.now()}`;
const hostDir = (sb) => sb.url.replace(/^file:\/\//, '');

/** A TCP server on the host's loopback that counts connections. */
async function loopbackServer() {
  let hits = 0;
  const srv = net.createServer((s) => { hits++; s.end('hello from the host\n'); });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  t.onCleanup(() => new Promise((r) => srv.close(r)));
  return { port: srv.address().port, hits: () => hits };
}

// Every file tool, pointed at p (a path to B's private file): the reads
// must fail and never return B's bytes, a listing of its directory must not
// show B's file, and writes must not reach B (a path that resolves into the
// jail's own /tmp may land there, inside the jail).  Returns what went wrong.
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
  if (JSON.stringify(ls.structuredContent ?? '').includes('private.txt')) bad.push('list_files showed B\'s directory');
  return bad;
}

async function writeTools(srv, sid, p, bDir) {
  const bad = [];
  const before = fs.readdirSync(bDir).sort().join(',');
  await srv.call('write_file', { path: p, content: 'overwritten', sandbox_id: sid });
  await srv.call('sandbox_file_write', { path: p, content: 'overwritten', machine: sid });
  await srv.call('write_file', { path: `${path.dirname(p)}/planted.txt`, content: 'planted', sandbox_id: sid });
  if (fs.readFileSync(path.join(bDir, 'private.txt'), 'utf8') !== `${SECRET}\n`) bad.push('a write changed B\'s file');
  if (fs.readdirSync(bDir).sort().join(',') !== before) bad.push('a write added a file to B\'s directory');
  return bad;
}

t.run(async () => {
  await preflight({ docker: false });
  const lo = await loopbackServer();
  const srv = await sdkClient(LOCAL, SPARE_DEFAULT);
  const a = await srv.tool('create_sandbox', {});
  const b = await srv.tool('create_sandbox', {});
  trackSandbox(a.sandbox_id);
  trackSandbox(b.sandbox_id);
  const aDir = hostDir(a), bDir = hostDir(b);
  await srv.tool('write_file', { path: 'private.txt', content: `${SECRET}\n`, sandbox_id: b.sandbox_id });
  t.is(fs.readFileSync(path.join(bDir, 'private.txt'), 'utf8'), `${SECRET}\n`, 'B holds a private file');
  const run = async (command) => srv.tool('run_command', { command, sandbox_id: a.sandbox_id });

  // ---- the host's secrets
  const shadow = await run('cat /etc/shadow; echo "rc=$?"');
  t.ok(/rc=[1-9]/.test(shadow.stdout) && !/root:/.test(shadow.stdout), 'the host\'s /etc/shadow cannot be read', shadow);
  const rootHome = await run('ls -A /root 2>&1; echo "rc=$?"');
  t.ok(/rc=[1-9]/.test(rootHome.stdout), '/root cannot be listed', rootHome);
  t.is((await run('ls / | tr "\\n" " "')).stdout.trim().split(' ').filter((n) => !['bin', 'dev', 'etc', 'lib', 'lib32', 'lib64', 'libx32', 'proc', 'sbin', 'tmp', 'usr', 'workspace'].includes(n)).join(' '), '',
    'the jail\'s / holds only /usr, its links, /etc, /proc, /dev, /tmp and /workspace');
  t.like((await run('cat /etc/passwd')).stdout, /^root:x:0:0:[^\n]*\n[^:\n]+:x:\d+:\d+:sandgate sandbox:\/workspace:/, '/etc/passwd is the jail\'s own');
  const hostEtc = fs.readdirSync('/etc').filter((n) => !fs.statSync(path.join('/etc', n), { throwIfNoEntry: false })?.isDirectory());
  t.cmp(Number((await run('ls /etc | wc -l')).stdout), '<', hostEtc.length, '/etc is a small one, not the host\'s');
  t.like((await run('touch /usr/x 2>&1; touch /x 2>&1; touch /etc/x 2>&1; true')).stdout, /Read-only file system[^]*Read-only file system[^]*Read-only file system/,
    '/usr, / and /etc are read-only');

  // ---- descriptors: a command has its 0-2 and nothing of the host (a
  // root sandgate's jail once passed on handles on its host directory and
  // on the runner: /proc/self/fd/N/.. was the other sandboxes' tree)
  const fds = (await run('ls -l /proc/self/fd | tail -n +2')).stdout.trim().split('\n')
    .map((l) => l.replace(/^.* (\d+) -> (.*)$/, '$1 $2'));
  t.deepEqual(fds.map((l) => l.split(' ')[0]), ['0', '1', '2', '3'], 'a command has fds 0-2 (and ls its own 3)', { fds });
  t.like(fds[3] ?? '', /^3 \/proc\/\d+\/fd$/, '... fd 3 being the listing of /proc/self/fd', { fds });
  const viaFd = await run('for f in /proc/self/fd/*; do ls "$f/.." 2>/dev/null; done; true');
  t.ok(!viaFd.stdout.includes(path.basename(bDir)) && !viaFd.stdout.includes(path.basename(aDir)),
    'no descriptor leads to the sandboxes\' host directories', viaFd);

  // ---- the machinery around the jail: the keyrings, the runner
  await checkKeyCalls(t, run);
  await checkRunnerHeld(t, run);

  // ---- the other sandbox
  const byHostPath = await run(`cat ${bDir}/private.txt 2>&1; ls ${path.dirname(bDir)} 2>&1; echo rc=$?`);
  t.ok(!byHostPath.stdout.includes(SECRET) && /rc=[1-9]/.test(byHostPath.stdout), 'B\'s host path does not exist in A', byHostPath);
  const byDots = await run(`cat ../${path.basename(bDir)}/private.txt 2>/dev/null; echo rc=$?; ls -a .. 2>&1`);
  t.ok(!byDots.stdout.includes(SECRET) && /rc=[1-9]/.test(byDots.stdout) && !byDots.stdout.includes(path.basename(bDir)),
    '../ from the workspace leads to the jail\'s own /, where B is not', byDots);
  await run(`ln -s ${bDir}/private.txt hostlink; ln -s ../${path.basename(bDir)}/private.txt dotlink; ln -s / rootlink`);
  const paths = [`../${path.basename(bDir)}/private.txt`, `${bDir}/private.txt`, 'hostlink', 'dotlink',
    `rootlink${bDir}/private.txt`, `/workspace/../../../${bDir}/private.txt`];
  // reads first: a write may land in the jail's own /tmp (the host path of
  // B here is under /tmp), and a later read would find that, not B's file
  for (const p of paths)
    t.deepEqual(await readTools(srv, a.sandbox_id, p), [], `every file tool refuses to read ${p}`);
  for (const p of paths)
    t.deepEqual(await writeTools(srv, a.sandbox_id, p, bDir), [], `no file tool writes B's directory through ${p}`);
  t.is(fs.readFileSync(path.join(bDir, 'private.txt'), 'utf8'), `${SECRET}\n`, 'B\'s file is unchanged');
  t.deepEqual(fs.readdirSync(path.dirname(aDir)).filter((n) => !/^sg-[0-9a-f]{12}$/.test(n)), [], 'nothing was planted beside the sandbox directories');

  // ---- the host's loopback
  const conn = `python3 -c 'import socket; s=socket.create_connection(("127.0.0.1", ${lo.port}), 3); print(s.recv(100).decode().strip())' 2>&1 | tail -1`;
  const blocked = await run(conn);
  t.ok(!/hello from the host/.test(blocked.stdout) && lo.hits() === 0, 'network none: a server on the host\'s loopback is unreachable', blocked);
  t.like((await run('python3 -c \'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); c=socket.create_connection(s.getsockname()); print("own loopback")\'')).stdout,
    /own loopback/, '... while the sandbox\'s own loopback works');
  await srv.close();

  const hostNet = await sdkClient([...LOCAL, '--set', 'local.network=host'], SPARE_DEFAULT);
  const h = await hostNet.tool('create_sandbox', {});
  trackSandbox(h.sandbox_id);
  t.is(h.details?.network, 'host', 'network = host is in the details');
  t.like((await hostNet.tool('run_command', { command: conn })).stdout, /hello from the host/, 'network = host: the loopback server answers (the control)');
  await hostNet.close();

  // ---- two HTTP sessions, two tokens
  const tokens = path.join(tmpdir(), 'tokens');
  const TA = `token-a-${'a'.repeat(40)}`, TB = `token-b-${'b'.repeat(40)}`;
  fs.writeFileSync(tokens, `${TA}\n${TB}\n`, { mode: 0o600 });
  const http = await startHttp({ args: LOCAL, set: { auth_tokens_file: tokens }, env: SPARE_DEFAULT });
  const sa = await connect(http.url, { token: TA, name: 'agent A' });
  const sb = await connect(http.url, { token: TB, name: 'agent B' });
  const sba = await sb.tool('create_sandbox', {});
  trackSandbox(sba.sandbox_id);
  await sb.tool('write_file', { path: 'mine.txt', content: `${SECRET}\n` });
  const saa = await sa.tool('create_sandbox', {});
  trackSandbox(saa.sandbox_id);
  const byId = await sa.call('read_file', { path: 'mine.txt', sandbox_id: sba.sandbox_id });
  t.ok(byId.isError && /not found/.test(errorText(byId)), 'session A cannot name session B\'s sandbox', { text: errorText(byId) });
  fs.writeFileSync(path.join(hostDir(sba), 'private.txt'), `${SECRET}\n`);
  const toB = `../${path.basename(hostDir(sba))}/private.txt`;
  t.deepEqual(await readTools(sa, saa.sandbox_id, toB), [], 'session A\'s file tools cannot read B\'s file by ../');
  t.deepEqual(await writeTools(sa, saa.sandbox_id, toB, hostDir(sba)), [], '... nor write there');
  const cat = await sa.tool('run_command', { command: `cat ${hostDir(sba)}/mine.txt ../${path.basename(hostDir(sba))}/mine.txt 2>&1; true` });
  t.ok(!cat.stdout.includes(SECRET), 'nor its commands', cat);
  // a shell is B's as its machine is: A cannot use it, even by naming a
  // machine of its own after B's sandbox id (a name works where an id does)
  const shB = await sb.tool('sandbox_env', { action: 'shell_new', params: { machine: sba.sandbox_id } });
  await sb.tool('sandbox_shell_exec', { shell_id: shB.shell_id, command: `export TOKEN=${SECRET}` });
  const named = await sa.call('sandbox_env', { action: 'machine_create', params: { name: sba.sandbox_id } });
  t.ok(named.isError && /is a machine's id: choose another name/.test(errorText(named)),
    'session A cannot name a machine after B\'s sandbox id', { text: errorText(named) });
  const useB = await sa.call('sandbox_shell_exec', { shell_id: shB.shell_id, command: 'echo $TOKEN; cat mine.txt' });
  t.ok(useB.isError && /shell_id '[^']+' not found/.test(errorText(useB)) && !JSON.stringify(useB).includes(SECRET),
    'session A cannot use B\'s shell', { text: errorText(useB) });
  await sa.close();
  await sb.close();
  await http.stop('SIGTERM');
}, { timeout: 240 });
