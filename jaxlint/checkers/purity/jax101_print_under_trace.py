from __future__ import annotations

import ast
import re
from typing import Iterator, List, Optional, Tuple

from ...analysis import Function, SemanticModel, proven
from ...analysis import knowledge as K
from ...fixes.edits import SAFE, Edit, Fix
from ...fixes.imports import module_alias
from ..messages import short
from ..base import Context, Finding, FixOffer, TracedCodeRule, register, traced_functions


@register
class PrintUnderTrace(TracedCodeRule):
    """
    ## What it does
    Flags `print(...)`, and `logging` / `logger` calls, that show a traced value
    inside a function that JAX traces (`jax.jit`, `vmap`, `grad`, a `lax.scan`
    body, a Flax module's `__call__`, or a helper called from one).

    ## Why is this bad?
    In PyTorch, `print(loss)` inside the training step prints the loss every
    step. Under `jax.jit` your Python function body runs only once, while JAX
    *traces* it to build a compiled program; later calls run the compiled
    program and never execute the `print` again. What that one `print` shows is
    a tracer such as `Traced<ShapedArray(float32[])>`, not a number. The same
    holds for `logging.info(...)`. A `print` that shows only static facts
    (`print("compiling", x.shape)`) is a legitimate way to see retracing and is
    not flagged.

    ## Profiles
    `print` of a traced value is reported in the default profile: it is the
    PyTorch habit, and it never shows a value. A `logging`/`logger` call of a
    traced value is reported only in the strict profile (`--strict`): in JAX
    code a log line inside a jitted or pmapped function is most often a
    deliberate trace-time diagnostic (it records the shapes and the static
    configuration each time the function is compiled), which the maintainer
    means to run once per compilation. So is a `print` in test code: a test
    often runs one function eagerly and then jitted, and the print is its
    author's debugging aid.

    ## Example
    ```python
    @jax.jit
    def train_step(params, x, y):
        loss = loss_fn(params, x, y)
        print(f"loss {loss:.3f}")
        return loss
    ```

    ## Use instead
    ```python
    @jax.jit
    def train_step(params, x, y):
        loss = loss_fn(params, x, y)
        jax.debug.print("loss {loss:.3f}", loss=loss)
        return loss
    ```
    `jax.debug.print` is staged into the compiled program and prints the
    runtime value on every call.

    ## Fix safety
    The fix rewrites `print(...)` to `jax.debug.print(...)` with an equivalent
    format string (positional arguments, f-strings with format specs and
    conversions, constant `sep=`). It is safe: the original `print` could only
    ever show a tracer, so no working output is lost, and arguments are
    evaluated exactly as before. `%`-formatting and `str.format` with a
    literal template are converted when every conversion has an exact
    `str.format` equivalent (`%s`, `%r`, `%f`/`%e`/`%g` with flags, width and
    precision, `%%`); logging calls (`logger.info("loss %s", loss)`) become
    `jax.debug.print` the same way, because the logging call itself could only
    ever log a tracer. Calls with `file=`, a non-default `end=`, a non-constant
    `sep=`, `*args`, `%d`/`%x`-style conversions or `exc_info=` are reported
    without a fix.
    """

    confirm = "print"
    summary = "`print`/logging of a traced value inside a traced function runs once, at trace time"
    fix = FixOffer("Use `jax.debug.print`", SAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        loggers = None
        for fn in traced_functions(ctx):
            for call in fn.of_type(ast.Call):
                func = call.func
                q = m.qualname(func, fn) if isinstance(func, (ast.Name, ast.Attribute)) else None
                if q == "print":
                    what = "`print`"
                elif q in K.LOGGING_FUNCS:
                    what = f"`{q}`"
                elif isinstance(func, ast.Attribute) and func.attr in K.LOGGER_METHODS:
                    if loggers is None:
                        loggers = m.loggers()
                    base = func.value
                    name = base.id if isinstance(base, ast.Name) else (
                        base.attr if isinstance(base, ast.Attribute) else None)
                    if name is None or name not in loggers:
                        continue
                    what = f"`{name}.{func.attr}`"
                else:
                    continue
                culprit = self._traced_argument(call, fn, ctx)
                if culprit is None:
                    continue
                shown = short(culprit)
                msg = (f"{what} of traced value `{shown}` inside {fn.trace_description()} runs once at "
                       f"trace time and shows a tracer, not the value")
                if q == "print":
                    fix = build_debug_print_fix(ctx, call, fn)
                    strict = TEST_BASIS if ctx.model.in_test_code(fn) else None
                else:
                    fix, strict = build_logging_fix(ctx, call, fn), LOGGING_BASIS
                yield ctx.finding(self, call, msg, confidence=fn.confidence, fix=fix, strict=strict)

    @staticmethod
    def _traced_argument(call: ast.Call, fn: Function, ctx: Context) -> Optional[ast.AST]:
        m = ctx.model
        values = list(call.args) + [k.value for k in call.keywords if k.arg not in ("sep", "end", "file", "flush")]
        for a in values:
            # print(str(x)) / print(repr(x)) shows the tracer just the same
            while isinstance(a, ast.Call) and len(a.args) == 1 and not a.keywords and \
                    m.qualname(a.func, fn) in ("str", "repr", "format"):
                a = a.args[0]
            if isinstance(a, ast.JoinedStr):
                for v in a.values:
                    if isinstance(v, ast.FormattedValue) and proven(m.kind(v.value, fn)):
                        return m.traced_culprit(v.value, fn)
            elif proven(m.kind(a, fn)):
                return m.traced_culprit(a, fn)
        return None


# why a print in test code belongs to the strict profile
TEST_BASIS = ("a print in test code is a debugging aid for the test's author (a test often runs the same "
              "function eagerly and jitted), not output anyone relies on")
# why a logging call of a traced value belongs to the strict profile
LOGGING_BASIS = ("a log call in traced code is usually a deliberate trace-time diagnostic: it records "
                 "what is compiled, once per compilation")


_RESERVED = {"fmt", "ordered", "partitioned"}


def _escape(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def _field(value: ast.expr, conversion: int, spec: Optional[ast.AST], args: List[str],
           kwargs: List[Tuple[str, str]], source_text: Optional[str]) -> Optional[str]:
    conv = "" if conversion in (-1, None) else "!" + chr(conversion)
    spec_text = ""
    if spec is not None:
        if not isinstance(spec, ast.JoinedStr) or any(not isinstance(v, ast.Constant) for v in spec.values):
            return None   # nested replacement fields in the format spec
        spec_text = ":" + "".join(v.value for v in spec.values)
    if isinstance(value, ast.Name) and value.id not in _RESERVED and value.id.isidentifier():
        if (value.id, value.id) not in kwargs:
            kwargs.append((value.id, value.id))
        return "{" + value.id + conv + spec_text + "}"
    args.append(source_text if source_text is not None else ast.unparse(value))
    return "{" + conv + spec_text + "}"


_PERCENT = re.compile(r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[-+ #0]*)(?P<width>\d*)(?:\.(?P<prec>\d+))?(?P<type>[a-zA-Z%])")


def _percent_to_format(template: str, values: List[ast.expr], args: List[str],
                       kwargs: List[Tuple[str, str]], source_of) -> Optional[str]:
    """Translate a %-template with its values into a str.format template, or None."""
    out: List[str] = []
    pos = 0
    it = iter(values)
    for m in _PERCENT.finditer(template):
        out.append(_escape(template[pos:m.start()]))
        pos = m.end()
        t = m.group("type")
        if t == "%":
            if m.group(0) != "%%":
                return None
            out.append("%")
            continue
        if m.group("key") is not None:
            return None
        flags, width, prec = m.group("flags"), m.group("width"), m.group("prec")
        try:
            value = next(it)
        except StopIteration:
            return None
        if t in "sr":
            if flags.replace("-", "") or prec:
                return None
            # %10s right-aligns, str.format left-aligns strings by default
            spec = (":" + ("<" if "-" in flags else ">") + width) if width else ""
            conv = -1 if t == "s" else ord("r")
        elif t in "feEgG":
            if "#" in flags:
                return None
            align = "<" if "-" in flags else ""
            sign = "+" if "+" in flags else (" " if " " in flags else "")
            zero = "0" if "0" in flags and not align else ""
            spec = ":" + align + sign + zero + width + (("." + prec) if prec else "") + t
            conv = -1
        else:
            return None
        field = _field(value, conv, None, args, kwargs, source_of(value))
        if spec:
            field = field[:-1] + spec + "}"
        out.append(field)
    out.append(_escape(template[pos:]))
    if next(it, None) is not None:
        return None
    return "".join(out)


def _template_piece(ctx: Context, a: ast.expr, args: List[str], kwargs: List[Tuple[str, str]]) -> Optional[str]:
    """One printed argument as a piece of a str.format template, or None if it cannot be converted."""
    src = ctx.source.segment
    if isinstance(a, ast.Starred):
        return None
    if isinstance(a, ast.Call) and len(a.args) == 1 and not a.keywords \
            and not isinstance(a.args[0], ast.Starred) and ctx.model.qualname(a.func) in ("str", "repr"):
        # str(x) / repr(x) of a tracer: format the runtime value instead
        conv = -1 if ctx.model.qualname(a.func) == "str" else ord("r")
        return _field(a.args[0], conv, None, args, kwargs, src(a.args[0]))
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return _escape(a.value)
    if isinstance(a, ast.JoinedStr):
        out = []
        for v in a.values:
            if isinstance(v, ast.Constant):
                out.append(_escape(v.value))
            elif isinstance(v, ast.FormattedValue):
                f = _field(v.value, v.conversion, v.format_spec, args, kwargs, None)
                if f is None:
                    return None
                out.append(f)
            else:
                return None
        return "".join(out)
    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mod) and isinstance(a.left, ast.Constant) \
            and isinstance(a.left.value, str):
        right = a.right
        values = list(right.elts) if isinstance(right, ast.Tuple) else [right]
        if isinstance(right, (ast.Dict, ast.Starred)) or any(isinstance(v, ast.Starred) for v in values):
            return None
        return _percent_to_format(a.left.value, values, args, kwargs, src)
    if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "format" \
            and isinstance(a.func.value, ast.Constant) and isinstance(a.func.value.value, str):
        template = a.func.value.value
        if any(isinstance(x, ast.Starred) for x in a.args) or any(k.arg is None for k in a.keywords):
            return None
        if re.search(r"\{\d", template):
            return None   # explicit positions would shift once other arguments precede them
        n_auto = len(re.findall(r"(?<!\{)\{(?![{\w])", template))
        if n_auto != len(a.args) or args:
            return None   # keep positional numbering unambiguous
        args.extend(src(x) for x in a.args)
        for k in a.keywords:
            if k.arg in _RESERVED or (k.arg, src(k.value)) in kwargs:
                return None
            kwargs.append((k.arg, src(k.value)))
        return template
    return _field(a, -1, None, args, kwargs, src(a))


def _debug_print(ctx: Context, call: ast.Call, fmt: str, args: List[str], kwargs: List[Tuple[str, str]]) -> Fix:
    names = [k for k, _ in kwargs]
    if len(names) != len(set(names)):
        # the same keyword bound to two different expressions
        seen = {}
        for k, v in kwargs:
            if seen.setdefault(k, v) != v:
                return None
        kwargs = list(dict.fromkeys(kwargs))
    jax_name, import_edits = module_alias(ctx.model, ctx.source, "jax", "jax")
    parts = [repr(fmt)] + args + [f"{k}={v}" for k, v in kwargs]
    new = f"{jax_name}.debug.print({', '.join(parts)})"
    start, end = ctx.source.node_span(call)
    return PrintUnderTrace.fix.make([Edit(start, end, new)] + import_edits)


def build_logging_fix(ctx: Context, call: ast.Call, fn: Function) -> Optional[Fix]:
    """``logger.info("loss %s", loss)`` -> ``jax.debug.print("loss {loss}", loss=loss)``."""
    if any(k.arg not in ("stacklevel",) for k in call.keywords):
        return None
    positional = list(call.args)
    q = ctx.model.qualname(call.func, fn)
    if (q or "").endswith(".log") or (isinstance(call.func, ast.Attribute) and call.func.attr == "log"):
        positional = positional[1:]   # logging.log(level, msg, *args)
    if not positional:
        return None
    msg, values = positional[0], positional[1:]
    args: List[str] = []
    kwargs: List[Tuple[str, str]] = []
    if values:
        if not (isinstance(msg, ast.Constant) and isinstance(msg.value, str)):
            return None
        if any(isinstance(v, ast.Starred) for v in values):
            return None
        fmt = _percent_to_format(msg.value, values, args, kwargs, ctx.source.segment)
    else:
        fmt = _template_piece(ctx, msg, args, kwargs)
    if fmt is None:
        return None
    return _debug_print(ctx, call, fmt, args, kwargs)


def build_debug_print_fix(ctx: Context, call: ast.Call, fn: Function) -> Optional[Fix]:
    sep = " "
    for kw in call.keywords:
        if kw.arg == "sep":
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                sep = kw.value.value
            elif not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                return None
        elif kw.arg == "end":
            if not (isinstance(kw.value, ast.Constant) and kw.value.value in ("\n", None)):
                return None
        elif kw.arg == "flush":
            continue
        else:
            return None
    pieces: List[str] = []
    args: List[str] = []
    kwargs: List[Tuple[str, str]] = []
    for a in call.args:
        piece = _template_piece(ctx, a, args, kwargs)
        if piece is None:
            return None
        pieces.append(piece)
    return _debug_print(ctx, call, sep.join(pieces), args, kwargs)
