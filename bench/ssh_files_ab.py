#!/usr/bin/env python3
"""The 1 KiB file tools on SSH through two builds side by side, interleaved
round by round (the columns' order turning), on one throwaway sshd
(t/ssh/sshd-fixture.sh on loopback): the rows of bench/files_bench.py's SSH
section, for a change to ssh.so's or the runner's file path.  p50 / p99 ms.

    bench/ssh_files_ab.py OLD_BUILD_DIR NEW_BUILD_DIR [-n 150] [--isolation none|bwrap]

Each build directory holds its `sandgate`, `.libs/ssh.so` and
`sandgate-runner`.  --isolation none (the default) makes each sandbox a
plain directory, whose file tools are kept to it (doc/local.md); bwrap a
jail.  After the rounds each build's files must hold what they wrote.  Not
part of `make check`.
"""
import argparse, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_builds import env_for  # noqa: E402
from files_bench import FIXTURE, close_box, interleaved, open_box, sandgate_rows  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("-n", type=int, default=150)
    ap.add_argument("--isolation", default="none", choices=("none", "bwrap"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sg-ssh-ab-")
    fx = os.path.join(tmp, "sshd")
    boxes = {}
    try:
        ready = dict(l.split("=", 1) for l in subprocess.check_output(
            ["sh", FIXTURE, "start", fx]).decode().splitlines() if "=" in l)
        for col, build in (("old", a.old), ("new", a.new)):
            state = os.path.join(tmp, col)
            os.makedirs(state)
            env = env_for(os.path.abspath(build), state)
            env.pop("SSH_AUTH_SOCK", None)
            boxes[col] = open_box([os.path.join(build, "sandgate"), "--config", ready["ini"],
                                   "--set", "plugin.load=ssh", "--set", "sandbox.default_backend=ssh",
                                   "--set", f"ssh.isolation={a.isolation}", "stdio"], env)
        rows, checks = {}, []
        for col, box in boxes.items():
            fns, check = sandgate_rows(box)
            checks.append(check)
            for r, fn in fns.items():
                rows.setdefault(r, {})[col] = fn
        res = interleaved(rows, a.n)
        for check in checks:
            check()
    finally:
        for box in boxes.values():
            close_box(box)
        subprocess.run(["sh", FIXTURE, "stop", fx])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"n = {a.n} per cell, isolation {a.isolation}, loadavg "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}\n")
    print("| 1 KiB, SSH | old p50 / p99 ms | new p50 / p99 ms |\n|---|---:|---:|")
    for r, cols in res.items():
        print(f"| `{r}` | " + " | ".join(f"{cols[c]['p50']} / {cols[c]['p99']}" for c in ("old", "new")) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
