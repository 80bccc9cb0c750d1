"""PRNG-key dataflow: which names hold JAX PRNG keys, where each key value is
consumed, and where one key value is consumed twice.

A JAX key is a value, not a stateful generator: every consumer of the same key
value (``jax.random.normal(key)``, ``jax.random.split(key)``, ``model.init(key,
x)``, ``train_step(..., key)``) sees the same bits.  This module follows key
values through one scope at a time:

* **Which names hold keys** (:meth:`KeyAnalysis.key_names`): names bound from
  ``jax.random.PRNGKey/key/split/fold_in/clone/wrap_key_data`` or
  ``self.make_rng(...)``; names passed as the key argument of a
  ``jax.random`` function; key-named names (``key``, ``rng``, ``*_key``,
  ``prng``, ...) passed in ``rngs={...}``/``rng=`` or as the first argument of
  ``.init(...)``; key-named names passed to a parameter of a function of this
  module that is itself a key; aliases and loop variables over key arrays.
* **Values** (:class:`_Interp`): an abstract interpreter over the scope's
  statements keeps, per execution path, which key value each name holds and
  which values were already consumed.  Every binding from a key producer (or
  from an unknown source) creates a fresh value; ``k2 = key`` aliases;
  ``keys[0]`` is a value derived from ``keys``.  Branches fork the path
  (reuse on *any* path is reported, mutually exclusive branches are not
  reuse); loops and comprehensions run their body twice, so a key consumed
  in a loop body and not re-split is seen consumed again by the next
  iteration.
* **Consumers**: every ``jax.random`` sampler, ``split`` and ``fold_in``
  (two ``fold_in`` of one key conflict only with the same constant data;
  ``fold_in(key, step)`` in a loop is correct), and passing the key to any
  other call (a jitted step, ``model.init``, ``rngs={'dropout': key}``), except
  calls that only look at it (``key_data``, ``print``, ``isinstance``,
  ``jax.numpy``, container methods, ...) and functions of this module whose
  parameter is not itself a key there.
* **Structured loops**: in a ``lax.scan``/``fori_loop``/``while_loop`` body, a
  key taken from the carry, consumed, and returned unchanged in the carry is
  reused on every step; so is a key closed over from the enclosing scope and
  consumed in the body.

Rules ask :func:`key_analysis` (cached per model) for :class:`Reuse` records
and :class:`Use` sites; they never walk key dataflow themselves.
"""
from __future__ import annotations

import ast
import functools
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from ...analysis import knowledge as K
from ...analysis.model import Function, SemanticModel

# ---------------------------------------------------------------- vocabulary
RANDOM = "jax.random."
# jax.random functions that create a key without consuming one
KEY_FROM_SEED = frozenset({"jax.random.PRNGKey", "jax.random.key"})
KEY_PRODUCERS = frozenset({
    "jax.random.PRNGKey", "jax.random.key", "jax.random.split", "jax.random.fold_in",
    "jax.random.clone", "jax.random.wrap_key_data",
})
PRODUCER_TERMINALS = frozenset(q.rsplit(".", 1)[1] for q in KEY_PRODUCERS)
# jax.random functions whose first argument is a key but that do not consume it
RANDOM_NON_CONSUMING = frozenset({
    "jax.random.PRNGKey", "jax.random.key", "jax.random.key_data", "jax.random.key_impl",
    "jax.random.clone", "jax.random.wrap_key_data", "jax.random.key_dtype", "jax.random.default_prng_impl",
})
# final components of every jax.random function: a cheap pre-filter before resolving names
RANDOM_TERMINALS = frozenset({
    "PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare",
    "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential", "f", "fold_in", "gamma",
    "generalized_normal", "geometric", "gumbel", "key", "key_data", "key_impl", "laplace",
    "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal", "normal",
    "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "split",
    "t", "triangular", "truncated_normal", "uniform", "wald", "weibull_min", "wrap_key_data", "shuffle",
})
# calls that only look at a key (or copy it somewhere): not a consumption
NON_CONSUMING = frozenset({
    "print", "repr", "str", "format", "isinstance", "type", "len", "id", "hash", "bool", "int",
    "list", "tuple", "dict", "set", "frozenset", "zip", "enumerate", "iter", "reversed", "sorted",
    "next", "getattr", "setattr", "hasattr", "vars", "dir", "callable", "issubclass",
    "jax.eval_shape", "jax.device_put", "jax.device_get", "jax.block_until_ready", "jax.typeof",
    "jax.ShapeDtypeStruct", "jax.core.get_aval", "jax.tree.structure", "jax.tree.leaves",
    "jax.tree.flatten", "jax.lax.stop_gradient",
})
NON_CONSUMING_PREFIXES = ("logging.", "absl.logging.", "jax.dtypes.", "numpy.", "jax.numpy.", "jax.debug.",
                          "pickle.", "json.", "copy.", "chex.assert")
# methods whose arguments are looked up or stored, never drawn from
CONTAINER_METHODS = frozenset({
    "get", "pop", "setdefault", "append", "extend", "insert", "remove", "index", "count", "add",
    "discard", "update", "__contains__", "__getitem__", "startswith", "endswith", "join", "format",
    "write", "put", "put_nowait", "send", "save", "dump", "dumps", "log", "store", "record",
})
# wrappers that call the function they are given (seen through when comparing consumers)
WRAPPERS = frozenset({
    "jax.jacobian", "jax.jacfwd", "jax.jacrev", "jax.hessian", "jax.grad", "jax.value_and_grad",
    "jax.jit", "jax.vmap", "jax.checkpoint", "jax.remat", "functools.partial",
})
# methods that produce a fresh key on every call
PRODUCER_METHODS = frozenset({"make_rng"})
TIME_SOURCES = frozenset({
    "time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
    "time.monotonic_ns", "time.process_time", "datetime.datetime.now", "datetime.datetime.utcnow",
    "datetime.now",
})
# names of parameters/locals that conventionally hold keys: the last word names a key
_KEY_WORDS = frozenset({"key", "keys", "rng", "prng", "subkey", "subkeys", "subrng", "prngkey", "rngkey", "sk"})
# words that make a key-named variable something else (``num_keys``, ``key_padding_mask``)
_NOT_KEY_WORDS = frozenset({
    "num", "n", "len", "count", "max", "min", "size", "dim", "dims", "shape", "name", "names", "dict",
    "map", "mask", "path", "col", "column", "attr", "str", "id", "ids", "idx", "index", "sort", "cache",
    "lookup", "api", "secret", "public", "private", "primary", "foreign", "hot", "dict", "file", "env",
})
# keywords through which Flax takes a key (``nn.Dropout(...)(x, rng=key)``)
_RNG_KEYWORDS = frozenset({"rng", "prng_key", "rng_key", "dropout_rng", "dropout_key"})

