// create_sandbox: the result object, the container and its labels, timeout
// and envs, explicit template and backend, and clear errors for bad ones.
import { t, preflight, sdkClient, containerOf, resultData, checkResultShape, errorText, IMAGE,
  LABEL_MANAGED, LABEL_OWNER, LABEL_SESSION, LABEL_CREATED, LABEL_LIFETIME } from '../lib/sg.mjs';

t.run(async () => {
  await preflight();
  const srv = await sdkClient();
  const t0 = Math.floor(Date.now() / 1000);
  const res = await srv.call('create_sandbox', {});
  t.ok(!res.isError, 'create_sandbox {} succeeds', { result: res });
  checkResultShape(res, 'create_sandbox');
  const d = resultData(res);
  t.like(d.sandbox_id, /^\S+$/, 'sandbox_id is a non-empty string');
  t.hasFields(d, { status: 'running', backend: 'docker', template: 'base', workspace: '/workspace' },
    'result: status running, backend docker, template base, workspace /workspace');
  t.is(typeof d.url, 'string', 'result has a url string');
  t.ok(d.sandbox_created !== true, 'create_sandbox does not report a lazy creation');

  const c = await containerOf(d.sandbox_id);
  t.ok(c, 'a managed container exists for the sandbox_id', { sandbox_id: d.sandbox_id });
  if (c) {
    t.ok(c.running, 'the container is running');
    t.is(c.image, IMAGE, `the container runs ${IMAGE}`);
    t.is(c.labels[LABEL_MANAGED], '1', `label ${LABEL_MANAGED}=1`);
    const m = /^([^:]+):(\d+):(\S+)$/.exec(c.labels[LABEL_OWNER] ?? '');
    t.ok(m, `label ${LABEL_OWNER} is host:pid:starttime`, { owner: c.labels[LABEL_OWNER] });
    t.is(m ? Number(m[2]) : null, srv.pid, 'the owner label names this sandgate pid');
    t.like(c.labels[LABEL_SESSION], /^[0-9a-f]{8,64}$/, `label ${LABEL_SESSION} is a hex hash`);
    const created = Number(c.labels[LABEL_CREATED]);
    t.ok(created >= t0 - 5 && created <= Math.floor(Date.now() / 1000) + 5, `label ${LABEL_CREATED} is the creation time (unix s)`, { created, t0 });
    t.is(c.labels[LABEL_LIFETIME], '300', `label ${LABEL_LIFETIME} is the default timeout 300`);
  }

  const d2 = await srv.tool('create_sandbox', { timeout: 120, envs: { SG_E2E_VAR: 'hello world', SG_E2E_2: 'x=y' } });
  t.isnt(d2.sandbox_id, d.sandbox_id, 'a second create_sandbox makes a new sandbox');
  const c2 = await containerOf(d2.sandbox_id);
  t.is(c2?.labels[LABEL_LIFETIME], '120', 'timeout 120 is the lifetime label');
  t.is(c2?.labels[LABEL_SESSION], c?.labels[LABEL_SESSION], 'both sandboxes carry the same session label');
  const env = await srv.tool('run_command', { command: 'printf "%s|%s" "$SG_E2E_VAR" "$SG_E2E_2"', sandbox_id: d2.sandbox_id });
  t.is(env.stdout, 'hello world|x=y', 'create_sandbox envs are set in the sandbox');

  const d3 = await srv.tool('create_sandbox', { template: 'base', backend: 'docker' });
  t.is(d3.template, 'base', 'explicit template base and backend docker work');
  t.is(d3.backend, 'docker', 'backend is docker');

  const bt = await srv.call('create_sandbox', { template: 'no-such-template-e2e' });
  t.ok(bt.isError, 'an unknown template is an isError result', { result: bt });
  t.like(errorText(bt), /no-such-template-e2e/, 'the error names the template', { text: errorText(bt) });
  const bb = await srv.call('create_sandbox', { backend: 'no-such-backend' });
  t.ok(bb.isError, 'an unknown backend is an isError result', { result: bb });
  t.like(errorText(bb), /no-such-backend|backend/, 'the error names the backend', { text: errorText(bb) });

  await srv.close();
  t.ok(!(await containerOf(d.sandbox_id)), 'session end removed the sandboxes');
}, { timeout: 150 });
