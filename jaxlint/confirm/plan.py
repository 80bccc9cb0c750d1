"""From static findings to confirmation jobs (no JAX, no user code).

For each file with findings, the semantic model is rebuilt and every finding
is mapped to the functions a worker can trace to reach it: the innermost
function whose span holds the finding's line, then (for ``inferred``
contexts) its callers up to a function with a ``certain`` trace context.
A job is a JSON-able dict handed to one worker subprocess per module.
"""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..analysis import CERTAIN, Function, SemanticModel, SourceFile
from ..analysis import knowledge as K
from . import callsites, synth
from .rules import declaration, raises_args, shape_declaration, unconfirmable_reason
from .specs import ConfirmConfig

# jaxtyping dtype annotations -> dtype ("key" for PRNG keys)
JAXTYPING = {
    "Float": "float32", "Float16": "float16", "Float32": "float32", "Float64": "float64", "BFloat16": "bfloat16",
    "Int": "int32", "Int8": "int8", "Int16": "int16", "Int32": "int32", "Int64": "int64",
    "UInt": "uint32", "UInt8": "uint8", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
    "Integer": "int32", "Bool": "bool", "Complex": "complex64", "Complex64": "complex64",
    "Complex128": "complex128", "Shaped": "float32", "Num": "float32", "Real": "float32",
    "Inexact": "float32", "Key": "key",
}
ARRAY_TYPES = {"jax.Array", "jax.numpy.ndarray", "jax.typing.ArrayLike", "jaxtyping.Array", "jaxtyping.ArrayLike",
               "chex.Array", "chex.ArrayDevice", "Array", "ArrayLike"}
KEY_TYPES = {"jaxtyping.PRNGKeyArray", "PRNGKeyArray", "jax.random.KeyArray", "chex.PRNGKey"}
SCALARS = {"float": ("float32", True), "int": ("int32", True), "bool": ("bool", False)}


# ------------------------------------------------------------ module names
def module_location(path: str, root: Optional[str] = None) -> Tuple[str, str]:
    """(dotted module name, directory to put on ``sys.path``) for a file, the way the lint names it:
    the chain of packages above it and, below the project ``root`` (found when not given), folders
    without ``__init__.py`` under a package as namespace packages (PEP 420)."""
    path = os.path.abspath(path)
    if not path.lower().endswith(".ipynb"):
        from ..analysis.project import find_root, module_name_for
        root = root or find_root(os.path.dirname(path))
        if root is not None:
            name, _pkg, folder = module_name_for(path, root)
            if name:
                return name, folder
    d, base = os.path.split(path)
    name = os.path.splitext(base)[0]
    parts = [] if name == "__init__" else [name]
    while os.path.isfile(os.path.join(d, "__init__.py")):
        d, pkg = os.path.split(d)
        parts.insert(0, pkg)
    if not parts:
        parts = [os.path.basename(os.path.dirname(path))]
    return ".".join(parts), d


def _valid_module(name: str) -> bool:
    return all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in name.split("."))


# ------------------------------------------------------------ annotations
def _ann_node(node: Optional[ast.expr]) -> Optional[ast.expr]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node


