"""Trip counting for JAX504: what a Python loop iterates over and how many times, as far as
it is known when the code is written.

:func:`for_trip` and :func:`while_trip` describe a loop as a :class:`Trip` (a literal count,
a bound fixed at trace time such as a static argument or a configuration value, or the rows of
a traced array) or return ``None`` when the loop is not one the rule reasons about.
:func:`loop_info` is the same count in the form runtime confirmation records
(``jaxlint/confirm``): which name to vary to retrace the loop with fewer iterations.
"""
from __future__ import annotations

import ast
import math
import re
from typing import Optional, Tuple

from ....analysis import CONTAINER, JAX, Function, SemanticModel, proven
from ...messages import short

# attribute chains that hold configuration: ``config.num_steps``, ``self.cfg.n_iter``
_CONFIG_OWNERS = frozenset({"config", "cfg", "conf", "hparams", "hps", "hp", "args", "opts", "options",
                            "params_cfg", "settings", "flags", "FLAGS"})

# parameters named like a sequence of data rather than a list of layers/parameters
_ARRAY_NAME = re.compile(r"^(?:xs|x_seq|seq|sequence|inputs|signal|frames|tokens|timesteps|ts|times|"
                         r"obs|observations|actions|rewards|trajectory|samples)$")

# a trip count named like a number of layers: ``num_layers``, ``self.depth``, ``n_blocks``
_LAYER_COUNT = re.compile(r"layer|depth|block|stage|head|level", re.IGNORECASE)


class Trip:
    """What a loop iterates over, as far as it is known when the code is written."""

    __slots__ = ("count", "what", "kind", "bound", "array_length")

    def __init__(self, kind: str, what: str, count: Optional[int] = None, bound: Optional[ast.expr] = None,
                 array_length: bool = False):
        self.kind = kind      # literal | static | array
        self.what = what      # e.g. "`num_steps` (a static argument, 1000 by default)"
        self.count = count    # known trip count (or default), if any
        self.bound = bound    # the expression that bounds the count (``range``'s stop), if any
        # the count is the length of a traced array (``range(xs.shape[1])``: a sequence's steps)
        self.array_length = array_length


# ---------------------------------------------------------------- for / while
def for_trip(m: SemanticModel, fn: Function, loop: ast.For) -> Optional[Trip]:
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.args \
            and m.qualname(it.func, fn) in ("enumerate", "reversed") and len(it.args) == 1:
        it = it.args[0]
    if isinstance(it, ast.Call) and m.qualname(it.func, fn) == "range":
        return _range_trip(m, fn, it)
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in it.elts):
            return None
        if not all(_constant(e) for e in it.elts):
            # ``for arg in [itypes, all_js, volume, ...]``: distinct values, each of its own shape
            # and type -- nothing to stack into one array a ``scan``/``vmap`` could run over
            return None
        if any(isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)) for e in it.elts for n in ast.walk(e)):
            # ``for name in ("C1", "C2", ...)``: names of fields or keys (``getattr(t, name)``) -- JAX
            # traces no strings, so no ``scan``/``fori_loop`` can run over them: a loop over structure
            return None
        return Trip("literal", f"{len(it.elts)} literal items", len(it.elts))
    if isinstance(it, ast.Call) and m.qualname(it.func, fn) == "zip":
        for a in it.args:
            if traced_array(m, fn, a):
                return Trip("array", f"the rows of traced array `{short(a)}`")
        return None
    if traced_array(m, fn, it) and not _used_as_mapping(loop):
        return Trip("array", f"the rows of traced array `{short(it)}`")
    return None


def _constant(e: ast.expr) -> bool:
    """A literal value: a number, string, ``-1``, or a tuple/list of them."""
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return _constant(e.operand)
    if isinstance(e, (ast.Tuple, ast.List)):
        return all(_constant(x) for x in e.elts)
    return False


def _range_trip(m: SemanticModel, fn: Function, call: ast.Call) -> Optional[Trip]:
    if call.keywords or not 1 <= len(call.args) <= 3 or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    vals = [int_value(m, fn, a) for a in call.args]
    text = f"`{short(call)}`"
    stop = call.args[0] if len(call.args) == 1 else call.args[1]
    if all(v is not None for v in vals):
        try:
            n = len(range(*vals))
        except ValueError:
            return None
        return Trip("literal", text, n, stop)
    start_v = vals[0] if len(call.args) > 1 else 0
    if len(call.args) == 3 or start_v is None:
        return None
    if _LAYER_COUNT.search(_bound_name(stop)):
        return None   # one iteration per layer/block/head: unrolling is the intent
    cls = _static_bound(m, fn, stop)
    if cls is None:
        return None
    desc, default = cls
    n = None if default is None else max(0, default - start_v)
    if n is not None:
        what = f"{text} ({desc}, {n} by default)"
    else:
        what = f"{text} ({desc})"
    return Trip("static", what, n, stop, array_length=desc.startswith(_ARRAY_LENGTH))


