#!/usr/bin/env python3
"""The file tools on a warm Docker sandbox through the runner, next to the
archive way (runner off) and the raw floor, side by side in one run.

Small file (1 KiB), p50/p99 in ms, interleaved one of each per round:
  runner   read_file, write_file, sandbox_file_read, sandbox_file_write,
           list_files through `sandgate stdio` (the default: sandgate-runner)
  archive  the same with SANDGATE_DOCKER_RUNNER=false (Engine API archive
           endpoints plus helper execs)
  floor    `docker exec CTR cat FILE` and `docker exec -i CTR sh -c 'cat > FILE'`
           (the docker CLI: what an agent without sandgate would pay)
  run_command "true" through the runner, for scale
Large file (--big MiB, default 16), a few rounds: write_file and read_file
(base64) through the runner next to `docker exec -i CTR cat` piping the same
bytes in and out.  Each request is made before its clock starts (as the
pipe's input is), and the client reads in 1 MiB reads (benchlib.Server);
the read is timed to the reply's last byte (as the pipe's row, which
decodes nothing) and to the client's parsed and decoded result.  Targets (issue 17): each 1 KiB tool <= 2 ms p50; the
big write and read within 1.5x the pipe.  Not part of `make check`.

With --before BUILD_DIR the large rounds also run the same write_file and
read_file through that build (its sandgate, .libs and sandgate-runner),
interleaved with this one's, on a sandbox of its own: an A/B of a change in
one run.

usage: bench/files_bench.py [-n 100] [--big 16] [--sandgate ./sandgate]
                            [--before BUILD_DIR] [--json]
"""
import argparse, base64, json, os, subprocess, sys, time