def _name_of(model: SemanticModel, node: ast.expr) -> Optional[str]:
    q = model.qualname(node)
    if q is not None:
        return q
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _eval_dim(tok: str, cfg: ConfirmConfig) -> Optional[int]:
    """A jaxtyping dimension token -> its size; None for a variadic one."""
    if tok in ("...",) or tok.startswith("*"):
        return None
    tok = tok.lstrip("#").lstrip("_") or "_"
    if tok.isdigit():
        return int(tok)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):
        return cfg.dim(tok)
    # symbolic expressions such as "n+1" or "2*d"
    try:
        expr = ast.parse(tok, mode="eval").body
    except SyntaxError:
        return cfg.dim_size

    def ev(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            return cfg.dim(n.id)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
            return a // b if b else 0
        raise ValueError

    try:
        return max(0, ev(expr))
    except (ValueError, RecursionError):
        return cfg.dim_size


RNGS_TYPES = frozenset({"flax.nnx.Rngs", "flax.nnx.rnglib.Rngs", "flax.experimental.nnx.Rngs"})


def annotation_spec(model: SemanticModel, ann: Optional[ast.expr], cfg: ConfirmConfig) -> Optional[dict]:
    """A jaxtyping / ``jax.Array`` / scalar annotation -> an argument spec."""
    node = _ann_node(ann)
    if node is None:
        return None
    # Optional[X], X | None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return annotation_spec(model, side, cfg)
        return None
    if isinstance(node, ast.Subscript):
        base = _name_of(model, node.value) or ""
        short = base.rsplit(".", 1)[-1]
        if short == "Optional":
            return annotation_spec(model, node.slice, cfg)
        if short == "Annotated" and isinstance(node.slice, ast.Tuple) and node.slice.elts:
            return annotation_spec(model, node.slice.elts[0], cfg)
        if short in JAXTYPING and (base.startswith("jaxtyping.") or base == short):
            sl = node.slice
            if not (isinstance(sl, ast.Tuple) and len(sl.elts) == 2):
                return None
            dims_node = sl.elts[1]
            if not (isinstance(dims_node, ast.Constant) and isinstance(dims_node.value, str)):
                return None
            shape = []
            for tok in dims_node.value.split():
                d = _eval_dim(tok, cfg)
                if d is not None:
                    shape.append(d)
            dtype = JAXTYPING[short]
            if dtype == "key":
                return {"t": "key", "shape": shape}
            return {"t": "array", "dtype": dtype, "shape": shape}
        return None
    name = _name_of(model, node)
    if name is None:
        return None
    if name in KEY_TYPES:
        return {"t": "key", "shape": []}
    if name in RNGS_TYPES:       # Flax NNX's key streams: what every NNX constructor is given
        return {"t": "rngs"}
    if name in ARRAY_TYPES:
        return cfg.array_default()
    if name in SCALARS:
        dtype, weak = SCALARS[name]
        return {"t": "array", "dtype": dtype, "shape": [], "weak": weak}
    return None


# ------------------------------------------------------------ entries
def _addressable(fn: Function) -> Optional[str]:
    """The attribute path of ``fn`` in its module, if it can be reached by getattr."""
    if fn.is_module or fn.is_lambda or fn.parent is None or not fn.parent.is_module:
        return None
    if fn.cls is None:
        return fn.name
    if fn.cls.scope is not None and fn.cls.scope.is_module:
        return f"{fn.cls.name}.{fn.name}"
    return None


def staged(fn: Function, model: Optional[SemanticModel] = None, _depth: int = 0) -> bool:
    """A transform applied to ``fn`` here stages it into a program (``jit``, ``pmap``, a ``lax`` body,
    ``checkpoint``...): every operation in it is traced, constants included.  ``vmap`` alone does not
    (values it does not map stay concrete) -- unless it is applied inside a function that is staged
    itself (``jax.vmap(crop)(images)`` in a jitted step)."""
    for c in fn.contexts:
        tr = K.TRANSFORMS.get(c.transform)
        if c.caller is not None or c.confidence != CERTAIN or tr is None:
            continue
        if tr.jit_like or tr.kind in ("jit", "pmap", "body") or (tr.kind == "trace" and not tr.eager) \
                or c.transform == "equinox.filter_pmap":
            return True
        outer = _outer_scope(model, c.node) if model is not None and _depth < 4 else None
        if outer is not None and outer is not fn and staged(outer, model, _depth + 1):
            return True
    return False


def entry_basis(model: SemanticModel, fn: Function) -> Tuple[str, str]:
    """What puts tracers into ``fn`` when the program runs, as (basis, description):

    ``transform``: a transform is applied to ``fn`` itself in this module (``@jax.jit``,
    ``jax.vmap(fn)``, a ``lax.scan`` body...), and not only differentiation outside any staging
    trace: tracing ``fn`` with tracers where that transform puts them is what the program does.
    ``module``: a Flax/Equinox module method, traced when the program applies the module under a
    transform.  ``helper``: traced only because a traced function calls it (or by inference: a
    library contract, another module): tracing it alone would assume what the program does around
    it.  ``eager``: nothing here traces it."""
    direct = [c for c in fn.contexts if c.caller is None and c.confidence == CERTAIN]
    if direct and not model.concrete_primal(fn):
        return "transform", direct[0].description
    if direct:
        return "helper", direct[0].description + ", outside any staging trace (tracers carry values)"
    if fn.cls is not None and fn.cls.module_kind == "nnx" and fn.name == "__init__" and not fn.contexts:
        # an NNX module is built eagerly (its constructor makes its parameters from `rngs`)
        return "eager", f"the constructor of the nnx module `{fn.cls.name}`, run as the program builds it"
    if fn.cls is not None and fn.cls.module_kind:
        return "module", f"a method of the {fn.cls.module_kind} module `{fn.cls.name}`"
    if fn.contexts:
        ctx = fn.primary_context
        return "helper", ctx.description if ctx is not None else "traced by inference"
    return "eager", "not traced by anything in this module"


def _param_info(model: SemanticModel, fn: Function, cfg: ConfirmConfig) -> List[dict]:
    out = []
    skip = fn.self_name
    if fn.cls is not None and not fn.is_staticmethod and fn.params and skip is None:
        skip = fn.params[0]
    kinds = [(p, "pos") for p in fn.params] + [(p, "kwonly") for p in fn.kwonly]
    if fn.vararg:
        kinds.append((fn.vararg, "var"))
    if fn.kwarg:
        kinds.append((fn.kwarg, "varkw"))
    for p, kind in kinds:
        if p == skip and kind == "pos":
            continue
        node = fn.param_nodes.get(p)
        spec = annotation_spec(model, getattr(node, "annotation", None), cfg) if node is not None else None
        d = fn.defaults.get(p)
        out.append({
            "name": p, "kind": kind, "ann": spec,
            "static": p in fn.static_params,
            "traced": p in fn.traced_params,
            "tracer": synth.param_tracer(model, fn, p),
            "has_default": d is not None,
        })
    return out


def _containing(model: SemanticModel, line: int) -> Optional[Function]:
    best = None
    for fn in model.functions:
        if fn.is_module:
            continue
        node = fn.node
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            key = (node.lineno, -(node.end_lineno or 0))
            if best is None or key > (best.node.lineno, -(best.node.end_lineno or 0)):
                best = fn
    return best


def _enclosing_addressable(model: SemanticModel, line: int) -> Optional[Function]:
    """The innermost module-level function or method whose span holds ``line``."""
    best = None
    for fn in model.functions:
        if fn.is_module or fn.is_lambda or not _addressable(fn):
            continue
        node = fn.node
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.node.lineno:
                best = fn
    return best


def _outer_scope(model: SemanticModel, node: ast.AST) -> Optional[Function]:
    line = getattr(node, "lineno", None)
    if line is None:
        return None
    return _containing(model, line)


def entry_chain(model: SemanticModel, fn: Optional[Function]) -> List[Function]:
    """Functions to trace to reach code in ``fn``: nearest ``certain`` entry
    points first, then the remaining addressable functions, closest first."""
    chain: List[Function] = []
    seen: Set[int] = set()
    cur = fn
    while cur is not None and id(cur) not in seen and not cur.is_module:
        seen.add(id(cur))
        chain.append(cur)
        ctx = cur.primary_context
        if ctx is None:
            break
        if ctx.caller is not None:
            cur = ctx.caller
            continue
        outer = _outer_scope(model, ctx.node)
        if outer is cur and cur.parent is not None and not cur.parent.is_module and \
                not any(n is ctx.node for n in ast.walk(cur.node)):
            # a lambda the transform gets on the line that applies it
            # (`jax.vmap(lambda t, k: generate(...))(tokens, keys)`): the function around that line
            outer = cur.parent
        # a transform applied inside another function (a scan body, a vmap
        # inside jit, a cond branch in eager code) is reached by tracing that
        # function; a jit applied there only wraps it, so the outer function
        # must itself be traced
        tr = K.TRANSFORMS.get(ctx.transform)
        wraps_only = tr is None or tr.kind in ("jit", "pmap", "filter")
        if outer is not None and outer is not cur and not _is_decorator_of(ctx.node, cur) and \
                (outer.contexts or not wraps_only):
            cur = outer
            continue
        break
    certain = [f for f in chain if f.confidence == CERTAIN and _addressable(f)]
    rest = [f for f in chain if f not in certain and _addressable(f)]
    # a body a transform applies inside another function (a `lax.scan` step, a vmapped
    # function) is traced through that call first: what the transform does with it (the
    # same key in every iteration) shows only there
    bodies = [f for f in certain if f is not chain[-1] and _is_body(f)]
    out = [f for f in certain if f not in bodies] + bodies + rest
    if fn is not None and fn.cls is not None and fn.cls.module_kind and not certain:
        # a Flax/Equinox module method: reached from jitted functions that
        # call `.apply` / `.init` (tried in order until one runs the line)
        for other in model.functions:
            if other.confidence == CERTAIN and _addressable(other) and other not in out and any(
                    isinstance(c.func, ast.Attribute) and c.func.attr in ("apply", "init", "init_with_output")
                    for c in other.of_type(ast.Call)):
                out.append(other)
    if fn is not None and fn.cls is not None and fn.cls.module_kind:
        # a submodule's method is also reached through the modules of this file that build it
        # (`pool = ValidTokenPool(...)` in a parent's `__call__`/`setup`): the parent's `__call__` runs
        # it with the values the program computes for it
        for parent in _parent_modules(model, fn.cls):
            call = model.class_method(parent, "__call__")
            if call is not None and call not in out and _addressable(call):
                out.append(call)
    return out


def _parent_modules(model: SemanticModel, cls, depth: int = 2) -> list:
    """Module classes of this file that construct ``cls`` in one of their methods (nearest first)."""
    out: list = []
    frontier = [cls]
    for _ in range(depth):
        nxt = []
        for other in model.functions:
            parent = other.cls
            if parent is None or not parent.module_kind or parent in out or parent in frontier or parent is cls:
                continue
            names = {c.name for c in frontier}
            if any(isinstance(c.func, ast.Name) and c.func.id in names for c in other.of_type(ast.Call)):
                out.append(parent)
                nxt.append(parent)
        frontier = nxt
        if not frontier:
            break
    return out


# strategies an eager run of the module's own code can show (what runs under the program's trace)
EAGER_REACH = frozenset({"trace-error", "print", "global-write", "impure-call", "tracer-leak", "key-reuse"})
MAX_EAGER_CALLERS = 3


def _factory_of(fn: Function) -> Optional[Function]:
    """The module-level function a nested function is defined in (``make_train_step`` for the
    ``train_step`` it returns), or None."""
    cur = fn
    while cur.parent is not None and not cur.parent.is_module:
        cur = cur.parent
    return cur if cur is not fn and not cur.is_lambda and _addressable(cur) else None


def eager_callers(model: SemanticModel, fn: Function, depth: int = 2) -> List[Function]:
    """Module-level eager functions (nothing here traces them) that lead to ``fn``: they call it, a
    function on its way to a transform (its traced callers), or the factory that defines it -- up to
    ``depth`` calls away, closest first, at most :data:`MAX_EAGER_CALLERS`."""
    frontier: List[Function] = []
    seen: Set[int] = set()
    cur: Optional[Function] = fn
    while cur is not None and id(cur) not in seen and not cur.is_module:
        seen.add(id(cur))
        frontier.append(cur)
        fac = _factory_of(cur)
        if fac is not None and id(fac) not in seen:
            seen.add(id(fac))
            frontier.append(fac)
        ctx = cur.primary_context
        cur = ctx.caller if ctx is not None else None
    out: List[Function] = []
    for _ in range(depth):
        names = {f.name for f in frontier if not f.is_lambda}
        found: List[Function] = []
        for other in model.functions:
            if other.is_module or other.is_lambda or other.contexts or not _addressable(other) or \
                    id(other) in seen or other.cls is not None:
                continue
            for call in other.of_type(ast.Call):
                f = call.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in names:
                    target = model.resolve_callable(f, other)
                    if target is None or target.function in frontier:
                        found.append(other)
                        seen.add(id(other))
                        break
        out.extend(found)
        frontier = found
        if not found or len(out) >= MAX_EAGER_CALLERS:
            break
    return out[:MAX_EAGER_CALLERS]


def _is_body(fn: Function) -> bool:
    ctx = fn.primary_context
    if ctx is None or ctx.caller is not None:
        return False
    tr = K.TRANSFORMS.get(ctx.transform)
    return tr is not None and tr.kind not in ("jit", "pmap", "filter") and not _is_decorator_of(ctx.node, fn)


def via_lines(model: SemanticModel, fn: Optional[Function]) -> List[int]:
    """Lines of the transform applications / calls through which ``fn`` is traced."""
    out: List[int] = []
    seen: Set[int] = set()
    cur = fn
    while cur is not None and id(cur) not in seen and not cur.is_module:
        seen.add(id(cur))
        ctx = cur.primary_context
        if ctx is None:
            break
        line = getattr(ctx.node, "lineno", None)
        if line is not None:
            out.append(line)
        cur = ctx.caller if ctx.caller is not None else _outer_scope(model, ctx.node)
        if cur is not None and not cur.contexts:
            break
    return out


def _is_decorator_of(node: ast.AST, fn: Function) -> bool:
    return any(node is d for d in getattr(fn.node, "decorator_list", []))


def _names_by_line(model: SemanticModel) -> Dict[int, List[str]]:
    """line -> the names and dotted attribute chains (``self.w``) on it, in order (one walk per file)."""
    out: Dict[int, List[str]] = {}
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Name):
            out.setdefault(node.lineno, []).append(node.id)
        elif isinstance(node, ast.Attribute):
            parts = []
            n = node
            while isinstance(n, ast.Attribute):
                parts.append(n.attr)
                n = n.value
            if isinstance(n, ast.Name):
                out.setdefault(node.lineno, []).append(".".join([n.id] + parts[::-1]))
    return out


