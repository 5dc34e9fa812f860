#!/usr/bin/env python3
"""t/fuzz/make-seeds.py - writes the seed inputs of t/fuzz/corpus/NAME/seed-*.

Seeds come from the unit tests (the JSON-RPC messages of t/unit/test_jsonrpc.c,
the texts and diffs of t/unit/test_patch.c, the envelopes and base64 of
t/fc/test_connect.c), the example configuration, and a few hand-made inputs
in each target's format (see the comment at the top of t/fuzz/fuzz_NAME.c).
Inputs that once found a bug are kept beside them as regress-* and are never
written by this script.  Run it from anywhere; it rewrites the seed-* files.

    python3 t/fuzz/make-seeds.py
"""
import ast
import hashlib
import json
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def read(rel):
    with open(os.path.join(TOP, rel), encoding='utf-8') as f:
        return f.read()


LIT = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def c_string(text):
    """Value of a run of adjacent C string literals (as bytes)."""
    out = b''
    for m in LIT.finditer(text):
        out += ast.literal_eval('b"' + m.group(1) + '"')
    return out


def call_args(src, fn):
    """The string arguments of each call fn(...) in src: lists of bytes
    (None for NULL, a non-string argument skipped)."""
    calls = []
    for m in re.finditer(r'\b' + re.escape(fn) + r'\(', src):
        i, depth, args, cur = m.end(), 1, [], ''
        while depth and i < len(src):
            c = src[i]
            if c == '"':
                j = i + 1
                while src[j] != '"':
                    j += 2 if src[j] == '\\' else 1
                cur += src[i:j + 1]
                i = j + 1
                continue
            if c == '(':
                depth += 1
            elif c == ')':
                depth -= 1
            if (c == ',' and depth == 1) or depth == 0:
                args.append(cur.strip())
                cur = ''
            else:
                cur += c
            i += 1
        vals = []
        for a in args:
            if a == 'NULL':
                vals.append(None)
            elif a.startswith('"'):
                vals.append(c_string(a))
        calls.append(vals)
    return calls


class Corpus:
    def __init__(self, name):
        self.dir = os.path.join(HERE, 'corpus', name)
        os.makedirs(self.dir, exist_ok=True)
        for f in os.listdir(self.dir):
            if f.startswith('seed-'):
                os.unlink(os.path.join(self.dir, f))
        self.n = 0

    def add(self, data, label=''):
        if isinstance(data, str):
            data = data.encode()
        h = hashlib.sha1(data).hexdigest()[:10]
        label = re.sub(r'[^a-z0-9]+', '-', label.lower()).strip('-')[:40]
        name = f'seed-{label}-{h}' if label else f'seed-{h}'
        with open(os.path.join(self.dir, name), 'wb') as f:
            f.write(data)
        self.n += 1


def jsonrpc_messages():
    msgs = []
    for m in LIT.finditer(read('t/unit/test_jsonrpc.c')):
        try:
            b = ast.literal_eval('b"' + m.group(1) + '"')
        except (ValueError, SyntaxError):
            continue
        if b.startswith((b'{', b'[')) and (b'jsonrpc' in b or b'method' in b):
            msgs.append(b)
    return msgs


INIT = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
                   'params': {'protocolVersion': '2025-11-25', 'capabilities': {},
                              'clientInfo': {'name': 'fuzz', 'version': '1'}}})


def rpc(id_, method, params=None):
    m = {'jsonrpc': '2.0', 'id': id_, 'method': method}
    if params is not None:
        m['params'] = params
    return json.dumps(m)


def seeds_jsonrpc(msgs):
    c = Corpus('jsonrpc')
    for b in msgs:
        c.add(b, 'test-jsonrpc')
    c.add('[' + ','.join([rpc(1, 'ping'), rpc('x', 'tools/list'), '{"jsonrpc":"2.0","method":"n"}']) + ']', 'batch')
    c.add('{"jsonrpc":"2.0","id":9223372036854775807,"method":"a\\u0000b"}', 'nul-in-method')
    c.add('{"jsonrpc":"2.0","id":' + '[' * 40 + ']' * 40 + ',"method":"ping"}', 'nested-id')
    return c.n


