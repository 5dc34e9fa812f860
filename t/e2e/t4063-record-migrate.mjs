// Persistent machines of earlier versions lived in <state>/machines.json:
// the first start moves them into the machine record (state.db) and removes
// the file, and the machine is then found by name, listed, and removed as
// any other.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, runCli, tmpdir, docker, trackSandbox, containerOf, IMAGE, LABEL_MANAGED, LABEL_OWNER } from '../lib/sg.mjs';

function stdoutJson(r) {
  try { return JSON.parse(r.stdout); } catch { return null; }
}

t.run(async () => {
  await preflight();
  const name = `old-${process.pid}`;
  const id = (await docker(['run', '-d', '--label', `${LABEL_MANAGED}=1`, '--label', `${LABEL_OWNER}=gone:1:1`,
    '--label', 'org.sandgate.persistent=1', '--label', `org.sandgate.name=${name}`, IMAGE, 'sleep', 'infinity'])).trim();
  trackSandbox(id);
  const state = path.join(tmpdir(), 'state', 'sandgate');
  fs.mkdirSync(state, { recursive: true, mode: 0o700 });
  const cred = `local:${process.getuid()}`;
  fs.writeFileSync(path.join(state, 'machines.json'), JSON.stringify({
    machines: [{ backend: 'docker', id, name, owner: cred, purpose: 'made by an earlier sandgate', template: 'base', created: 1700000000 }],
  }), { mode: 0o600 });

  const ml = await runCli(['call', 'sandbox_env', '{"action":"machine_list"}']);
  t.is(ml.code, 0, 'machine_list runs', { stderr: ml.stderr });
  const m = stdoutJson(ml)?.machines?.find((x) => x.name === name);
  t.hasFields(m ?? {}, { sandbox_id: id, persistent: true, purpose: 'made by an earlier sandgate', backend: 'docker' },
    'the machine of machines.json is listed, with its purpose');
  t.like(ml.stderr, /migrated 1 persistent machine record\(s\) from .*machines\.json into state\.db/, 'the log says it migrated');
  t.ok(!fs.existsSync(path.join(state, 'machines.json')), 'machines.json is gone');
  t.is(fs.statSync(path.join(state, 'state.db')).mode & 0o777, 0o600, 'state.db is 0600');

  const rc = await runCli(['call', 'run_command', '{"command":"echo by name"}', '--sandbox-id', name]);
  t.is(stdoutJson(rc)?.stdout, 'by name\n', 'a later process reaches it by name', { stderr: rc.stderr });
  const rm = await runCli(['call', 'sandbox_env', JSON.stringify({ action: 'machine_remove', params: { machine: name } })]);
  t.hasFields(stdoutJson(rm) ?? {}, { status: 'removed' }, 'machine_remove removes it', { stderr: rm.stderr });
  t.is(await containerOf(id), null, 'its container is gone');
  const again = await runCli(['call', 'run_command', '{"command":"true"}', '--sandbox-id', name]);
  t.ok(again.code === 1 && /not found/.test(again.stderr), 'and its name is not found any more');
}, { timeout: 120 });