def _names_in_span(by_line: Dict[int, List[str]], line: int, end_line: int) -> List[str]:
    names = [n for ln in range(line, end_line + 1) for n in by_line.get(ln, ())]
    seen: Set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]


def _loop_info(model: SemanticModel, line: int, fn: Optional[Function]) -> Optional[dict]:
    """The trip count of the loop at ``line`` (JAX504), counted by the rule's own trip counter."""
    from ..checkers.jit.jax504_unrolled_python_loop.trips import loop_info
    info = loop_info(model, line, fn)
    if info is not None and "trip" not in info and fn is not None:
        # a function the module itself does not transform (jitted by the caller): `range(param)`
        for node in fn.of_type(ast.For):
            it = node.iter
            if node.lineno == line and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
                    it.func.id == "range" and len(it.args) == 1 and isinstance(it.args[0], ast.Name) and \
                    it.args[0].id in fn.param_nodes:
                info["trip"] = {"kind": "param", "name": it.args[0].id}
    return info


def _jit_target_name(model: SemanticModel, line: int) -> Optional[str]:
    """The function wrapped by the ``jax.jit`` at ``line`` (JAX501/JAX502)."""
    for site in model.transform_sites:
        if getattr(site.node, "lineno", None) == line and site.target is not None:
            return site.target.function.name
    for fn in model.functions:
        for dec in getattr(fn.node, "decorator_list", []) if not fn.is_module and not fn.is_lambda else []:
            if dec.lineno == line:
                return fn.name
    return None


