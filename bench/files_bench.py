#!/usr/bin/env python3
"""The file tools on a warm sandbox through the runner, next to the way
without it and the raw floor, side by side in one run: Docker always, SSH
with --ssh.

Small file (1 KiB), p50/p99 in ms, interleaved one of each per round
(5 warm-up rounds not counted), the same loop for both backends:
  tools    read_file, write_file, sandbox_file_read, sandbox_file_write,
           sandbox_file_patch (a one-line unified diff on a 1 KiB file of 16
           lines, alternately applied and undone, so every round patches the
           same text), list_files
  Docker   runner   through `sandgate stdio` (the default: sandgate-runner,
                    on its channel where the engine is local: doc/docker.md)
           relay    the same with --set docker.runner_channel=false (the
                    runner's frames through the engine's exec relay)
           archive  the same with SANDGATE_DOCKER_RUNNER=false (Engine API
                    archive endpoints plus helper execs)
           floor    `docker exec CTR cat FILE` and
                    `docker exec -i CTR sh -c 'cat > FILE'` (the docker CLI:
                    what an agent without sandgate would pay)
  SSH      (--ssh: a throwaway sshd from t/ssh/sshd-fixture.sh on loopback,
           sandboxes plain directories: --set ssh.isolation=none, under
           $TMPDIR; sandgate's writes fsync the file and its directory, the
           floor's `cat >` does not, so the disk under $TMPDIR counts)
           runner   ssh.so with its runner (the default)
           plain    --set ssh.runner=false (files over SFTP, commands on exec
                    channels; both on a pooled libssh2 connection)
           floor    OpenSSH reusing a ControlMaster connection:
                    `ssh ... 'cat FILE'` and `ssh ... 'cat > FILE'` (the
                    remote login shell is the `sh -c`), the ssh client's
                    start included
  run_command "true" on each path (`docker exec CTR true` and `ssh ... true`
  its floors), for scale.  Then the runner's column alone: each tool n times
  in a row with nothing in between (the interleaved rounds put the engine's
  clean-up after each archive and docker CLI call on the next call).
After the rounds each sandgate path's a.txt must hold the 1 KiB written and
its patched file the text the patches left (checked once).
Large file (--big MiB, default 16; Docker), a few rounds: write_file and
read_file (base64) through the runner (on its channel, and through the
relay) next to `docker exec -i CTR cat` piping the same bytes in and out.  Each request is made before its clock
starts (as the pipe's input is).  sandgate's replies and the pipe's output
are read by the same client reader (benchlib.Reader: 1 MiB reads into one
kept buffer); the read is timed to the reply's first byte (the file read
from the sandbox and encoded: the reply is written once it is whole), to
its newline (as the pipe's row to its EOF: nothing decoded) and to the
client's parsed and decoded result.
Targets (issue 17): each 1 KiB tool <= 2 ms p50 through the runner, on
Docker and on SSH; the big write and read within 1.5x the pipe.  Not part of
`make check`.

With --before BUILD_DIR the large rounds also run the same write_file and
read_file through that build (its sandgate, .libs and sandgate-runner),
interleaved with this one's, on a sandbox of its own: an A/B of a change in
one run.

usage: bench/files_bench.py [-n 100] [--big 16] [--big-rounds 3] [--ssh] [--sandgate ./sandgate]
                            [--before BUILD_DIR] [--json]
"""
import argparse, base64, json, os, shutil, subprocess, sys, tempfile, time
from collections import namedtuple

from benchlib import Reader, Server, summary

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "t", "ssh", "sshd-fixture.sh")
WARMUP = 5
KIB = ("x" * 1023) + "\n"
# The patched file: 16 lines of 64 bytes; the diffs swap line 8 between x and y.
PATCH_LINE = "line 07 {}\n"
PATCH_TEXT = "".join(f"line {i:02d} " + "x" * 55 + "\n" for i in range(16))
PATCH_DONE = PATCH_TEXT.replace(PATCH_LINE.format("x" * 55), PATCH_LINE.format("y" * 55))
SMALL_TARGET_MS = 2

