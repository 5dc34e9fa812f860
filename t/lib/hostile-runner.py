#!/usr/bin/env python3
"""A runner that lies (t/unit/test_runner_hostile.c): it greets as the real
one does (doc/runner-protocol.md), then answers every LIST with 12,000
entries and "more" forever, and every SPAWN with STARTED and then 8 MiB of
output and no end.  What a command could be once it speaks in the runner's
place, or a runner binary a sandbox replaced."""
import os, struct, sys

RIN, ROUT = 0, 1


def fnv(path):
    h = 0xcbf29ce484222325
    with open(path, 'rb') as f:
        for b in f.read():
            h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return '%016x' % h


def fld(tag, val):
    return struct.pack('>HI', tag, len(val)) + val


def u32(tag, v):
    return fld(tag, struct.pack('>I', v))


def u64(tag, v):
    return fld(tag, struct.pack('>Q', v))


def frame(typ, rid, payload=b''):
    data = struct.pack('>IBBBBI', len(payload), typ, 0, 0, 0, rid) + payload
    while data:
        data = data[os.write(ROUT, data):]


def read(n):
    b = b''
    while len(b) < n:
        c = os.read(RIN, n - len(b))
        if not c:
            sys.exit(0)
        b += c
    return b


def fields(p):
    out, i = {}, 0
    while i + 6 <= len(p):
        tag, ln = struct.unpack('>HI', p[i:i + 6])
        out.setdefault(tag, []).append(p[i + 6:i + 6 + ln])
        i += 6 + ln
    return out


ENTRIES = b''.join(fld(76, fld(77, b'f%07d' % k) + u32(70, 0) + u64(71, 1) + u32(65, 0o644) + u64(72, 0))
                   for k in range(12000))
frame(0x81, 0, u32(1, 1 << 16) + fld(2, fnv(sys.argv[0]).encode()) + u32(3, os.getpid())
      + fld(6, b'files') + fld(6, b'files-sweep'))
while True:
    ln, typ, _, _, _, rid = struct.unpack('>IBBBBI', read(12))
    f = fields(read(ln))
    if typ == 0x11 and struct.unpack('>I', f[60][0])[0] == 4:   # FILE LIST
        frame(0x91, rid, ENTRIES + u32(66, 4))                   # ... and MORE, always
    elif typ == 0x11:
        frame(0x91, rid, u32(33, 5) + fld(40, b'refused'))
    elif typ == 0x02:                                            # SPAWN
        frame(0x82, rid, u32(3, 99) + u32(20, 99))
        for _ in range(128):
            frame(0x83, rid, b'x' * 65536)                       # 8 MiB, no EXIT
    elif typ == 0x06:                                            # PING
        frame(0x86, rid)
