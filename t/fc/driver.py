# The FC emulator's stand-in for a Jupyter kernel (fc-protocol.md section 6):
# runs the code read from stdin and writes `result` and `error` lines as
# NDJSON to fd 3.  Like IPython, the value of a final expression is the main
# result, rendered through its _repr_*_ methods (png/jpeg as base64), and
# display(obj) emits further results.  Output goes to stdout/stderr as is.
import ast
import base64
import json
import os
import sys
import traceback

_out = os.fdopen(3, "w")
_REPRS = (("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
          ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("latex", "_repr_latex_"),
          ("json", "_repr_json_"), ("javascript", "_repr_javascript_"), ("pdf", "_repr_pdf_"))


def _emit(obj):
    sys.stdout.flush()
    sys.stderr.flush()
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


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


def display(value):
    _result(value, False)


def main():
    code = sys.stdin.read()
    ns = {"__name__": "__main__", "display": display}
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell>", "exec"), ns)
        if last is not None:
            value = eval(compile(last, "<cell>", "eval"), ns)
            if value is not None:
                _result(value, True)
    except BaseException as e:  # the kernel reports, never dies
        _emit({"type": "error", "name": type(e).__name__, "value": str(e),
               "traceback": traceback.format_exc()})


main()