# One sandgate path to a sandbox: the server, the sandbox's id and workspace.
Box = namedtuple("Box", "srv id ws")


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def interleaved(rows, n):
    """rows: {row: {column: fn}}.  Calls every fn once per round, row by row
    (so drift hits every column alike), for WARMUP + n rounds; returns
    {row: {column: summary of the n counted rounds}}.  The columns' order
    turns by one each round: the engine keeps working for a while after a
    docker CLI or archive call returns, and whichever column came next would
    always pay for it."""
    ms = {r: {c: [] for c in cols} for r, cols in rows.items()}
    for i in range(n + WARMUP):
        for r, cols in rows.items():
            order = list(cols.items())
            k = i % len(order)
            for c, fn in order[k:] + order[:k]:
                t = timed(fn)
                if i >= WARMUP:
                    ms[r][c].append(t)
    return {r: {c: summary(v) for c, v in cols.items()} for r, cols in ms.items()}


class Patcher:
    """sandbox_file_patch of p.txt, applying the one-line diff and undoing it
    on alternate calls, so the file is one of two known texts."""

    def __init__(self, box):
        self.box, self.calls = box, 0
        x, y = PATCH_LINE.format("x" * 55), PATCH_LINE.format("y" * 55)
        hunk = "--- a/p.txt\n+++ b/p.txt\n@@ -8,1 +8,1 @@\n"
        self.diffs = (hunk + "-" + x + "+" + y, hunk + "-" + y + "+" + x)

    def __call__(self):
        b = self.box
        b.srv.tool("sandbox_file_patch", {"mode": "patch", "path": f"{b.ws}/p.txt",
                                          "patch": self.diffs[self.calls % 2], "machine": b.id})
        self.calls += 1

    def expected(self):
        return PATCH_DONE if self.calls % 2 else PATCH_TEXT


def open_box(cmd, env):
    """A sandgate stdio server with one sandbox, its runner started (when it
    has one) and the small files written."""
    srv = Server(cmd, env)
    srv.initialize("files-bench")
    r = srv.tool("create_sandbox", {})
    box = Box(srv, r["sandbox_id"], r["workspace"])
    srv.tool("run_command", {"command": "true", "sandbox_id": box.id})
    srv.tool("write_file", {"path": f"{box.ws}/a.txt", "content": KIB, "sandbox_id": box.id})
    srv.tool("write_file", {"path": f"{box.ws}/p.txt", "content": PATCH_TEXT, "sandbox_id": box.id})
    return box


def close_box(box):
    box.srv.tool("kill_sandbox", {"sandbox_id": box.id})
    box.srv.close()


def sandgate_rows(box):
    """{row: fn} of the 1 KiB tools and run_command "true" on one path, and
    the check of what they left (to run once, after the rounds)."""
    s, i, ws = box.srv, box.id, box.ws
    patch = Patcher(box)
    rows = {
        "read_file": lambda: s.tool("read_file", {"path": f"{ws}/a.txt", "sandbox_id": i}),
        "write_file": lambda: s.tool("write_file", {"path": f"{ws}/a.txt", "content": KIB,
                                                    "sandbox_id": i}),
        "sandbox_file_read": lambda: s.tool("sandbox_file_read", {"path": f"{ws}/a.txt", "machine": i}),
        "sandbox_file_write": lambda: s.tool("sandbox_file_write", {"path": f"{ws}/b.txt",
                                                                    "content": KIB, "machine": i}),
        "sandbox_file_patch": patch,
        "list_files": lambda: s.tool("list_files", {"path": ws, "sandbox_id": i}),
        "run_command true": lambda: s.tool("run_command", {"command": "true", "sandbox_id": i}),
    }

    def check():
        for name, want in (("a.txt", KIB), ("p.txt", patch.expected())):
            got = s.tool("read_file", {"path": f"{ws}/{name}", "sandbox_id": i}).get("content")
            if got != want:
                bad = next((g for g, w in zip((got or "").splitlines(), want.splitlines()) if g != w), got)
                raise RuntimeError(f"{name} on {i} is not what the rounds left: {bad!r:.100}")
    return rows, check


def small_section(paths, floor, n):
    """paths: {column: Box}; floor: {row: fn}.  The interleaved 1 KiB rounds,
    then each path's check; returns {row: {column: summary}}."""
    rows, checks = {}, []
    for col, box in paths.items():
        fns, check = sandgate_rows(box)
        checks.append(check)
        for r, fn in fns.items():
            rows.setdefault(r, {})[col] = fn
    for r, fn in floor.items():
        rows[r]["floor"] = fn
    res = interleaved(rows, n)
    # then the runner's tools with nothing else in between, one tool n
    # times in a row: what an agent that only uses sandgate sees (with the
    # runner nothing of theirs makes the engine work after the call)
    first = next(iter(paths))
    for r, cols in rows.items():
        fn = cols[first]
        for _ in range(WARMUP):
            fn()
        res[r]["alone"] = summary([timed(fn) for _ in range(n)])
    for check in checks:
        check()
    return res