def while_trip(m: SemanticModel, fn: Function, loop: ast.While) -> Optional[Trip]:
    test = loop.test
    if m.truth_traced(test, fn):
        return None   # a traced condition fails at trace time (JAX201)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op = test.ops[0]
    left, right = test.left, test.comparators[0]
    if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Name):
        counter, bound = left, right
    elif isinstance(op, (ast.Gt, ast.GtE)) and isinstance(right, ast.Name):
        counter, bound = right, left
    else:
        return None
    # the counter must be stepped in the body
    if not any(isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == counter.id
               for s in loop.body for n in ast.walk(s)):
        return None
    v = int_value(m, fn, bound)
    text = f"{short(test)}` loop"
    if v is None and _LAYER_COUNT.search(_bound_name(bound)):
        return None
    if v is not None:
        return Trip("literal", text, v, bound)
    cls = _static_bound(m, fn, bound)
    if cls is None:
        return None
    desc, default = cls
    if default is None:
        default = _stepped_count(m, fn, loop, counter.id, bound)
        if default is not None:
            what = f"{text} ({desc}, {default} steps by default)"
            return Trip("static", what, default, bound)
    what = f"{text} ({desc}" + (f", {default} by default)" if default is not None else ")")
    return Trip("static", what, default, bound, array_length=desc.startswith(_ARRAY_LENGTH))


def _number(m: SemanticModel, fn: Function, e: Optional[ast.expr]) -> Optional[float]:
    """A literal number, or a static parameter's literal default (``dt=0.25``)."""
    if isinstance(e, ast.Name) and e.id in fn.param_nodes and e.id in fn.static_params:
        e = fn.defaults.get(e.id)
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return float(e.value)
    return None


def _stepped_count(m: SemanticModel, fn: Function, loop: ast.While, counter: str,
                   bound: ast.expr) -> Optional[int]:
    """``t = 0.0; while t < t_end: ...; t += dt`` with the start, the bound's default and the
    step all numbers known here: the number of iterations (``ceil((t_end - t0) / dt)``)."""
    end = _number(m, fn, bound)
    steps = [n for s in loop.body for n in ast.walk(s) if isinstance(n, ast.AugAssign)
             and isinstance(n.target, ast.Name) and n.target.id == counter]
    if end is None or len(steps) != 1 or not isinstance(steps[0].op, ast.Add):
        return None
    step = _number(m, fn, steps[0].value)
    block = m.block_of(loop, fn)
    if not step or step <= 0 or block is None:
        return None
    start = None
    for st in block[:next(i for i, x in enumerate(block) if x is loop)]:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                and st.targets[0].id == counter:
            start = _number(m, fn, st.value)
    if start is None:
        return None
    n = math.ceil((end - start) / step)
    return n if 0 <= n <= 10 ** 7 else None


def loop_info(m: SemanticModel, line: int, fn: Optional[Function]) -> Optional[dict]:
    """The loop at ``line`` as runtime confirmation records it: its span and, for a ``for``
    loop over ``range``, its trip bound as ``{"kind": "literal", "value": n}``, a parameter
    of ``fn`` (``{"kind": "param", "name": ...}``) or a module-level name (``"global"``):
    the name confirmation varies to retrace the loop with fewer iterations."""
    for node in ast.walk(m.tree):
        if isinstance(node, (ast.For, ast.While)) and node.lineno == line:
            info = {"line": node.lineno, "end_line": node.end_lineno or node.lineno}
            trip = for_trip(m, fn, node) if fn is not None and isinstance(node, ast.For) else None
            bound = trip.bound if trip is not None else None
            if isinstance(bound, ast.Constant) and isinstance(bound.value, int):
                info["trip"] = {"kind": "literal", "value": bound.value}
            elif isinstance(bound, ast.Name):
                if bound.id in fn.param_nodes:
                    info["trip"] = {"kind": "param", "name": bound.id}
                elif bound.id in m.module.locals:
                    info["trip"] = {"kind": "global", "name": bound.id}
            return info
    return None


# ------------------------------------------------------------------- bounds
_ARRAY_LENGTH = "the length of traced array"