# loop primitives whose body runs once per step: name -> (function position, function keyword,
# index of the carry parameter or None, how the carry is returned: "first" of a 2-tuple / "all")
LOOP_BODIES = {
    "jax.lax.scan": (0, "f", 0, "first"),
    "jax.lax.fori_loop": (2, "body_fun", 1, "all"),
    "jax.lax.while_loop": (1, "body_fun", 0, "all"),
    "jax.lax.map": (0, "f", None, None),
}

_STATE_CAP = 32
_STEP_BUDGET = 20000


@functools.lru_cache(maxsize=8192)
def is_key_like_name(name: str) -> bool:
    """``key``, ``rng``, ``dropout_key``, ``init_rng``, ``subkey``, ``prng`` (not ``num_keys``, ``rngs``)."""
    words = name.lower().strip("_").split("_")
    if words[-1] not in _KEY_WORDS:
        return False
    return not any(w in _NOT_KEY_WORDS for w in words)


class Use:
    """One consumption of a key value."""

    __slots__ = ("call", "arg", "stmt", "name", "kind", "callee", "data", "in_comp", "fn", "ident")

    def __init__(self, call: ast.Call, arg: ast.expr, stmt: Optional[ast.stmt], kind: str, callee: str,
                 data, in_comp: bool, fn: Function, ident: Optional[str] = None):
        self.call = call
        self.arg = arg                      # the key expression (a Name or ``keys[0]``)
        self.stmt = stmt                    # the statement whose evaluation runs the call
        self.name = arg.id if isinstance(arg, ast.Name) else None
        self.kind = kind                    # sample | split | fold_in | call
        self.callee = callee                # display name of the consumer
        self.data = data                    # fold_in data (a constant) or None
        self.in_comp = in_comp              # inside a comprehension
        self.fn = fn
        # for calls into other functions: which function (through jit/grad/partial wrappers)
        self.ident = ident

    @property
    def line(self) -> int:
        return self.call.lineno

    def __repr__(self) -> str:  # pragma: no cover
        return f"<Use {self.name} by {self.callee} line {self.line}>"


class Reuse:
    """A key value consumed a second time.

    ``reason``: ``again`` (already consumed earlier on some path), ``loop``
    (consumed on every iteration of a Python loop or comprehension without
    being re-split), ``carry`` (taken from a ``lax`` loop carry, consumed and
    returned unchanged), ``closure`` (closed over by a ``lax`` loop body).
    """

    __slots__ = ("fn", "use", "first", "reason", "where", "sites", "_vid")

    def __init__(self, fn: Function, use: Use, first: Optional[Use], reason: str, where: str,
                 vid=None):
        self.fn = fn
        self.use = use
        self.first = first
        self.reason = reason
        self.where = where          # "`for` loop", "comprehension", "`lax.scan`", ...
        # every consumption of the reused value in this scope, in source order (fixes split
        # before each of them); empty when unknown
        self.sites: List[Use] = []
        self._vid = vid


class _State:
    __slots__ = ("env", "used")

    def __init__(self, env: Dict[str, object], used: Dict[object, tuple]):
        self.env = env
        self.used = used

    def copy(self) -> "_State":
        return _State(dict(self.env), dict(self.used))

    def sig(self):
        return (frozenset(self.env.items()), frozenset(self.used.items()))


class _Budget(Exception):
    pass


class _Frame:
    __slots__ = ("breaks", "continues", "node")

    def __init__(self, node):
        self.node = node
        self.breaks: List[_State] = []
        self.continues: List[_State] = []


def _dedupe(states: List[_State]) -> List[_State]:
    if len(states) <= 1:
        return states
    seen = set()
    out = []
    for s in states:
        k = s.sig()
        if k in seen:
            continue
        seen.add(k)
        out.append(s)
        if len(out) >= _STATE_CAP:
            break
    return out


def _copy_all(states: List[_State]) -> List[_State]:
    return [s.copy() for s in states]


def _rooted_at(e: ast.AST, name: str) -> bool:
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return isinstance(e, ast.Name) and e.id == name


_NON_KEY_VALUES = (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Compare, ast.BoolOp, ast.UnaryOp,
                   ast.Dict, ast.Set, ast.List, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp,
                   ast.Lambda)