def _callers(model: SemanticModel, line: int) -> List[Function]:
    """Eager functions that call the function jitted at ``line`` (the step for JAX501)."""
    jitted: Optional[Function] = None
    attr_names: Set[str] = set()
    for site in model.transform_sites:
        if getattr(site.node, "lineno", None) == line and site.target is not None:
            jitted = site.target.function
    for fn in model.functions:
        if fn.is_module or fn.is_lambda:
            continue
        if any(d.lineno == line for d in fn.node.decorator_list):
            jitted = fn
    # `name = jax.jit(...)` / `self.name = jax.jit(...)` at this line
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Assign) and node.lineno == line:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    attr_names.add(t.id)
                elif isinstance(t, ast.Attribute):
                    attr_names.add(t.attr)
    if jitted is not None and not jitted.is_lambda:
        attr_names.add(jitted.name)
    out = []
    for fn in model.functions:
        if fn.is_module or fn.contexts or fn is jitted:
            continue
        for call in fn.of_type(ast.Call):
            # calls it, or hands it to a transform called here (`jax.value_and_grad(loss_fn)(...)`)
            names = {f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                     for f in [call.func] + list(call.args)}
            if names & attr_names and fn.node.lineno != line:
                out.append(fn)
                break
    return [f for f in out if _addressable(f)]


def _call_facts(model: SemanticModel, line: int, end_line: int, fn: Optional[Function]) -> dict:
    """What the ``raises`` strategy needs about the flagged span: the keywords of the calls on it
    (``rngs=``, ``mutable=``: the shapes of a finding that predict no error), whether it calls an
    ``apply`` itself (or passes a value on to a function that does) and whether it is a ``return``
    of its function (the value then goes through the function's transform)."""
    keywords: List[str] = []
    returns = applies = False
    for node in ast.walk(model.tree):
        ln = getattr(node, "lineno", None)
        if ln is None or not line <= ln <= end_line:
            continue
        if isinstance(node, ast.Call):
            keywords.extend(k.arg for k in node.keywords if k.arg and k.arg not in keywords)
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("apply", "apply_fn"):
                applies = True
        elif isinstance(node, ast.Return) and ln == line and fn is not None and not fn.is_module:
            # a value built here (a name, an attribute, `Params(...)`), not a call's result
            v = node.value
            f = v.func if isinstance(v, ast.Call) else None
            last = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            returns = isinstance(v, (ast.Name, ast.Attribute)) or last[:1].isupper()
    return {"keywords": keywords, "returns": returns, "applies": applies}


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _loop_callers(model: SemanticModel, fn: Function) -> List[Function]:
    """Eager module-level functions that call ``fn`` inside a loop: a step whose dropout key is the
    same on every call shows it when the loop that calls it runs (JAX613)."""
    if _addressable(fn) is None or fn.cls is not None:
        return []
    out: List[Function] = []
    for other in model.functions:
        if other is fn or other.is_module or other.is_lambda or other.contexts or not _addressable(other):
            continue
        hit = any(isinstance(c, ast.Call) and (isinstance(c.func, ast.Name) and c.func.id == fn.name)
                  for loop in ast.walk(other.node) if isinstance(loop, _LOOPS) for c in ast.walk(loop))
        if hit:
            out.append(other)
    return out


def _axis_sites(model: SemanticModel, fn: Function) -> List[dict]:
    """The transforms that map ``fn`` over a named axis (JAX601): ``{"kind": "pmap"|"vmap", "names":
    [...]}`` per site whose axis names are literal; the worker maps the entry the same way."""
    from ..checkers.parallel.axes import site_axis
    out: List[dict] = []
    for site in model.transform_sites:
        if site.target is None or site.target.function is not fn:
            continue
        binds, names = site_axis(model, site)
        if not binds and site.transform.replicates:
            rec = {"kind": "pmap", "names": [None]}     # `@jax.pmap` with no axis name: mapped all the same
        elif not binds or not names:
            continue
        else:
            rec = {"kind": "pmap" if site.transform.replicates else "vmap", "names": list(names)}
        if rec not in out:
            out.append(rec)
    return out


