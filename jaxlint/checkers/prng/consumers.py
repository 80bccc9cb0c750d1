"""What a call does to the keys passed to it (a part of the PRNG interpreter,
:class:`~.interp.Interpreter`): which arguments it consumes, whether it draws
random numbers from them, and which calls only look at a key or draw nothing
(predicates, deterministic Flax layers, abstract-only callees, NNX ``rngs``
streams, functions of other project modules that do not draw from that parameter).
"""
from __future__ import annotations

import ast
from typing import List, Optional

from ...analysis import knowledge as K
from ..messages import short
from .states import DERIVED, contains
from .vocabulary import (DRAWING_OBJECT_METHODS, CONSTANT_INITIALIZERS, CONTAINER_METHODS, DETERMINISTIC_APPLY, DETERMINISTIC_INIT_LAYERS,
                         DRAWING_KEY_FIRST_METHODS, DRAWING_LIBRARY_PREFIXES, KEY_FIRST_METHODS, LOOK_ONLY_METHODS, NNX_RNG_STREAMS,
                         LOWERING_METHODS, SEED_KEYWORDS, NON_CONSUMING, NON_CONSUMING_PREFIXES,
                         PRODUCER_METHODS, RANDOM_NON_CONSUMING, RNG_KEYWORDS, VARIABLE_COLLECTIONS, WRAPPERS, abstract_only, is_key_like_name, key_argument,
                         stores_state)


