#!/usr/bin/env python3
"""run_command on SSH: ssh.so with its runner, ssh.so on plain exec, and
OpenSSH's own connection reuse, side by side in one run.

Starts a throwaway sshd (t/ssh/sshd-fixture.sh) and, for each of the commands
"true" and "echo hi", measures p50/p99 in ms of:
  runner      run_command through `sandgate stdio` on ssh.so (the default:
              sandgate-runner on the host, one channel for every command)
  plain       the same with --set ssh.runner=false (a channel, an exec request
              and a login shell per command, on a pooled libssh2 connection)
  jailed      the runner path with each sandbox a bubblewrap jail on the host
              (--set ssh.isolation=bwrap: the sandbox's own runner inside it);
              runner and plain above are plain directories (isolation none)
  ssh_cm      `ssh -o ControlMaster=auto -o ControlPath=... -o ControlPersist=60
              ... <command>` reusing a master connection: what a script that
              shells out to ssh pays, starting the ssh client process included
  raw_runner  a SPAWN round trip on the runner's own protocol over one
              `ssh ... sandgate-runner --stdio` channel (the master's): the
              floor of the runner path without MCP, JSON and libssh2
Calls are interleaved (one of each per round), so drift hits all alike.  Same
host, same user, same login shell (the fixture's sshd sets SHLVL=1, so bash
skips ~/.bashrc everywhere).  Also: 8 concurrent calls on each sandgate path,
and the one-time costs (connect + create_sandbox; the runner's upload and
start, from sandgate's log).  Targets (doc/performance.md): runner p50 <= 5
ms; jailing adds at most 1 ms p50 (jailed - runner).
Not part of `make check`; shared machines drift, so compare within one run.

usage: bench/ssh-bench.py [-n 200] [--sandgate ./sandgate] [--plugins .libs]
                          [--runner ./sandgate-runner] [--json]
"""
import argparse, json, os, re, shutil, struct, subprocess, sys, tempfile, threading, time

from benchlib import RawRunner, summary as stats

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "t", "ssh", "sshd-fixture.sh")
COMMANDS = ["true", "echo hi"]


class Server:
    """A sandgate stdio process spoken to with raw JSON-RPC lines."""

    def __init__(self, cmd, env, stderr_path):
        self.err = open(stderr_path, "wb")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=env)
        self.id = 0
        self.lock = threading.Lock()
        self.waiting = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "ssh-bench", "version": "1"}})

    def _read(self):
        for line in self.p.stdout:
            msg = json.loads(line)
            ev = self.waiting.get(msg.get("id"))
            if ev:
                ev[1] = msg
                ev[0].set()

    def call(self, method, params=None):
        with self.lock:
            self.id += 1
            rid = self.id
            ev = [threading.Event(), None]
            self.waiting[rid] = ev
            msg = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                msg["params"] = params
            self.p.stdin.write((json.dumps(msg) + "\n").encode())
            self.p.stdin.flush()
        ev[0].wait(120)
        del self.waiting[rid]
        if ev[1] is None:
            raise RuntimeError(f"no answer to {method}")
        return ev[1]

    def tool(self, name, args):
        r = self.call("tools/call", {"name": name, "arguments": args})
        res = r.get("result") or {}
        if r.get("error") or res.get("isError"):
            raise RuntimeError(f"{name}: {r}")
        return res.get("structuredContent")

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)
        self.err.close()


