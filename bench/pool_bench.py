#!/usr/bin/env python3
"""create_sandbox from the warm pool, without a pool, and a raw Engine API
`docker create` + `start` of the same image, interleaved in one run.

p50/p99 in ms, one of each per round:
  pool     sandgate stdio with [docker] pool = 1: each round waits (untimed)
           until the refill is ready, then times the create_sandbox (a hit)
  nopool   sandgate stdio with pool = 0: docker create + start + inspect
  raw      POST /containers/create + /start on the engine's socket (the floor
           without sandgate; the runner is not started)
Every sandbox is killed again (untimed) within its round.  Target (issue
17): a pool hit <= 30 ms p50.  Not part of `make check`.

usage: bench/pool_bench.py [-n 20] [--sandgate ./sandgate] [--json]
"""
import argparse, json, os, subprocess, tempfile, time

from benchlib import LoggedServer, Server, docker, summary

def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return (time.perf_counter() - t0) * 1000, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--sandgate", default="./sandgate")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("SANDGATE_PLUGIN_DIR", os.path.abspath(".libs"))
    log = tempfile.mktemp(prefix="pool-bench-", suffix=".log")
    pooled = LoggedServer([a.sandgate, "stdio"], dict(env, SANDGATE_DOCKER_POOL="1"), log)
    plain = Server([a.sandgate, "stdio"], dict(env, SANDGATE_DOCKER_POOL="0"))
    pooled.initialize("pool-bench")
    plain.initialize("pool-bench")
    body = {"Image": "sandgate/base:1", "Entrypoint": ["/bin/sh", "-c", "sleep infinity"],
            "HostConfig": {"Init": True}}
    s = {"pool": [], "nopool": [], "raw": []}
    for i in range(a.n + 2):  # 2 warm-up rounds
        deadline = time.time() + 60
        while not pooled.pool_ready() and time.time() < deadline:
            time.sleep(0.05)
        tp, dp = timed(lambda: pooled.tool("create_sandbox", {}))
        tn, dn = timed(lambda: plain.tool("create_sandbox", {}))

        def raw():
            _, d = docker("POST", "/containers/create", body)
            cid = json.loads(d)["Id"]
            docker("POST", f"/containers/{cid}/start")
            return cid
        tr, cid = timed(raw)
        pooled.tool("kill_sandbox", {"sandbox_id": dp["sandbox_id"]})
        plain.tool("kill_sandbox", {"sandbox_id": dn["sandbox_id"]})
        docker("DELETE", f"/containers/{cid}?force=1&v=1")
        if i >= 2:
            s["pool"].append(tp)
            s["nopool"].append(tn)
            s["raw"].append(tr)
    pooled.close()
    plain.close()
    os.unlink(log)
    out = {k: summary(v) for k, v in s.items()}
    if a.json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        print(f"create_sandbox {k:7s} {json.dumps(v)}")


if __name__ == "__main__":
    main()