class KeyCalls:
    """Mixin of :class:`~.interp.Interpreter`: the consumption side of a call."""

    def call_info(self, call: ast.Call) -> list:
        """[(key expression, kind, fold data, callee display)] consumed by ``call``."""
        got = self.call_infos.get(id(call))
        if got is not None:
            return got
        out = self._call_info(call)
        if self.an.random_qualname(call, self.fn) is None:
            # a function of this scope that draws from a key it reads from here
            # (``def loss_fn(p): ... rngs={"dropout": key}``): each call draws from that key
            held = {a.id for a, *_ in out if isinstance(a, ast.Name)}
            out = out + [u for u in self._closure_uses(call) if u[0].id not in held]
        self.call_infos[id(call)] = out
        return out

    def _candidate(self, a: ast.AST) -> bool:
        if isinstance(a, ast.Name):
            return a.id in self.keys
        if isinstance(a, ast.Call):
            return self.seed_vid(a) is not None     # ``normal(jax.random.PRNGKey(0), shape)``
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
            a = key_argument(call)
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
            return [(a, kind, data, q, None, True)]
        # any argument that mentions a key
        args = [a.value if isinstance(a, ast.Starred) else a for a in call.args] + \
               [kw.value for kw in call.keywords]
        cands = []
        for a in args:
            self._collect(a, cands)
        if not cands:
            return []
        f = call.func
        stored = self._stored_in_state(call, cands)
        if stored is not None:
            return stored
        if isinstance(f, ast.Attribute) and (f.attr in CONTAINER_METHODS or f.attr in PRODUCER_METHODS
                                             or f.attr in LOOK_ONLY_METHODS or f.attr.startswith("assert")):
            return []
        if f.__class__ in (ast.Name, ast.Attribute):
            fq = self.m.qualname(f, fn)
            if fq is not None and (fq in NON_CONSUMING or fq.startswith(NON_CONSUMING_PREFIXES)):
                return []
        if f.__class__ in (ast.Name, ast.Attribute) and abstract_only(f.attr if f.__class__ is ast.Attribute else f.id):
            return []       # get_abstract_state(cfg, init_fn, rng): shapes only, nothing drawn
        if self._lowers(f):
            return []       # jax.jit(f).lower(key): traced abstractly to compile, nothing drawn
        if self._abstract_partial(call):
            return []       # init = partial(init_state, ..., rng) only ever evaluated abstractly
        target = self.m.resolve_callable(f, fn)
        if target is None and f.__class__ in (ast.Name, ast.Attribute) \
                and stores_state(f.attr if f.__class__ is ast.Attribute else f.id):
            return []       # restore_checkpoint(dir, state, rng): the key is kept, not drawn from
        init = self.an.initializer(f, self.fn) if target is None else None
        if init is not None and init.rsplit(".", 1)[1] in CONSTANT_INITIALIZERS:
            return []       # nn.initializers.zeros(key, shape) ignores its key
        display = short(f)
        ident = self._callee_identity(f)
        if target is None and f.__class__ in (ast.Name, ast.Attribute):
            q = self.m.qualname(f, fn)
            ext = self.m.external_facts(q)
            if ext is not None and "prng" in ext:
                return _external_uses(call, cands, ext, display, ident, self.m.external_facts)
            if q is None and f.__class__ is ast.Attribute and not f.attr.startswith("__"):
                # a method of an object whose class is not known here: the project's classes that
                # define a method of that name decide -- none of them draws from the key (they
                # only store it), or every one of them does
                impls = [e for e in self.m.methods_named(f.attr) or () if _accepts(e["params"], call, cands)]
                if impls and f.attr not in KEY_FIRST_METHODS \
                        and all(_keeps_key(call, cands, e, self.m.external_facts) for e in impls):
                    return []
                if impls:
                    # the project's methods of that name decide whether it draws (not the name:
                    # a project ``problem.init(key)`` is no Flax ``init``)
                    drawn = all(_draws_key(call, cands, e, self.m.external_facts) for e in impls)
                    return [(c, "call", None, display, ident, drawn) for c in cands
                            if not self._draws_nothing(call, c)]
        if target is not None:
            # a function of this module consumes a key only through a parameter it treats as
            # a key (draws from it, splits it, passes it on to a key consumer)
            callee = target.function
            kp = an.key_params(callee)
            pairs, _ = self.m.bind_arguments(target, call)
            out = []
            for p, a in pairs:
                for c in cands:
                    if _holds(a, c):
                        if p in kp and not an.passes_on_folded(callee, p):
                            out.append((c, "call", None, display, ident, an.param_draws(callee, p)))
                        elif p not in kp and p in callee.param_nodes and an.param_reaches_unknown(callee, p):
                            # not a key there by any evidence, but handed to a callable whose
                            # effect is unknown: may draw (strict)
                            out.append((c, "call", None, display, ident, False))
            # deduplicate (a ``**kwargs`` pairing may list one argument for several parameters)
            seen = set()
            uniq = []
            for item in out:
                if id(item[0]) not in seen:
                    seen.add(id(item[0]))
                    uniq.append(item)
            return uniq
        derived = DERIVED if _derives_per_variable(call) else None
        return [(c, "call", derived, display, ident, self._draws(call, c)) for c in cands
                if not self._draws_nothing(call, c)]

    def _stored_in_state(self, call: ast.Call, cands: list) -> Optional[list]:
        """A key kept as a field of a state for the steps to come: ``TrainingState(...,
        key=rng)`` of a class of this module, ``state.replace(rng=rng)``,
        ``state._replace(key=rng)``.  The state's next step splits it: a ``store`` use, which
        conflicts with a split of the same key here (``split(k, 2)`` repeats ``split(k, 2)``,
        and with JAX's default partitionable threefry ``split(k, n)`` begins with the keys of
        ``split(k, m)``).  None when ``call`` is no such store."""
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr in ("replace", "_replace"):
            pass
        elif isinstance(f, ast.Name) and f.id in self.m.classes and f.id not in self.fn.locals:
            pass
        else:
            return None
        out = []
        for kw in call.keywords:
            if kw.arg is not None and isinstance(kw.value, ast.Name) and any(c is kw.value for c in cands):
                out.append((kw.value, "store", None, short(f) + f"({kw.arg}=...)", None, False))
        return out if out else ([] if isinstance(f, ast.Attribute) else None)

    def _closure_uses(self, call: ast.Call) -> list:
        """Keys of this scope that ``call`` -- of a function defined in this scope, directly or
        through ``jax.grad``/``jit``/``partial`` wrappers -- draws from by reading them from here:
        (a stand-in name node, "call", None, callee, identity, True) each."""
        f = call.func
        if f.__class__ not in (ast.Name, ast.Call, ast.Attribute):
            return []
        if f.__class__ is ast.Attribute and not isinstance(f.value, ast.Call):
            return []
        target = self.m.resolve_callable(f, self.fn)
        if target is None:
            return []
        callee = target.function
        if callee.parent is not self.fn or callee is self.fn:
            return []
        names = [n for n in sorted(self.keys) if n not in callee.locals and self.an.closure_draws(callee, n)]
        if not names:
            return []
        display = short(f)
        ident = self._callee_identity(f)
        return [(closure_stand_in(n, call, callee), "call", None, display, ident, True) for n in names]

    def _lowers(self, f: ast.AST) -> bool:
        """``jax.jit(f).lower``/``.trace`` (or of a name bound to a jitted function): the
        ahead-of-time API traces ``f`` with abstract values -- only the key's shape and type
        are used."""
        if not (isinstance(f, ast.Attribute) and f.attr in LOWERING_METHODS):
            return False
        recv = f.value
        if isinstance(recv, ast.Name):
            recv = self.m.single_value(recv.id, self.fn)
        if not (isinstance(recv, ast.Call) and recv.func.__class__ in (ast.Name, ast.Attribute)):
            return False
        tr = K.transform_for(self.m.qualname(recv.func, self.fn))
        return tr is not None and (tr.jit_like or tr.kind == "pmap")

    def _abstract_partial(self, call: ast.Call) -> bool:
        """``init = functools.partial(f, ..., key)`` where every later use of ``init`` in this
        function is an argument of a callee that only evaluates abstractly
        (``get_abstract_state(cfg, mesh, init)``): the key is never drawn from."""
        f = call.func
        if not (f.__class__ in (ast.Name, ast.Attribute) and self.m.qualname(f, self.fn) == "functools.partial"):
            return False
        stmt = self.stmt
        if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            return False
        name = stmt.targets[0].id
        parents = {}
        for n in ast.walk(self.fn.node):
            for c in ast.iter_child_nodes(n):
                parents[id(c)] = n
        seen_use = False
        # the code that can see this binding: the rest of its block, then the rest of each
        # enclosing block (an ``if``'s other branch excluded), until the name is rebound
        child, up = stmt, parents.get(id(stmt))
        while up is not None:
            if isinstance(up, (ast.For, ast.AsyncFor, ast.While, ast.comprehension, ast.Try, ast.Lambda)) \
                    or up.__class__.__name__ == "TryStar":
                return False   # a loop (earlier code sees it next time round), a try (its handlers)
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(up, field, None)
                if not isinstance(block, list) or child not in block:
                    continue
                for later in block[block.index(child) + 1:]:
                    if isinstance(later, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                             for t in later.targets):
                        return seen_use
                    for n in ast.walk(later):
                        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                            if not self._abstract_argument(n, parents):
                                return False
                            seen_use = True
            if up is self.fn.node:
                break
            child, up = up, parents.get(id(up))
        return seen_use

    @staticmethod
    def _abstract_argument(n: ast.Name, parents: dict) -> bool:
        up = parents.get(id(n))
        if isinstance(up, ast.keyword):
            up = parents.get(id(up))
        if not (isinstance(up, ast.Call) and n is not up.func and up.func.__class__ in (ast.Name, ast.Attribute)):
            return False
        g = up.func
        return abstract_only(g.attr if g.__class__ is ast.Attribute else g.id)

    def _draws_nothing(self, call: ast.Call, key: ast.AST) -> bool:
        """Flax calls known not to draw from ``key``: ``LayerNorm().init(key, x)``
        (a deterministic initialiser), ``apply(..., rngs={"params": key})`` (the
        params stream is drawn only by ``init``), ``apply(..., deterministic=True,
        rngs={"dropout": key})`` (stochastic layers switched off)."""
        f = call.func
        term = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if term.lstrip("_").startswith(("is_", "has_", "check_", "valid")):
            return True       # `scope._is_valid_rng(key)`: a predicate only looks at the key
        q = self.m.qualname(f, self.fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if q is not None and q.startswith("flax.nnx.") and any(
                kw.arg == "rngs" and kw.value is key for kw in call.keywords):
            return True       # NNX takes an `nnx.Rngs` stream there, advanced by every use
        if any(isinstance(kw.value, ast.Constant) and (kw.arg, kw.value.value) in DETERMINISTIC_APPLY
               for kw in call.keywords) and self._dropout_key(call, key):
            return True       # ``forward(x, rngs={"dropout": key}, is_training=False)``: dropout is off
        if not isinstance(f, ast.Attribute):
            return False
        streams = _streams_of(call, key, f.attr)
        if streams and all(s in VARIABLE_COLLECTIONS for s in streams):
            return True       # rngs={"batch_stats": key}: a variable collection, no RNG stream draws it
        if f.attr in ("init", "init_with_output"):
            ctor = f.value
            if isinstance(ctor, ast.Name):   # `module = nn.LayerNorm(); module.init(key, x)`
                ctor = self.m.single_value(ctor.id, self.fn)
            return isinstance(ctor, ast.Call) and self.m.qualname(ctor.func, self.fn) in DETERMINISTIC_INIT_LAYERS
        if f.attr != "apply":
            return False
        for kw in call.keywords:
            if isinstance(kw.value, ast.Constant) and (kw.arg, kw.value.value) in DETERMINISTIC_APPLY:
                return True
            if kw.arg == "rngs" and isinstance(kw.value, ast.Dict) and any(v is key for v in kw.value.values):
                streams = [k.value for k, v in zip(kw.value.keys, kw.value.values)
                           if v is key and isinstance(k, ast.Constant)]
                if streams and all(s == "params" for s in streams):
                    return True
        return False

    @staticmethod
    def _dropout_key(call: ast.Call, key: ast.AST) -> bool:
        """``key`` reaches ``call`` as its dropout stream or rng keyword (``rngs={"dropout": key}``,
        ``rngs=key``, ``dropout_rng=key``, ``rng=key``), not as the key of an ``init``."""
        for kw in call.keywords:
            if kw.value is key and (kw.arg in RNG_KEYWORDS or kw.arg == "rngs"):
                return True
            if kw.arg == "rngs" and isinstance(kw.value, ast.Dict):
                if any(v is key and isinstance(k, ast.Constant) and k.value == "dropout"
                       for k, v in zip(kw.value.keys, kw.value.values)):
                    return True
        return False

    def _draws(self, call: ast.Call, key: ast.AST) -> bool:
        """A call outside this module known to draw from ``key``: ``model.init(key, x)``,
        ``cell.initialize_carry(key, shape)``, ``apply(..., rngs={...: key})``, an initializer
        (``nn.initializers.normal()(key, shape)``, ``init_fn(key, shape)`` with ``init_fn`` one)."""
        f = call.func
        first = call.args[0] if call.args else None
        if isinstance(f, ast.Attribute) and f.attr in DRAWING_KEY_FIRST_METHODS and first is not None \
                and (first is key or (isinstance(first, ast.Dict) and contains(first, key))):
            return True
        if any(kw.arg in SEED_KEYWORDS and kw.value is key for kw in call.keywords):
            return True       # ``dist.sample(seed=key)``: TFP, distrax, numpyro draw from ``seed``
        q = self.m.qualname(f, self.fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if q is not None and (q.startswith(DRAWING_LIBRARY_PREFIXES) or (q in NNX_RNG_STREAMS and first is key)):
            return True       # ``pix.random_contrast(key, image, ...)``; ``nnx.Rngs(key)`` feeds a module's init
        for kw in call.keywords:
            if kw.arg == "rngs" and (kw.value is key or contains(kw.value, key)):
                return True
        if isinstance(f, ast.Attribute) and f.attr == "apply" and len(call.args) > 1 and call.args[1] is key \
                and not self._flax_apply(call):
            return True       # Haiku's ``transformed.apply(params, rng, *args)`` draws from ``rng``
        if first is key and self._library_object_draws(f):
            return True       # ``mcmc.run(key, ...)`` on ``mcmc = numpyro.infer.MCMC(...)``
        return first is key and self.an.initializer(f, self.fn) is not None

    def _flax_apply(self, call: ast.Call) -> bool:
        """``module.apply(variables, *args, method=..., rngs=..., mutable=...)``: Flax's ``apply``
        hands its positional arguments after the variables to the module's method (a key there is
        the method's argument, which may draw from it or not), unlike Haiku's ``apply(params, rng,
        *args)``.  Evidence: a keyword only Flax's ``apply`` takes, or a receiver this scope made
        from a Flax module class of this module."""
        if any(kw.arg in ("method", "mutable", "rngs", "capture_intermediates") for kw in call.keywords):
            return True
        f = call.func
        if isinstance(f.value, ast.Name) and f.value.id in self.fn.locals:
            made = self.m.single_value(f.value.id, self.fn)
            if isinstance(made, ast.Call) and isinstance(made.func, ast.Name):
                info = self.m.classes.get(made.func.id)
                return info is not None and info.module_kind in ("linen", "nnx")
        return False

    def _library_object_draws(self, f: ast.AST) -> bool:
        """``f`` is a method (or the call) of an object this scope made from a library class
        whose method draws from the key it is given first (``DRAWING_OBJECT_METHODS``)."""
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            obj, method = f.value.id, f.attr
        elif isinstance(f, ast.Name):
            obj, method = f.id, "__call__"
        else:
            return False
        made = self.m.single_value(obj, self.fn) if obj in self.fn.locals else None
        if not isinstance(made, ast.Call) or not isinstance(made.func, (ast.Name, ast.Attribute)):
            return False
        return method in DRAWING_OBJECT_METHODS.get(self.m.qualname(made.func, self.fn) or "", ())

    def _callee_identity(self, f: ast.AST) -> str:
        """The function a call runs, seen through ``jax.jit``/``grad``/``partial`` wrappers and
        names bound once to them: ``f(key)`` and ``jax.grad(f)(key)`` (or ``g(key)`` after
        ``g = jax.grad(f)``) evaluate one randomized function with one key."""
        e = f
        for _ in range(6):
            if isinstance(e, ast.Name):
                # ``grad_fn = jax.grad(loss)`` then ``grad_fn(w, key)``: the name's one value
                v = self.m.single_value(e.id, self.fn)
                if isinstance(v, ast.Call):
                    e = v
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


def closure_stand_in(name: str, call: ast.Call, callee) -> ast.Name:
    """A name node standing at ``call`` for the key ``name`` that ``callee`` reads from an enclosing
    scope (no argument to rewrite: the fix leaves it alone)."""
    node = ast.Name(id=name, ctx=ast.Load())
    ast.copy_location(node, call)
    node.end_lineno, node.end_col_offset = call.end_lineno, call.end_col_offset
    node.jaxlint_closure = callee.qualname
    return node


def _derives_per_variable(call: ast.Call) -> bool:
    """``model.init(key, x)``, ``model.init_with_output(...)``, ``model.apply(..., rngs=...)``: a
    library module's entry point, which derives per-variable keys from the key it is given."""
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr in ("init", "init_with_output", "apply")


def _streams_of(call: ast.Call, key: ast.AST, method: str) -> List[str]:
    """The Flax RNG stream names under which ``call`` (``init({...}, x)`` or
    ``apply(..., rngs={...})``) is given ``key``; empty when it is not given in a literal dict."""
    dicts = [kw.value for kw in call.keywords if kw.arg == "rngs"]
    if method in ("init", "init_with_output") and call.args:
        dicts.append(call.args[0])
    out = []
    for d in dicts:
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values):
                if v is key and isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out.append(k.value)
    return out


def _holds(a: ast.expr, c: ast.expr) -> bool:
    """Argument ``a`` is the key expression ``c``, or a dict/tuple/list display holding it."""
    return c is a or (isinstance(a, (ast.Dict, ast.Tuple, ast.List)) and contains(a, c))


def _bind_by_name(call: ast.Call, params: list):
    """``(parameter, argument)`` pairs of a call of another module's function, by position
    and keyword (``params`` as the project exports them); None when a ``*args`` argument
    makes the binding unknown."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    pairs = [(params[i], a) for i, a in enumerate(call.args) if i < len(params)]
    pairs.extend((kw.arg, kw.value) for kw in call.keywords if kw.arg in params)
    return pairs


def _draws(ext: dict, lookup) -> set:
    """The parameters of another module's function that draw from the key they get."""
    via = ext["prng"].get("via", {})
    return {p for p in set(ext["prng"]["key"]) - set(ext["prng"]["folded"])
            if not (p in via and all(external_folds(lookup, q, i, k) for q, i, k in via[p]))}


def _accepts(params: list, call: ast.Call, cands: list) -> bool:
    """A method with these parameters (``self`` left out) can take this call's arguments, each
    key in a parameter named as a key: a plausible target of the call."""
    if len(call.args) > len(params) or not all(kw.arg in params for kw in call.keywords):
        return False
    pairs = [(params[i], a) for i, a in enumerate(call.args)] + [(kw.arg, kw.value) for kw in call.keywords]
    return all(is_key_like_name(p) for p, a in pairs if any(c is a for c in cands))


def _key_parameters(call: ast.Call, cands: list, ext: dict) -> Optional[list]:
    """The parameter of another project function (``ext``: its exported facts) each key
    argument of ``call`` binds to, one each; None when that is not known."""
    pairs = _bind_by_name(call, ext["params"]) if "prng" in ext else None
    if pairs is None:
        return None
    out = []
    for c in cands:
        bound = [p for p, a in pairs if _holds(a, c)]
        if len(bound) != 1:
            return None
        out.append(bound[0])
    return out


def _keeps_key(call: ast.Call, cands: list, ext: dict, lookup) -> bool:
    """One project class's method of the called name takes each key argument in a parameter
    named as a key and only stores it (``def setup(self, task, init_key): self._key = init_key``)."""
    params = _key_parameters(call, cands, ext)
    if params is None:
        return False
    draws = _draws(ext, lookup)
    return all(p not in draws and p in ext["prng"].get("stored", ()) for p in params)


def _draws_key(call: ast.Call, cands: list, ext: dict, lookup) -> bool:
    """One project class's method of the called name draws from every key argument of the
    call (the parameter it binds to is a key there, not only folded, stored or handed on)."""
    params = _key_parameters(call, cands, ext)
    if params is None:
        return False
    draws = _draws(ext, lookup)
    return all(p in draws for p in params)


def _external_uses(call: ast.Call, cands: list, ext: dict, display: str, ident: str, lookup) -> list:
    """A call of another project module's function: like a local helper, it consumes
    a key only through a parameter that draws from it there (``ext``: the facts the
    project exported for it, see ``keys.export_key_params``; ``lookup`` reads other
    functions' facts, for a key it only hands on to one that folds it)."""
    pairs = _bind_by_name(call, ext["params"])
    if pairs is None:
        return [(c, "call", None, display, ident, False) for c in cands]   # unknown binding
    draws = _draws(ext, lookup)
    out, seen = [], set()
    for p, a in pairs:
        if p not in draws:
            continue
        for c in cands:
            if _holds(a, c) and id(c) not in seen:
                seen.add(id(c))
                out.append((c, "call", None, display, ident, True))
    return out


def external_folds(lookup, qualname: str, index: Optional[int], keyword: Optional[str], _depth: int = 0) -> bool:
    """Another project module's function ``qualname`` only derives keys per call from the
    argument at ``index`` (or ``keyword``), by its exported facts (``lookup``: the model's
    ``external_facts``); False when unknown."""
    facts = lookup(qualname)
    if facts is None or "prng" not in facts:
        return False
    params, prng = facts["params"], facts["prng"]
    name = params[index] if index is not None and index < len(params) else keyword
    if name is None:
        return False
    if name in prng["folded"] or name not in prng["key"]:
        return True
    via = prng.get("via", {}).get(name)
    return bool(via) and _depth < 4 and all(external_folds(lookup, q, i, k, _depth + 1) for q, i, k in via)