class KeyAnalysis:
    """Key facts of one module; build with :func:`key_analysis`."""

    def __init__(self, model: SemanticModel, text: Optional[str] = None):
        self.model = model
        self._random_q: Dict[int, Optional[str]] = {}
        self._keys: Dict[int, Set[str]] = {}
        self._loaded: Dict[int, FrozenSet[str]] = {}
        self._folded: Dict[Tuple[int, str], bool] = {}
        self._reuses: Optional[List[Reuse]] = None
        self._loop_bodies: Optional[Dict[int, Tuple[str, Optional[str], str]]] = None
        self._text = text
        self.active = False
        self._computed = False
        # call names that may reach jax.random: its functions' own names and local aliases
        # (``from jax.random import normal as randn``)
        extra = [local for local, q in model.imports.aliases.items() if q.startswith(RANDOM)]
        self._terms = RANDOM_TERMINALS | frozenset(extra) if extra else RANDOM_TERMINALS

    def _ensure(self) -> None:
        if self._computed:
            return
        self._computed = True
        text = self._text
        # key evidence needs `jax.random` (imported by some spelling), `make_rng` or `rngs=`/`rng=`
        self.active = bool(self.model.mentions_jax) and (text is None or _mentions_random(self.model, text))
        if self.active:
            # which kinds of evidence the text can hold at all (skips work on most calls)
            self._scan_keywords = text is None or "rng" in text
            self._scan_init = text is None or ".init(" in text
            self._compute_key_names(text)
        self._text = None

    def _markers(self) -> Tuple[str, ...]:
        """Text that any direct key evidence in a function must contain: the local spellings
        of ``jax.random`` and its functions, ``make_rng``, ``rng``-keywords and ``.init(``."""
        out = {"jax.random", "make_rng", "rng", ".init("}
        for local, q in self.model.imports.aliases.items():
            if q == "jax.random" or q.startswith(RANDOM):
                out.add(local)
        return tuple(out)

    # ------------------------------------------------------------ names
    def random_qualname(self, call: ast.Call, fn: Function) -> Optional[str]:
        """``jax.random.<name>`` for a call into ``jax.random`` (cheaply pre-filtered)."""
        f = call.func
        fc = f.__class__
        term = f.attr if fc is ast.Attribute else (f.id if fc is ast.Name else None)
        if term not in self._terms:
            return None
        k = id(call)
        cache = self._random_q
        if k in cache:
            return cache[k]
        q = self.model.qualname(f, fn)
        if q is not None and not q.startswith(RANDOM):
            q = None
        cache[k] = q
        return q

    def is_producer(self, e: ast.AST, fn: Function) -> bool:
        """A call that returns fresh key(s): ``jax.random.split(...)``, ``PRNGKey(...)``, ``make_rng``."""
        if e.__class__ is ast.Subscript:
            e = e.value
        if e.__class__ is not ast.Call:
            return False
        f = e.func
        fc = f.__class__
        term = f.attr if fc is ast.Attribute else (f.id if fc is ast.Name else None)
        if term in PRODUCER_TERMINALS or (term in self._terms and term not in RANDOM_TERMINALS):
            return self.random_qualname(e, fn) in KEY_PRODUCERS
        return fc is ast.Attribute and term in PRODUCER_METHODS

    @staticmethod
    def key_argument(call: ast.Call) -> Optional[ast.expr]:
        if call.args and not isinstance(call.args[0], ast.Starred):
            return call.args[0]
        for kw in call.keywords:
            if kw.arg == "key":
                return kw.value
        return None

    def key_names(self, fn: Function) -> Set[str]:
        """Names of ``fn`` that hold PRNG keys (flow-insensitive)."""
        self._ensure()
        return self._keys.get(id(fn), set())

    def only_folded(self, fn: Function, param: str) -> bool:
        """Key parameter ``param`` is only ever used through ``jax.random.fold_in(param, data)``
        with non-constant data (``rng = fold_in(rng, state.step)`` first thing in the body):
        each call derives its own key, so passing the same key on every call repeats nothing."""
        k = (id(fn), param)
        got = self._folded.get(k)
        if got is not None:
            return got
        ok = False
        body = fn.node.body if isinstance(fn.node.body, list) else []
        fold_stmt = None
        for i, stmt in enumerate(body):
            v = getattr(stmt, "value", None)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(v, ast.Call) and v.args \
                    and isinstance(v.args[0], ast.Name) and v.args[0].id == param \
                    and self.random_qualname(v, fn) == "jax.random.fold_in" and not _constant_data(v):
                fold_stmt = stmt
                if stmt.targets[0].id == param:
                    ok = True   # rng = fold_in(rng, step): later reads see the derived key
                else:
                    # step_key = fold_in(rng, step): the original key must not be read again
                    ok = not any(isinstance(n, ast.Name) and n.id == param
                                 for later in body[i + 1:] for n in ast.walk(later))
                break
            if any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(stmt)):
                break   # read (or rebound) before any fold
        self._folded[k] = ok
        return ok

    def key_params(self, fn: Function) -> Set[str]:
        ks = self._keys.get(id(fn))
        if not ks:
            return set()
        return ks & set(fn.param_nodes)

    def _direct_key_names(self, fn: Function) -> Set[str]:
        keys: Set[str] = set()
        Name, Attribute, Dict_, Call_ = ast.Name, ast.Attribute, ast.Dict, ast.Call
        terms = self._terms
        keylike = is_key_like_name
        scan_kw = self._scan_keywords
        scan_init = self._scan_init
        for call in fn.of_type(ast.Call):
            f = call.func
            fc = f.__class__
            term = f.attr if fc is Attribute else (f.id if fc is Name else None)
            if term in terms:
                q = self.random_qualname(call, fn)
                if q is not None:
                    if q not in RANDOM_NON_CONSUMING:
                        a = self.key_argument(call)
                        if isinstance(a, ast.Subscript):
                            if isinstance(a.slice, ast.Constant) and isinstance(a.slice.value, str):
                                continue   # split(state["rng"]): `state` is a dict holding a key, not a key array
                            a = a.value
                        if isinstance(a, Name):
                            keys.add(a.id)
                    continue
            kws = call.keywords
            if kws and scan_kw:
                # rngs={"dropout": key}, rng=key
                for kw in kws:
                    v = kw.value
                    vc = v.__class__
                    if vc is Name:
                        arg = kw.arg
                        if (arg in _RNG_KEYWORDS or (arg and arg.endswith("_rng"))) and keylike(v.id):
                            keys.add(v.id)
                    elif vc is Dict_ and kw.arg == "rngs":
                        for x in v.values:
                            if x.__class__ is Name and keylike(x.id):
                                keys.add(x.id)
            if scan_init and term == "init" and fc is Attribute and call.args:
                # model.init(key, x), model.init({"params": key}, x)
                a = call.args[0]
                if a.__class__ is Name and keylike(a.id):
                    keys.add(a.id)
                elif a.__class__ is Dict_:
                    for x in a.values:
                        if x.__class__ is Name and keylike(x.id):
                            keys.add(x.id)
        for node in fn.of_type(ast.Assign, ast.AnnAssign, ast.NamedExpr):
            value = node.value
            if value is None:
                continue
            if value.__class__ is ast.Subscript:
                value = value.value
            if value.__class__ is not Call_ or not self.is_producer(value, fn):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                keys.update(_target_names(t))
        for node in fn.of_type(ast.For, ast.comprehension):
            if self.is_producer(node.iter, fn):
                keys.update(_target_names(node.target))
        return keys

    def _callee_calls_of(self, fn: Function) -> list:
        """Calls of ``fn`` that pass a key-named name, except calls into ``jax.random``."""
        got = self._callee_calls.get(id(fn))
        if got is not None:
            return got
        out = []
        Name = ast.Name
        keylike = is_key_like_name
        for call in fn.of_type(ast.Call):
            listed = False
            for a in call.args:
                if a.__class__ is Name and keylike(a.id):
                    listed = True
                    break
            if not listed:
                for kw in call.keywords:
                    if kw.value.__class__ is Name and keylike(kw.value.id):
                        listed = True
                        break
            if listed and self.random_qualname(call, fn) is None:
                out.append(call)
        self._callee_calls[id(fn)] = out
        return out

    def _compute_key_names(self, text: Optional[str]) -> None:
        m = self.model
        self._callee_calls: Dict[int, list] = {}
        markers = self._markers() if text is not None else None
        src = getattr(m, "source", None)
        if src is None or getattr(src, "text", None) != text:
            markers = None
        # a function whose text names no key source holds no direct key evidence
        scan = m.functions if markers is None else functions_mentioning(m, markers)
        for fn in scan:
            ks = self._direct_key_names(fn)
            if ks:
                self._keys[id(fn)] = ks
        # a key a nested function reads from its enclosing scope is a key there too
        for fn in m.functions:
            ks = self._keys.get(id(fn))
            if not ks or fn.is_module:
                continue
            for n in ks - fn.locals:
                owner = fn.parent
                while owner is not None and n not in owner.locals:
                    owner = owner.parent
                if owner is not None and n not in owner.globals_declared:
                    self._keys.setdefault(id(owner), set()).add(n)
        # aliases and loops over key arrays, then key parameters of callees
        for _round in range(3):
            changed = False
            for fn in m.functions:
                ks = self._keys.get(id(fn))
                if ks and self._close_aliases(fn, ks):
                    changed = True
            if any(self.key_params(f) for f in m.functions if id(f) in self._keys):
                for fn in m.functions:
                    if self._from_callees(fn):
                        changed = True
            if not changed:
                break

    def _close_aliases(self, fn: Function, ks: Set[str]) -> bool:
        changed = False
        for _ in range(4):
            grew = False
            for node in fn.of_type(ast.Assign):
                v = node.value
                if isinstance(v, ast.Subscript):
                    v = v.value
                if isinstance(v, ast.Name) and v.id in ks:
                    for t in node.targets:
                        for n in _target_names(t):
                            if n not in ks:
                                ks.add(n)
                                grew = True
            for node in fn.of_type(ast.For, ast.comprehension):
                if _mentions(node.iter, ks):
                    for n in _target_names(node.target):
                        if n not in ks and (is_key_like_name(n) or isinstance(node.target, ast.Name)):
                            ks.add(n)
                            grew = True
            if not grew:
                break
            changed = True
        return changed

    def _from_callees(self, fn: Function) -> bool:
        """Key-named arguments passed to a key parameter of a function of this module."""
        ks = self._keys.get(id(fn))
        changed = False
        m = self.model
        for call in self._callee_calls_of(fn):
            cands = [a for a in call.args if isinstance(a, ast.Name) and is_key_like_name(a.id)
                     and not (ks and a.id in ks)]
            cands += [kw.value for kw in call.keywords if isinstance(kw.value, ast.Name)
                      and is_key_like_name(kw.value.id) and not (ks and kw.value.id in ks)]
            if not cands:
                continue
            if self.random_qualname(call, fn) is not None:
                continue
            target = m.resolve_callable(call.func, fn)
            if target is None:
                continue
            kp = self.key_params(target.function)
            if not kp:
                continue
            pairs, _ = m.bind_arguments(target, call)
            for p, a in pairs:
                if p in kp and isinstance(a, ast.Name) and a in cands:
                    if ks is None:
                        ks = self._keys[id(fn)] = set()
                    ks.add(a.id)
                    changed = True
        return changed

    def loaded_names(self, fn: Function) -> FrozenSet[str]:
        """Every name read anywhere in ``fn`` (nested functions included)."""
        k = id(fn)
        got = self._loaded.get(k)
        if got is None:
            body = fn.node.body if not fn.is_lambda else fn.node.body
            roots = body if isinstance(body, list) else [body]
            names = set()
            for r in roots:
                for n in ast.walk(r):
                    if n.__class__ is ast.Name and n.ctx.__class__ is ast.Load:
                        names.add(n.id)
            got = frozenset(names)
            self._loaded[k] = got
        return got

    # ------------------------------------------------------------ loop bodies
    def loop_bodies(self) -> Dict[int, Tuple[str, Optional[str], str]]:
        """Functions used as the body of a ``lax`` loop primitive:
        id(function) -> (primitive, carry parameter or None, carry return shape)."""
        if self._loop_bodies is not None:
            return self._loop_bodies
        out: Dict[int, Tuple[str, Optional[str], str]] = {}
        m = self.model
        for site in m.transform_sites:
            spec = LOOP_BODIES.get(site.transform.name)
            if spec is None or site.target is None or site.call is None:
                continue
            pos, kw, carry_idx, shape = spec
            call = site.call
            arg = call.args[pos] if len(call.args) > pos and not isinstance(call.args[pos], ast.Starred) else None
            if arg is None:
                arg = next((k.value for k in call.keywords if k.arg == kw), None)
            if arg is None:
                continue
            target = m.resolve_callable(arg, site.scope)
            if target is None or target.function is not site.target.function:
                continue
            body = target.function
            carry = None
            if carry_idx is not None:
                i = target.bound_positional + carry_idx
                if i < len(body.params):
                    carry = body.params[i]
            out[id(body)] = (site.transform.name, carry, shape)
        self._loop_bodies = out
        return out

    # ------------------------------------------------------------ reuse
    def reuses(self) -> List[Reuse]:
        if self._reuses is not None:
            return self._reuses
        out: List[Reuse] = []
        self._ensure()
        if self.active:
            bodies = self.loop_bodies()
            for fn in self.model.functions:
                ks = self._keys.get(id(fn))
                body = bodies.get(id(fn))
                if ks:
                    interp = _Interp(self, fn, ks, body)
                    try:
                        out.extend(interp.run())
                    except (_Budget, RecursionError):
                        pass
                if body is not None:
                    out.extend(self._closure_reuses(fn, body[0]))
        seen = set()
        uniq = []
        for r in sorted(out, key=lambda r: (r.use.call.lineno, r.use.call.col_offset)):
            k = id(r.use.call)
            if k in seen:
                continue
            seen.add(k)
            uniq.append(r)
        self._reuses = uniq
        return uniq

    def _closure_reuses(self, fn: Function, primitive: str) -> List[Reuse]:
        """A key of an enclosing scope consumed in a ``lax`` loop body: the same key every step."""
        out: List[Reuse] = []
        seen: Set[str] = set()
        short = primitive.replace("jax.lax.", "lax.")
        for call in sorted(fn.of_type(ast.Call), key=lambda c: (c.lineno, c.col_offset)):
            q = self.random_qualname(call, fn)
            if q is None or q in RANDOM_NON_CONSUMING:
                continue
            a = self.key_argument(call)
            if not isinstance(a, ast.Name) or a.id in fn.locals:
                continue
            if q == "jax.random.fold_in" and not _constant_data(call):
                continue
            owner = fn.parent
            while owner is not None and a.id not in owner.locals:
                owner = owner.parent
            if owner is None or a.id in owner.globals_declared:
                continue
            if a.id not in self.key_names(owner):
                continue
            if a.id in seen:
                continue
            seen.add(a.id)
            kind = "split" if q == "jax.random.split" else ("fold_in" if q == "jax.random.fold_in" else "sample")
            use = Use(call, a, None, kind, q, None, False, fn)
            out.append(Reuse(fn, use, None, "closure", f"`{short}` body"))
        return out