def run(argv, data=None):
    """A floor command: argv with data on its stdin; returns its stdout."""
    return subprocess.run(argv, input=data, capture_output=True, check=True).stdout


PIPE_READER = Reader()


def pipe_read(argv):
    """The large read's floor: argv's stdout read to EOF by the same client
    reader as sandgate's replies (benchlib.Reader); returns the bytes."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = PIPE_READER.read_all(p.stdout.fileno())
    if p.wait() != 0:
        raise RuntimeError(f"{argv}: exit {p.returncode}")
    return memoryview(PIPE_READER.buf)[:n]


def docker_small(fast, relay, slow, n):
    """The 1 KiB rows on Docker: runner (on its channel), runner through
    the engine's relay, archive and the docker CLI floor (on a file outside
    the workspace of the runner's container)."""
    run(["docker", "exec", fast.id, "sh", "-c", "head -c 1024 /dev/zero > /tmp/f"])
    floor = {
        "read_file": lambda: run(["docker", "exec", fast.id, "cat", "/tmp/f"]),
        "write_file": lambda: run(["docker", "exec", "-i", fast.id, "sh", "-c", "cat > /tmp/f"],
                                  KIB.encode()),
        "run_command true": lambda: run(["docker", "exec", fast.id, "true"]),
    }
    return small_section({"runner": fast, "relay": relay, "archive": slow}, floor, n)


def ssh_small(a, env):
    """The 1 KiB rows on SSH: a throwaway sshd, ssh.so with and without its
    runner (plain directories), and OpenSSH on a ControlMaster connection as
    the floor.  Returns (host, {row: {column: summary}})."""
    tmp = tempfile.mkdtemp(prefix="sg-files-bench-")
    fx = os.path.join(tmp, "sshd")
    boxes, ssh = [], None
    try:
        ready = dict(l.split("=", 1) for l in subprocess.check_output(
            ["sh", FIXTURE, "start", fx]).decode().splitlines() if "=" in l)
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={ready['known_hosts']}",
               "-o", "StrictHostKeyChecking=yes", "-i", ready["key"], "-p", ready["port"],
               "-o", "ControlMaster=auto", "-o", f"ControlPath={tmp}/cm-%C",
               "-o", "ControlPersist=60", f"{ready['user']}@127.0.0.1"]
        # sandgate's state and ~/.ssh are the run's own, not the user's
        senv = dict(env, HOME=os.path.join(tmp, "home"), XDG_STATE_HOME=os.path.join(tmp, "state"))
        senv.pop("SSH_AUTH_SOCK", None)
        senv.pop("SANDGATE_SSH_RUNNER", None)
        os.makedirs(senv["HOME"])
        base = [a.sandgate, "--config", ready["ini"], "--set", "plugin.load=ssh",
                "--set", "sandbox.default_backend=ssh", "--set", "ssh.isolation=none"]
        boxes.append(open_box(base + ["stdio"], senv))
        boxes.append(open_box(base + ["--set", "ssh.runner=false", "stdio"], senv))
        f = os.path.join(tmp, "f")
        run(ssh + [f"head -c 1024 /dev/zero > {f}"])  # also starts the master
        floor = {
            "read_file": lambda: run(ssh + [f"cat {f}"]),
            "write_file": lambda: run(ssh + [f"cat > {f}"], KIB.encode()),
            "run_command true": lambda: run(ssh + ["true"]),
        }
        res = small_section({"runner": boxes[0], "plain": boxes[1]}, floor, a.n)
        return f"{ready['user']}@127.0.0.1:{ready['port']}", res
    finally:
        for box in boxes:
            close_box(box)
        if ssh:
            subprocess.run(ssh[:-1] + ["-O", "exit", ssh[-1]], stderr=subprocess.DEVNULL)
        subprocess.run(["sh", FIXTURE, "stop", fx])
        shutil.rmtree(tmp, ignore_errors=True)