def raw_spawn(raw, command):
    """The argv ssh.so sends: /bin/sh -c <command>."""
    payload = b"".join(RawRunner.field(11, a.encode()) for a in ("/bin/sh", "-c", command))
    raw.spawn(payload + RawRunner.field(15, struct.pack(">I", 1000)))


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def concurrent(srv, rounds, width=8):
    out = []
    lock = threading.Lock()

    def one():
        ms = timed(lambda: srv.tool("run_command", {"command": "true"}))
        with lock:
            out.append(ms)
    for _ in range(rounds):
        ths = [threading.Thread(target=one) for _ in range(width)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    return out


def runner_start_ms(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        m = re.search(r"runner \S+ on \S+: pid \d+, build [0-9a-f]+, started in (\d+) ms", f.read())
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--sandgate", default=os.environ.get("SANDGATE_BIN", "./sandgate"))
    ap.add_argument("--plugins", default=os.environ.get("SANDGATE_PLUGIN_DIR", ".libs"))
    ap.add_argument("--runner", default="./sandgate-runner", help="for raw_runner")
    ap.add_argument("--json", action="store_true", help="JSON only")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sg-ssh-bench-")
    fx = os.path.join(tmp, "sshd")
    ready = dict(l.split("=", 1) for l in subprocess.check_output(
        ["sh", FIXTURE, "start", fx]).decode().splitlines() if "=" in l)
    port, user, key, kh = ready["port"], ready["user"], ready["key"], ready["known_hosts"]
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={kh}", "-o", "StrictHostKeyChecking=yes",
           "-i", key, "-p", port, "-o", "ControlMaster=auto", "-o", f"ControlPath={tmp}/cm-%C",
           "-o", "ControlPersist=60", f"{user}@127.0.0.1"]
    env = dict(os.environ, HOME=os.path.join(tmp, "home"), XDG_STATE_HOME=os.path.join(tmp, "state"),
               SANDGATE_PLUGIN_DIR=os.path.abspath(a.plugins))
    env.pop("SSH_AUTH_SOCK", None)
    env.pop("SANDGATE_SSH_RUNNER", None)
    os.makedirs(env["HOME"], exist_ok=True)
    base = [a.sandgate, "--config", ready["ini"], "--set", "plugin.load=ssh",
            "--set", "sandbox.default_backend=ssh", "--set", "log.level=info"]
    jails = shutil.which("bwrap") is not None
    servers, raw = {}, None
    out = {"host": f"{user}@127.0.0.1:{port}", "n": a.n, "load_start": os.getloadavg()[0]}
    try:
        ssh_first = timed(lambda: subprocess.run(ssh + ["true"], check=True))
        kinds = [("runner", ["--set", "ssh.isolation=none"]),
                 ("plain", ["--set", "ssh.isolation=none", "--set", "ssh.runner=false"])]
        if jails:
            kinds.append(("jailed", ["--set", "ssh.isolation=bwrap"]))
        for name, extra in kinds:
            srv = Server(base + extra + ["stdio"], env, os.path.join(tmp, f"{name}.stderr"))
            servers[name] = srv
            out[f"{name}_create_ms"] = round(timed(lambda: srv.tool("create_sandbox", {})), 1)
            out[f"{name}_first_command_ms"] = round(
                timed(lambda: srv.tool("run_command", {"command": "true"})), 1)
        out["runner_start_ms"] = runner_start_ms(os.path.join(tmp, "runner.stderr"))
        out["ssh_first_ms"] = round(ssh_first, 1)
        raw = RawRunner(ssh + [os.path.abspath(a.runner), "--stdio"])

        paths = {
            "runner": lambda c: servers["runner"].tool("run_command", {"command": c}),
            "plain": lambda c: servers["plain"].tool("run_command", {"command": c}),
            "ssh_cm": lambda c: subprocess.run(ssh + [c], check=True, stdout=subprocess.DEVNULL),
            "raw_runner": lambda c: raw_spawn(raw, c),
        }
        if jails:
            paths["jailed"] = lambda c: servers["jailed"].tool("run_command", {"command": c})
        res = {c: {p: [] for p in paths} for c in COMMANDS}
        for i in range(a.n + 5):  # 5 warm-up rounds, not counted
            for c in COMMANDS:
                for p, fn in paths.items():
                    ms = timed(lambda: fn(c))
                    if i >= 5:
                        res[c][p].append(ms)
        out["commands"] = {c: {p: stats(xs) for p, xs in res[c].items()} for c in COMMANDS}
        rounds = max(1, a.n // 8)
        out["concurrent8"] = {p: stats(concurrent(servers[p], rounds)) for p in ("runner", "plain")}
        out["load_end"] = os.getloadavg()[0]
        out["ratios_p50"] = {}
        for c in COMMANDS:
            r = out["commands"][c]
            out["ratios_p50"][c] = {"plain_over_runner": round(r["plain"]["p50"] / r["runner"]["p50"], 1),
                                    "ssh_cm_over_runner": round(r["ssh_cm"]["p50"] / r["runner"]["p50"], 1)}
            if jails:
                out["ratios_p50"][c]["jailed_minus_runner_ms"] = round(r["jailed"]["p50"] - r["runner"]["p50"], 2)
        ok = all(out["commands"][c]["runner"]["p50"] <= 5.0 and
                 (not jails or out["ratios_p50"][c]["jailed_minus_runner_ms"] <= 1.0) for c in COMMANDS)
        out["target_met"] = ok
    finally:
        if raw:
            raw.close()
        for srv in servers.values():
            srv.close()
        subprocess.run(ssh[:-1] + ["-O", "exit", ssh[-1]], stderr=subprocess.DEVNULL)
        subprocess.run(["sh", FIXTURE, "stop", fx])
        shutil.rmtree(tmp, ignore_errors=True)

    if a.json:
        print(json.dumps(out, indent=2))
        return 0 if ok else 1
    print(f"run_command on {out['host']} (login shell without rc files), n = {a.n} per cell, "
          f"interleaved; load average {out['load_start']:.1f} -> {out['load_end']:.1f}")
    print(f"  {'command':<9} {'path':<11} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for c in COMMANDS:
        for p, s in out["commands"][c].items():
            print(f"  {c:<9} {p:<11} {s['p50']:8.2f} {s['p99']:8.2f} {s['mean']:8.2f}")
        r = out["ratios_p50"][c]
        print(f"  {c:<9} plain/runner p50 {r['plain_over_runner']}x, "
              f"ssh_cm/runner p50 {r['ssh_cm_over_runner']}x"
              + (f", jailed - runner p50 {r['jailed_minus_runner_ms']} ms" if jails else ""))
    for p, s in out["concurrent8"].items():
        print(f"  8 concurrent 'true', {p:<6} (each): p50 {s['p50']:.2f} ms, p99 {s['p99']:.2f} ms, n={s['n']}")
    print(f"  one-time: create_sandbox (connect + auth + mkdir) {out['runner_create_ms']} ms; first "
          f"command with the runner {out['runner_first_command_ms']} ms (runner upload + start "
          f"{out['runner_start_ms']} ms), on plain exec {out['plain_first_command_ms']} ms; "
          f"first ssh (connect + auth + true) {out['ssh_first_ms']} ms")
    print(f"targets (runner p50 <= 5 ms; jailing adds at most 1 ms p50): {'met' if ok else 'NOT met'}")
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