def functions_mentioning(model: SemanticModel, markers: Tuple[str, ...]) -> List[Function]:
    """The module scope and every function whose source text contains one of ``markers``
    (a nested function is looked at only when its enclosing one matched)."""
    src = getattr(model, "source", None)
    if src is None:
        return list(model.functions)
    text = src.text
    out = [model.module]
    stack = list(reversed(model.module.children))
    while stack:
        fn = stack.pop()
        node = fn.node
        seg = text[src.offset(node.lineno, 0):src.offset(node.end_lineno + 1, 0)]
        for mk in markers:
            if mk in seg:
                out.append(fn)
                stack.extend(reversed(fn.children))
                break
    return out


def _mentions_random(model: SemanticModel, text: str) -> bool:
    for q in model.imports.aliases.values():
        if q == "jax.random" or q.startswith(RANDOM):
            return True
    if "jax.random" in text:
        return True
    return "rng" in text and ("make_rng" in text or "rng=" in text or "rngs=" in text)


def _constant_data(call: ast.Call) -> bool:
    data = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "data"), None)
    return isinstance(data, ast.Constant)


def _target_names(t: ast.AST) -> List[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        out = []
        for e in t.elts:
            out.extend(_target_names(e))
        return out
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    return []


def _mentions(e: ast.AST, names: Set[str]) -> bool:
    for n in ast.walk(e):
        if n.__class__ is ast.Name and n.id in names:
            return True
    return False


_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class _Interp:
    """Path-sensitive abstract interpretation of one scope's key values."""

    def __init__(self, an: KeyAnalysis, fn: Function, keys: Set[str], body_spec):
        self.an = an
        self.m = an.model
        self.fn = fn
        self.keys = keys
        self.reports: Dict[int, Reuse] = {}
        self.uses: Dict[Tuple[int, int], Use] = {}
        self.call_infos: Dict[int, list] = {}
        self.value_uses: Dict[object, List[Use]] = {}
        self.vid_nodes: Dict[object, ast.AST] = {}
        self.try_collect: Optional[List[_State]] = None
        self.reported_vids: Set[object] = set()
        self.stmt: Optional[ast.stmt] = None
        self.comp_depth = 0
        self.steps = 0
        self.loops: List[ast.AST] = []
        self.body_spec = body_spec
        self.carry = body_spec[1] if body_spec else None
        self.carry_vids: Set[object] = set()
        self.carry_assigned = False
        if self.carry is not None:
            self.carry_assigned = any(self.carry in _target_names(t)
                                      for n in fn.of_type(ast.Assign) for t in n.targets)

    # ------------------------------------------------------------ driver
    def run(self) -> List[Reuse]:
        fn = self.fn
        env: Dict[str, object] = {}
        for p in fn.all_params():
            if p in self.keys:
                env[p] = ("param", p)
                if p == self.carry:
                    self.carry_vids.add(("param", p))
        states = [_State(env, {})]
        if fn.is_lambda:
            states = self.expr(fn.node.body, states)
            if self.carry is not None:
                self.on_return(fn.node.body, states)
        else:
            self.block(fn.node.body, states, None)
        for r in self.reports.values():
            sites = self.value_uses.get(r._vid, [])
            r.sites = sorted(sites, key=lambda u: (u.call.lineno, u.call.col_offset))
        return list(self.reports.values())

    def tick(self) -> None:
        self.steps += 1
        if self.steps > _STEP_BUDGET:
            raise _Budget()

    # ------------------------------------------------------------ statements
    def block(self, stmts, states: List[_State], frame: Optional[_Frame]) -> List[_State]:
        collect = self.try_collect
        for s in stmts:
            if not states:
                break
            states = self.stmt_(s, states, frame)
            if collect is not None and states:
                collect.extend(_copy_all(states))
        return states

    def _collect_exit(self, states: List[_State]) -> None:
        """A path leaves the statement list early (``return``/``raise``): an enclosing
        ``except`` may still see what it consumed."""
        if self.try_collect is not None:
            self.try_collect.extend(_copy_all(states))

    def stmt_(self, s: ast.stmt, states: List[_State], frame: Optional[_Frame]) -> List[_State]:
        self.tick()
        t = s.__class__
        self.stmt = s
        if t is ast.Expr:
            return self.expr(s.value, states)
        if t is ast.Assign:
            states = self.expr(s.value, states)
            for target in s.targets:
                states = self.target_exprs(target, states)
                self.bind(target, s.value, states)
            return states
        if t is ast.AnnAssign:
            if s.value is not None:
                states = self.expr(s.value, states)
                self.bind(s.target, s.value, states)
            return states
        if t is ast.AugAssign:
            states = self.expr(s.value, states)
            states = self.target_exprs(s.target, states)
            if isinstance(s.target, ast.Name) and s.target.id in self.keys:
                for st in states:
                    st.env[s.target.id] = None
            return states
        if t is ast.Return:
            if s.value is not None:
                states = self.expr(s.value, states)
            if self.carry is not None:
                self.on_return(s.value, states)
            self._collect_exit(states)
            return []
        if t is ast.If:
            states = self.expr(s.test, states)
            a = self.block(s.body, _copy_all(states), frame)
            b = self.block(s.orelse, states, frame)
            return _dedupe(a + b)
        if t is ast.For or t is ast.AsyncFor:
            return self.loop(s, states, is_for=True)
        if t is ast.While:
            return self.loop(s, states, is_for=False)
        if t is ast.Break:
            if frame is not None:
                frame.breaks.extend(states)
            return []
        if t is ast.Continue:
            if frame is not None:
                frame.continues.extend(states)
            return []
        if t is ast.Raise:
            if s.exc is not None:
                states = self.expr(s.exc, states)
            self._collect_exit(states)
            return []
        if t is ast.Try or t.__name__ == "TryStar":
            outer = self.try_collect
            inside: List[_State] = []
            self.try_collect = inside
            try:
                body_out = self.block(s.body, _copy_all(states), frame)
            finally:
                self.try_collect = outer
            if outer is not None:
                outer.extend(inside)
            # an exception may leave the body after any statement
            handler_in = _dedupe(_copy_all(states) + inside)
            outs = self.block(s.orelse, body_out, frame)
            for h in s.handlers:
                outs = outs + self.block(h.body, _copy_all(handler_in), frame)
            outs = _dedupe(outs)
            if s.finalbody:
                outs = self.block(s.finalbody, outs, frame)
            return outs
        if t is ast.With or t is ast.AsyncWith:
            for item in s.items:
                states = self.expr(item.context_expr, states)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, None, states)
            return self.block(s.body, states, frame)
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef:
            for d in s.decorator_list:
                states = self.expr(d, states)
            self.unbind(s.name, states)
            return states
        if t is ast.Delete:
            for target in s.targets:
                for n in _target_names(target):
                    self.unbind(n, states)
            return states
        if t is ast.Assert:
            states = self.expr(s.test, states)
            return states
        if t.__name__ == "Match":
            states = self.expr(s.subject, states)
            outs = []
            for case in s.cases:
                outs.extend(self.block(case.body, _copy_all(states), frame))
            return _dedupe(outs + states)
        return states

    def loop(self, s, states: List[_State], is_for: bool) -> List[_State]:
        if is_for:
            states = self.expr(s.iter, states)
            fresh_target = self.iter_gives_keys(s.iter)
        else:
            states = self.expr(s.test, states)
            fresh_target = False
        infinite = not is_for and isinstance(s.test, ast.Constant) and bool(s.test.value)
        exits: List[_State] = [] if infinite else list(states)
        breaks: List[_State] = []
        cur = _copy_all(states)
        self.loops.append(s)
        try:
            for _pass in range(2):
                if not cur:
                    break
                frame = _Frame(s)
                if is_for:
                    self.stmt = s
                    self.bind_loop_target(s.target, cur, fresh_target)
                out = self.block(s.body, cur, frame)
                out = _dedupe(out + frame.continues)
                breaks.extend(frame.breaks)
                if not is_for and out:
                    self.stmt = s
                    out = self.expr(s.test, out)
                if not infinite:
                    exits.extend(_copy_all(out))
                cur = out
        finally:
            self.loops.pop()
        result = _dedupe(exits)
        if s.orelse:
            result = self.block(s.orelse, result, None)
        return _dedupe(result + breaks)

    # ------------------------------------------------------------ bindings
    def unbind(self, name: str, states: List[_State]) -> None:
        if name in self.keys:
            for st in states:
                st.env[name] = None

    def iter_gives_keys(self, it: ast.AST) -> bool:
        return self.an.is_producer(it, self.fn) or _mentions(it, self.keys)

    def bind_loop_target(self, target: ast.AST, states: List[_State], fresh: bool) -> None:
        for n in _iter_name_nodes(target):
            if n.id in self.keys:
                vid = id(n) if fresh else None
                if vid is not None:
                    self.vid_nodes[vid] = n
                for st in states:
                    st.env[n.id] = vid
                    if vid is not None:
                        _forget(st, vid)

    def target_exprs(self, target: ast.AST, states: List[_State]) -> List[_State]:
        """Evaluate the expressions inside an assignment target (``a[f(key)] = ...``)."""
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            for child in ast.iter_child_nodes(target):
                if isinstance(child, ast.expr):
                    states = self.expr(child, states)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                states = self.target_exprs(e, states)
        return states

    def bind(self, target: ast.AST, value: Optional[ast.AST], states: List[_State]) -> None:
        t = target.__class__
        if t is ast.Starred:
            for n in _target_names(target):
                self.unbind(n, states)
            return
        if t is ast.Tuple or t is ast.List:
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in value.elts):
                # evaluate the right side first: ``a, b = b, a`` swaps
                saved = [{n: st.env.get(n) for n in self.keys} for st in states]
                for te, ve in zip(target.elts, value.elts):
                    self._bind_one(te, ve, states, saved)
                return
            elem = None
            if value is not None and (self.an.is_producer(value, self.fn) or
                                      (self.carry is not None and not self.carry_assigned
                                       and _rooted_at(value, self.carry))):
                elem = value
            for te in target.elts:
                if isinstance(te, ast.Name):
                    if te.id in self.keys:
                        self._fresh(te, states, carry=elem is not None and not self.an.is_producer(elem, self.fn))
                else:
                    self.bind(te, None, states)
            return
        if t is ast.Name:
            self._bind_one(target, value, states, None)

    def _bind_one(self, target: ast.AST, value: Optional[ast.AST], states: List[_State], saved) -> None:
        if not isinstance(target, ast.Name):
            if isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
                self.bind(target, value, states)
            return
        name = target.id
        if name not in self.keys:
            return
        v = value
        if v is None:
            self._fresh(target, states)
            return
        if isinstance(v, ast.Name) and v.id in self.keys:
            for i, st in enumerate(states):
                src = saved[i].get(v.id) if saved is not None else st.env.get(v.id)
                st.env[name] = src
            return
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id in self.keys \
                and isinstance(v.slice, ast.Constant) and not isinstance(v.slice.value, str):
            for i, st in enumerate(states):
                base = saved[i].get(v.value.id) if saved is not None else st.env.get(v.value.id)
                st.env[name] = ("sub", base, v.slice.value) if base is not None else None
            return
        if (isinstance(v, _NON_KEY_VALUES) and not self.an.is_producer(v, self.fn)) or \
                (isinstance(v, ast.Call) and self.an.random_qualname(v, self.fn) is not None
                 and not self.an.is_producer(v, self.fn)):
            # a literal, arithmetic, or a draw (``x = jax.random.normal(key)``, ``key_data(key)``)
            for st in states:
                st.env[name] = None
            return
        carry = (self.carry is not None and not self.carry_assigned and _rooted_at(v, self.carry))
        self._fresh(target, states, carry=carry)

    def _fresh(self, target: ast.Name, states: List[_State], carry: bool = False) -> None:
        vid = id(target)
        self.vid_nodes[vid] = target
        if carry:
            self.carry_vids.add(vid)
        for st in states:
            st.env[target.id] = vid
            _forget(st, vid)

    # ------------------------------------------------------------ expressions
    def expr(self, e: Optional[ast.AST], states: List[_State]) -> List[_State]:
        if e is None or not states:
            return states
        t = e.__class__
        if t is ast.Name or t is ast.Constant:
            return states
        if t is ast.Call:
            states = self.expr(e.func, states)
            for a in e.args:
                states = self.expr(a.value if a.__class__ is ast.Starred else a, states)
            for kw in e.keywords:
                states = self.expr(kw.value, states)
            self.call_event(e, states)
            return states
        if t is ast.Lambda:
            return states
        if t in _COMPS:
            return self.comprehension(e, states)
        if t is ast.IfExp:
            states = self.expr(e.test, states)
            a = self.expr(e.body, _copy_all(states))
            b = self.expr(e.orelse, states)
            return _dedupe(a + b)
        if t is ast.NamedExpr:
            states = self.expr(e.value, states)
            self.bind(e.target, e.value, states)
            return states
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                states = self.expr(child, states)
        return states

    def comprehension(self, e, states: List[_State]) -> List[_State]:
        gens = e.generators
        states = self.expr(gens[0].iter, states)
        fresh = self.iter_gives_keys(gens[0].iter)
        exits = list(states)
        cur = _copy_all(states)
        self.comp_depth += 1
        self.loops.append(e)
        try:
            for _pass in range(2):
                self.tick()
                self.bind_loop_target(gens[0].target, cur, fresh)
                for c in gens[0].ifs:
                    cur = self.expr(c, cur)
                for g in gens[1:]:
                    cur = self.expr(g.iter, cur)
                    self.bind_loop_target(g.target, cur, self.iter_gives_keys(g.iter))
                    for c in g.ifs:
                        cur = self.expr(c, cur)
                if isinstance(e, ast.DictComp):
                    cur = self.expr(e.key, cur)
                    cur = self.expr(e.value, cur)
                else:
                    cur = self.expr(e.elt, cur)
                cur = _dedupe(cur)
                exits.extend(_copy_all(cur))
        finally:
            self.comp_depth -= 1
            self.loops.pop()
        return _dedupe(exits)

    # ------------------------------------------------------------ consumption
    def call_info(self, call: ast.Call) -> list:
        """[(key expression, kind, fold data, callee display)] consumed by ``call``."""
        got = self.call_infos.get(id(call))
        if got is not None:
            return got
        out = self._call_info(call)
        self.call_infos[id(call)] = out
        return out

    def _candidate(self, a: ast.AST) -> bool:
        if isinstance(a, ast.Name):
            return a.id in self.keys
        if isinstance(a, ast.Subscript):
            return isinstance(a.value, ast.Name) and a.value.id in self.keys and isinstance(a.slice, ast.Constant)
        return False

    def _call_info(self, call: ast.Call) -> list:
        fn = self.fn
        an = self.an
        q = an.random_qualname(call, fn)
        if q is not None:
            if q in RANDOM_NON_CONSUMING:
                return []
            a = an.key_argument(call)
            if a is None or not self._candidate(a):
                return []
            if q == "jax.random.split":
                kind = "split"
            elif q == "jax.random.fold_in":
                kind = "fold_in"
            else:
                kind = "sample"
            data = None
            if kind == "fold_in":
                d = call.args[1] if len(call.args) > 1 else next(
                    (k.value for k in call.keywords if k.arg == "data"), None)
                data = ("const", repr(d.value)) if isinstance(d, ast.Constant) else None
            return [(a, kind, data, q, None)]
        # any argument that mentions a key
        args = [a.value if isinstance(a, ast.Starred) else a for a in call.args] + \
               [kw.value for kw in call.keywords]
        cands = []
        for a in args:
            self._collect(a, cands)
        if not cands:
            return []
        f = call.func
        if isinstance(f, ast.Attribute) and (f.attr in CONTAINER_METHODS or f.attr in PRODUCER_METHODS
                                             or f.attr.startswith("assert")):
            return []
        if f.__class__ in (ast.Name, ast.Attribute):
            fq = self.m.qualname(f, fn)
            if fq is not None and (fq in NON_CONSUMING or fq.startswith(NON_CONSUMING_PREFIXES)):
                return []
        target = self.m.resolve_callable(f, fn)
        display = _display(f)
        ident = self._callee_identity(f)
        if target is not None:
            # a function of this module consumes a key only through a parameter it treats as
            # a key (draws from it, splits it, passes it on to a key consumer)
            callee = target.function
            kp = an.key_params(callee)
            pairs, _ = self.m.bind_arguments(target, call)
            out = []
            for p, a in pairs:
                for c in cands:
                    if c is a or (isinstance(a, (ast.Dict, ast.Tuple, ast.List)) and _contains(a, c)):
                        if p in kp and not an.only_folded(callee, p):
                            out.append((c, "call", None, display, ident))
            # deduplicate (a ``**kwargs`` pairing may list one argument for several parameters)
            seen = set()
            uniq = []
            for item in out:
                if id(item[0]) not in seen:
                    seen.add(id(item[0]))
                    uniq.append(item)
            return uniq
        return [(c, "call", None, display, ident) for c in cands]

    def _callee_identity(self, f: ast.AST) -> str:
        """The function a call runs, seen through ``jax.jit``/``grad``/``partial`` wrappers:
        ``f(key)`` and ``jax.grad(f)(key)`` evaluate one randomized function with one key."""
        e = f
        for _ in range(6):
            if not isinstance(e, ast.Call) or not isinstance(e.func, (ast.Name, ast.Attribute)):
                break
            q = self.m.qualname(e.func, self.fn)
            if q is None or not (q in WRAPPERS or q in K.TRANSFORMS or q in K.PARTIAL):
                break
            if not e.args or isinstance(e.args[0], ast.Starred):
                break
            e = e.args[0]
        return ast.dump(e)

    def _collect(self, a: ast.AST, out: list) -> None:
        if self._candidate(a):
            out.append(a)
        elif isinstance(a, (ast.Tuple, ast.List, ast.Set)):
            for e in a.elts:
                self._collect(e.value if isinstance(e, ast.Starred) else e, out)
        elif isinstance(a, ast.Dict):
            for v in a.values:
                self._collect(v, out)

    def use_for(self, call: ast.Call, arg: ast.AST, kind: str, data, callee: str, ident) -> Use:
        k = (id(call), id(arg))
        u = self.uses.get(k)
        if u is None:
            u = Use(call, arg, self.stmt, kind, callee, data, self.comp_depth > 0, self.fn, ident)
            self.uses[k] = u
        return u

    def call_event(self, call: ast.Call, states: List[_State]) -> None:
        info = self.call_info(call)
        if not info:
            return
        for arg, kind, data, callee, ident in info:
            use = self.use_for(call, arg, kind, data, callee, ident)
            for st in states:
                vid = self._vid(arg, st)
                if vid is None:
                    continue
                vu = self.value_uses.setdefault(vid, [])
                if use not in vu:
                    vu.append(use)
                prev = st.used.get(vid)
                if prev:
                    if use in prev and kind == "fold_in":
                        continue
                    for p in prev:
                        if _conflict(p, use):
                            self.report(use, p, vid)
                            break
                    if use not in prev:
                        st.used[vid] = prev + (use,)
                else:
                    st.used[vid] = (use,)

    @staticmethod
    def _vid(arg: ast.AST, st: _State):
        if isinstance(arg, ast.Name):
            return st.env.get(arg.id)
        base = st.env.get(arg.value.id)
        if base is None:
            return None
        return ("sub", base, arg.slice.value)

    def report(self, use: Use, first: Use, vid) -> None:
        """Record the first reuse of each key value (its "second use"); the fix and the
        message cover the value's other uses."""
        k = id(use.call)
        if k in self.reports or vid in self.reported_vids:
            return
        if first is use or _after(first.call, use.call):
            carrier = self._carrier(vid)
            if carrier is None or is_config_sweep(self.m, carrier, self.fn):
                # each iteration of a loop over literal configurations (shapes, dtypes)
                # replays the same inputs on purpose
                return
            self.reports[k] = Reuse(self.fn, use, first, "loop", loop_label(carrier), vid)
        else:
            self.reports[k] = Reuse(self.fn, use, first, "again", "", vid)
        self.reported_vids.add(vid)

    def _carrier(self, vid) -> Optional[ast.AST]:
        """The innermost loop being run that does not create ``vid``: the one whose
        iterations see the same key value."""
        while isinstance(vid, tuple) and vid and vid[0] == "sub":
            vid = vid[1]
        node = self.vid_nodes.get(vid)
        for loop in reversed(self.loops):
            if node is None or not _encloses(loop, node):
                return loop
        return None

    # ------------------------------------------------------------ lax loop carries
    def on_return(self, value: Optional[ast.AST], states: List[_State]) -> None:
        prim, carry, shape = self.body_spec
        if value is None or carry is None:
            return
        out = value
        if shape == "first":
            if not (isinstance(value, ast.Tuple) and len(value.elts) == 2):
                return
            out = value.elts[0]
        names = []
        _carry_names(out, names)
        whole = isinstance(out, ast.Name) and out.id == carry and not self.carry_assigned
        short = prim.replace("jax.lax.", "lax.")
        for st in states:
            vids = set()
            for n in names:
                vid = st.env.get(n)
                if vid is not None and vid in self.carry_vids:
                    vids.add(vid)
            if whole:
                vids.update(v for v in self.carry_vids if v in st.used)
            for vid in vids:
                for use in st.used.get(vid, ()):
                    if use.kind == "fold_in" and use.data is None:
                        continue
                    k = id(use.call)
                    if k not in self.reports and vid not in self.reported_vids:
                        self.reports[k] = Reuse(self.fn, use, None, "carry", f"`{short}`", vid)
                        self.reported_vids.add(vid)


