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
import argparse, json, os, struct, subprocess, sys, time

from benchlib import RawRunner, Server, raw_exec, summary


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
    fast.initialize("runner-bench")
    slow.initialize("runner-bench")
    fctr = fast.tool("create_sandbox", {})["sandbox_id"]
    sctr = slow.tool("create_sandbox", {})["sandbox_id"]
    commands = {"true": ["true"], "echo hi": ["sh", "-c", "echo hi"]}
    fast.tool("run_command", {"command": "true", "sandbox_id": fctr})  # starts the runner
    path = runner_path(fctr)
    raw_runner = RawRunner(["docker", "exec", "-i", fctr, path, "--stdio"]) if path else None

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
                raw_runner.spawn(RawRunner.field(10, name.encode()) +
                                 RawRunner.field(14, struct.pack(">I", 60000)))
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
