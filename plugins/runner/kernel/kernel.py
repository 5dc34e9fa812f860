# sandgate's Python kernel (doc/kernel-protocol.md).  sandgate-runner starts it
# as `python3 -` with this program on stdin, then sends requests on fd 3 and
# reads events on fd 4; the code's own stdout and stderr are fds 1 and 2, so
# the output of the subprocesses it starts is captured with it.  Standard
# library only: it must run on any python3 >= 3.8.
import ast, base64, builtins, io, json, os, signal, sys, types

REQ, EV = 3, 4
LINE_MAX = 1000000      # bytes of one event line: a runner frame holds 1 MiB
ERROR_MAX = 65536       # bytes of a traceback
FILES_MAX = 200
WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
CO_COROUTINE = 0x80     # inspect.CO_COROUTINE, without importing inspect

root = os.getcwd()      # output_files are the files written under here
running = False         # SIGINT interrupts the code only, never the kernel
recording = False
written = {}            # paths opened for writing by this call, in order
cell = 0
loop = None             # one asyncio loop for all top-level awaits

# The code's namespace is a fresh __main__, so classes it defines pickle.
main = types.ModuleType('__main__')
main.__dict__['__builtins__'] = builtins
sys.modules['__main__'] = main
ns = main.__dict__


def send(word, obj=None):
    line = word if obj is None else word + ' ' + json.dumps(obj)
    data = (line + '\n').encode()
    while data:
        data = data[os.write(EV, data):]


def on_sigint(signum, frame):
    if running:
        raise KeyboardInterrupt


def audit(event, args):
    # An open for writing while code runs: open(), os.open(), and what
    # libraries build on them.  Never raises: that would fail the open.
    if not recording or event != 'open':
        return
    try:
        path, mode, flags = args
        if isinstance(path, int) or not (flags or 0) & WRITES:
            return
        written[os.path.abspath(os.fsdecode(path))] = None
    except Exception:
        pass


class Results:
    """The call's rich results, each one event, all within a byte cap."""

    def __init__(self, cap):
        self.left = cap

    def add(self, item, what):
        line = json.dumps(item)
        if len(line) > min(self.left, LINE_MAX):
            item = {'omitted': '%s of %d bytes passed the cap on rich output '
                    '(%d bytes left of the call\'s cap, %d per result)'
                    % (what, len(line), max(self.left, 0), LINE_MAX)}
            line = json.dumps(item)
        self.left -= len(line)
        send('result', item)


def get_loop():
    global loop
    if loop is None:
        import asyncio
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop


def run_code(code):
    if code.co_flags & CO_COROUTINE:
        return get_loop().run_until_complete(eval(code, ns))
    return eval(code, ns)


def execute(source, name):
    """Runs the cell; returns the value of its last expression, or None."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = ast.parse(source, name)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    run_code(compile(tree, name, 'exec', flags))
    if last is not None:
        return run_code(compile(last, name, 'eval', flags))
    return None


def show(value, results):
    item = {'text': repr(value), 'is_main_result': True}
    try:
        html = getattr(value, '_repr_html_', None)
        html = html() if callable(html) and not isinstance(value, type) else None
        if isinstance(html, str):
            item['html'] = html
    except Exception:
        pass
    results.add(item, 'the value')


def error(e):
    import traceback
    tb = e.__traceback__
    # Drop the kernel's own frames: the traceback starts in the cell.
    while tb and not tb.tb_frame.f_code.co_filename.startswith('<cell-'):
        tb = tb.tb_next
    frames = traceback.extract_tb(tb)
    if frames and frames[-1].filename == '<stdin>':
        # It ends in the kernel too (the SIGINT handler): cut that off.
        while frames and frames[-1].filename == '<stdin>':
            frames.pop()
        text = ('Traceback (most recent call last):\n' + ''.join(traceback.format_list(frames))
                + ''.join(traceback.format_exception_only(type(e), e)))
    else:
        text = ''.join(traceback.format_exception(type(e), e, tb))
    if len(text) > ERROR_MAX:
        text = text[:ERROR_MAX // 2] + '\n[...]\n' + text[-ERROR_MAX // 2:]
    send('error', {'name': type(e).__name__, 'value': str(e), 'traceback': text})


def figures(results):
    """Each open matplotlib figure as a PNG of its own size; then closed,
    as a notebook's inline backend does."""
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is None:
        return
    try:
        nums = plt.get_fignums()
    except Exception:
        return
    for num in nums:
        try:
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format='png')
            w, h = fig.canvas.get_width_height()
            results.add({'text': repr(fig), 'png': base64.b64encode(buf.getvalue()).decode(),
                         'width': w, 'height': h}, 'figure %d' % num)
        except Exception as e:
            results.add({'omitted': 'figure %d could not be drawn: %s' % (num, e)}, 'a note')
    try:
        plt.close('all')
    except Exception:
        pass


def output_files():
    files = []
    for path in written:
        rel = os.path.relpath(path, root)
        if rel.startswith('..') or os.path.isabs(rel):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_mode & 0o170000 == 0o100000:
            files.append({'name': rel, 'path': path, 'size': st.st_size})
        if len(files) >= FILES_MAX:
            break
    if files:
        send('files', files)


def call(source, rich_cap):
    global running, recording, cell
    cell += 1
    name = '<cell-%d>' % cell
    import linecache
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    results = Results(rich_cap)
    written.clear()
    recording = True
    value = None
    try:
        running = True
        value = execute(source, name)
        running = False
    except BaseException as e:  # KeyboardInterrupt and SystemExit too
        running = False
        error(e)
    recording = False
    if value is not None:
        try:
            show(value, results)
        except Exception as e:
            error(e)
    figures(results)
    output_files()


def requests():
    """Each request: a line `exec <bytes> <rich cap>`, then the code."""
    rd = os.fdopen(REQ, 'rb')
    while True:
        head = rd.readline().split()
        if len(head) != 3 or head[0] != b'exec':
            return
        source = rd.read(int(head[1]))
        yield source.decode('utf-8', 'replace'), int(head[2])


def serve():
    os.set_inheritable(REQ, False)
    os.set_inheritable(EV, False)
    os.environ.setdefault('MPLBACKEND', 'Agg')
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    sys.argv = ['']
    signal.signal(signal.SIGINT, on_sigint)
    sys.addaudithook(audit)
    send('hello', {'language': 'python', 'pid': os.getpid(),
                   'interpreter': 'python3 %d.%d.%d' % sys.version_info[:3]})
    for source, rich_cap in requests():
        try:
            call(source, rich_cap)
        except KeyboardInterrupt:  # an interrupt that came just too late
            pass
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                f.flush()
            except Exception:
                pass
        send('done')


serve()