def _bound_axes(model: SemanticModel, fn: Function):
    """The axis names bound wherever ``fn`` runs (the rule's own answer), None when unknown."""
    from ..checkers.parallel.axes import axis_index
    return axis_index(model).bound(fn)


def _has_collective(model: SemanticModel, line: int, end_line: int) -> bool:
    """Whether the flagged span calls a ``lax`` collective (the unbound-axis shape of JAX601)."""
    from ..checkers.parallel.axes import COLLECTIVES
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Call) and line <= getattr(node, "lineno", 0) <= end_line:
            if model.qualname(node.func) in COLLECTIVES:
                return True
    return False


# ------------------------------------------------------------ planning
_FIRST_USE = re.compile(r"already consumed by .*? on line (\d+)")


def _entry(model: SemanticModel, fn: Function, cfg: ConfirmConfig, module: Optional[str], path: str) -> dict:
    qual = _addressable(fn)
    e = {
        "qualname": qual,
        "line": fn.node.lineno,
        "owner": fn.cls.name if fn.cls is not None else None,
        "owner_kind": fn.cls.module_kind if fn.cls is not None else None,
        "staticmethod": fn.is_staticmethod,
        "params": _param_info(model, fn, cfg),
        "declared": cfg.spec_for(module, path, qual),
        "certain": fn.confidence == CERTAIN,
        "traced": bool(fn.contexts),
    }
    e["basis"], e["basis_why"] = entry_basis(model, fn)
    bound = partial_bound(model, fn)
    if e["basis"] == "transform" and bound:
        # the transform gets `partial(fn, ...)`: the bound values are the program's, not ours to
        # synthesize -- the module's own bound callable (below) is called instead
        e["basis"] = "helper"
        e["basis_why"] += f", through `functools.partial` binding {', '.join(f'`{b}`' for b in bound)}"
    e["staged"] = e["basis"] == "transform" and staged(fn, model)
    names = {p["name"] for p in e["params"]}
    lines: Dict[str, List[str]] = {}
    for node in ast.walk(fn.node):
        if isinstance(node, ast.Name) and node.id in names:
            got = lines.setdefault(str(node.lineno), [])
            if node.id not in got:
                got.append(node.id)
    e["line_params"] = lines      # line -> the parameters it names (what to change when it fails)
    if e["declared"] is None:
        given, _line = callsites.call_site_specs(model, fn)
        cands, e["no_inputs"] = synth.candidates(model, fn, e["params"], cfg.dim_size, given)
        e["candidates"] = [] if e["no_inputs"] else cands
        e["suggest"] = callsites.suggestion(f"{module or path}:{qual}", (cands or [None])[0], e["params"])
    if fn.cls is not None:
        _ctor_info(model, fn.cls, cfg, module, path, e)
    return e


def _ctor_info(model: SemanticModel, cls, cfg: ConfirmConfig, module: Optional[str], path: str, e: dict) -> None:
    """How to construct an instance of ``cls``: its declaration, or its constructor's parameters."""
    e["ctor"] = cfg.spec_for(module, path, cls.name)
    init = model.class_method(cls, "__init__")
    e["ctor_params"] = _param_info(model, init, cfg) if init is not None else _field_params(model, cls, cfg)
    if init is not None:       # unannotated constructor parameters: from their uses in __init__
        uses = synth.param_uses(model, init)
        given = callsites.ctor_call_specs(model, cls, init)[0] if e["ctor"] is None else {}
        # the values the module constructs it with, defaulted parameters it passes included
        e["ctor_given"] = {p["name"]: given[p["name"]] for p in e["ctor_params"]
                           if p["name"] in given and p["kind"] not in ("var", "varkw")}
        for p in e["ctor_params"]:
            if p["name"] in given and not p["has_default"] and p["kind"] not in ("var", "varkw"):
                p["ann"] = given[p["name"]]
                continue
            if p["ann"] is None and not p["has_default"] and p["name"] in uses and uses[p["name"]].known:
                try:
                    p["ann"] = synth.spec_of(uses[p["name"]], 1, cfg.dim_size, False, p["name"])
                except synth.Unbuildable:
                    pass


def partial_bound(model: SemanticModel, fn: Function) -> List[str]:
    """The parameters of ``fn`` that every transform site here binds with ``functools.partial``
    (``jax.jit(partial(f, neighbors=...))``); [] when a site passes ``fn`` itself."""
    out: Optional[Set[str]] = None
    for site in model.transform_sites:
        tgt = site.target
        if tgt is None or tgt.function is not fn:
            continue
        names = set(fn.params[:tgt.bound_positional]) | set(tgt.bound_keywords)
        if fn.self_name and fn.params[:1] == [fn.self_name]:
            names.discard(fn.self_name)
        out = names if out is None else out & names
    return sorted(out or ())


def _traced_chain(fn: Function) -> List[Function]:
    """``fn`` and its traced callers, nearest first (what a transform applied to any of them runs)."""
    chain: List[Function] = []
    cur: Optional[Function] = fn
    while cur is not None and cur not in chain and not cur.is_module:
        chain.append(cur)
        ctx = cur.primary_context
        cur = ctx.caller if ctx is not None else None
    return chain