def seeds_mcp(msgs):
    c = Corpus('mcp')
    c.add('\n'.join([INIT, '{"jsonrpc":"2.0","method":"notifications/initialized"}',
                     rpc(2, 'ping'), rpc(3, 'tools/list'),
                     rpc(4, 'tools/call', {'name': 'run_command', 'arguments': {'command': 'ls'}}),
                     rpc(5, 'tools/call', {'name': 'nope'}), rpc(6, 'logging/setLevel', {'level': 'debug'}),
                     '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}']), 'session')
    old = INIT.replace('2025-11-25', '2025-03-26')
    c.add('\n'.join([old, '[' + ','.join([rpc(1, 'ping'), rpc(2, 'tools/call', {'name': 'sandbox_env'}),
                                          '{"jsonrpc":"2.0","method":"x"}', '{"jsonrpc":"2.0","id":3,"result":{}}']) + ']',
                     '[]', '[1]']), 'batch-2025-03-26')
    c.add('\n'.join([INIT, rpc(2, 'tools/list', {'cursor': 'abc'}), rpc(3, 'initialize', {}), INIT]), 'reinit')
    for i in range(0, len(msgs), 8):
        c.add(b'\n'.join(msgs[i:i + 8]), 'test-jsonrpc')
    return c.n


def seeds_stdio():
    c = Corpus('stdio')
    lines = [INIT, rpc(2, 'ping'), '', '  \r', rpc(3, 'tools/list') + ' \t\r']
    for cap in (5, 40, 0x85):
        for seed in (0, 1, 0x80, 0x81):
            c.add(bytes([cap, seed]) + '\n'.join(lines).encode(), f'cap-{cap}-seed-{seed}')
    c.add(bytes([3, 1]) + b'abcdefgh\nab\nabcd\r\nabc', 'over-cap')
    c.add(bytes([60, 0x81]) + b'x' * 7000 + b'\nok\n' + b'y' * 9000, 'long-lines')
    return c.n


def head(method, path, headers, body=''):
    text = f'{method} {path}\n' + ''.join(f'{k}: {v}\n' for k, v in headers)
    return text + ('\n' + body if body else '')


def seeds_http():
    c = Corpus('http')
    sid = 'ab' * 32
    base = [('Host', 'localhost:8010'), ('Accept', 'application/json, text/event-stream'),
            ('Content-Type', 'application/json')]
    auth = [('Authorization', 'Bearer tok-fuzz')]
    c.add(b'\x00' + head('POST', '/mcp', base + [('Content-Length', '40')], INIT).encode(), 'initialize')
    c.add(b'\x01' + head('POST', '/mcp', base + auth + [('Mcp-Session-Id', sid), ('MCP-Protocol-Version', '2025-11-25')]).encode(), 'session-token')
    c.add(b'\x00' + head('GET', '/mcp', [('Host', '[::1]:1'), ('Accept', 'text/event-stream'), ('Mcp-Session-Id', sid), ('Last-Event-ID', '3-7')]).encode(), 'get-resume')
    c.add(b'\x02' + head('DELETE', '/mcp', [('Host', '127.0.0.1'), ('Mcp-Session-Id', sid)]).encode(), 'delete-stopping')
    for h in ('[::1].evil.com', '[::1]evil', '127.0.0.1.evil.com', 'localhost:', '[0:0::1]:80', 'LocalHost'):
        c.add(b'\x00' + head('POST', '/mcp', [('Host', h)]).encode(), 'host')
    for o in ('http://[::1].evil.com', 'http://127.0.0.1.evil.com', 'https://localhost:1', 'null', 'http://localhost/x'):
        c.add(b'\x00' + head('POST', '/mcp', [('Host', 'localhost'), ('Origin', o)]).encode(), 'origin')
    c.add(b'\x00' + head('POST', '/mcp', base + [('Content-Length', '5'), ('Content-Length', '6')]).encode(), 'two-lengths')
    c.add(b'\x00' + head('POST', '/mcp', base + [('Content-Length', '5'), ('Transfer-Encoding', 'chunked')]).encode(), 'length-and-chunked')
    c.add(b'\x00' + head('PUT', '/other', base).encode(), 'put-other')
    return c.n


