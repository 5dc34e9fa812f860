# The FC emulator's stand-in for a Jupyter Python kernel (fc-protocol.md
# section 6), kept per sandbox: it reads executions as JSON lines
# {"code", "env"} on stdin and runs each in one namespace, so names persist
# from call to call; it writes events as JSON lines on fd 3: `hello` (its
# pid, for Jupyter's interrupt), `stdout`/`stderr` (what the code prints,
# as ipykernel's streams), `result`, `error`, and `done` at the end of each
# execution.  Like IPython, the value of a final expression is the main
# result, rendered through its _repr_*_ methods (png/jpeg as base64),
# display(obj) emits further results (raw=True: a mime bundle, unknown
# types under "extra" as E2B's server files them), open matplotlib figures
# come back as png results after the cell (the inline backend), and
# get_ipython().events runs pre_run_cell and post_run_cell callbacks
# (get_ipython and display are builtins, as IPython makes them).
# SIGINT interrupts the running cell (KeyboardInterrupt); env applies to
# one execution.
import ast
import base64
import builtins
import io
import json
import os
import signal
import sys
import traceback

_ev = os.fdopen(3, "w")
os.set_inheritable(3, False)
_REPRS = (("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
          ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("latex", "_repr_latex_"),
          ("json", "_repr_json_"), ("javascript", "_repr_javascript_"), ("pdf", "_repr_pdf_"))
_MIMES = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
          "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
          "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
          "application/javascript": "javascript", "e2b/data": "data", "e2b/graph": "graph"}
_running = False


def _send(obj):
    _ev.write(json.dumps(obj) + "\n")
    _ev.flush()


def _emit(obj):
    """An event after what the code printed before it."""
    for f in (sys.stdout, sys.stderr):
        f.flush()
    _send(obj)


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr as stream events, a line at a time (as
    ipykernel's streams send them), in order with the rest."""

    def __init__(self, name):
        self._name = name
        self._buf = ""

    def writable(self):
        return True

    def write(self, s):
        self._buf += s
        nl = self._buf.rfind("\n")
        if nl >= 0:
            _send({"type": self._name, "text": self._buf[:nl + 1]})
            self._buf = self._buf[nl + 1:]
        return len(s)

    def flush(self):
        if self._buf:
            text, self._buf = self._buf, ""
            _send({"type": self._name, "text": text})


def _result(value, main):
    r = {"type": "result", "is_main_result": main}
    for key, meth in _REPRS:
        f = getattr(value, meth, None)
        if not callable(f):
            continue
        data = f()
        if data is None:
            continue
        if isinstance(data, bytes):
            data = base64.b64encode(data).decode("ascii")
        r[key] = data
    r["text"] = repr(value)
    _emit(r)


def display(value, raw=False):
    if not (raw and isinstance(value, dict)):
        _result(value, False)
        return
    r = {"type": "result", "is_main_result": False}
    extra = {}
    for mime, data in value.items():
        if mime in _MIMES:
            r[_MIMES[mime]] = data
        else:
            extra[mime] = data
    if extra:
        r["extra"] = extra
    _emit(r)


class _Events:
    def __init__(self):
        self._callbacks = {}

    def register(self, name, fn):
        self._callbacks.setdefault(name, []).append(fn)

    def trigger(self, name, *args):
        for fn in list(self._callbacks.get(name, ())):
            try:
                fn(*args)
            except Exception:
                traceback.print_exc()


class _Shell:
    def __init__(self, ns):
        self.events = _Events()
        self.user_ns = ns


def _install_ipython(ns):
    """get_ipython() and display() as IPython puts them in builtins (no
    IPython module: libraries such as matplotlib would take it for the
    real one)."""
    shell = _Shell(ns)
    builtins.get_ipython = lambda: shell
    builtins.display = display
    return shell


def _figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        _emit({"type": "result", "is_main_result": False, "text": repr(fig),
               "png": base64.b64encode(buf.getvalue()).decode("ascii")})
    plt.close("all")


def _error(e):
    tb = e.__traceback__
    while tb and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    frames = [f for f in traceback.extract_tb(tb) if f.filename == "<cell>"]
    text = ("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
            + "".join(traceback.format_exception_only(type(e), e)))
    _emit({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": text})


def _on_sigint(signum, frame):
    if _running:
        raise KeyboardInterrupt


def _cell(code, ns, shell):
    global _running
    shell.events.trigger("pre_run_cell")
    value = None
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        _running = True
        exec(compile(tree, "<cell>", "exec"), ns)
        if last is not None:
            value = eval(compile(last, "<cell>", "eval"), ns)
        _running = False
        if value is not None:
            _result(value, True)
    except BaseException as e:  # the kernel reports, never dies
        _running = False
        _error(e)
    try:
        _figures()
    except Exception as e:
        _error(e)
    shell.events.trigger("post_run_cell", None)


def main():
    ns = {"__name__": "__main__", "__builtins__": builtins}
    shell = _install_ipython(ns)
    sys.stdout = _Stream("stdout")
    sys.stderr = _Stream("stderr")
    signal.signal(signal.SIGINT, _on_sigint)
    _emit({"type": "hello", "pid": os.getpid()})
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        env = {k: str(v) for k, v in (req.get("env") or {}).items()}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            _cell(req.get("code", ""), ns, shell)
        except KeyboardInterrupt:  # an interrupt that came just too late
            pass
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _emit({"type": "done"})


main()
