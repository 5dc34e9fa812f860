#!/usr/bin/env python3
"""sandgate on Docker next to the raw Docker Engine API floor, in one run.

Reports: cold start (spawn to initialize result), idle memory after
initialize + tools/list (RssAnon and VmRSS), and p50/p99 of run_command
"true" through `sandgate stdio` next to the raw exec flow (create exec,
start, inspect) on the same container.  Not part of `make check`: timing
belongs in a benchmark, and shared machines drift, so compare the ratio.

usage: bench/docker_bench.py [-n 100] [--sandgate ./sandgate]
"""
import argparse, http.client, json, os, socket, statistics, subprocess, time


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


def raw_exec(ctr):
    _, d = docker("POST", f"/containers/{ctr}/exec",
                  {"Cmd": ["true"], "AttachStdout": True, "AttachStderr": True})
    eid = json.loads(d)["Id"]
    docker("POST", f"/exec/{eid}/start", {"Detach": False, "Tty": False})
    docker("GET", f"/exec/{eid}/json")


class Server:
    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.id = 0

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

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--sandgate", default="./sandgate")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("SANDGATE_PLUGIN_DIR", os.path.abspath(".libs"))
    cmd = [a.sandgate, "stdio"]
    init = {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}

    colds = []
    for _ in range(20):
        t0 = time.perf_counter()
        s = Server(cmd, env)
        s.call("initialize", init)
        colds.append((time.perf_counter() - t0) * 1000)
        s.close()

    s = Server(cmd, env)
    s.call("initialize", init)
    s.call("tools/list")
    time.sleep(0.5)
    st = dict(l.split(":", 1) for l in open(f"/proc/{s.p.pid}/status").read().splitlines() if ":" in l)
    rss_anon, vm_rss = st["RssAnon"].strip(), st["VmRSS"].strip()
    r = s.call("tools/call", {"name": "create_sandbox", "arguments": {}})
    ctr = r["result"]["structuredContent"]["sandbox_id"]
    args = {"name": "run_command", "arguments": {"command": "true", "sandbox_id": ctr}}
    ours, raw = [], []
    for _ in range(5):
        s.call("tools/call", args)
        raw_exec(ctr)
    for _ in range(a.n):  # interleaved, so drift hits both alike
        t0 = time.perf_counter()
        s.call("tools/call", args)
        ours.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        raw_exec(ctr)
        raw.append((time.perf_counter() - t0) * 1000)
    s.close()
    out = {
        "cold_start_ms_p50": round(statistics.median(colds), 2),
        "idle_RssAnon": rss_anon, "idle_VmRSS": vm_rss,
        "run_command_true_ms": {"p50": round(pct(ours, 50), 2), "p99": round(pct(ours, 99), 2)},
        "raw_docker_exec_flow_ms": {"p50": round(pct(raw, 50), 2), "p99": round(pct(raw, 99), 2)},
        "ratio_p50": round(pct(ours, 50) / pct(raw, 50), 3),
        "n": a.n, "loadavg": open("/proc/loadavg").read().split()[:3],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
