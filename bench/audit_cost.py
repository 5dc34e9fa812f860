#!/usr/bin/env python3
"""The instructions a run_command spends on its audit row, under callgrind.

Runs `sandgate stdio` under `valgrind --tool=callgrind` on the fake backend
that works at no cost (t/plugins/fake.c, FAKE_WORKS: the command answers
"ok\\n" without leaving the process), makes N run_command calls one after
the other, and reads the inclusive instruction counts (Ir) of:

  - the whole call: everything the process executed for the N calls, less a
    run that makes none (startup, initialize, tools/list, the end), over N;
  - the audit row: the call's side (sg_audit_tool_call: the row and its
    queueing) plus the writer thread (writer_main: redaction, JSON, the
    SQLite inserts and commits), over N.

Two paces: "back to back" (each call sent when the previous one answered:
the writer's 100 ms batch window gathers many rows into one transaction)
and "spaced" (--gap, 150 ms between calls by default: every row is a batch
of its own, the worst case).  Callgrind counts instructions, not time, so
the figures do not depend on the machine's load.

Needs a build with the test plugins (`make check` builds
t/plugins/.libs/fakework.so) and valgrind.

  bench/audit_cost.py [--build DIR] [-n 200] [--gap 0.15] [--json]
"""
import argparse, json, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Server  # noqa: E402


def run(build, n, gap, workdir, tag):
    out = os.path.join(workdir, f"callgrind.{tag}")
    state = tempfile.mkdtemp(prefix=f"state-{tag}-", dir=workdir)
    env = dict(os.environ, XDG_STATE_HOME=state, HOME=state)
    libs = os.path.join(build, "t", "plugins", ".libs")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--separate-threads=no",
           os.path.join(build, "sandgate"), "--set", f"plugin.path={libs}", "--set", "plugin.load=fakework",
           "--set", "sandbox.default_backend=fakework", "stdio"]
    s = Server(cmd, env)
    s.initialize()
    s.call("tools/list")
    for _ in range(n):
        r = s.call("tools/call", {"name": "run_command", "arguments": {"command": "true"}})
        if r.get("result", {}).get("isError") or r.get("error"):
            sys.exit(f"run_command failed: {r}")
        if gap:
            time.sleep(gap)
    s.p.stdin.close()
    s.p.wait(timeout=600)
    return out


def inclusive(path):
    """{function name: inclusive Ir} and the total Ir of a callgrind file."""
    txt = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--auto=no", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    total = None
    funcs = {}
    for line in txt.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        what = m.group(2)
        if what.startswith("PROGRAM TOTALS"):
            total = ir
            continue
        f = re.match(r"^(?:.*:)?([A-Za-z_]\w*)(?:'\d+)?\s+\[", what)
        if f:
            funcs[f.group(1)] = funcs.get(f.group(1), 0) + ir
    return total, funcs


WARM = 10  # calls both runs make: the first row opens the database


def measure(build, n, gap, workdir, tag):
    base_total, base = inclusive(run(build, WARM, gap, workdir, f"{tag}-warm"))
    total, funcs = inclusive(run(build, WARM + n, gap, workdir, tag))
    d = lambda name: (funcs.get(name, 0) - base.get(name, 0)) / n  # noqa: E731
    call = (total - base_total) / n
    side, writer = d("sg_audit_tool_call"), d("writer_main")
    return {"calls": n, "gap_s": gap, "per_call_ir": round(call), "audit_call_side_ir": round(side),
            "audit_writer_ir": round(writer), "audit_ir": round(side + writer),
            "audit_share": round((side + writer) / call, 3) if call else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("SG_BUILD", "build"), help="build directory (default ./build)")
    ap.add_argument("-n", type=int, default=200, help="run_command calls per pace (default 200)")
    ap.add_argument("--gap", type=float, default=0.15, help="seconds between spaced calls (default 0.15)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON only")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if not os.path.exists(os.path.join(build, "t", "plugins", ".libs", "fakework.so")):
        sys.exit(f"{build}/t/plugins/.libs/fakework.so is missing: run `make check` (or make t/plugins/fakework.la) there")
    with tempfile.TemporaryDirectory(prefix="sg-audit-cost-") as wd:
        res = {"back_to_back": measure(build, a.n, 0, wd, "b2b"),
               "spaced": measure(build, max(20, a.n // 5), a.gap, wd, "spaced")}
    if a.json:
        print(json.dumps(res))
        return
    for pace, r in res.items():
        print(f"{pace:13} {r['calls']:4} calls: {r['per_call_ir']:8} Ir per run_command, audit row {r['audit_ir']:7} "
              f"(call side {r['audit_call_side_ir']}, writer {r['audit_writer_ir']}), {100 * r['audit_share']:.1f} %")
    ok = res["back_to_back"]["audit_ir"] < 20000
    print("target: the audit row under 20k instructions per run_command:", "met" if ok else "NOT met")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
