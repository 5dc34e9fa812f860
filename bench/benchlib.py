"""Pieces the Python benchmarks share: the Docker Engine API over its Unix
socket and its raw exec flow (the floor), a blocking newline-JSON-RPC client
of `sandgate stdio`, a client of sandgate-runner's frames
(doc/runner-protocol.md), and percentiles."""
import time, http.client, json, os, socket, statistics, struct, subprocess


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def docker(method, url, body=None, sock="/var/run/docker.sock"):
    """One Docker Engine API request; returns (status, body bytes)."""
    c = UnixHTTP(sock)
    c.request(method, url, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def raw_exec(ctr, argv):
    """The exec flow alone: create, start (attached), inspect."""
    _, d = docker("POST", f"/containers/{ctr}/exec",
                  {"Cmd": argv, "AttachStdout": True, "AttachStderr": True})
    eid = json.loads(d)["Id"]
    docker("POST", f"/exec/{eid}/start", {"Detach": False, "Tty": False})
    docker("GET", f"/exec/{eid}/json")


class Reader:
    """Reads a pipe into one bytearray, kept and doubled as needed, 1 MiB a
    read (os.readv into its memoryview: no bytes object per read).  The
    large floors read the same way (read_all), so both sides of a
    comparison pay the same client."""

    def __init__(self):
        self.buf = bytearray(1 << 20)
        self.start = self.end = 0  # unread bytes: buf[start:end]

    def _fill(self, fd):
        if len(self.buf) - self.end < (1 << 20):
            self.buf.extend(bytes(len(self.buf)))
        with memoryview(self.buf) as mv:
            return os.readv(fd, [mv[self.end:self.end + (1 << 20)]])

    def line(self, fd, owner=None):
        """The next line (bytes, its newline included); at EOF what is left."""
        if self.start == self.end:
            self.start = self.end = 0
        scan = self.start
        while True:
            nl = self.buf.find(b"\n", scan, self.end)
            if nl >= 0:
                if owner is not None:
                    owner.t_last = time.perf_counter()
                out = bytes(self.buf[self.start:nl + 1])
                self.start = nl + 1
                return out
            scan = self.end
            n = self._fill(fd)
            if n and owner is not None and getattr(owner, "t_first", 0) is None:
                owner.t_first = time.perf_counter()
            if not n:
                out = bytes(self.buf[self.start:self.end])
                self.start = self.end = 0
                return out
            self.end += n

    def read_all(self, fd):
        """Everything to EOF; returns its length (the bytes stay in buf)."""
        self.start = self.end = 0
        while True:
            n = self._fill(fd)
            if not n:
                return self.end
            self.end += n


class Server:
    """sandgate stdio, one request at a time.  initialize() is separate, so
    a caller can time it."""

    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.id = 0
        self.inbuf = b""

    def readline(self):
        """The next line from sandgate, read into one buffer that is kept
        and grown (Reader), as a client that takes large replies would:
        allocating each read's bytes anew cost a 170 MB reply 300 to 450 ms
        of page faults in the client.  Sets t_first (when asked for by
        setting it to None) and t_last, the newline's arrival."""
        if not hasattr(self, "reader"):
            self.reader = Reader()
        return self.reader.line(self.p.stdout.fileno(), self)

    def initialize(self, name="bench"):
        r = self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": name, "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return r

    def request(self, method, params=None):
        """The next request's line, made now (to be sent by send_line())."""
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": method}
        if params is not None:
            msg["params"] = params
        return (json.dumps(msg) + "\n").encode()

    def send_line(self, line):
        self.p.stdin.write(line)
        self.p.stdin.flush()

    def reply_raw(self):
        """The reply line to the last request, as it came (bytes)."""
        while True:
            line = self.readline()
            if f'"id":{self.id},'.encode() in line[:64]:
                return line

    def call(self, method, params=None):
        self.send_line(self.request(method, params))
        return json.loads(self.reply_raw())

    def tool(self, name, args):
        """tools/call; returns structuredContent, raises on any error."""
        r = self.call("tools/call", {"name": name, "arguments": args})
        res = r.get("result") or {}
        if r.get("error") or res.get("isError"):
            raise RuntimeError(f"{name} {args}: {json.dumps(r)[:300]}")
        return res.get("structuredContent", {})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


class LoggedServer(Server):
    """Server with its stderr in a file: a warm pool or a spare says there
    when a member is ready (`pool_ready`)."""

    def __init__(self, cmd, env, log):
        self.log = log
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(log, "w"), env=env)
        self.id = 0

    def pool_ready(self):
        """True when more members were made ready than were handed out."""
        text = open(self.log).read()
        return text.count(" ready (") > text.count("pool: handed out")


class RawRunner:
    """sandgate-runner --stdio started by argv (docker exec -i, or ssh),
    driven with its frames: HELLO, then SPAWN and wait for EXIT."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.id = 0
        self.send(0x01, 0, self.field(1, struct.pack(">I", 1 << 16)))
        t, _, _ = self.frame()
        if t != 0x81:
            raise RuntimeError(f"no HELLO from the runner (frame 0x{t:02x})")

    @staticmethod
    def field(tag, val):
        return struct.pack(">HI", tag, len(val)) + val

    def send(self, typ, rid, payload=b""):
        self.p.stdin.write(struct.pack(">IBBHI", len(payload), typ, 0, 0, rid) + payload)

    def read(self, n):
        b = b""
        while len(b) < n:
            chunk = self.p.stdout.read(n - len(b))
            if not chunk:
                raise EOFError("the runner stream ended")
            b += chunk
        return b

    def frame(self):
        n, typ, _, _, rid = struct.unpack(">IBBHI", self.read(12))
        return typ, rid, self.read(n)

    def spawn(self, payload):
        """One SPAWN with the given fields; returns its stdout once it ended."""
        self.id += 1
        self.send(0x02, self.id, payload)
        out = b""
        while True:
            typ, rid, data = self.frame()
            if rid != self.id:
                continue
            if typ == 0x83:
                out += data
            if typ in (0x87, 0x88):
                return out

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(xs):
    return {"p50": round(pct(xs, 50), 2), "p99": round(pct(xs, 99), 2),
            "mean": round(statistics.mean(xs), 2), "n": len(xs)}
