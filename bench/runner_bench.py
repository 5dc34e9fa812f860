#!/usr/bin/env python3
"""run_command through the in-sandbox runner, next to plain exec and the raw
Docker floor, side by side in one run.

For each of the commands "true" and "echo hi", p50 and p99 in ms of:
  runner     run_command through `sandgate stdio` (the default: sandgate-runner)
  plain      run_command through `sandgate stdio` with SANDGATE_DOCKER_RUNNER=false
  raw_exec   the Docker Engine API exec flow alone (create, start, inspect)
  raw_runner a SPAWN round trip on the runner's own stream (docker exec -i of
             the runner this sandgate put into the container): the floor the
             runner path could reach without MCP and JSON
Calls are interleaved (one of each per round), so drift hits all alike.
Targets (doc/performance.md): runner p50 <= 5 ms on a warm sandbox, and at
least 10 times faster than plain.  Not part of `make check`.

usage: bench/runner_bench.py [-n 200] [--sandgate ./sandgate] [--json]
"""
import argparse, http.client, json, os, socket, statistics, struct, subprocess, sys, time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def docker(method, url, body=None, sock="/var/run/docker.sock"):
    c = UnixHTTP(sock)
    c.request(method, url, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def raw_exec(ctr, argv):
    _, d = docker("POST", f"/containers/{ctr}/exec",
                  {"Cmd": argv, "AttachStdout": True, "AttachStderr": True})
    eid = json.loads(d)["Id"]
    docker("POST", f"/exec/{eid}/start", {"Detach": False, "Tty": False})
    docker("GET", f"/exec/{eid}/json")


class Server:
    """sandgate stdio, spoken to with newline-delimited JSON-RPC."""

    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.id = 0
        init = {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "runner-bench", "version": "1"}}
        self.call("initialize", init)
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def call(self, method, params=None):
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": method}
        if params is not None:
            msg["params"] = params
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        while True:
            r = json.loads(self.p.stdout.readline())
            if r.get("id") == self.id:
                return r

    def tool(self, name, args):
        r = self.call("tools/call", {"name": name, "arguments": args})
        res = r.get("result", {})
        if res.get("isError") or "error" in r:
            raise RuntimeError(f"{name} {args}: {json.dumps(r)[:300]}")
        return res.get("structuredContent", {})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


class RawRunner:
    """The runner protocol (doc/runner-protocol.md) over `docker exec -i`."""

    def __init__(self, ctr, path):
        self.p = subprocess.Popen(["docker", "exec", "-i", ctr, path, "--stdio"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.id = 0
        self.send(0x01, 0, self.field(1, struct.pack(">I", 1 << 16)))
        t, _, _ = self.frame()
        assert t == 0x81, "no HELLO from the runner"

    @staticmethod
    def field(tag, val):
        return struct.pack(">HI", tag, len(val)) + val

    def send(self, typ, rid, payload=b""):
        self.p.stdin.write(struct.pack(">IBBHI", len(payload), typ, 0, 0, rid) + payload)
        self.p.stdin.flush()

    def read(self, n):
        b = b""
        while len(b) < n:
            chunk = self.p.stdout.read(n - len(b))
            if not chunk:
                raise EOFError("the runner stream ended")
            b += chunk
        return b

    def frame(self):
        n, typ, _, _, rid = struct.unpack(">IBBHI", self.read(12))
        return typ, rid, self.read(n)

    def run(self, command):
        self.id += 1
        self.send(0x02, self.id, self.field(10, command.encode()) + self.field(14, struct.pack(">I", 60000)))
        out = b""
        while True:
            typ, rid, payload = self.frame()
            if rid != self.id:
                continue
            if typ == 0x83:
                out += payload
            if typ == 0x87:
                return out

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summary(samples):
    return {"p50": round(pct(samples, 50), 2), "p99": round(pct(samples, 99), 2),
            "mean": round(statistics.mean(samples), 2)}


def runner_path(ctr):
    ps = subprocess.run(["docker", "exec", ctr, "ps", "-eo", "args"], capture_output=True,
                        text=True, check=True).stdout.split("\n")
    for line in ps:
        parts = line.split()
        if parts and "/.sandgate-runner-" in parts[0]:
            return parts[0]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--sandgate", default="./sandgate")
    ap.add_argument("--json", action="store_true", help="JSON only")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("SANDGATE_PLUGIN_DIR", os.path.abspath(".libs"))
    env.pop("SANDGATE_DOCKER_RUNNER", None)
    cmd = [a.sandgate, "stdio"]

    fast = Server(cmd, env)
    slow = Server(cmd, dict(env, SANDGATE_DOCKER_RUNNER="false"))
    fctr = fast.tool("create_sandbox", {})["sandbox_id"]
    sctr = slow.tool("create_sandbox", {})["sandbox_id"]
    commands = {"true": ["true"], "echo hi": ["sh", "-c", "echo hi"]}
    fast.tool("run_command", {"command": "true", "sandbox_id": fctr})  # starts the runner
    path = runner_path(fctr)
    raw_runner = RawRunner(fctr, path) if path else None

    res = {}
    for name, argv in commands.items():
        s = {"runner": [], "plain": [], "raw_exec": [], "raw_runner": []}
        for i in range(a.n + 5):  # 5 warm-up rounds, not counted
            t0 = time.perf_counter()
            out = fast.tool("run_command", {"command": name, "sandbox_id": fctr})
            t1 = time.perf_counter()
            slow.tool("run_command", {"command": name, "sandbox_id": sctr})
            t2 = time.perf_counter()
            raw_exec(fctr, argv)
            t3 = time.perf_counter()
            if raw_runner:
                raw_runner.run(name)
            t4 = time.perf_counter()
            if name == "echo hi" and out.get("stdout") != "hi\n":
                raise RuntimeError(f"echo hi gave {out!r}")
            if i >= 5:
                s["runner"].append((t1 - t0) * 1000)
                s["plain"].append((t2 - t1) * 1000)
                s["raw_exec"].append((t3 - t2) * 1000)
                if raw_runner:
                    s["raw_runner"].append((t4 - t3) * 1000)
        res[name] = {k: summary(v) for k, v in s.items() if v}
        res[name]["plain_over_runner_p50"] = round(res[name]["plain"]["p50"] / res[name]["runner"]["p50"], 1)
    if raw_runner:
        raw_runner.close()
    fast.tool("kill_sandbox", {"sandbox_id": fctr})
    slow.tool("kill_sandbox", {"sandbox_id": sctr})
    fast.close()
    slow.close()

    out = {"n": a.n, "results_ms": res, "loadavg": open("/proc/loadavg").read().split()[:3],
           "cpus": os.cpu_count()}
    ok = all(r["runner"]["p50"] <= 5 and r["plain_over_runner_p50"] >= 10 for r in res.values())
    out["targets_met"] = ok
    if a.json:
        print(json.dumps(out, indent=2))
        return 0 if ok else 1
    print(f"n = {a.n} per cell, {os.cpu_count()} CPUs, loadavg {' '.join(out['loadavg'])}\n")
    print("| command | path | p50 ms | p99 ms | mean ms |")
    print("|---|---|---:|---:|---:|")
    for name, r in res.items():
        for k in ("runner", "plain", "raw_exec", "raw_runner"):
            if k in r:
                print(f"| `{name}` | {k} | {r[k]['p50']} | {r[k]['p99']} | {r[k]['mean']} |")
        print(f"| `{name}` | plain / runner (p50) | {r['plain_over_runner_p50']}x | | |")
    print(f"\ntargets (runner p50 <= 5 ms, >= 10x faster than plain): {'met' if ok else 'NOT met'}")
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