def _static_bound(m: SemanticModel, fn: Function, e: ast.expr,
                  depth: int = 0) -> Optional[Tuple[str, Optional[int]]]:
    """A bound fixed at trace time but not in the code: a static argument, a module field, a
    configuration value, the length of a traced array.  (description, default if known)"""
    if isinstance(e, ast.Name):
        s = m.resolve_scope(e.id, fn)
        if s is None or s.is_module:
            return None
        if e.id in s.param_nodes:
            if e.id in s.static_params and s.confidence == "certain" and not s.is_lambda:
                return "a static argument", literal_int(s.defaults.get(e.id))
            return None
        local = m.single_value(e.id, s)
        if local is None or depth > 3:
            return None
        return _static_bound(m, s, local, depth + 1)
    if isinstance(e, ast.Attribute):
        base = e.value
        if isinstance(base, ast.Name):
            owner = fn.enclosing_method()
            if owner is not None and base.id == owner.self_name and owner.cls is not None:
                info = owner.cls
                if e.attr in info.fields:
                    return "a module field", _class_default(info, e.attr)
                default = _constructor_default(info, e.attr)
                if default is not None:
                    return "a constructor argument", default
                if base.id in _CONFIG_OWNERS:
                    return "a configuration value", None
                return None
            if base.id in _CONFIG_OWNERS and m.qualname(base, fn) is None:
                return "a configuration value", None
        elif isinstance(base, ast.Attribute) and base.attr in _CONFIG_OWNERS:
            return "a configuration value", None
        return None
    op = _INT_OPS.get(type(e.op)) if isinstance(e, ast.BinOp) and depth <= 3 else None
    if op is not None:
        # ``self.num_steps - 1``: a static bound shifted by a constant
        left, c = _static_bound(m, fn, e.left, depth + 1), int_value(m, fn, e.right)
        if left is not None and c is not None:
            return left[0], None if left[1] is None else op(left[1], c)
        return None
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
        arr = e.value.value
        if traced_array(m, fn, arr) and _is_leading_axis(e.slice):
            return f"{_ARRAY_LENGTH} `{short(arr)}`", None
        return None
    if isinstance(e, ast.Call) and m.qualname(e.func, fn) == "len" and len(e.args) == 1:
        if traced_array(m, fn, e.args[0]):
            return f"{_ARRAY_LENGTH} `{short(e.args[0])}`", None
    return None


def _bound_name(e: ast.expr) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    if isinstance(e, ast.Call) and e.args:   # len(self.layers)
        return _bound_name(e.args[0])
    return ""


def _is_leading_axis(sl: ast.expr) -> bool:
    """Axis 0 (rows, samples) or 1 (time steps in batch-first sequences); the last axis
    (channels/features) is left alone."""
    return isinstance(sl, ast.Constant) and sl.value in (0, 1) and not isinstance(sl.value, bool)


def _constructor_default(info, name: str) -> Optional[int]:
    """``self.<name> = <param>`` in ``__init__``, where the parameter defaults to an int literal:
    the value the attribute holds unless a caller passes another (fixed at trace time either way)."""
    init = info.methods.get("__init__")
    if init is None or init.self_name is None:
        return None
    for node in init.of_type(ast.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
                and node.targets[0].attr == name and isinstance(node.targets[0].value, ast.Name) \
                and node.targets[0].value.id == init.self_name and isinstance(node.value, ast.Name):
            return literal_int(init.defaults.get(node.value.id))
    return None


def _class_default(info, name: str) -> Optional[int]:
    for stmt in info.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return literal_int(stmt.value)
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    return literal_int(stmt.value)
    return None


# ------------------------------------------------------------ traced arrays
def traced_array(m: SemanticModel, fn: Function, e: ast.expr) -> bool:
    """``e`` is surely a traced *array*, not a pytree (a list of layers, a dict of
    parameters): the model's :meth:`surely_array`, or a traced parameter named like a
    sequence of data (``xs``, ``tokens``, ``frames``: what a loop over rows iterates)."""
    if m.surely_array(e, fn):
        return True
    if not (isinstance(e, ast.Name) and e.id in fn.param_nodes and _ARRAY_NAME.match(e.id)):
        return False
    k = m.kind(e, fn)
    # (in code traced by inference -- a module method -- the name is no evidence: ``xs`` is as
    # often a Python list of feature maps; the model must vouch for an array)
    return proven(k) and bool(k & JAX) and not k & CONTAINER and m.vouched_array(e, fn)


def _used_as_mapping(loop: ast.For) -> bool:
    """The loop variable is unpacked or indexed with strings: elements are layers/pytrees."""
    if not isinstance(loop.target, ast.Name):
        return True
    var = loop.target.id
    for s in loop.body:
        for n in ast.walk(s):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == var \
                    and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                return True
    return False


# ---------------------------------------------------------------- constants
def literal_int(e: Optional[ast.expr]) -> Optional[int]:
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = literal_int(e.operand)
        return -v if v is not None else None
    return None


def int_value(m: SemanticModel, fn: Function, e: ast.expr, depth: int = 0) -> Optional[int]:
    """A literal int, a module-level int constant, or simple arithmetic over them."""
    if depth > 6:
        return None
    v = literal_int(e)
    if v is not None:
        return v
    if isinstance(e, ast.Name):
        # a local or module-level constant bound once
        s = m.resolve_scope(e.id, fn)
        if s is None:
            return None
        value = m.single_value(e.id, s)
        return int_value(m, s, value, depth + 1) if value is not None else None
    op = _INT_OPS.get(type(e.op)) if isinstance(e, ast.BinOp) else None
    if op is not None:
        a = int_value(m, fn, e.left, depth + 1)
        b = int_value(m, fn, e.right, depth + 1)
        return None if a is None or b is None else op(a, b)
    return None


# the integer arithmetic a trip count may be written with (``N * 4``, ``STEPS // 2``)
_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b if b else None}