def loop_label(loop: ast.AST) -> str:
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return "`for` loop"
    if isinstance(loop, ast.While):
        return "`while` loop"
    return "comprehension"


def _encloses(outer: ast.AST, inner: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and \
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset)


_SWEEP_CALLS = frozenset({"itertools.product", "itertools.combinations", "itertools.permutations"})
_LITERALS = (ast.List, ast.Tuple, ast.Set, ast.Dict)


def is_config_sweep(model: SemanticModel, loop: ast.AST, fn: Function) -> bool:
    """A loop over literal configurations (``for shape in [(2, 3), (4,)]``,
    ``for dtype in dtypes`` with ``dtypes = [...]``, ``itertools.product(...)``)."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        it = loop.iter
    elif isinstance(loop, _COMPS):
        it = loop.generators[0].iter
    else:
        return False
    return _sweep_iter(model, it, fn, 0)


def _sweep_iter(model: SemanticModel, it: ast.AST, fn: Function, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(it, _LITERALS):
        return True
    if isinstance(it, ast.Call):
        f = it.func
        if isinstance(f, ast.Attribute) and f.attr in ("items", "keys", "values") and not it.args:
            return _sweep_iter(model, f.value, fn, depth + 1)
        q = model.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if q in _SWEEP_CALLS:
            return True
        if q in ("zip", "enumerate", "reversed", "sorted", "list", "tuple") and it.args:
            return _sweep_iter(model, it.args[0], fn, depth + 1)
        return False
    if isinstance(it, ast.Name):
        s = fn
        while s is not None and it.id not in s.locals:
            s = s.parent
        if s is None or it.id in s.param_nodes:
            return False
        values = [n.value for n in s.of_type(ast.Assign)
                  if any(isinstance(t, ast.Name) and t.id == it.id for t in n.targets)]
        return bool(values) and all(_sweep_iter(model, v, s, depth + 1) for v in values)
    return False


def _forget(st: _State, vid) -> None:
    """A binding site runs again: its value (and values indexed from it) are new."""
    used = st.used
    if not used:
        return
    used.pop(vid, None)
    stale = [k for k in used if k.__class__ is tuple and k[0] == "sub" and k[1] == vid]
    for k in stale:
        del used[k]


def _carry_names(e: ast.AST, out: List[str]) -> None:
    if isinstance(e, ast.Name):
        out.append(e.id)
    elif isinstance(e, (ast.Tuple, ast.List)):
        for x in e.elts:
            _carry_names(x, out)
    elif isinstance(e, ast.Dict):
        for x in e.values:
            _carry_names(x, out)


def _iter_name_nodes(t: ast.AST) -> Iterable[ast.Name]:
    if isinstance(t, ast.Name):
        yield t
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _iter_name_nodes(e)
    elif isinstance(t, ast.Starred):
        yield from _iter_name_nodes(t.value)


def _contains(container: ast.AST, node: ast.AST) -> bool:
    for n in ast.walk(container):
        if n is node:
            return True
    return False


def _after(a: ast.AST, b: ast.AST) -> bool:
    """Does ``a`` start after ``b`` in the source?"""
    return (a.lineno, a.col_offset) > (b.lineno, b.col_offset)


def _conflict(first: Use, second: Use) -> bool:
    if first.kind == "fold_in" or second.kind == "fold_in":
        # fold_in(key, d) derives a distinct key per datum: only the same constant twice repeats
        return first.kind == second.kind == "fold_in" and first.data is not None and first.data == second.data
    if first.kind == second.kind == "call" and first.call is not second.call and first.ident == second.ident:
        # one function evaluated twice with one key (``f(key, x)`` and ``jax.grad(f)(key, x)``,
        # a data generator replayed): the same randomness on purpose
        return False
    return True


def _display(f: ast.AST) -> str:
    try:
        text = ast.unparse(f)
    except Exception:  # pragma: no cover - defensive
        return "a call"
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------- cache
def key_analysis(model: SemanticModel, text: Optional[str] = None) -> KeyAnalysis:
    """The (cached) key analysis of ``model``; ``text`` (the source) enables a cheap pre-filter."""
    got = model.cache.get("keys")
    if got is None:
        got = model.cache["keys"] = KeyAnalysis(model, text)
    return got
