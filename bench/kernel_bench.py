#!/usr/bin/env python3
"""run_code's kernels through the runner, next to starting an interpreter per
call, side by side in one run (doc/kernel-protocol.md).

p50 and p99 in ms of, interleaved one of each per round:
  kernel_py   KEXEC "1+1" on a warm Python kernel (the runner's frames only)
  kernel_js   KEXEC "1+1" on a warm JavaScript kernel
  spawn_py    SPAWN python3 -c '1+1' through the same runner (what run_code
              costs without a kernel, less sandgate's own share)
  spawn_true  SPAWN true: the floor of any command through the runner
and once each, the first call of a new runner (the kernel's start):
  first_py, first_js
The runner is the built ./sandgate-runner, run here (kernels with
PATH=/usr/bin:/bin, so Debian's python3 and node) or, with --docker IMAGE,
in a throwaway container of that image (docker run --rm -i).  Targets (issue
18): a warm kernel call at most 3 ms p50, the first call at most 150 ms.
Not part of `make check`.

usage: bench/kernel_bench.py [-n 200] [--runner ./sandgate-runner]
                             [--docker sandgate/base:1] [--json]
"""
import argparse, json, os, struct, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import RawRunner, summary  # noqa: E402

KEXEC, R_EXIT, R_ERROR, R_KEVENT = 0x10, 0x87, 0x88, 0x90
F_ENV, F_TIMEOUT, F_LANG, F_SOURCE = 12, 14, 50, 51
PATH = b"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def kexec(rr, lang, code):
    """One KEXEC; returns the text of its value (checks the kernel ran it)."""
    rr.id += 1
    f = RawRunner.field
    rr.send(KEXEC, rr.id, f(F_LANG, lang.encode()) + f(F_SOURCE, code.encode()) +
            f(F_ENV, PATH) + f(F_TIMEOUT, struct.pack(">I", 60000)))
    text = None
    while True:
        typ, rid, data = rr.frame()
        if rid != rr.id:
            continue
        if typ == R_KEVENT and data.startswith(b"result "):
            text = json.loads(data[7:]).get("text")
        elif typ == R_KEVENT and data.startswith(b"error "):
            raise RuntimeError(f"{lang} {code!r}: {data.decode()}")
        elif typ == R_ERROR:
            raise RuntimeError(f"{lang} {code!r}: refused: {data!r}")
        elif typ == R_EXIT:
            return text


def spawn(rr, argv):
    f = RawRunner.field
    return rr.spawn(b"".join(f(11, a.encode()) for a in argv) + f(F_ENV, PATH))


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t0) * 1000, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--runner", default="./sandgate-runner")
    ap.add_argument("--docker", metavar="IMAGE", help="run the runner in a container of IMAGE")
    ap.add_argument("--json", action="store_true", help="JSON only")
    a = ap.parse_args()
    runner = os.path.abspath(a.runner)
    if a.docker:
        argv = ["docker", "run", "--rm", "-i", "-v", f"{runner}:/sandgate-runner:ro",
                a.docker, "/sandgate-runner", "--stdio"]
    else:
        argv = [runner, "--stdio"]

    rr = RawRunner(argv)
    res = {}
    res["first_py_ms"], v = timed(kexec, rr, "python", "1+1")
    res["first_js_ms"], w = timed(kexec, rr, "javascript", "1+1")
    if v != "2" or w != "2":
        raise RuntimeError(f"1+1 gave {v!r} (python) and {w!r} (javascript)")
    s = {"kernel_py": [], "kernel_js": [], "spawn_py": [], "spawn_true": []}
    for i in range(a.n + 5):  # 5 warm-up rounds, not counted
        t = {"kernel_py": timed(kexec, rr, "python", "1+1")[0],
             "kernel_js": timed(kexec, rr, "javascript", "1+1")[0],
             "spawn_py": timed(spawn, rr, ["python3", "-c", "1+1"])[0],
             "spawn_true": timed(spawn, rr, ["true"])[0]}
        if i >= 5:
            for k, ms in t.items():
                s[k].append(ms)
    rr.close()
    for k, xs in s.items():
        res[k] = summary(xs)
    res["first_py_ms"] = round(res["first_py_ms"], 1)
    res["first_js_ms"] = round(res["first_js_ms"], 1)
    res["spawn_py_over_kernel_py_p50"] = round(res["spawn_py"]["p50"] / res["kernel_py"]["p50"], 1)
    res["where"] = a.docker or "this host"
    if a.json:
        print(json.dumps(res))
        return
    print(f"runner {runner} on {res['where']}, n={a.n}")
    print(f"{'':12} {'p50 ms':>8} {'p99 ms':>8}")
    for k in s:
        print(f"{k:12} {res[k]['p50']:8.2f} {res[k]['p99']:8.2f}")
    print(f"first call: python {res['first_py_ms']} ms, javascript {res['first_js_ms']} ms")
    print(f"python3 -c per call is {res['spawn_py_over_kernel_py_p50']}x a warm kernel call (p50)")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
