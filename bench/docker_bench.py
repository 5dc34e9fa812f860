#!/usr/bin/env python3
"""sandgate on Docker next to the raw Docker Engine API floor, in one run.

Reports: cold start (spawn to initialize result), idle memory after
initialize + tools/list (RssAnon and VmRSS), and p50/p99 of run_command
"true" through `sandgate stdio` next to the raw exec flow (create exec,
start, inspect) on the same container.  Not part of `make check`: timing
belongs in a benchmark, and shared machines drift, so compare the ratio.

usage: bench/docker_bench.py [-n 100] [--sandgate ./sandgate]
"""
import argparse, json, os, statistics, time

from benchlib import Server, pct, raw_exec


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
        raw_exec(ctr, ["true"])
    for _ in range(a.n):  # interleaved, so drift hits both alike
        t0 = time.perf_counter()
        s.call("tools/call", args)
        ours.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        raw_exec(ctr, ["true"])
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
