// Refuse, never degrade: with bwrap missing from PATH, or replaced by one
// that cannot create a user namespace (what a kernel or an AppArmor policy
// that forbids them makes bwrap say), local refuses to create sandboxes and
// names the fix; nothing runs unconfined; its probe says it is not usable,
// and docker goes on working (and is the default).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { t, preflight, sdkClient, errorText, runCli, trackSandbox, SPARE_DEFAULT } from '../lib/sg.mjs';

const LOCAL = ['--set', 'sandbox.default_backend=local'];

t.run(async () => {
  await preflight(); // docker too: it must keep working
  const marker = path.join(os.tmpdir(), `sg-unconfined-${process.pid}`);

  // ---- no bwrap in PATH
  const noPath = { PATH: '/nonexistent', ...SPARE_DEFAULT };
  const conf = await runCli(['config'], noPath);
  t.like(conf.stdout, /; local [^\n]*: not usable: local: no bwrap \(bwrap\) in PATH: install bubblewrap \(apt-get install bubblewrap\)/,
    'sandgate config: local is not usable, and the fix is named', { out: conf.stdout.slice(-800) });
  t.like(conf.stdout, /; default backend: docker/, '... the default backend is docker');
  const srv = await sdkClient([], noPath);
  const refused = await srv.call('create_sandbox', { backend: 'local' });
  t.ok(refused.isError, 'create_sandbox on local is refused');
  t.like(errorText(refused), /install bubblewrap.*local never runs commands unconfined/, '... naming the package, never running unconfined', { text: errorText(refused) });
  const dk = await srv.tool('create_sandbox', { backend: 'docker' });
  trackSandbox(dk.sandbox_id);
  t.is((await srv.tool('run_command', { command: 'echo docker works', sandbox_id: dk.sandbox_id })).stdout, 'docker works\n', 'docker still works');
  await srv.tool('kill_sandbox', { sandbox_id: dk.sandbox_id });
  await srv.close();

  // ---- a bwrap that cannot create a user namespace; the sandbox user must
  // be able to run it, so it lives in a world-readable directory
  const fake = fs.mkdtempSync(path.join(os.tmpdir(), 'sg-fake-bwrap-'));
  t.onCleanup(() => fs.rmSync(fake, { recursive: true, force: true }));
  fs.chmodSync(fake, 0o755);
  fs.writeFileSync(path.join(fake, 'bwrap'), `#!/bin/sh
case " $* " in *" --version "*) echo "bubblewrap 0.8.0"; exit 0;; esac
# what bwrap says where unprivileged user namespaces are forbidden
echo "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'." >&2
exit 1
`, { mode: 0o755 });
  const broken = { PATH: `${fake}:${process.env.PATH}`, ...SPARE_DEFAULT };
  const bconf = await runCli(['config'], broken);
  t.like(bconf.stdout, /; local [^\n]*: not usable: local: bubblewrap cannot create the sandbox's namespaces \(bwrap: No permissions to creating new namespace/,
    'sandgate config: local is not usable, with bwrap\'s own words', { out: bconf.stdout.slice(-1000) });
  const cli = await runCli([...LOCAL, 'call', 'run_command', JSON.stringify({ command: `touch ${marker}` })], broken);
  t.is(cli.code, 1, 'a call on local fails');
  t.like(cli.stderr, /bubblewrap cannot create the sandbox's namespaces .*: (unprivileged user namespaces|user namespaces|AppArmor|this is a container|allow unprivileged user namespaces)[^;]*(sysctl|AppArmor|--security-opt)[^;]*; local never runs commands unconfined/,
    '... naming the fix (sysctl, AppArmor policy or container options) and refusing to run unconfined', { stderr: cli.stderr.slice(-800) });
  t.ok(!fs.existsSync(marker), 'and the command never ran, confined or not');
  const srv2 = await sdkClient([], broken);
  const dk2 = await srv2.tool('create_sandbox', {});
  trackSandbox(dk2.sandbox_id);
  t.is(dk2.backend, 'docker', 'with local refusing, the default is docker, which works');
  await srv2.close();
}, { timeout: 180 });
