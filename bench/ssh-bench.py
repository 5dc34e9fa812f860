#!/usr/bin/env python3
"""sandgate on SSH next to OpenSSH's own connection reuse, in one run.

Starts a throwaway sshd (t/ssh/sshd-fixture.sh), then reports p50/p99 of
run_command "true" through `sandgate stdio` (ssh.so, one pooled libssh2
connection) next to `ssh -o ControlMaster=auto -o ControlPath=...
-o ControlPersist=60 ... true` reusing a master connection, same host, same
user, same login shell (the fixture's sshd sets SHLVL=1, so bash skips
~/.bashrc on both sides).  The ssh column includes starting the ssh client
process, which is what a script that shells out to ssh pays.  Also: connect
time (the first call) and 8 concurrent calls.  Not part of `make check`;
shared machines drift, so compare within one run.

usage: bench/ssh-bench.py [-n 200] [--sandgate ./sandgate] [--plugins .libs]
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "t", "ssh", "sshd-fixture.sh")


class Server:
    """A sandgate stdio process spoken to with raw JSON-RPC lines."""

    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.id = 0
        self.lock = threading.Lock()
        self.waiting = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

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


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(name, xs):
    print(f"  {name:<44} p50 {pct(xs, 50):7.2f} ms   p99 {pct(xs, 99):7.2f} ms   "
          f"mean {statistics.mean(xs):7.2f} ms   n={len(xs)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--sandgate", default=os.environ.get("SANDGATE_BIN", "./sandgate"))
    ap.add_argument("--plugins", default=os.environ.get("SANDGATE_PLUGIN_DIR", ".libs"))
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
    os.makedirs(env["HOME"], exist_ok=True)
    srv = None
    try:
        # OpenSSH, master connection reused
        t0 = time.perf_counter()
        subprocess.run(ssh + ["true"], check=True)
        ssh_first = (time.perf_counter() - t0) * 1000
        for _ in range(3):
            subprocess.run(ssh + ["true"], check=True)
        ssh_ms = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            subprocess.run(ssh + ["true"], check=True)
            ssh_ms.append((time.perf_counter() - t0) * 1000)

        # sandgate stdio on ssh.so
        srv = Server([a.sandgate, "--config", ready["ini"], "--set", "plugin.load=ssh",
                      "--set", "sandbox.default_backend=ssh", "stdio"], env)
        srv.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "ssh-bench", "version": "1"}})
        t0 = time.perf_counter()
        srv.tool("create_sandbox", {})
        sg_first = (time.perf_counter() - t0) * 1000
        for _ in range(3):
            srv.tool("run_command", {"command": "true"})
        sg_ms = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            r = srv.tool("run_command", {"command": "true"})
            sg_ms.append((time.perf_counter() - t0) * 1000)
            assert r["exit_code"] == 0
        conc = []

        def one():
            t1 = time.perf_counter()
            srv.tool("run_command", {"command": "true"})
            conc.append((time.perf_counter() - t1) * 1000)
        for _ in range(max(1, a.n // 8)):
            ths = [threading.Thread(target=one) for _ in range(8)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()

        print(f"run_command \"true\" on {user}@127.0.0.1:{port} (login shell without rc files), "
              f"{a.n} calls each after 3 warm-up calls")
        row("ssh ControlMaster=auto (master reused)", ssh_ms)
        row("sandgate stdio, ssh.so (pooled connection)", sg_ms)
        row("sandgate, 8 concurrent calls (each)", conc)
        print(f"  ratio sandgate/ssh: p50 {pct(sg_ms, 50) / pct(ssh_ms, 50):.2f}x, "
              f"p99 {pct(sg_ms, 99) / pct(ssh_ms, 99):.2f}x; difference p50 "
              f"{pct(sg_ms, 50) - pct(ssh_ms, 50):+.2f} ms")
        print(f"  first call: ssh (connect + auth + command) {ssh_first:.1f} ms, "
              f"sandgate create_sandbox (connect + auth + mkdir) {sg_first:.1f} ms")
    finally:
        if srv:
            srv.close()
        subprocess.run(ssh[:-1] + ["-O", "exit", ssh[-1]], stderr=subprocess.DEVNULL)
        subprocess.run(["sh", FIXTURE, "stop", fx])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