def _unwrap_transforms(model: SemanticModel, value: ast.expr):
    """``(innermost node, vmap layers, (positional, keywords) a partial binds or None)`` of
    ``T1(T2(...(f)))`` (``partial(f, ...)`` innermost allowed; only plain ``jit``/``vmap``, default axes)."""
    node, vmaps, bound = value, 0, None
    while isinstance(node, ast.Call) and node.args:
        q = model.call_qualname(node) or ""
        if q in K.PARTIAL and bound is None and not any(isinstance(a, ast.Starred) for a in node.args) \
                and all(k.arg for k in node.keywords):
            bound = (len(node.args) - 1, {k.arg for k in node.keywords})     # partial(f, a, k=v)
            node = node.args[0]
            continue
        tr = K.TRANSFORMS.get(q)
        if bound is not None or tr is None or tr.kind not in ("jit", "vmap") or len(node.args) != 1 or \
                any(k.arg not in ("static_argnames",) for k in node.keywords):
            break
        vmaps += tr.kind == "vmap"
        node = node.args[0]
    return node, vmaps, bound


def bound_transforms(model: SemanticModel, fn: Function) -> List[Tuple[str, Function, int, tuple]]:
    """``(name, traced function, vmap layers, (positional, keywords) a partial binds)`` for each
    module-level ``name = T1(T2(...(f)))`` (``partial(f, ...)`` innermost allowed) whose
    innermost function ``f`` leads to ``fn`` (``fn`` itself, or a traced caller on its way): calling
    ``name`` runs the program's own transforms.  Only plain ``jit``/``vmap`` chains (default axes)."""
    chain = _traced_chain(fn)
    out = []
    for stmt in model.tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        node, vmaps, bound = _unwrap_transforms(model, stmt.value)
        target = model.function_for_def(node) if isinstance(node, ast.Lambda) else (
            model.lookup_function(node.id, model.module) if isinstance(node, ast.Name) else None)
        if target is not None and target in chain and node is not stmt.value:
            out.append((stmt.targets[0].id, target, vmaps, bound or (0, set())))
    return out


def _defining_init(fn: Function) -> Optional[Function]:
    """The constructor (``__init__`` of a module-level class) whose body defines ``fn``, or None."""
    cur = fn.parent
    while cur is not None and not cur.is_module:
        if cur.cls is not None and cur.name == "__init__" and _addressable(cur):
            return cur
        cur = cur.parent
    return None


def instance_bindings(model: SemanticModel, fn: Function) -> List[Tuple[str, Function, Function, int, bool]]:
    """``(attribute, constructor, traced function, vmap layers, transformed)`` for each
    ``self.ATTR = T1(T2(...(g)))`` or ``self.ATTR = g`` in the ``__init__`` that defines ``fn``
    (environments that build their ``reset``/``step`` as nested functions), ``g`` a function of that
    constructor leading to ``fn``: the constructed instance's attribute is the program's own callable."""
    init = _defining_init(fn)
    if init is None or not init.params:
        return []
    me = init.params[0]
    chain = _traced_chain(fn)
    # the constructor's own functions that call it plainly (`_step` calling `_soft_reset_state`):
    # bound as they are, they run it as the program does (key reuse shows run eagerly too)
    for g in list(model.functions):
        if g is fn or g in chain or _defining_init(g) is not init:
            continue
        for call in g.of_type(ast.Call):
            if isinstance(call.func, ast.Name) and call.func.id == fn.name and \
                    model.lookup_function(fn.name, g) is fn:
                chain += [c for c in _traced_chain(g) if c not in chain]
                break
    out = []
    for stmt in ast.walk(init.node):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1) or _containing(model, stmt.lineno) is not init:
            continue
        tgt = stmt.targets[0]
        if not (isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == me):
            continue
        node, vmaps, bound = _unwrap_transforms(model, stmt.value)
        if bound is not None:
            continue
        target = model.function_for_def(node) if isinstance(node, ast.Lambda) else (
            model.lookup_function(node.id, init) if isinstance(node, ast.Name) else None)
        if target is not None and target in chain:
            out.append((tgt.attr, init, target, vmaps, node is not stmt.value))
    return out


def _batched(spec: dict, n: int, dim: int) -> dict:
    """``spec`` with ``n`` leading axes of size ``dim`` on every array and key (what ``vmap`` maps)."""
    t = spec.get("t")
    if n <= 0:
        return spec
    if t in ("array", "key"):
        return dict(spec, shape=[dim] * n + list(spec["shape"]), weak=False)
    if t == "concrete":
        return dict(spec, of=_batched(spec["of"], n, dim))
    if t in ("list", "tuple"):
        return dict(spec, items=[_batched(s, n, dim) for s in spec["items"]])
    if t in ("dict", "ns"):
        return dict(spec, items={k: _batched(s, n, dim) for k, s in spec["items"].items()})
    return spec


def _bound_entry(model: SemanticModel, name: str, target: Function, vmaps: int, cfg: ConfirmConfig,
                 module: Optional[str], path: str, bound_args=(0, ())) -> dict:
    """The entry of a module-level transformed callable: inputs from how the traced function uses its
    parameters (those a ``partial`` binds left out), with the axes its ``vmap`` layers map; run as the
    program runs it."""
    npos, kws = bound_args
    params = [p for i, p in enumerate(_param_info(model, target, cfg))
              if not (p["kind"] == "pos" and i < npos) and p["name"] not in kws]
    for p in params:
        p["tracer"] = False       # the program's transforms make the tracers, from concrete values
    e = {"qualname": name, "line": getattr(target.node, "lineno", 0), "owner": None, "owner_kind": None,
         "staticmethod": False, "params": params, "declared": cfg.spec_for(module, path, name),
         "certain": False, "traced": False, "basis": "eager",
         "basis_why": f"the module's `{name}`, a transform of {target.display()} the program calls",
         "staged": False, "as_is": True, "line_params": {}}
    if e["declared"] is None:
        cands, e["no_inputs"] = synth.candidates(model, target, params, cfg.dim_size, {})
        e["candidates"] = [] if e["no_inputs"] else [
            dict(c, args=[_batched(a, vmaps, cfg.dim_size) for a in c["args"]],
                 kwargs={k: _batched(a, vmaps, cfg.dim_size) for k, a in c["kwargs"].items()}) for c in cands]
        e["suggest"] = callsites.suggestion(f"{module or path}:{name}", (e["candidates"] or [None])[0], params)
    return e


