#!/usr/bin/env python3
"""local.so next to Docker and to a bare bubblewrap, side by side in one run.

run_command "true", p50 and p99 in ms, interleaved (one of each per round,
so drift hits all alike), on warm sandboxes:
  local        run_command through `sandgate stdio` on a local sandbox (the
               runner in its bwrap jail)
  docker       run_command through `sandgate stdio` on a Docker sandbox (the
               runner in the container)
  bwrap_min    a bare `bwrap --unshare-all ... --ro-bind /usr /usr ... true`
               started per command: what a jail per command would cost
  bwrap_jail   the same with the options of a local jail (its /etc binds,
               /proc, /dev, /tmp, the sandbox user as root)
  runner_jail  a SPAWN of `true` on sandgate-runner's own protocol, the runner
               in a jail-like bwrap (no MCP, no JSON, no sandgate): the floor
               of the local path
  docker_exec  `docker exec CTR true` on a container of the bench's own (the
               floor an agent without sandgate pays on Docker)
  local_before with --before DIR: the local path of another build (its
               sandgate, sandgate-runner and .libs), same rounds
  spawn_true   os.posix_spawn of /bin/true and its waitpid, from this
               process: what one fork+exec costs on this machine, the floor
               under any run_command
  spawn_sh     the same for `/bin/sh -c true`, which is what the runner
               spawns for a command

Then back to back (`*_b2b`): n calls of local, runner_jail and spawn_sh each
in a row, no other path between them: an agent's loop, one tool after
another, looks more like this than like the interleaved rounds.  spawn_sh is
the like-for-like floor (the runner spawns `/bin/sh -c`); the two spawn rows
take turns in each round, so neither always follows the bwrap rows.

create-to-first-output, ms (n rounds): create_sandbox, then the first output
of `echo hi` in it, through one `sandgate stdio`; for bwrap, the first byte
of `echo hi` from a new jail-like bwrap.  `local` is without a spare ([local]
spare = 0: the jail starts in the call); `local_spare` is a second
`sandgate stdio` with spare = 1, and each round waits (untimed) until its log
says the refill is ready, so every timed create is a hit (a jail started
ahead, doc/local.md).

Targets (issue 13, doc/performance.md): local run_command p50 <= 1.5 ms and
create-to-first-output < 20 ms.  Not part of `make check`.

usage: bench/local_bench.py [-n 200] [--creates 20] [--sandgate ./sandgate] [--no-docker]
                            [--before BUILD_DIR] [--json]
"""
import argparse, json, os, pwd, shutil, subprocess, sys, tempfile, time

from benchlib import LoggedServer, RawRunner, Server, summary

# What a local jail binds of /etc (plugins/local/jail.c, jail_etc).
JAIL_ETC = ["alternatives", "ssl/certs", "ssl/openssl.cnf", "ca-certificates",
            "ca-certificates.conf", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
            "protocols", "services", "networks", "ethertypes", "localtime", "timezone",
            "locale.alias", "locale.gen", "default/locale", "ld.so.cache", "ld.so.conf",
            "ld.so.conf.d", "mime.types", "magic", "magic.mime", "bash.bashrc", "profile",
            "inputrc", "environment", "os-release", "debian_version", "lsb-release", "fonts",
            "matplotlibrc", "python3", "python3.11", "python3.12", "perl", "gitconfig", "npmrc",
            "java-17-openjdk", "subversion", "wgetrc", "curlrc"]


def root_links():
    args = []
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = "/" + top
        if os.path.islink(p):
            args += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            args += ["--ro-bind", p, p]
    return args


def bwrap_min():
    return (["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr"] +
            root_links() + ["--proc", "/proc", "--dev", "/dev", "--"])


def bwrap_jail(ws):
    a = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
         "--unshare-cgroup-try", "--unshare-net", "--disable-userns", "--die-with-parent",
         "--new-session", "--hostname", "bench", "--ro-bind", "/usr", "/usr"] + root_links()
    for e in JAIL_ETC:
        a += ["--ro-bind-try", f"/etc/{e}", f"/etc/{e}"]
    a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", ws, "/workspace",
          "--remount-ro", "/", "--chdir", "/workspace", "--clearenv", "--setenv", "PATH",
          "/usr/bin:/bin", "--"]
    return a


