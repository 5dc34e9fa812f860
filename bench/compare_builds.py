#!/usr/bin/env python3
"""Two builds of sandgate side by side, interleaved round by round so that
the machine's drift hits both alike: the cold start (spawn to the
initialize result) and `run_command "true"` on a warm Docker sandbox,
through `sandgate stdio`.  For a change that must not slow either down
(doc/performance.md records the figures).

    bench/compare_builds.py OLD_BUILD_DIR NEW_BUILD_DIR [-n 200] [--cold 30]

Each build directory holds its `sandgate`, `.libs/*.so` and
`sandgate-runner`; the image sandgate/base:1 must exist (etc/image/build.sh).
"""
import argparse, json, os, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Server, pct  # noqa: E402


def env_for(build, state):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("SANDGATE_"):
            del env[k]
    env["SANDGATE_PLUGIN_DIR"] = os.path.join(build, ".libs")
    env["SANDGATE_RUNNER"] = os.path.join(build, "sandgate-runner")
    env["XDG_STATE_HOME"] = state
    env["HOME"] = state
    return env


def cold_start(build, state):
    t0 = time.perf_counter()
    s = Server([os.path.join(build, "sandgate"), "stdio"], env_for(build, state))
    r = s.initialize()
    dt = (time.perf_counter() - t0) * 1000
    assert "result" in r, r
    s.close()
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("-n", type=int, default=200, help="run_command rounds")
    ap.add_argument("--cold", type=int, default=30, help="cold start rounds")
    a = ap.parse_args()
    builds = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    states = {k: tempfile.mkdtemp(prefix=f"sg-bench-{k}-") for k in builds}
    cold = {k: [] for k in builds}
    for i in range(a.cold):
        for k in (builds if i % 2 == 0 else reversed(list(builds))):
            cold[k].append(cold_start(builds[k], states[k]))
    servers = {}
    for k, b in builds.items():
        s = Server([os.path.join(b, "sandgate"), "stdio"], env_for(b, states[k]))
        s.initialize()
        s.tool("run_command", {"command": "true"})  # creates the sandbox, starts its runner
        servers[k] = s
    runs = {k: [] for k in builds}
    for i in range(a.n):
        for k in (builds if i % 2 == 0 else reversed(list(builds))):
            t0 = time.perf_counter()
            servers[k].tool("run_command", {"command": "true"})
            runs[k].append((time.perf_counter() - t0) * 1000)
    for s in servers.values():
        s.close()
    out = {k: {"cold_start_ms_p50": round(statistics.median(cold[k]), 2),
               "run_command_true_ms_p50": round(pct(runs[k], 50), 3),
               "run_command_true_ms_p99": round(pct(runs[k], 99), 3)} for k in builds}
    out["ratio_new_to_old"] = {
        "cold_start": round(out["new"]["cold_start_ms_p50"] / out["old"]["cold_start_ms_p50"], 3),
        "run_command": round(out["new"]["run_command_true_ms_p50"] / out["old"]["run_command_true_ms_p50"], 3)}
    out["load_average"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