def _instance_entry(model: SemanticModel, attr: str, init: Function, target: Function, vmaps: int,
                    transformed: bool, cfg: ConfirmConfig, module: Optional[str], path: str) -> dict:
    """The entry of a callable a constructor binds to its instance (``self.reset = jax.jit(reset)``):
    the class constructed as for a method, the attribute called as the program calls it."""
    cls = init.cls
    qual = f"{cls.name}().{attr}"
    e = _bound_entry(model, qual, target, vmaps, cfg, module, path)
    e.update(owner=cls.name, owner_kind=cls.module_kind, attr=attr, instance_attr=True,
             basis_why=f"what `{cls.name}.__init__` binds to `self.{attr}`: "
             + (f"a transform of {target.display()}" if transformed else target.display())
             + ", called as the program calls it")
    _ctor_info(model, cls, cfg, module, path, e)
    made = _made_by_bindings(model, init, target, cfg)
    if made and e.get("candidates"):
        pos = [p["name"] for p in e["params"] if p["kind"] == "pos"]
        for c in e["candidates"]:
            for name, spec in made.items():
                if name in pos and pos.index(name) < len(c["args"]):
                    c["args"][pos.index(name)] = spec
                elif name in c["kwargs"]:
                    c["kwargs"][name] = spec
    return e


K_ARRAY_ANNOTATIONS = frozenset({"Array", "ndarray", "ArrayLike", "PRNGKeyArray", "PRNGKey", "int", "float",
                                 "bool", "str", "Any", "Optional", "Tuple", "List", "Dict"})


def _ann_class(node: Optional[ast.expr]) -> Optional[str]:
    """The class name an annotation spells (``State``, ``env.State``), or None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _made_by_bindings(model: SemanticModel, init: Function, target: Function, cfg: ConfirmConfig) -> Dict[str, dict]:
    """Parameters of ``target`` annotated with a class that another callable the same constructor binds
    returns (``state: State`` of ``_step``, ``reset(key) -> Tuple[Observations, State]``), each with the
    spec that calls it on the instance: a value the program's own code makes, not one we invent."""
    anns = {}
    a = target.node.args
    for arg in list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs):
        name = _ann_class(arg.annotation)
        if name and name not in K_ARRAY_ANNOTATIONS:
            anns[arg.arg] = name
    if not anns:
        return {}
    makers = []
    me = init.params[0]
    for stmt in ast.walk(init.node):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1) or _containing(model, stmt.lineno) is not init:
            continue
        tgt = stmt.targets[0]
        if not (isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == me):
            continue
        node, vmaps, bound = _unwrap_transforms(model, stmt.value)
        g = model.lookup_function(node.id, init) if isinstance(node, ast.Name) else None
        if g is None or g is target or vmaps or bound is not None or isinstance(g.node, ast.Lambda):
            continue
        makers.append((tgt.attr, g))
    out: Dict[str, dict] = {}
    for pname, cname in anns.items():
        for attr, g in makers:
            ret, pick = g.node.returns, None
            if _ann_class(ret) != cname:
                if not (isinstance(ret, ast.Subscript) and _ann_class(ret.value) in ("Tuple", "tuple")
                        and isinstance(ret.slice, ast.Tuple)):
                    continue
                hits = [i for i, el in enumerate(ret.slice.elts) if _ann_class(el) == cname]
                if len(hits) != 1:
                    continue
                pick = hits[0]
            gparams = _param_info(model, g, cfg)
            for p in gparams:
                p["tracer"] = False
            cands, no = synth.candidates(model, g, gparams, cfg.dim_size, {})
            if no or not cands:
                continue
            out[pname] = {"t": "made", "attr": attr, "args": cands[0]["args"], "kwargs": cands[0]["kwargs"],
                          "pick": pick, "src": f"made by `self.{attr}`"}
            break
    return out


def _field_params(model: SemanticModel, cls, cfg: ConfirmConfig) -> List[dict]:
    """Annotated class-body fields of a dataclass-like class (Flax linen, Equinox) as
    keyword constructor parameters."""
    out = []
    for stmt in cls.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.simple:
            ann = stmt.annotation
            name = _name_of(model, ann) if not isinstance(ann, ast.Subscript) else None
            if name in ("ClassVar", "typing.ClassVar") or stmt.target.id in ("parent", "name"):
                continue
            out.append({"name": stmt.target.id, "kind": "kwonly", "ann": annotation_spec(model, ann, cfg),
                        "static": True, "traced": False, "tracer": False, "has_default": stmt.value is not None})
    return out