def seeds_conf():
    c = Corpus('conf')
    c.add(read('etc/sandgate.ini.example'), 'example')
    c.add('[server]\nport = 8010\nhost=127.0.0.1\n; comment\n# comment\nallowed_hosts = localhost, [::1]\n'
          '[ssh.target.lab]\nhost = lab.example\nport = 2222\nmode = b\nflag = yes\nenv.FOO = bar\n', 'targets')
    c.add('[server]\nport = 8010\n\x00server.port=9\x00ssh.target.x.port=1\x00bad\x00log.level=debug', 'with-set')
    c.add('\ufeff[log]\nlevel = debug ; inline\n[audit]\nredact = x\n  continued\n', 'bom-continuation')
    c.add('[server]\n# ' + 'x' * 197 + 'port = 4444\n', 'long-comment')
    return c.n


def frame(stream, payload):
    return struct.pack('>BxxxI', stream, len(payload)) + payload


def seeds_demux():
    c = Corpus('demux')
    s = frame(1, b'hello\n') + frame(2, b'oops\n') + frame(1, b'') + frame(3, b'daemon error')
    for mode in (0, 1, 0x20, 0x31):
        c.add(bytes([mode]) + s, f'frames-{mode}')
    c.add(b'\x00' + frame(1, b'x' * 300)[:100], 'cut')
    c.add(b'\x00' + b'\x05\x00\x00\x00\x00\x00\x00\x01x', 'bad-stream')
    return c.n


