"""PRNG-key dataflow: which names hold JAX PRNG keys, where each key value is
consumed, and where one key value is consumed twice.

A JAX key is a value, not a stateful generator: every consumer of the same key
value (``jax.random.normal(key)``, ``jax.random.split(key)``, ``model.init(key,
x)``, ``train_step(..., key)``) sees the same bits.  This module follows key
values through one scope at a time.  The family's modules:

* ``vocabulary.py``: which ``jax.random`` functions make, consume or only read
  a key, other calls that only look at one, key-like variable names;
* ``states.py``: :class:`Use`/:class:`Reuse` records and per-path key states;
* ``interp.py``: the interpreter of one scope's key values;
* ``loops.py``: ``lax`` loop bodies and carries, literal configuration sweeps;
* this module: which names hold keys, which parameters of this module's
  functions are keys (interprocedural summaries), and the per-model cache.

What is found where:

* **Which names hold keys** (:meth:`KeyAnalysis.key_names`): names bound from
  ``jax.random.PRNGKey/key/split/fold_in/clone/wrap_key_data`` or
  ``self.make_rng(...)``; names passed as the key argument of a
  ``jax.random`` function; key-named names (``key``, ``rng``, ``*_key``,
  ``prng``, ...) passed in ``rngs={...}``/``rng=`` or as the first argument of
  ``.init(...)``/``.initialize_carry(...)``; key-named names passed to a parameter of a function of this
  module that is itself a key; aliases and loop variables over key arrays.
* **Values** (:class:`Interpreter`): an abstract interpreter over the scope's
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
from typing import Dict, List, Optional, Set, Tuple

from ...analysis.bindings import ASSIGN
from ...analysis.model import Function, SemanticModel
from ...analysis.project import register_exporter
from .consumers import external_folds
from .attrs import body_attribute_reuses, stored_key_reuses
from .interp import Interpreter
from .loops import LOOP_BODIES, closure_reuses, loop_bodies
from .outputs import key_outputs
from ...analysis.liveness import bound_names as target_names
from .states import Budget, Reuse, Use, mentions
from .vocabulary import (CONTAINER_METHODS, DRAWING_LIBRARY_PREFIXES, KEY_FROM_SEED, SEED_KEYWORDS, INITIALIZER_PREFIXES, KEY_FIRST_METHODS, KEY_PRODUCERS, PRODUCER_METHODS, PRODUCER_TERMINALS, RANDOM, RANDOM_NON_CONSUMING,
                         RANDOM_TERMINALS, RNG_KEYWORDS, WRAPPERS, constant_data, functions_mentioning,
                         is_key_like_name, key_argument, mentions_random)

__all__ = ["KeyAnalysis", "key_analysis", "rule_analysis", "Reuse", "Use", "LOOP_BODIES", "WRAPPERS"]


class KeyAnalysis:
    """Key facts of one module; build with :func:`key_analysis`."""

    def __init__(self, model: SemanticModel, text: Optional[str] = None):
        self.model = model
        self._random_q: Dict[int, Optional[str]] = {}
        self._keys: Dict[int, Set[str]] = {}
        self._folded: Dict[Tuple[int, str], bool] = {}
        self._forwards: Dict[Tuple[int, str], Optional[List[tuple]]] = {}
        self._outputs: Dict[Tuple[int, str], Optional[List[tuple]]] = {}
        self._reuses: Optional[List[Reuse]] = None
        self._loop_bodies: Optional[Dict[int, Tuple[str, Optional[str], str]]] = None
        self._text = text if text is not None else getattr(model.source, "text", None)
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
        self.active = bool(self.model.mentions_jax) and (text is None or mentions_random(self.model, text))
        if self.active:
            # which kinds of evidence the text can hold at all (skips work on most calls)
            self._scan_keywords = text is None or "rng" in text
            self._scan_init = text is None or "init" in text
            self._compute_key_names(text)
        self._text = None

    def _markers(self) -> Tuple[str, ...]:
        """Text that any direct key evidence in a function must contain: the local spellings
        of ``jax.random`` and its functions, ``make_rng``, ``rng``-keywords, ``.init(``,
        ``.initialize_carry(`` and initializers."""
        out = {"jax.random", "make_rng", "rng", ".init(", ".init_with_output(", ".initialize_carry(", "initializers",
               "seed=", "random_"}
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

    key_argument = staticmethod(key_argument)

    def initializer(self, f: ast.AST, fn: Function) -> Optional[str]:
        """The initializer a call to ``f`` runs (``nn.initializers.zeros(...)``,
        ``normal(0.02)(...)``, ``init_fn(...)`` with ``init_fn`` bound once to one), by
        qualified name, or None."""
        e = f
        if isinstance(e, ast.Attribute):
            field = self._field_default(e, fn)
            if field is not None:
                e, fn = field
        for _ in range(2):
            if isinstance(e, ast.Name):
                bs = self.model.lookup(e.id, fn)
                if len(bs) == 1 and bs[0].kind == ASSIGN and bs[0].path == ():
                    e = bs[0].value
            if isinstance(e, ast.Call):
                e = e.func
        if not isinstance(e, (ast.Name, ast.Attribute)):
            return None
        q = self.model.qualname(e, fn)
        return q if q is not None and q.startswith(INITIALIZER_PREFIXES) else None

    def _field_default(self, e: ast.Attribute, fn: Function):
        """``self.kernel_init`` read in a method (or a function nested in one) of a class whose
        body declares ``kernel_init: Callable = <default>``: (the default, the scope it is
        evaluated in).  A dataclass-style field (a Flax module's) holds its default unless the
        caller passes another value; None when the class does not declare it."""
        if not isinstance(e.value, ast.Name):
            return None
        s = fn
        while s is not None and s.cls is None:
            s = s.parent
        if s is None or not s.is_method or s.self_name != e.value.id or e.value.id in fn.locals - {s.self_name} \
                or (s is not fn and e.value.id in fn.locals):
            return None
        for stmt in s.cls.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id == e.attr and stmt.value is not None:
                return stmt.value, s.cls.scope
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == e.attr:
                return stmt.value, s.cls.scope
        return None

    def key_names(self, fn: Function) -> Set[str]:
        """Names of ``fn`` that hold PRNG keys (flow-insensitive)."""
        self._ensure()
        return self._keys.get(id(fn), set())

    def only_folded(self, fn: Function, param: str) -> bool:
        """Key parameter ``param`` is only ever used to derive a key per call: through
        ``jax.random.fold_in(param, data)`` with non-constant data (``rng = fold_in(rng,
        state.step)`` first thing in the body, or ``return fold_in(key, hash(name))``), or
        handed on to functions of this module that do so (``derive_key(key, name)``):
        each call derives its own key, so passing the same key on every call repeats nothing."""
        k = (id(fn), param)
        got = self._folded.get(k)
        if got is not None:
            return got
        self._folded[k] = False     # (a recursive chain of helpers: not folded)
        ok = self._folds_first(fn, param)
        if not ok:
            targets = self.forwards(fn, param)
            ok = bool(targets) and all(t[0] == "fold" or (t[0] == "local" and self.only_folded(t[1], t[2]))
                                       for t in targets if not _itself(t, fn, param))
        self._folded[k] = ok
        return ok

    def _folds_first(self, fn: Function, param: str) -> bool:
        body = fn.node.body if isinstance(fn.node.body, list) else []
        for i, stmt in enumerate(body):
            v = getattr(stmt, "value", None)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(v, ast.Call) and v.args \
                    and isinstance(v.args[0], ast.Name) and v.args[0].id == param \
                    and self.random_qualname(v, fn) == "jax.random.fold_in" and not constant_data(v):
                if stmt.targets[0].id == param:
                    return True   # rng = fold_in(rng, step): later reads see the derived key
                # step_key = fold_in(rng, step): the original key must not be read again
                return not any(isinstance(n, ast.Name) and n.id == param
                               for later in body[i + 1:] for n in ast.walk(later))
            if any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(stmt)):
                return False   # read (or rebound) before any fold
        return False

    def forwards(self, fn: Function, param: str) -> Optional[List[tuple]]:
        """Where key parameter ``param`` goes when every read of it in ``fn`` is a plain
        argument of a call: ``("fold",)`` for ``jax.random.fold_in(param, data)`` with
        non-constant data, ``("local", callee, parameter)`` for a function of this module,
        ``("ext", qualname, index, keyword)`` for another module's function.  None when
        the key is used any other way (drawn from, stored, rebound, read by a nested function)."""
        k = (id(fn), param)
        if k not in self._forwards:     # (asked by only_folded, passes_on_folded and via alike)
            self._forwards[k] = self._find_forwards(fn, param)
        return self._forwards[k]

    def _find_forwards(self, fn: Function, param: str) -> Optional[List[tuple]]:
        m = self.model
        if param not in fn.param_nodes or param in fn.locals - set(fn.param_nodes):
            return None
        reads = 0
        for n in ast.walk(fn.node):
            if n.__class__ is ast.Name and n.id == param:
                reads += 1
            elif n.__class__ is ast.Compare and _none_test(n, param):
                reads -= 1      # `if key is None:` looks at the key, draws nothing
        out: List[tuple] = []
        seen = 0
        for call in fn.of_type(ast.Call):
            slots = [(i, None, a) for i, a in enumerate(call.args)] + \
                    [(None, kw.arg, kw.value) for kw in call.keywords]
            for i, kw, a in slots:
                if a.__class__ is ast.Starred and isinstance(a.value, ast.Name) and a.value.id == param:
                    return None
                if not (a.__class__ is ast.Name and a.id == param):
                    continue
                seen += 1
                if kw is None and i is None:
                    return None                                     # **param
                f = call.func
                if self.random_qualname(call, fn) == "jax.random.fold_in" and i == 0 and not constant_data(call):
                    out.append(("fold",))
                    continue
                target = m.resolve_callable(f, fn)
                if target is not None:
                    pairs, unknown = m.bind_arguments(target, call)
                    bound = [q for q, arg in pairs if arg is a]
                    if len(bound) != 1 or unknown:
                        return None
                    out.append(("local", target.function, bound[0]))
                    continue
                q = m.qualname(f, fn) if f.__class__ in (ast.Name, ast.Attribute) else None
                if q is None or q.startswith(RANDOM):
                    return None
                out.append(("ext", q, i, kw))
        return out if out and seen == reads else None

    def param_draws(self, fn: Function, param: str) -> bool:
        """``fn``'s body is known to draw from its key parameter ``param``: some consumption of
        it there samples, splits or folds it, or hands it to a consumer known to draw (a key
        only given to dropout switched off, ``forward(x, rngs={"dropout": key},
        is_training=False)``, is not drawn from)."""
        memo = self.__dict__.setdefault("_param_draws", {})
        k = (id(fn), param)
        got = memo.get(k)
        if got is not None:
            return got
        memo[k] = True   # recursion guard: assume it draws
        # (and the closures that read it: ``def loss_fn(params): ... rngs={"dropout": key}``)
        got = memo[k] = self._drawn_in(fn, param, closure=False)
        return got

    def closure_draws(self, fn: Function, name: str) -> bool:
        """``fn`` (or a function nested in it) draws from ``name``, a key it reads from its
        enclosing scope (a sampler, a split, or a consumer known to draw takes it).
        ``jax.random.fold_in(name, data)`` with non-constant data is no draw from ``name``: it
        derives a key per value of ``data`` (``fold_in(BASE_KEY, step)`` in a jitted step
        called with the loop's step), like a key parameter that is only folded."""
        memo = self.__dict__.setdefault("_closure_draws", {})
        k = (id(fn), name)
        got = memo.get(k)
        if got is not None:
            return got
        memo[k] = False
        text_ok = any(n.__class__ is ast.Name and n.id == name for n in ast.walk(fn.node))
        got = memo[k] = text_ok and name not in fn.locals and self._drawn_in(fn, name, closure=True)
        return got

    def _drawn_in(self, fn: Function, name: str, closure: bool) -> bool:
        """Some call of ``fn``, or of a function nested in it that does not rebind ``name``, draws
        from the key ``name`` (a sampler, a split, or a consumer known to draw takes it); with
        ``closure``, not counting arguments marked as read from an enclosing scope."""
        todo = [fn]
        while todo:
            scope = todo.pop()
            interp = Interpreter(self, scope, {name}, None)
            folded = self._folded_on(scope) if closure else ()
            for call in scope.of_type(ast.Call):
                if id(call) in folded:
                    continue   # ``fold_in(fold_in(KEY, 1), step)``: a step of a per-call derivation
                if any(isinstance(arg, ast.Name) and arg.id == name and (kind != "call" or draws)
                       and not (closure and getattr(arg, "jaxlint_closure", False))
                       and not (closure and kind == "fold_in" and data is None)
                       for arg, kind, data, _callee, _ident, draws in interp.call_info(call)):
                    return True
            todo.extend(c for c in scope.children if name not in c.locals)
        return False

    def _folded_on(self, scope: Function) -> Set[int]:
        """Ids of the ``fold_in`` calls of ``scope`` whose result is folded again with non-constant
        data (``fold_in(fold_in(KEY, 1), step)``, directly or through more constant folds): each is
        only a step of deriving a key per value of that data."""
        folds = [c for c in scope.of_type(ast.Call) if self.random_qualname(c, scope) == "jax.random.fold_in"]
        out: Set[int] = set()
        changed = True
        while changed:
            changed = False
            for c in folds:
                if (not constant_data(c) or id(c) in out) and c.args and isinstance(c.args[0], ast.Call) \
                        and id(c.args[0]) not in out and self.random_qualname(c.args[0], scope) == "jax.random.fold_in":
                    out.add(id(c.args[0]))
                    changed = True
        return out

    def param_reaches_unknown(self, fn: Function, param: str) -> bool:
        """``fn``'s parameter ``param`` is not a key there by any evidence, but reaches a call
        whose effect on a key is unknown (``state.apply_fn(params, batch, rng)`` in a jitted
        step): a key passed there may be drawn from -- a strict-profile consumer."""
        memo = self.__dict__.setdefault("_param_unknown", {})
        k = (id(fn), param)
        got = memo.get(k)
        if got is not None:
            return got
        memo[k] = False
        todo = [fn]
        while todo and not got:
            scope = todo.pop()
            interp = Interpreter(self, scope, {param}, None)
            for call in scope.of_type(ast.Call):
                if any(isinstance(arg, ast.Name) and arg.id == param and kind == "call"
                       for arg, kind, _data, _callee, _ident, _draws in interp.call_info(call)):
                    got = True
                    break
            todo.extend(c for c in scope.children if param not in c.locals)
        memo[k] = got
        return got

    def passes_on_folded(self, fn: Function, param: str, _depth: int = 0) -> bool:
        """:meth:`only_folded`, or every path of the key ends in another project module's
        function that only folds it (read from the project's exported facts)."""
        if self.only_folded(fn, param):
            return True
        targets = self.forwards(fn, param) if _depth < 4 else None
        if not targets:
            return False
        for t in targets:
            if t[0] == "fold" or _itself(t, fn, param):
                continue
            if t[0] == "local":
                if not self.passes_on_folded(t[1], t[2], _depth + 1):
                    return False
            elif not external_folds(self.model.external_facts, t[1], t[2], t[3], _depth + 1):
                return False
        return True

    def via(self, fn: Function, param: str, _depth: int = 0) -> Optional[List[list]]:
        """For the project's exports: the other modules' functions ``param`` is handed to
        (directly or through this module's functions), when that is all ``fn`` does with it
        besides folding; the caller's module resolves them once every module's facts are published."""
        targets = self.forwards(fn, param) if _depth < 4 else None
        if not targets:
            return None
        ext: List[list] = []
        for t in targets:
            if t[0] == "ext" and [t[1], t[2], t[3]] not in ext:
                ext.append([t[1], t[2], t[3]])
            elif t[0] == "local" and not _itself(t, fn, param) and not self.only_folded(t[1], t[2]):
                sub = self.via(t[1], t[2], _depth + 1)
                if not sub:
                    return None
                ext.extend(x for x in sub if x not in ext)
        return ext or None

    def outputs(self, fn: Function, param: str, _depth: int = 0) -> Optional[List[tuple]]:
        """The paths of ``fn``'s result that derive from its key parameter ``param``
        (``outputs.key_outputs``), or None when the key may reach anything else."""
        k = (id(fn), param)
        if k not in self._outputs:
            self._outputs[k] = None       # (recursion: unknown while being computed)
            self._outputs[k] = key_outputs(self, fn, param, _depth)
        return self._outputs[k]

    def splits(self, fn: Function, param: str) -> bool:
        """``fn`` derives keys from its parameter ``param`` with ``jax.random.split`` (the
        summary a caller needs: splitting that key again gives the same subkeys)."""
        for call in fn.of_type(ast.Call):
            if self.random_qualname(call, fn) == "jax.random.split":
                a = key_argument(call)
                if isinstance(a, ast.Name) and a.id == param:
                    return True
        return False

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
            if kws and scan_kw and not (fc is Attribute and term in CONTAINER_METHODS):
                # rngs={"dropout": key}, rng=key (not state.replace(rng=key): stored, not drawn from)
                for kw in kws:
                    v = kw.value
                    vc = v.__class__
                    if vc is Name:
                        arg = kw.arg
                        if (arg in RNG_KEYWORDS or arg == "rngs" or (arg and arg.endswith("_rng"))) \
                                and keylike(v.id):
                            keys.add(v.id)
                    elif vc is Dict_ and kw.arg == "rngs":
                        for x in v.values:
                            if x.__class__ is Name and keylike(x.id):
                                keys.add(x.id)
            if scan_init and call.args and call.args[0].__class__ is Name and keylike(call.args[0].id) \
                    and (fc is Call_ or fc is Name or (fc is Attribute and f.value.__class__ is Name)) \
                    and self.initializer(f, fn) is not None:
                keys.add(call.args[0].id)     # nn.initializers.normal(0.02)(rng, shape), init_fn(rng, shape)
            if term == "Rngs" and call.args and call.args[0].__class__ is Name and keylike(call.args[0].id) \
                    and (self.model.qualname(f, fn) or "").startswith("flax.nnx"):
                keys.add(call.args[0].id)     # nnx.Rngs(key): the module draws its parameters from it
            if term is not None and term.startswith("random_") and call.args and call.args[0].__class__ is Name \
                    and keylike(call.args[0].id) \
                    and (self.model.qualname(f, fn) or "").startswith(DRAWING_LIBRARY_PREFIXES):
                keys.add(call.args[0].id)     # pix.random_flip_left_right(key, image)
            if kws:
                for kw in kws:
                    if kw.arg in SEED_KEYWORDS and kw.value.__class__ is Name and keylike(kw.value.id):
                        keys.add(kw.value.id)     # dist.sample(seed=key)
            if term == "apply" and fc is Attribute and len(call.args) > 1 and call.args[1].__class__ is Name \
                    and keylike(call.args[1].id):
                keys.add(call.args[1].id)     # Haiku's transformed.apply(params, rng, x)
            if scan_init and term in KEY_FIRST_METHODS and fc is Attribute and call.args:
                # model.init(key, x), model.init({"params": key}, x), cell.initialize_carry(key, shape)
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
                keys.update(target_names(t))
        for node in fn.of_type(ast.For, ast.comprehension):
            if self.is_producer(node.iter, fn):
                keys.update(target_names(node.target))
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
        # aliases and loops over key arrays, key parameters of callees, and keys nested
        # functions read from their enclosing scope (a key there too), until nothing changes
        for _round in range(3):
            changed = self._close_closures()
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

    def _close_closures(self) -> bool:
        """A key a nested function reads from its enclosing scope is a key there too."""
        m = self.model
        changed = False
        for fn in m.functions:
            ks = self._keys.get(id(fn))
            if not ks or fn.is_module:
                continue
            for n in ks - fn.locals:
                owner = m.resolve_scope(n, fn.parent)
                if owner is not None and n not in owner.globals_declared:
                    got = self._keys.setdefault(id(owner), set())
                    if n not in got:
                        got.add(n)
                        changed = True
        return changed

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
                        for n in target_names(t):
                            if n not in ks:
                                ks.add(n)
                                grew = True
            for node in fn.of_type(ast.For, ast.comprehension):
                if mentions(node.iter, ks):
                    for n in target_names(node.target):
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

    def _seeds_twice(self, fn: Function) -> bool:
        """``fn`` makes keys from the same literal seed at least twice
        (``normal(PRNGKey(0), ...)`` and ``bernoulli(PRNGKey(0), ...)``)."""
        seen = set()
        for call in fn.of_type(ast.Call):
            if len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Constant) \
                    and type(call.args[0].value) is int and self.random_qualname(call, fn) in KEY_FROM_SEED:
                v = call.args[0].value
                if v in seen:
                    return True
                seen.add(v)
        return False

    # ------------------------------------------------------------ loop bodies
    def loop_bodies(self) -> Dict[int, Tuple[str, Optional[str], str]]:
        """Functions used as the body of a ``lax`` loop primitive (cached):
        id(function) -> (primitive, carry parameter or None, carry return shape)."""
        if self._loop_bodies is None:
            self._loop_bodies = loop_bodies(self.model)
        return self._loop_bodies

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
                if ks or self._seeds_twice(fn):
                    interp = Interpreter(self, fn, ks or set(), body)
                    try:
                        out.extend(interp.run())
                    except (Budget, RecursionError):
                        pass
                if body is not None:
                    out.extend(closure_reuses(self, fn, body[0]))
                    out.extend(body_attribute_reuses(self, fn, body[0]))
            out.extend(stored_key_reuses(self, self.model))
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

# ---------------------------------------------------------------- cache
def export_key_params(model: SemanticModel) -> Dict[str, Dict[str, List[str]]]:
    """For other modules of the project: which parameters of this module's top-level
    functions and methods draw from a key (``key``), and which only derive a key
    per call with ``fold_in(key, step)`` (``folded``).  A caller in another module
    then treats passing a key to them exactly like a call of a local helper."""
    an = key_analysis(model)
    out: Dict[str, Dict[str, List[str]]] = {}
    for fn in model.functions:
        if fn.is_lambda or fn.is_module or fn.parent is None or not fn.parent.is_module:
            continue
        name = f"{fn.cls.name}.{fn.name}" if fn.cls is not None else fn.name
        if model.top_level_function(name) is not fn:
            continue
        kp = an.key_names(fn) & set(fn.param_nodes)
        out[name] = {"key": sorted(kp), "folded": sorted(p for p in kp if an.only_folded(fn, p))}
        split = sorted(p for p in kp if an.splits(fn, p))
        if split:
            out[name]["split"] = split
        via = {p: v for p in sorted(kp) if p not in out[name]["folded"] for v in [an.via(fn, p)] if v}
        if via:
            out[name]["via"] = via
        outs = {p: o for p in sorted(kp) for o in [an.outputs(fn, p)] if o is not None}
        if outs:
            out[name]["outputs"] = {p: [list(t) for t in o] for p, o in outs.items()}
        stored = sorted(p for p in fn.param_nodes if is_key_like_name(p) and p not in kp and _only_stored(fn, p))
        if stored:
            out[name]["stored"] = stored
    return out


def _only_stored(fn: Function, param: str) -> bool:
    """Every read of ``param`` in ``fn`` keeps it in an attribute (``self._init_key = init_key``):
    the function stores the key for later; it draws nothing from it here."""
    reads = stores = 0
    for n in ast.walk(fn.node):
        if n.__class__ is ast.Name and n.id == param and n.ctx.__class__ is ast.Load:
            reads += 1
        elif n.__class__ is ast.Assign and n.value.__class__ is ast.Name and n.value.id == param \
                and all(t.__class__ is ast.Attribute for t in n.targets):
            stores += 1
    return reads > 0 and reads == stores


register_exporter("prng", export_key_params)


def rule_analysis(ctx) -> Optional[KeyAnalysis]:
    """The key analysis a rule checking ``ctx`` works with; None when the module never
    mentions JAX (no key can be in it)."""
    m = ctx.model
    return m.facts(KeyAnalysis) if m.mentions_jax else None


def key_analysis(model: SemanticModel, text: Optional[str] = None) -> KeyAnalysis:
    """The (cached) key analysis of ``model`` (``model.facts(KeyAnalysis)``); the model's
    source text enables a cheap pre-filter (``text`` is accepted for old callers)."""
    return model.facts(KeyAnalysis)


def _none_test(c: ast.Compare, name: str) -> bool:
    """``name is None`` / ``name is not None``: looks at the key, draws nothing."""
    return (len(c.ops) == 1 and c.ops[0].__class__ in (ast.Is, ast.IsNot)
            and c.left.__class__ is ast.Name and c.left.id == name
            and c.comparators[0].__class__ is ast.Constant and c.comparators[0].value is None)


def _itself(target: tuple, fn: Function, param: str) -> bool:
    """A recursive call handing the key to the same parameter: neither draws nor folds."""
    return target[0] == "local" and target[1] is fn and target[2] == param