def write_big(box, data, b64):
    """write_file of the big file, the request made before the clock starts
    (as the pipe's input is), to its reply."""
    srv = box.srv
    line = srv.request("tools/call", {"name": "write_file", "arguments": {
        "path": f"{box.ws}/big.bin", "content": b64, "encoding": "base64", "sandbox_id": box.id}})
    t0 = time.perf_counter()
    srv.send_line(line)
    reply = srv.reply_raw()
    ms = (time.perf_counter() - t0) * 1000
    if b'"isError"' in reply or b'"bytes_written":%d' % len(data) not in reply:
        raise RuntimeError(f"write_file: {reply[:300]!r}")
    return ms


def read_big(box, data):
    """read_file of the whole big file (limit = the size: without it, the
    first page only): to the reply's first byte, its last byte, and parsed
    and decoded by the client."""
    srv = box.srv
    args = {"path": f"{box.ws}/big.bin", "encoding": "base64", "limit": len(data),
            "sandbox_id": box.id}
    line = srv.request("tools/call", {"name": "read_file", "arguments": args})
    srv.t_first = None
    t0 = time.perf_counter()
    srv.send_line(line)
    reply = srv.reply_raw()
    t1 = srv.t_last  # the newline's arrival, before the client copies the line out
    got = base64.b64decode(json.loads(reply)["result"]["structuredContent"]["content"])
    t2 = time.perf_counter()
    if got != data:
        raise RuntimeError("the large file did not round-trip exactly")
    return (srv.t_first - t0) * 1000, (t1 - t0) * 1000, (t2 - t0) * 1000


def docker_big(a, fast, relay, cmd, env):
    """The large rounds on Docker: the runner on its channel, through the
    engine's relay (relay), and on the --before build; returns the rows and
    the ratios to the pipe."""
    data = os.urandom(a.big * 1024 * 1024)
    b64 = base64.b64encode(data).decode()
    rounds = {"write_file (runner)": [], "docker exec -i cat > f": [],
              "read_file (runner)": [], "read_file, to the reply's last byte": [],
              "read_file, to the reply's first byte": [], "docker exec cat f": [],
              "write_file (relay)": [], "read_file, to the reply's last byte (relay)": []}
    old = None
    if a.before:
        benv = dict(env, SANDGATE_PLUGIN_DIR=os.path.join(a.before, ".libs"),
                    SANDGATE_RUNNER=os.path.join(a.before, "sandgate-runner"))
        old = open_box([os.path.join(a.before, "sandgate")] + cmd[1:], benv)
        rounds["write_file (before)"] = []
        rounds["read_file (before)"] = []
        rounds["read_file, to the reply's last byte (before)"] = []
    for i in range(a.big_rounds + 1):  # the first round warms up
        if old:
            ow = write_big(old, data, b64)
            _, orb, orr = read_big(old, data)
            if i:
                rounds["write_file (before)"].append(ow)
                rounds["read_file (before)"].append(orr)
                rounds["read_file, to the reply's last byte (before)"].append(orb)
        rw = write_big(relay, data, b64)
        _, rrb, _ = read_big(relay, data)
        w = write_big(fast, data, b64)
        pw = timed(lambda: run(["docker", "exec", "-i", fast.id, "sh", "-c", "cat > /tmp/big"], data))
        rf, rb, r = read_big(fast, data)
        out = {}
        pr = timed(lambda: out.update(o=pipe_read(["docker", "exec", fast.id, "cat", "/tmp/big"])))
        if out["o"] != data:
            raise RuntimeError("the pipe did not round-trip exactly")
        if i:
            rounds["write_file (relay)"].append(rw)
            rounds["read_file, to the reply's last byte (relay)"].append(rrb)
            rounds["write_file (runner)"].append(w)
            rounds["docker exec -i cat > f"].append(pw)
            rounds["read_file (runner)"].append(r)
            rounds["read_file, to the reply's last byte"].append(rb)
            rounds["read_file, to the reply's first byte"].append(rf)
            rounds["docker exec cat f"].append(pr)
    if old:
        close_box(old)
    big = {k: summary(v) for k, v in rounds.items()}
    ratio = lambda row, pipe: round(big[row]["p50"] / big[pipe]["p50"], 2)
    big["write_over_pipe_p50"] = ratio("write_file (runner)", "docker exec -i cat > f")
    big["read_over_pipe_p50"] = ratio("read_file (runner)", "docker exec cat f")
    big["read_bytes_over_pipe_p50"] = ratio("read_file, to the reply's last byte", "docker exec cat f")
    return big