def env(flags, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return struct.pack('>BI', flags, len(payload)) + payload


def seeds_fc():
    c = Corpus('fc')
    src = read('t/fc/test_connect.c')
    ev = [env(0, '{"event":{"start":{"pid":42}}}'),
          env(0, '{"event":{"data":{"stdout":"aGkK"}}}'),
          env(0, '{"event":{"data":{"stderr":"b29wcw==","pty":"eA"}}}'),
          env(0, '{"event":{"keepalive":{}}}'),
          env(0, '{"event":{"end":{"exitCode":"3","status":"signal: killed"}}}'),
          env(2, '{"error":{"code":"deadline_exceeded","message":"timeout"}}')]
    for mode in (0, 5, 10, 0x18):
        c.add(bytes([mode]) + b''.join(ev), f'envelopes-{mode}')
    for mode in (1, 6, 11):
        c.add(bytes([mode]) + b''.join(ev), f'process-{mode}')
    nd = '\n'.join([
        '{"type":"stdout","text":"hello\\n"}', '{"type":"stderr","text":"warn\\n"}',
        '{"type":"result","text":"42","is_main_result":true,"png":"iVBORw0KGgo=","html":"<b>x</b>"}',
        '{"type":"error","name":"ValueError","value":"bad","traceback":"..."}',
        '{"type":"number_of_executions","execution_count":1}', '', '{"type":"end_of_execution"}']) + '\n'
    for mode in (2, 7, 0x12, 0x1a):
        c.add(bytes([mode]) + nd.encode(), f'ndjson-{mode}')
    for m in re.finditer(r'fc_b64_decode\("((?:[^"\\]|\\.)*)"', src):
        c.add(bytes([3]) + ast.literal_eval('b"' + m.group(1) + '"'), 'base64')
    for m in re.finditer(r'fc_rfc3339\("((?:[^"\\]|\\.)*)"', src):
        c.add(bytes([4]) + ('"' + m.group(1) + '"').encode(), 'rfc3339')
    for v in ('"1234"', '12', '1e300', '"FILE_TYPE_DIRECTORY"', '3', '"12x"', '-9223372036854775809'):
        c.add(bytes([4]) + v.encode(), 'value')
    for m in re.finditer(r'(?:const char \w+\[\] = |fc_env_feed\(&d, )"((?:[^"\\]|\\.)*)"', src):
        c.add(bytes([0]) + ast.literal_eval('b"' + m.group(1) + '"'), 'test-connect')
    return c.n


RN_HELLO, RN_SPAWN, RN_R_HELLO, RN_R_STARTED, RN_R_STDOUT, RN_R_STDERR, RN_R_STATUS, RN_R_EXIT, RN_R_ERROR = 1, 2, 0x81, 0x82, 0x83, 0x84, 0x85, 0x87, 0x88


def rframe(type_, id_, payload=b''):
    return struct.pack('>IBxxxI', len(payload), type_, id_) + payload


def field(tag, value):
    if isinstance(value, int):
        value = struct.pack('>I', value)
    elif isinstance(value, str):
        value = value.encode()
    return struct.pack('>HI', tag, len(value)) + value


def seeds_runner():
    c = Corpus('runner')
    hello = rframe(RN_R_HELLO, 0, field(1, 1 << 16) + field(2, '0123456789abcdef') + field(3, 7) + field(5, 'x86_64'))
    spawn = rframe(RN_SPAWN, 1, field(10, 'echo hi') + field(11, 'a') + field(12, 'K=V') + field(13, '/tmp') +
                   field(14, 1000) + field(16, b'\0' * 8) + field(17, 7) + field(18, 3))
    for mode in (0, 3, 4, 0x18):
        c.add(bytes([mode]) + hello + runner_reply(), f'reader-{mode}')
    c.add(bytes([0]) + rframe(RN_HELLO, 0, field(1, 1 << 16)) + spawn + rframe(4, 1) + rframe(5, 1, field(0, 9)), 'to-runner')
    c.add(bytes([0x10]) + rframe(RN_R_STDOUT, 1, b'x' * 300), 'over-cap')
    return c.n


def runner_reply():
    return (rframe(RN_R_STARTED, 1, field(3, 100) + field(20, 100)) + rframe(RN_R_STDOUT, 1, b'out\n') +
            rframe(RN_R_STDERR, 1, b'err\n') + rframe(RN_R_STATUS, 1, b'{"s":1}\n') +
            rframe(RN_R_EXIT, 1, field(30, 3) + field(32, 4) + field(999, 1)))


def seeds_runner_client():
    c = Corpus('runner_client')
    hello = rframe(RN_R_HELLO, 0, field(1, 1 << 16) + field(2, '0123456789abcdef') + field(3, 7) + field(5, 'x86_64'))
    for mode in (0, 2, 6):
        c.add(bytes([mode]) + hello, f'greeting-{mode}')
    c.add(bytes([0]) + b'OCI runtime exec failed: exec format error\r\n', 'greeting-garbage')
    c.add(bytes([0]) + rframe(RN_R_HELLO, 0, field(1, 2 << 16) + field(2, '0123456789abcdef')), 'greeting-v2')
    for mode in (1, 3, 5, 0x21):
        c.add(bytes([mode]) + runner_reply(), f'request-{mode}')
    c.add(bytes([1]) + rframe(RN_R_EXIT, 1, field(31, 9) + field(33, 2) + field(34, 3)), 'request-signal')
    c.add(bytes([1]) + rframe(RN_R_ERROR, 1, field(40, 'refused')), 'request-error')
    c.add(bytes([1]) + rframe(RN_R_STDOUT, 7, b'x'), 'request-bad-id')
    return c.n


def seeds_patch():
    c = Corpus('patch')
    src = read('t/unit/test_patch.c')
    for args in call_args(src, 'apply_ok'):
        if len(args) >= 2:
            c.add(b'\x00' + (args[0] or b'') + b'\x00' + args[1], 'apply')
    for args in call_args(src, 'replace_ok'):
        if len(args) >= 3:
            c.add(b'\x01' + args[0] + b'\x00' + args[1] + b'\x00' + args[2], 'replace')
    for m in re.finditer(r'sg_diff_parse\(("(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*)', src):
        c.add(b'\x00a\nb\nc\n\x00' + c_string(m.group(1)), 'parse')
    c.add(b'\x02a\nb\nc\nd\ne\nf\ng\n\x00a\nB\nc\nd\ne\nf\nG', 'round-trip')
    c.add(b'\x02--- x\n+++ y\n-- a\n\x00++ b\n--- x\n', 'round-trip-dashes')
    c.add(b'\x02\x00new\nfile', 'round-trip-new')
    return c.n


def main():
    msgs = jsonrpc_messages()
    counts = {
        'jsonrpc': seeds_jsonrpc(msgs), 'mcp': seeds_mcp(msgs), 'stdio': seeds_stdio(),
        'http': seeds_http(), 'conf': seeds_conf(), 'demux': seeds_demux(), 'fc': seeds_fc(),
        'runner': seeds_runner(), 'runner_client': seeds_runner_client(), 'patch': seeds_patch(),
    }
    for k, v in counts.items():
        print(f'{k}: {v} seeds')
    return 0


if __name__ == '__main__':
    sys.exit(main())
