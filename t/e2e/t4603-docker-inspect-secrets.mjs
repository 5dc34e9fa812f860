// docker_inspect shows a machine's environment by key, never by value: a
// secret given to docker_run reaches the container's process, and appears
// in no result (docker_run, docker_inspect, docker_ps, status, docker_logs
// of something else), no log line of sandgate and no audit row; the image
// view (kind image) lists its env keys only too.
import fs from 'node:fs';
import path from 'node:path';
import { t, preflight, sdkClient, resultData, tmpdir } from '../lib/sg.mjs';
import { uniq, dockerArgs, envFlat, buildImage, PID } from '../lib/docker.mjs';

t.run(async () => {
  await preflight();
  const secret = `s3cr3t-value-${PID}-${Math.random().toString(36).slice(2)}`;
  const imgSecret = `image-secret-${PID}`;
  const img = await buildImage(`sgt-envimg-${PID}:1`,
    `FROM sandgate/base:1\nENV IMAGE_TOKEN=${imgSecret}\nCMD ["/bin/sleep", "infinity"]\n`);
  const audit = path.join(tmpdir(), 'audit.db');
  const srv = await sdkClient([...dockerArgs(), '--set', `audit.log_path=${audit}`], {}, { name: 'sandgate' });
  const name = uniq('t4603');
  const seen = [];
  const keep = (r) => { seen.push(JSON.stringify(r)); return resultData(r); };

  const run = keep(await envFlat(srv, 'docker_run', { name, image: img, env: { API_SECRET: secret, MODE: 'test' } }));
  t.is(run.status, 'running', 'docker_run with a secret in env');
  const inside = await srv.tool('sandbox_shell_exec', { machine: name, command: 'test "$API_SECRET" = "$(cat /proc/1/environ | tr "\\0" "\\n" | sed -n "s/^API_SECRET=//p")" && printf %s "${#API_SECRET}"' });
  t.is(inside.output, String(secret.length), 'the container\'s own process and its shells have the value');

  const ins = keep(await envFlat(srv, 'docker_inspect', { machine: name }));
  t.deepEqual(ins.env_keys?.filter((k) => ['API_SECRET', 'MODE', 'IMAGE_TOKEN'].includes(k)), ['API_SECRET', 'IMAGE_TOKEN', 'MODE'],
    'docker_inspect lists the environment keys, sorted', ins.env_keys);
  t.hasFields(ins, { name: `sandgate-${name}`, image: img, finished_at: null, restart_policy: { name: 'on-failure', max_retry: 3 } },
    'docker_inspect: the container view');
  t.hasFields(ins.state ?? {}, { status: 'running', running: true, exit_code: 0 }, '... its state');
  t.ok(ins.mounts?.some((m) => m.destination === '/workspace' && m.mode === 'rw'), '... with its mounts', ins.mounts);
  t.ok(!('env' in ins) && !('Env' in ins), '... and no environment values');
  const iv = keep(await envFlat(srv, 'docker_inspect', { kind: 'image', image: img }));
  t.ok(iv.env_keys?.includes('IMAGE_TOKEN') && iv.env_keys?.includes('PATH'), 'kind image: the image\'s env keys', iv);
  t.deepEqual(iv.tags, [img], '... its tags');
  t.deepEqual(iv.cmd, ['/bin/sleep', 'infinity'], '... its cmd');
  const iv2 = keep(await envFlat(srv, 'docker_inspect', { kind: 'image', machine: img }));
  t.is(iv2.id, iv.id, 'kind image also takes the reference in machine (the seed\'s way)');
  keep(await envFlat(srv, 'docker_ps'));
  keep(await srv.call('sandbox_env', { action: 'status' }));
  keep(await envFlat(srv, 'docker_logs', { machine: name }));
  const hist = keep(await envFlat(srv, 'docker_image_history', { image: img }));
  t.ok(hist.layers?.some((l) => /IMAGE_TOKEN/.test(l.created_by)), 'docker_image_history shows the layers (an image\'s own history is its own)');
  seen.pop(); // that history names the image's ENV line by design: not the machine's secret

  const q = await srv.tool('sandbox_audit_query', { action: 'docker_run' });
  const row = q.records?.find((r) => r.details?.params?.name === name);
  t.deepEqual(Object.keys(row?.details?.params?.env?.API_SECRET ?? {}).sort(), ['hmac_sha256', 'len'],
    'the audit row of docker_run keeps the env value as its keyed hash and length', row);
  for (const s of seen) t.ok(!s.includes(secret), `no result holds the secret value (${s.slice(0, 60)}...)`);
  for (const s of seen) t.ok(!s.includes(imgSecret), `no result but the history holds the image's env value (${s.slice(0, 60)}...)`);
  await srv.close();
  const log = fs.readFileSync(srv.stderrPath, 'utf8');
  t.ok(log.length > 0 && !log.includes(secret), 'sandgate\'s log has no line with the value');
  const db = fs.readFileSync(audit);
  t.ok(db.length > 0 && !db.includes(Buffer.from(secret)), 'the audit database does not hold the value');
  const state = path.join(tmpdir(), 'state', 'sandgate');
  for (const f of fs.readdirSync(state).filter((x) => x.startsWith('state.db'))) {
    t.ok(!fs.readFileSync(path.join(state, f)).includes(Buffer.from(secret)), `the machine record (${f}) does not hold it`);
  }
  for (const f of fs.readdirSync(path.dirname(audit)).filter((x) => x.startsWith('audit.db'))) {
    t.ok(!fs.readFileSync(path.join(path.dirname(audit), f)).includes(Buffer.from(secret)), `${f} does not hold it either`);
  }
}, { timeout: 240 });