def spawn(argv):
    """One posix_spawn of argv and its waitpid, in ms."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ)
    os.waitpid(pid, 0)
    return (time.perf_counter() - t0) * 1000


def jail_user():
    """As root, what a local jail runs as ([local] user's default)."""
    if os.geteuid() != 0:
        return None
    for name in ("sandgate", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    return None


def run_bwrap(argv, user):
    kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, **kw)


def first_output_bwrap(argv, user):
    kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
    t0 = time.perf_counter()
    p = subprocess.Popen(argv + ["/bin/sh", "-c", "echo hi"], stdout=subprocess.PIPE, **kw)
    p.stdout.read(1)
    t = (time.perf_counter() - t0) * 1000
    p.wait()
    return t


class JailRunner(RawRunner):
    """sandgate-runner --stdio in a jail-like bwrap, as the jail's user."""

    def __init__(self, argv, user):
        kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  bufsize=0, **kw)
        self.id = 0
        self.send(0x01, 0, self.field(1, (1 << 16).to_bytes(4, "big")))
        if self.frame()[0] != 0x81:
            raise RuntimeError("no HELLO from the jailed runner")


class SpareServer(LoggedServer):
    """A server whose log says when its local spare is ready."""

    def wait_spare(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = open(self.log).read()
            if text.count(" ready in ") > text.count("spare: handed out"):
                return
            time.sleep(0.02)
        raise RuntimeError(f"no spare ready within {timeout} s (see {self.log})")


def build_server(build, env):
    e = dict(env, SANDGATE_PLUGIN_DIR=os.path.join(build, ".libs"),
             SANDGATE_RUNNER=os.path.join(build, "sandgate-runner"))
    s = Server([os.path.join(build, "sandgate"), "stdio"], e)
    s.initialize("local-bench-before")
    return s


def first_output(srv, backend):
    t0 = time.perf_counter()
    sid = srv.tool("create_sandbox", {"backend": backend})["sandbox_id"]
    out = srv.tool("run_command", {"command": "echo hi", "sandbox_id": sid})
    t = (time.perf_counter() - t0) * 1000
    if out.get("stdout") != "hi\n":
        raise RuntimeError(f"echo hi gave {out!r}")
    srv.tool("kill_sandbox", {"sandbox_id": sid})
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--creates", type=int, default=20)
    ap.add_argument("--sandgate", default="./sandgate")
    ap.add_argument("--no-docker", action="store_true", help="leave Docker out")
    ap.add_argument("--json", action="store_true", help="JSON only")
    ap.add_argument("--before", help="another build directory, measured as local_before")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("SANDGATE_PLUGIN_DIR", os.path.abspath(".libs"))
    env["SANDGATE_LOCAL_SPARE"] = "0"  # "local": the jail starts in the call
    srv = Server([a.sandgate, "stdio"], env)
    srv.initialize("local-bench")
    log = tempfile.mktemp(prefix="local-bench-", suffix=".log")
    spare = SpareServer([a.sandgate, "stdio"], dict(env, SANDGATE_LOCAL_SPARE="1"), log)
    spare.initialize("local-bench-spare")
    user = jail_user()
    ws = f"/tmp/sg-local-bench-{os.getpid()}"
    os.makedirs(ws, exist_ok=True)
    if user:
        os.chown(ws, user.pw_uid, user.pw_gid)
    jail = bwrap_jail(ws)
    mini = bwrap_min()

    paths = ["local"] + ([] if a.no_docker else ["docker"])
    srvs = {b: srv for b in paths}
    old = build_server(a.before, env) if a.before else None
    if old:
        paths.append("local_before")
        srvs["local_before"] = old
    sids = {b: srvs[b].tool("create_sandbox", {"backend": b.split("_")[0]})["sandbox_id"]
            for b in paths}
    for b, sid in sids.items():
        srvs[b].tool("run_command", {"command": "true", "sandbox_id": sid})
    runner = os.path.join(os.path.dirname(os.path.abspath(a.sandgate)), "sandgate-runner")
    shutil.copy(runner, os.path.join(ws, ".runner"))
    jr = JailRunner(jail + ["/workspace/.runner", "--stdio"], user)
    ctr = None
    if not a.no_docker:
        ctr = f"sg-local-bench-{os.getpid()}"
        subprocess.run(["docker", "run", "-d", "--rm", "--name", ctr, "sandgate/base:1",
                        "sleep", "3600"], stdout=subprocess.DEVNULL, check=True)
    cmd = {b: [] for b in paths + ["runner_jail", "bwrap_min", "bwrap_jail"] +
           (["docker_exec"] if ctr else []) + ["spawn_true", "spawn_sh"]}
    for i in range(a.n + 5):  # 5 warm-up rounds, not counted
        order = paths if i % 2 else paths[::-1]
        for b in order:
            t0 = time.perf_counter()
            srvs[b].tool("run_command", {"command": "true", "sandbox_id": sids[b]})
            if i >= 5:
                cmd[b].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        jr.spawn(jr.field(10, b"true"))
        if i >= 5:
            cmd["runner_jail"].append((time.perf_counter() - t0) * 1000)
        if ctr:
            t0 = time.perf_counter()
            subprocess.run(["docker", "exec", ctr, "true"], check=True)
            if i >= 5:
                cmd["docker_exec"].append((time.perf_counter() - t0) * 1000)
        for name, argv in (("bwrap_min", mini), ("bwrap_jail", jail)):
            t0 = time.perf_counter()
            run_bwrap(argv + ["/usr/bin/true"], user)
            if i >= 5:
                cmd[name].append((time.perf_counter() - t0) * 1000)
        floors = (("spawn_true", ["/bin/true"]), ("spawn_sh", ["/bin/sh", "-c", "true"]))
        for name, argv in (floors if i % 2 else floors[::-1]):
            t = spawn(argv)
            if i >= 5:
                cmd[name].append(t)
    b2b = {"local_b2b": lambda: srv.tool("run_command", {"command": "true", "sandbox_id": sids["local"]}),
           "runner_jail_b2b": lambda: jr.spawn(jr.field(10, b"true")),
           "spawn_sh_b2b": lambda: spawn(["/bin/sh", "-c", "true"])}
    for name, f in b2b.items():
        cmd[name] = []
        for i in range(a.n + 5):
            t0 = time.perf_counter()
            f()
            if i >= 5:
                cmd[name].append((time.perf_counter() - t0) * 1000)
    for b, sid in sids.items():
        srvs[b].tool("kill_sandbox", {"sandbox_id": sid})
    jr.close()
    os.unlink(os.path.join(ws, ".runner"))
    if ctr:
        subprocess.run(["docker", "rm", "-f", ctr], stdout=subprocess.DEVNULL)

    create = {b: [] for b in paths + ["local_spare", "bwrap_jail"]}
    for i in range(a.creates + 1):  # 1 warm-up round
        for b in (paths if i % 2 else paths[::-1]):
            t = first_output(srvs[b], b.split("_")[0])
            if i:
                create[b].append(t)
        spare.wait_spare()  # untimed: every timed create is a hit
        t = first_output(spare, "local")
        if i:
            create["local_spare"].append(t)
        t = first_output_bwrap(jail, user)
        if i:
            create["bwrap_jail"].append(t)
    srv.close()
    spare.close()
    hits = open(log).read().count("spare: handed out")
    os.unlink(log)
    if old:
        old.close()
    os.rmdir(ws)

    res = {"run_command_true": {k: summary(v) for k, v in cmd.items()},
           "create_to_first_output": {k: summary(v) for k, v in create.items()}}
    out = {"n": a.n, "creates": a.creates, "results_ms": res,
           "loadavg": open("/proc/loadavg").read().split()[:3], "cpus": os.cpu_count(),
           "jail_user": user.pw_name if user else None, "spare_hits": hits}
    ok = (res["run_command_true"]["local"]["p50"] <= 1.5 and
          res["create_to_first_output"]["local_spare"]["p50"] < 20)
    out["targets_met"] = ok
    rc = res["run_command_true"]
    out["over_floor_ms"] = {"local_minus_spawn_sh": round(rc["local"]["p50"] - rc["spawn_sh"]["p50"], 2),
                            "local_b2b_minus_spawn_sh_b2b":
                                round(rc["local_b2b"]["p50"] - rc["spawn_sh_b2b"]["p50"], 2)}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0 if ok else 1
    print(f"n = {a.n} commands and {a.creates} creates per cell, {os.cpu_count()} CPUs, "
          f"loadavg {' '.join(out['loadavg'])}\n")
    print("| measure | path | p50 ms | p99 ms | mean ms |")
    print("|---|---|---:|---:|---:|")
    for m, r in res.items():
        for k, v in r.items():
            print(f"| {m} | {k} | {v['p50']} | {v['p99']} | {v['mean']} |")
    print(f"\nspare hits: {hits} of {a.creates + 1} creates through the spare server")
    print(f"targets (local run_command p50 <= 1.5 ms, create-to-first-output from a spare "
          f"< 20 ms): {'met' if ok else 'NOT met'}")
    print(f"a fork+exec here: spawn_true p50 {rc['spawn_true']['p50']} ms, spawn_sh "
          f"{rc['spawn_sh']['p50']} ms; local over spawn_sh: "
          f"{out['over_floor_ms']['local_minus_spawn_sh']} ms interleaved, "
          f"{out['over_floor_ms']['local_b2b_minus_spawn_sh_b2b']} ms back to back")
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