def small_ok(res, col="runner"):
    """Every 1 KiB tool's p50 in col within the target (run_command is for scale)."""
    return all(r[col]["p50"] <= SMALL_TARGET_MS for k, r in res.items() if k != "run_command true")


def print_small(title, res, cols):
    """A markdown table of the 1 KiB rows; cols: [(column, header)]; the
    floor is shown as its p50."""
    print(f"| {title} | " + " | ".join(h for _, h in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for k, r in res.items():
        cell = lambda c: "-" if c not in r else (
            str(r[c]["p50"]) if c == "floor" else f"{r[c]['p50']} / {r[c]['p99']}")
        print(f"| `{k}` | " + " | ".join(cell(c) for c, _ in cols) + " |")


def print_report(a, out):
    print(f"n = {a.n} per cell, {os.cpu_count()} CPUs, loadavg {' '.join(out['loadavg'])}\n")
    print_small("1 KiB, Docker", out["small_ms"], [("runner", "runner p50 / p99 ms"),
                                                   ("alone", "runner alone p50 / p99 ms"),
                                                   ("relay", "runner via relay p50 / p99 ms"),
                                                   ("archive", "archive p50 / p99 ms"),
                                                   ("floor", "floor (docker exec) p50 ms")])
    if "ssh_small_ms" in out:
        print(f"\nSSH: {out['ssh_host']} (plain directories)\n")
        print_small("1 KiB, SSH", out["ssh_small_ms"], [("runner", "runner p50 / p99 ms"),
                                                        ("alone", "runner alone p50 / p99 ms"),
                                                        ("plain", "plain (SFTP, exec) p50 / p99 ms"),
                                                        ("floor", "floor (ssh, ControlMaster) p50 ms")])
    big = out["big_ms"]
    if big:
        print(f"\n| {a.big} MiB | p50 ms | mean ms |\n|---|---:|---:|")
        for k, v in big.items():
            if isinstance(v, dict):
                print(f"| {k} | {v['p50']} | {v['mean']} |")
        print(f"| write / pipe | {big['write_over_pipe_p50']}x | |\n| read / pipe | {big['read_over_pipe_p50']}x | |")
        print(f"| read to the last byte / pipe | {big['read_bytes_over_pipe_p50']}x | |")
    print(f"\ntargets (each 1 KiB tool <= {SMALL_TARGET_MS} ms p50 through the runner; "
          f"the big write and read within 1.5x the pipe): {json.dumps(out['targets_met'])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--big", type=int, default=16, help="MiB for the large transfer (0: skip)")
    ap.add_argument("--big-rounds", type=int, default=3, help="counted large rounds (after one warm-up)")
    ap.add_argument("--ssh", action="store_true", help="also the 1 KiB rows on SSH (a throwaway sshd)")
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
    fast = open_box(cmd, env)
    relay = open_box(cmd + ["--set", "docker.runner_channel=false"], env)
    slow = open_box(cmd, dict(env, SANDGATE_DOCKER_RUNNER="false"))
    try:
        out = {"n": a.n, "big_mib": a.big, "small_ms": docker_small(fast, relay, slow, a.n)}
        out["big_ms"] = docker_big(a, fast, relay, cmd, env) if a.big else {}
    finally:
        close_box(fast)
        close_box(relay)
        close_box(slow)
    targets = {"docker_small_p50_le_2ms": small_ok(out["small_ms"]),
               "docker_small_alone_p50_le_2ms": small_ok(out["small_ms"], "alone")}
    if a.ssh:
        out["ssh_host"], out["ssh_small_ms"] = ssh_small(a, env)
        targets["ssh_small_p50_le_2ms"] = small_ok(out["ssh_small_ms"])
        targets["ssh_small_alone_p50_le_2ms"] = small_ok(out["ssh_small_ms"], "alone")
    big = out["big_ms"]
    # the pipe's rows decode nothing: the read's row to compare is the one
    # to the reply's last byte; the parsed one is reported apart
    targets["big_within_1.5x_pipe"] = not big or (big["write_over_pipe_p50"] <= 1.5 and
                                                  big["read_bytes_over_pipe_p50"] <= 1.5)
    targets["big_read_parsed_within_1.5x_pipe"] = not big or big["read_over_pipe_p50"] <= 1.5
    out.update(loadavg=open("/proc/loadavg").read().split()[:3], cpus=os.cpu_count(),
               targets_met=targets)
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print_report(a, out)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