from benchlib import Server, summary


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--big", type=int, default=16, help="MiB for the large transfer (0: skip)")
    ap.add_argument("--sandgate", default="./sandgate")
    ap.add_argument("--before", help="another build directory, for the large rounds")
    ap.add_argument("--json", action="store_true", help="JSON only")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("SANDGATE_PLUGIN_DIR", os.path.abspath(".libs"))
    env.pop("SANDGATE_DOCKER_RUNNER", None)
    cap = str(max(64, 2 * a.big) * 1024 * 1024)
    cmd = [a.sandgate, "stdio", "--set", f"docker.file_cap={cap}",
           "--set", f"files.max_file_size={cap}"]
    fast = Server(cmd, env)
    slow = Server(cmd, dict(env, SANDGATE_DOCKER_RUNNER="false"))
    fast.initialize("files-bench")
    slow.initialize("files-bench")
    fctr = fast.tool("create_sandbox", {})["sandbox_id"]
    sctr = slow.tool("create_sandbox", {})["sandbox_id"]
    kib = ("x" * 1023) + "\n"
    for srv, ctr in ((fast, fctr), (slow, sctr)):
        srv.tool("run_command", {"command": "true", "sandbox_id": ctr})  # starts the runner
        srv.tool("write_file", {"path": "/workspace/a.txt", "content": kib, "sandbox_id": ctr})
    subprocess.run(["docker", "exec", fctr, "sh", "-c", "head -c 1024 /dev/zero > /tmp/f"], check=True)

    def tools(srv, ctr):
        return {
            "read_file": lambda: srv.tool("read_file", {"path": "/workspace/a.txt", "sandbox_id": ctr}),
            "write_file": lambda: srv.tool("write_file", {"path": "/workspace/a.txt", "content": kib,
                                                          "sandbox_id": ctr}),
            "sandbox_file_read": lambda: srv.tool("sandbox_file_read", {"path": "/workspace/a.txt",
                                                                        "machine": ctr}),
            "sandbox_file_write": lambda: srv.tool("sandbox_file_write", {"path": "/workspace/b.txt",
                                                                          "content": kib, "machine": ctr}),
            "list_files": lambda: srv.tool("list_files", {"path": "/workspace", "sandbox_id": ctr}),
        }

    ft, st = tools(fast, fctr), tools(slow, sctr)
    floor = {
        "read_file": lambda: subprocess.run(["docker", "exec", fctr, "cat", "/tmp/f"],
                                            capture_output=True, check=True),
        "write_file": lambda: subprocess.run(["docker", "exec", "-i", fctr, "sh", "-c", "cat > /tmp/f"],
                                             input=kib.encode(), capture_output=True, check=True),
    }
    s = {k: {"runner": [], "archive": [], "floor": []} for k in ft}
    s["run_command true"] = {"runner": []}
    for i in range(a.n + 5):  # 5 warm-up rounds, not counted
        for k in ft:
            r = timed(ft[k])
            p = timed(st[k])
            f = timed(floor[k]) if k in floor else None
            if i >= 5:
                s[k]["runner"].append(r)
                s[k]["archive"].append(p)
                if f is not None:
                    s[k]["floor"].append(f)
        r = timed(lambda: fast.tool("run_command", {"command": "true", "sandbox_id": fctr}))
        if i >= 5:
            s["run_command true"]["runner"].append(r)
    if fast.tool("read_file", {"path": "/workspace/a.txt", "sandbox_id": fctr}).get("content") != kib:
        raise RuntimeError("read_file did not return the 1 KiB written")
    res = {k: {p: summary(v) for p, v in d.items() if v} for k, d in s.items()}

    big = {}
    if a.big:
        data = os.urandom(a.big * 1024 * 1024)
        b64 = base64.b64encode(data).decode()
        rounds = {"write_file (runner)": [], "docker exec -i cat > f": [],
                  "read_file (runner)": [], "read_file, to the reply's last byte": [],
                  "docker exec cat f": []}
        old = octr = None
        if a.before:
            benv = dict(env, SANDGATE_PLUGIN_DIR=os.path.join(a.before, ".libs"),
                        SANDGATE_RUNNER=os.path.join(a.before, "sandgate-runner"))
            old = Server([os.path.join(a.before, "sandgate")] + cmd[1:], benv)
            old.initialize("files-bench")
            octr = old.tool("create_sandbox", {})["sandbox_id"]
            old.tool("run_command", {"command": "true", "sandbox_id": octr})
            rounds["write_file (before)"] = []
            rounds["read_file (before)"] = []
            rounds["read_file, to the reply's last byte (before)"] = []
        def write_big(srv, ctr):
            """write_file of the big file, the request made before the
            clock starts (as the pipe's input is), to its reply."""
            line = srv.request("tools/call", {"name": "write_file", "arguments": {
                "path": "/workspace/big.bin", "content": b64, "encoding": "base64", "sandbox_id": ctr}})
            t0 = time.perf_counter()
            srv.send_line(line)
            reply = srv.reply_raw()
            ms = (time.perf_counter() - t0) * 1000
            if b'"isError"' in reply or b'"bytes_written":%d' % len(data) not in reply:
                raise RuntimeError(f"write_file: {reply[:300]!r}")
            return ms

        def read_big(srv, ctr):
            """read_file of the whole big file (limit = the size: without
            it, the first page only): to the reply's last byte, and parsed
            and decoded by the client."""
            args = {"path": "/workspace/big.bin", "encoding": "base64", "limit": len(data),
                    "sandbox_id": ctr}
            line = srv.request("tools/call", {"name": "read_file", "arguments": args})
            t0 = time.perf_counter()
            srv.send_line(line)
            reply = srv.reply_raw()
            t1 = time.perf_counter()
            got = base64.b64decode(json.loads(reply)["result"]["structuredContent"]["content"])
            t2 = time.perf_counter()
            if got != data:
                raise RuntimeError("the large file did not round-trip exactly")
            return (t1 - t0) * 1000, (t2 - t0) * 1000

        for i in range(4):
            if old:
                ow = write_big(old, octr)
                orb, orr = read_big(old, octr)
                if i:
                    rounds["write_file (before)"].append(ow)
                    rounds["read_file (before)"].append(orr)
                    rounds["read_file, to the reply's last byte (before)"].append(orb)
            w = write_big(fast, fctr)
            pw = timed(lambda: subprocess.run(["docker", "exec", "-i", fctr, "sh", "-c", "cat > /tmp/big"],
                                              input=data, capture_output=True, check=True))
            rb, r = read_big(fast, fctr)
            out = {}
            pr = timed(lambda: out.update(o=subprocess.run(["docker", "exec", fctr, "cat", "/tmp/big"],
                                                           capture_output=True, check=True).stdout))
            if out["o"] != data:
                raise RuntimeError("the pipe did not round-trip exactly")
            if i:  # the first round warms up
                rounds["write_file (runner)"].append(w)
                rounds["docker exec -i cat > f"].append(pw)
                rounds["read_file (runner)"].append(r)
                rounds["read_file, to the reply's last byte"].append(rb)
                rounds["docker exec cat f"].append(pr)
        big = {k: summary(v) for k, v in rounds.items()}
        big["write_over_pipe_p50"] = round(big["write_file (runner)"]["p50"] /
                                           big["docker exec -i cat > f"]["p50"], 2)
        big["read_over_pipe_p50"] = round(big["read_file (runner)"]["p50"] /
                                          big["docker exec cat f"]["p50"], 2)
        big["read_bytes_over_pipe_p50"] = round(big["read_file, to the reply's last byte"]["p50"] /
                                                big["docker exec cat f"]["p50"], 2)
        if old:
            old.tool("kill_sandbox", {"sandbox_id": octr})
            old.close()

    fast.tool("kill_sandbox", {"sandbox_id": fctr})
    slow.tool("kill_sandbox", {"sandbox_id": sctr})
    fast.close()
    slow.close()
    small_ok = all(r["runner"]["p50"] <= 2 for k, r in res.items() if k != "run_command true")
    # the pipe's rows decode nothing: the read's row to compare is the one
    # to the reply's last byte; the parsed one is reported apart
    big_ok = not big or (big["write_over_pipe_p50"] <= 1.5 and big["read_bytes_over_pipe_p50"] <= 1.5)
    parsed_ok = not big or big["read_over_pipe_p50"] <= 1.5
    out = {"n": a.n, "big_mib": a.big, "small_ms": res, "big_ms": big,
           "loadavg": open("/proc/loadavg").read().split()[:3], "cpus": os.cpu_count(),
           "targets_met": {"small_p50_le_2ms": small_ok, "big_within_1.5x_pipe": big_ok,
                           "big_read_parsed_within_1.5x_pipe": parsed_ok}}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"n = {a.n} per cell, {os.cpu_count()} CPUs, loadavg {' '.join(out['loadavg'])}\n")
    print("| 1 KiB | runner p50 / p99 ms | archive p50 / p99 ms | floor (docker exec) p50 ms |")
    print("|---|---:|---:|---:|")
    for k, r in res.items():
        cell = lambda p: f"{r[p]['p50']} / {r[p]['p99']}" if p in r else "-"
        print(f"| `{k}` | {cell('runner')} | {cell('archive')} | {r['floor']['p50'] if 'floor' in r else '-'} |")
    if big:
        print(f"\n| {a.big} MiB | p50 ms | mean ms |\n|---|---:|---:|")
        for k, v in big.items():
            if isinstance(v, dict):
                print(f"| {k} | {v['p50']} | {v['mean']} |")
        print(f"| write / pipe | {big['write_over_pipe_p50']}x | |\n| read / pipe | {big['read_over_pipe_p50']}x | |")
        print(f"| read to the last byte / pipe | {big['read_bytes_over_pipe_p50']}x | |")
    print(f"\ntargets: {json.dumps(out['targets_met'])}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