def plan_file(source: SourceFile, findings: Sequence, cfg: ConfirmConfig, start_id: int = 0,
              tree: Optional[ast.Module] = None, models=None) -> Tuple[dict, Dict[int, object]]:
    """One worker job for the findings of one file, and id -> finding.  ``models``: a
    :class:`~jaxlint.confirm.models.ModelSource` (the project's model of the file, as the lint
    saw it); without one, the module alone."""
    path = os.path.abspath(source.path)
    module, sys_dir = module_location(path)
    if tree is None:
        tree = source.parse()
    model = models.model(source, tree) if models is not None else SemanticModel(tree, source)
    by_line = _names_by_line(model)
    entries: Dict[str, dict] = {}
    targets = []
    by_id: Dict[int, object] = {}
    for i, f in enumerate(findings):
        fid = start_id + i
        by_id[fid] = f
        fn = _containing(model, f.line)   # a decorator line belongs to the scope around the def
        t = {"id": fid, "code": f.code, "line": f.line, "end_line": f.end_line, "col": f.col,
             "names": _names_in_span(by_line, f.line, f.end_line), "entries": [], "extra": {},
             "via": via_lines(model, fn)}
        chain = entry_chain(model, fn)
        decl = t["confirm"] = shape_declaration(f.code, f.message) or declaration(f.code)
        why = unconfirmable_reason(f.code, f.message)
        if why is not None:
            t["unreached"] = why
        strategy, args = (decl["strategy"], decl["args"]) if decl else (None, [])
        step = (args or ["caller"])[0] if strategy == "compiles" else None
        if step == "caller":
            steps = _callers(model, f.line)
            # the step the finding names ("its caller `Trainer.step` is not jitted"), never another
            # caller's compilations (a constructor's warm-up call, an evaluation loop)
            named = [s for s in steps if f"`{s.qualname}`" in f.message]
            steps = named or steps
            t["extra"]["jit_name"] = _jit_target_name(model, f.line)
            t["extra"]["steps"] = [_addressable(s) for s in steps]
            chain = steps
            if not steps:
                t["unreached"] = ("no eager function that calls the jitted function was found, "
                                  "so there is no step whose compilations could be counted")
        elif step == "enclosing":
            t["extra"]["jit_name"] = _jit_target_name(model, f.line)
            step = _enclosing_addressable(model, f.line)
            t["extra"]["steps"] = [_addressable(step)] if step is not None and not step.contexts else []
            chain = [step] if t["extra"]["steps"] else []
            if not chain:
                t["unreached"] = ("the `jax.jit` is not inside an eager module-level function or method "
                                  "whose calls could be counted")
        elif strategy == "unrolled-loop":
            loop = _loop_info(model, f.line, fn)
            if loop is not None:
                trip = loop.get("trip") or {}
                d = fn.defaults.get(trip.get("name")) if fn is not None and trip.get("kind") == "param" else None
                if isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool):
                    trip["default"] = d.value      # the trip count the finding names, when the inputs differ
                t["extra"]["loop"] = loop
        elif strategy == "raises":
            t["extra"].update(_call_facts(model, f.line, f.end_line, fn))
            if raises_args(decl)[2] and (set(raises_args(decl)[2]) & set(t["extra"]["keywords"])
                                         or not t["extra"]["applies"]):
                # a check that runs the entry: the eager loops that call it show a repetition too
                callers = [c for e in chain for c in _loop_callers(model, e)]
                for c in callers:
                    entries.setdefault(_addressable(c), _entry(model, c, cfg, module, path))
                t["extra"]["loop_callers"] = list(dict.fromkeys(_addressable(c) for c in callers))
        elif strategy == "trace-error":
            # the names whose items the span assigns (`acc[c] = ...`): a value the code made, or an input
            t["extra"]["stores"] = sorted({n.value.id for n in ast.walk(model.tree)
                                           if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
                                           and isinstance(n.value, ast.Name)
                                           and f.line <= n.lineno <= f.end_line})
        elif strategy == "key-reuse":
            m = _FIRST_USE.search(f.message or "")
            if m:
                t["extra"]["first_use"] = int(m.group(1))   # the earlier consumer must run for a verdict
        elif strategy == "pmap-sync":
            t["extra"]["axes"] = {_addressable(c): _axis_sites(model, c) for c in chain if _addressable(c)}
            t["extra"]["collective"] = _has_collective(model, f.line, f.end_line)
            if t["extra"]["collective"] and fn is not None and _bound_axes(model, fn) is None:
                t["unreached"] = (f"the axis names bound around `{fn.qualname}` depend on callers or transforms "
                                  f"this module does not show (a `shard_map` mesh, a Flax module, a function "
                                  f"nothing here runs), so tracing it alone would prove nothing")
        bound: List[str] = []
        if strategy in EAGER_REACH and not t.get("unreached") and fn is not None:
            # a transform the module binds to a name (`augment = jax.jit(jax.vmap(lambda im: ...))`): the
            # program's own callable, called as the program calls it
            for name, target, vmaps, bound_args in bound_transforms(model, fn):
                if name not in entries:
                    entries[name] = _bound_entry(model, name, target, vmaps, cfg, module, path, bound_args)
                bound.append(name)
            # a callable the constructor that defines the line binds to its instance
            # (`self.reset = jax.jit(reset)`): a transform, or (key reuse, which shows run eagerly
            # too) the function itself
            for attr, init, target, vmaps, transformed in instance_bindings(model, fn):
                if not transformed and strategy != "key-reuse":
                    continue
                name = f"{init.cls.name}().{attr}"
                if name not in entries:
                    entries[name] = _instance_entry(model, attr, init, target, vmaps, transformed, cfg, module, path)
                bound.append(name)
            # the module's own eager code that leads to the line (a training loop calling the jitted
            # step a factory returns): run as the program runs it, its transforms trace the line
            chain = list(chain) + [c for c in eager_callers(model, fn) if c not in chain]
        for c in chain:
            q = _addressable(c)
            entries.setdefault(q, _entry(model, c, cfg, module, path))
            t["entries"].append(q)
        t["entries"] += [b for b in bound if b not in t["entries"]]
        if t.get("unreached"):
            pass
        elif fn is None and not chain:
            t["module_level"] = True
        elif fn is not None and not t["entries"]:
            t["unreached"] = (f"`{fn.qualname}` is a nested function or lambda that no traceable "
                              f"module-level function reaches")
        targets.append(t)
    from ..analysis.project import find_root
    root = find_root(os.path.dirname(path))
    notebook = path.lower().endswith(".ipynb")
    job = {
        "path": path,
        "module": module if _valid_module(module) and not notebook else None,
        "notebook": notebook,
        "sys_path": [d for d in dict.fromkeys([sys_dir, cfg.root, root]) if d],
        "entries": entries,
        "targets": targets,
        "config": {"dim_size": cfg.dim_size, "array_shape": cfg.array_shape, "array_dtype": cfg.array_dtype},
    }
    return job, by_id
