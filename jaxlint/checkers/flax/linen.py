"""What the Flax linen rules ask about a file: which module instance an ``apply`` runs, what its
layers need for the arguments it is given, and the shape of the variables dict passed to it.

Built on the semantic model (classes and their module kinds, scopes and bindings, qualified names,
callables and argument binding); cached per model by ``model.facts(FlaxFacts)``.

* **Apply sites** (:meth:`FlaxFacts.apply_sites`): ``model.apply(variables, ...)`` where
  ``model`` is bound once to an instance of a linen module of this file or a Flax layer, and
  ``state.apply_fn(variables, ...)`` where every ``TrainState.create(apply_fn=m.apply, ...)``
  of the file names the same instance.
* **Needs** (:meth:`FlaxFacts.needs`): a small partial evaluator runs the module's method with
  the literal arguments of the apply call (``train=True``), the instance's constructor fields
  and the class defaults, through ``@nn.compact`` bodies, ``setup`` attributes, helper methods
  and submodules of this file.  A layer of :data:`.contracts.LAYERS` whose switch evaluates to
  "on" (``deterministic=False``, ``use_running_average=False``) on a path that certainly runs
  needs its rng stream or its collection; so do ``self.make_rng("dropout")`` and updates of
  ``self.variable("counter", ...).value``.  Anything the evaluator cannot decide (a flag from a
  traced argument, a branch on a config object, a module defined in another file) is not a
  certain need, and rules stay silent on it.
* **Variables shapes** (:meth:`FlaxFacts.shape`): ``"inner"`` for the parameter dict itself
  (``variables["params"]``, ``state.params`` of a ``TrainState`` created with the inner dict),
  ``"full"`` for a variables dict (``model.init(...)``, ``{"params": ...}``), following single
  bindings, shape-preserving calls (``optax.apply_updates``, ``freeze``) and, for parameters
  of functions of this file, every call site.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ...analysis import ClassInfo, Function, SemanticModel
from ...analysis import knowledge as K
from .contracts import (APPLY_KEYWORDS, FALLBACK_STREAM, INIT_METHODS, LAYERS, SHAPE_PRESERVING,
                        Layer)

INNER = "inner"
FULL = "full"


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover
        return "UNKNOWN"


UNKNOWN = _Unknown()
_MAX_DEPTH = 8


@dataclass
class Instance:
    """A module instance: a linen class of this file (``info``) or a Flax layer (``layer``)."""

    ctor: ast.Call
    scope: Function
    info: Optional[ClassInfo] = None
    layer: Optional[Layer] = None

    @property
    def name(self) -> str:
        if self.info is not None:
            return self.info.name
        return self.layer.short if self.layer else "module"


@dataclass
class ApplySite:
    call: ast.Call
    scope: Function
    receiver: ast.expr            # ``model`` in ``model.apply`` / ``state`` in ``state.apply_fn``
    method: str                   # apply | apply_fn | init
    instance: Optional[Instance]
    variables: Optional[ast.expr]  # the first argument

    def keyword(self, name: str) -> Optional[ast.keyword]:
        for kw in self.call.keywords:
            if kw.arg == name:
                return kw
        return None

    @property
    def has_star_kwargs(self) -> bool:
        return any(kw.arg is None for kw in self.call.keywords) or \
            any(isinstance(a, ast.Starred) for a in self.call.args)


@dataclass(frozen=True)
class Need:
    """Something the module needs when applied with a site's arguments."""

    kind: str            # rng | collection
    name: str            # the stream (``dropout``) or the collection (``batch_stats``)
    node: ast.AST        # the layer call, ``make_rng`` call or variable update
    what: str            # how messages name it: "`nn.Dropout`", "`self.make_rng('dropout')`"
    owner: str           # the class whose code holds it


@dataclass
class _Frame:
    info: ClassInfo
    fields: Dict[str, object]
    env: Dict[str, object] = field(default_factory=dict)
    ctors: Dict[str, Tuple[ast.Call, "Function"]] = field(default_factory=dict)
    variables: Dict[str, str] = field(default_factory=dict)   # local name -> collection
    # ``norm = functools.partial(nn.BatchNorm, use_running_average=not train)``
    partials: Dict[str, Tuple[ast.Call, "Function"]] = field(default_factory=dict)


def layer_for(qualname: Optional[str]) -> Optional[Layer]:
    if not qualname or not qualname.startswith("flax.linen."):
        return None
    return LAYERS.get("flax.linen." + qualname.rsplit(".", 1)[1])


def const_str(e: Optional[ast.AST]) -> Optional[str]:
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    return None


def dict_keys(e: ast.AST) -> Optional[Set[str]]:
    """The constant string keys of a dict literal (None if any key is not one, or ``**``)."""
    if not isinstance(e, ast.Dict):
        return None
    out = set()
    for k in e.keys:
        s = const_str(k)
        if s is None:
            return None
        out.add(s)
    return out


class FlaxFacts:
    def __init__(self, model: SemanticModel):
        self.model = model
        self._sites: Optional[List[ApplySite]] = None
        self._creates: Optional[List[Tuple[ast.Call, Function]]] = None
        self._callers: Optional[Dict[Tuple[int, str], List[Tuple[ast.expr, Function]]]] = None
        self._instances: Dict[Tuple[int, int], Optional[Instance]] = {}
        self._call_sites: Dict[int, List[Tuple[ast.Call, Function, object]]] = {}
        self._loaded: Optional[Set[str]] = None

    # ------------------------------------------------------------ bindings
    def binding_scope(self, name: str, fn: Function) -> Optional[Function]:
        return self.model.resolve_scope(name, fn)

    def assignments(self, name: str, scope: Function) -> Optional[List[ast.expr]]:
        """Every value bound to ``name`` in ``scope`` by ``name = value`` (or an element of an
        unpacked tuple display); None when the name is also bound another way (a parameter, a
        loop target, ``+=``, ``with``, ``def``, an element of an opaque value)."""
        values: List[ast.expr] = []
        for b in self.model.bindings(name, scope):
            if b.kind != "=":
                return None
            v = b.element
            if v is None:
                return None
            values.append(v)
        return values or None

    def single_value(self, name: str, fn: Function) -> Optional[Tuple[ast.expr, Function]]:
        scope = self.binding_scope(name, fn)
        if scope is None:
            return None
        values = self.assignments(name, scope)
        if not values or len(values) != 1:
            return None
        return values[0], scope

    # ------------------------------------------------------------ instances
    def instance_of_ctor(self, call: ast.expr, scope: Function) -> Optional[Instance]:
        if not isinstance(call, ast.Call):
            return None
        f = call.func
        if isinstance(f, ast.Name) and not self.model.qualname(f, scope):
            info = self.model.classes.get(f.id)
            if info is not None and info.module_kind == "linen" and self.binding_scope(f.id, scope) is self.model.module:
                return Instance(call, scope, info=info)
            return None
        layer = layer_for(self.model.qualname(f, scope))
        if layer is not None:
            return Instance(call, scope, layer=layer)
        return None

    def instance(self, expr: ast.expr, fn: Function) -> Optional[Instance]:
        """The module instance ``expr`` (``model``, ``MLP()``) holds, if this file shows it."""
        key = (id(expr), id(fn))
        if key in self._instances:
            return self._instances[key]
        self._instances[key] = None
        got = None
        if isinstance(expr, ast.Call):
            got = self.instance_of_ctor(expr, fn)
        elif isinstance(expr, ast.Name):
            sv = self.single_value(expr.id, fn)
            if sv is not None:
                got = self.instance_of_ctor(sv[0], sv[1])
            else:
                got = self._param_instance(expr.id, fn)
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            got = self._attribute_instance(expr, fn)
        self._instances[key] = got
        return got

    def _param_instance(self, name: str, fn: Function) -> Optional[Instance]:
        """The instance a never-rebound parameter surely holds: what every call of this file
        passes (or, for a function nothing here calls, what the paired factory returns)."""
        owner = self.binding_scope(name, fn)
        if owner is None or owner.is_module or len(self.model.bindings(name, owner)) != 1 or \
                name not in owner.param_nodes:
            return None
        sources, _ = self.param_sources(owner, name)
        found: Optional[Instance] = None
        for expr, scope in sources:
            inst = self.instance(expr, scope)
            if inst is None or (found is not None and found.ctor is not inst.ctor):
                return None
            found = inst
        return found

    def param_sources(self, fn: Function, param: str) -> Tuple[List[Tuple[ast.expr, Function]], bool]:
        """(the values ``param`` of ``fn`` receives, paired): every argument the calls of this
        file pass to it (``[]`` when one call leaves it to its default); for a module-level
        function nothing here calls or names, the matching element of what a *paired factory*
        returns -- a module-level function of this file whose every ``return`` is the same tuple
        of names, at least two of which are parameters of ``fn`` in the same order
        (``return model, params`` and ``def predict(model, params, x)``); ``paired`` is True
        then."""
        if fn.is_module or param not in fn.param_nodes:
            return [], False
        sites = self.call_sites(fn)
        if sites:
            got = self.callers().get((id(fn), param), [])
            return (got if len(got) == len(sites) else []), False
        if fn.cls is not None or fn.parent is None or not fn.parent.is_module or \
                isinstance(fn.node, ast.Lambda) or fn.name in self._loaded_names():
            return [], False
        out: List[Tuple[ast.expr, Function]] = []
        for g in self.model.module.children:
            if g is fn or g.cls is not None or isinstance(g.node, ast.Lambda):
                continue
            names = self._returned_names(g)
            if not names or param not in names:
                continue
            common = [p for p in fn.params if p in names]
            if len(common) < 2 or [n for n in names if n in common] != common:
                continue
            i = names.index(param)
            out.extend((r.value.elts[i], g) for r in g.of_type(ast.Return))
        return out, True

    @staticmethod
    def _returned_names(g: Function) -> Optional[List[str]]:
        """The names of the tuple every ``return`` of ``g`` returns (``return model, params``)."""
        names = None
        for r in g.of_type(ast.Return):
            v = r.value
            if not isinstance(v, ast.Tuple) or not all(isinstance(e, ast.Name) for e in v.elts):
                return None
            got = [e.id for e in v.elts]
            if names is not None and got != names:
                return None
            names = got
        if names is None or len(set(names)) != len(names):
            return None
        return names

    def _loaded_names(self) -> Set[str]:
        if self._loaded is None:
            self._loaded = {n.id for n in ast.walk(self.model.module.node)
                            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        return self._loaded

    def _attribute_instance(self, expr: ast.Attribute, fn: Function) -> Optional[Instance]:
        """``self.model`` in a plain class (a trainer) whose methods assign it exactly once."""
        method = fn.enclosing_method()
        if method is None or method.cls is None or method.cls.module_kind is not None \
                or expr.value.id != method.self_name:
            return None
        found = []
        for m in method.cls.methods.values():
            for node in m.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Attribute) and n.attr == expr.attr and \
                                isinstance(n.value, ast.Name) and n.value.id == m.self_name:
                            if not isinstance(node, ast.Assign) or n is not t:
                                return None
                            found.append((node.value, m))
        if len(found) != 1:
            return None
        return self.instance_of_ctor(found[0][0], found[0][1])

    def train_state_creates(self) -> List[Tuple[ast.Call, Function]]:
        """``X.create(apply_fn=..., params=..., ...)`` calls of the file (``TrainState.create``)."""
        if self._creates is None:
            out = []
            for fn in self.model.functions:
                for call in fn.of_type(ast.Call):
                    f = call.func
                    if isinstance(f, ast.Attribute) and f.attr == "create" and \
                            any(kw.arg == "apply_fn" for kw in call.keywords):
                        out.append((call, fn))
            self._creates = out
        return self._creates

    def _state_instance(self) -> Optional[Instance]:
        found: Optional[Instance] = None
        creates = self.train_state_creates()
        if not creates:
            return None
        for call, fn in creates:
            kw = next(k for k in call.keywords if k.arg == "apply_fn")
            v = kw.value
            if not (isinstance(v, ast.Attribute) and v.attr == "apply"):
                return None
            inst = self.instance(v.value, fn)
            if inst is None or (found is not None and found.ctor is not inst.ctor):
                return None
            found = inst
        return found

    # ------------------------------------------------------------ apply sites
    def apply_sites(self) -> List[ApplySite]:
        if self._sites is not None:
            return self._sites
        out: List[ApplySite] = []
        for fn in self.model.functions:
            for call in fn.of_type(ast.Call):
                f = call.func
                if isinstance(f, ast.Call) and len(f.args) == 1 and not f.keywords and \
                        isinstance(f.args[0], ast.Attribute) and self.model.qualname(f.func, fn) == "jax.jit":
                    f = f.args[0]     # jax.jit(model.apply)(variables, x)
                if not isinstance(f, ast.Attribute):
                    continue
                variables = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
                if variables is None:
                    want = "rngs" if f.attr in INIT_METHODS else "variables"
                    variables = next((kw.value for kw in call.keywords if kw.arg == want), None)
                if f.attr == "apply_fn":
                    out.append(ApplySite(call, fn, f.value, "apply_fn", self._state_instance(), variables))
                elif f.attr == "apply" or f.attr in INIT_METHODS:
                    inst = self.instance(f.value, fn)
                    if inst is None:
                        continue
                    out.append(ApplySite(call, fn, f.value, f.attr, inst, variables))
        self._sites = out
        return out

    # ------------------------------------------------------------ variables shapes
    def shape(self, e: Optional[ast.expr], fn: Function, _depth: int = 0,
              _seen: Optional[Set[int]] = None) -> Tuple[Optional[str], bool]:
        """(``inner`` | ``full`` | None, local): ``local`` is False when the answer rests on the
        call sites of a function that other modules could call too."""
        if e is None or _depth > _MAX_DEPTH:
            return None, True
        _seen = _seen if _seen is not None else set()
        if isinstance(e, ast.Subscript):
            if const_str(e.slice) == "params":
                return INNER, True
            return None, True
        if isinstance(e, ast.Dict):
            if "params" in {const_str(k) for k in e.keys if k is not None}:
                return FULL, True
            return None, True
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Attribute) and f.attr in INIT_METHODS:
                if self.instance(f.value, fn) is not None or len(e.args) >= 2:
                    return FULL, True
                return None, True
            if isinstance(f, ast.Call) and isinstance(f.args[0] if f.args else None, ast.Attribute) \
                    and f.args[0].attr in INIT_METHODS and self.model.qualname(f.func, fn) == "jax.jit":
                return FULL, True
            q = self.model.qualname(f, fn)
            pos = SHAPE_PRESERVING.get(q) if q else None
            if pos is not None and len(e.args) > pos:
                return self.shape(e.args[pos], fn, _depth + 1, _seen)
            return None, True
        if isinstance(e, ast.Attribute) and e.attr == "params":
            return self._state_params_shape(_depth, _seen)
        if isinstance(e, ast.Name):
            scope = self.binding_scope(e.id, fn)
            if scope is None:
                return None, True
            if e.id in scope.param_nodes:
                return self._param_shape(scope, e.id, _depth, _seen)
            bindings = self.model.bindings(e.id, scope)
            if not bindings:
                return None, True
            key = id(scope), e.id
            if key in _seen:
                return None, True
            _seen = _seen | {key}
            shapes = set()
            local = True
            for b in bindings:
                if b.kind != "=":
                    return None, True
                v = b.element
                if v is None:
                    # ``params, opt_state = step(params, opt_state, batch)`` where ``step``
                    # returns ``optax.apply_updates(params, ...)`` there: the same dict, updated
                    if b.path and self._passed_back(b.value, b.path, e.id, scope):
                        continue
                    return None, True
                s, loc = self.shape(v, scope, _depth + 1, _seen)
                if s is None:
                    # a self-referencing update (``params = optax.apply_updates(params, u)``)
                    if self._refers_to(v, e.id):
                        continue
                    return None, True
                shapes.add(s)
                local = local and loc
            if len(shapes) == 1:
                return shapes.pop(), local
        return None, True

    def _passed_back(self, call: ast.AST, path: Tuple[int, ...], name: str, scope: Function) -> bool:
        """Whether ``call`` (a function of this file, jitted or not) is given ``name`` and returns,
        at ``path`` of its result on every ``return``, that same argument (through
        shape-preserving calls such as ``optax.apply_updates``)."""
        if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
            return False
        target = self.model.resolve_callable(call.func, scope)
        if target is None or any(getattr(tr, "kind", None) not in ("jit", "pmap") for tr, _ in target.transforms):
            return False
        g = target.function
        for site in self.model.transform_sites:
            if site.is_decorator and site.target is not None and site.target.function is g and \
                    site.transform.kind not in ("jit", "pmap"):
                return False
        pairs, _ = self.model.bind_arguments(target, call)
        params = [p for p, a in pairs if isinstance(a, ast.Name) and a.id == name]
        if len(params) != 1 or g.is_module or isinstance(g.node, ast.Lambda):
            return False
        rets = g.of_type(ast.Return)
        if not rets:
            return False
        for r in rets:
            v = r.value
            for i in path:
                if not isinstance(v, (ast.Tuple, ast.List)) or i >= len(v.elts) or \
                        any(isinstance(x, ast.Starred) for x in v.elts):
                    return False
                v = v.elts[i]
            if not self._same_dict(v, params[0], g, 0):
                return False
        return True

    def _same_dict(self, v: ast.expr, param: str, g: Function, depth: int) -> bool:
        """``v`` in ``g`` is the parameter ``param`` itself or a shape-preserving update of it."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(v, ast.Call):
            q = self.model.qualname(v.func, g) if isinstance(v.func, (ast.Name, ast.Attribute)) else None
            pos = SHAPE_PRESERVING.get(q) if q else None
            return pos is not None and len(v.args) > pos and self._same_dict(v.args[pos], param, g, depth + 1)
        if not isinstance(v, ast.Name) or self.binding_scope(v.id, g) is not g:
            return False
        bs = self.model.bindings(v.id, g)
        if v.id == param:
            rest = [b for b in bs if b.kind != "param"]
            # a rebinding counts when it updates the parameter itself (``p = apply_updates(p, u)``)
            return all(b.kind == "=" and b.element is not None and
                       self._updates(b.element, param, g, depth + 1) for b in rest)
        return len(bs) == 1 and bs[0].kind == "=" and bs[0].element is not None and \
            self._same_dict(bs[0].element, param, g, depth + 1)

    def _updates(self, v: ast.expr, param: str, g: Function, depth: int) -> bool:
        """``v`` is a shape-preserving call chain ending at the name ``param`` itself."""
        while isinstance(v, ast.Call) and depth <= _MAX_DEPTH:
            q = self.model.qualname(v.func, g) if isinstance(v.func, (ast.Name, ast.Attribute)) else None
            pos = SHAPE_PRESERVING.get(q) if q else None
            if pos is None or len(v.args) <= pos:
                return False
            v = v.args[pos]
            depth += 1
        return isinstance(v, ast.Name) and v.id == param

    @staticmethod
    def _refers_to(v: ast.expr, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(v))

    def _state_params_shape(self, depth: int, seen: Set) -> Tuple[Optional[str], bool]:
        shapes = set()
        for call, fn in self.train_state_creates():
            kw = next((k for k in call.keywords if k.arg == "params"), None)
            if kw is None:
                return None, True
            s, _ = self.shape(kw.value, fn, depth + 1, seen)
            if s is None:
                return None, True
            shapes.add(s)
        if len(shapes) == 1:
            return shapes.pop(), True
        return None, True

    def _param_shape(self, fn: Function, param: str, depth: int, seen: Set) -> Tuple[Optional[str], bool]:
        if fn.is_module:
            return None, True
        key = id(fn), param
        if key in seen:
            return None, True
        seen = seen | {key}
        sites, paired = self.param_sources(fn, param)
        if not sites:
            return None, True
        shapes = set()
        for expr, scope in sites:
            s, _ = self.shape(expr, scope, depth + 1, seen)
            if s is None:
                return None, True
            shapes.add(s)
        if len(shapes) != 1:
            return None, True
        # a nested function is called from this file only
        return shapes.pop(), not paired and not fn.parent.is_module

    def call_sites(self, fn: Function) -> List[Tuple[ast.Call, Function, object]]:
        """Every call of this file that resolves to ``fn``: (call, calling scope, CallTarget)."""
        self.callers()
        return self._call_sites.get(id(fn), [])

    def callers(self) -> Dict[Tuple[int, str], List[Tuple[ast.expr, Function]]]:
        """(function, parameter) -> the argument expressions call sites of this file pass."""
        if self._callers is None:
            m = self.model
            out: Dict[Tuple[int, str], List[Tuple[ast.expr, Function]]] = {}
            for fn in m.functions:
                for call in fn.of_type(ast.Call):
                    if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
                        continue
                    target = m.resolve_callable(call.func, fn)
                    if target is None:
                        continue
                    self._call_sites.setdefault(id(target.function), []).append((call, fn, target))
                    pairs, _ = m.bind_arguments(target, call)
                    for p, a in pairs:
                        out.setdefault((id(target.function), p), []).append((a, fn))
            self._callers = out
        return self._callers

    # ------------------------------------------------------------ needs
    def needs(self, site: ApplySite) -> List[Need]:
        """What the module certainly needs when run with this site's arguments."""
        inst = site.instance
        if inst is None or inst.info is None or site.has_star_kwargs:
            return []
        if site.keyword("method") is not None:
            return []
        method = self.model.class_method(inst.info, "__call__")
        if method is None:
            return []
        fields = self._fields(inst.info, inst.ctor, inst.scope, {}, None)
        if fields is None:
            return []
        args = list(site.call.args[1:])
        keywords = {kw.arg: kw.value for kw in site.call.keywords
                    if kw.arg not in APPLY_KEYWORDS and kw.arg != "variables"}
        if site.method in INIT_METHODS:
            return []
        # a flag passed on from a parameter of the enclosing function (``train=train``) takes
        # each literal value the calls of that function give it (or its default)
        choices: Dict[str, List[object]] = {}
        for a in args + list(keywords.values()):
            if isinstance(a, ast.Name) and a.id not in choices:
                got = self.param_literals(a.id, site.scope)
                if got:
                    choices[a.id] = got
        combos: List[Dict[str, object]] = [{}]
        for name, values in choices.items():
            combos = [dict(c, **{name: v}) for c in combos for v in values][:8]
        for combo in combos:
            env = self._bind(method, args, keywords,
                             lambda e: combo.get(e.id, UNKNOWN) if isinstance(e, ast.Name) else _literal(e))
            if env is None:
                return []
            out: List[Need] = []
            self._run(inst.info, method, fields, env, out, 0, set())
            if out:
                return out
        return []

    def param_literals(self, name: str, scope: Function) -> List[object]:
        """The literal values calls of this file give the parameter ``name`` seen from ``scope``
        (the default where a call leaves it out); [] when some call gives something else, when
        the parameter is rebound, or when nothing in this file calls the function."""
        owner = self.model.resolve_scope(name, scope)
        if owner is None or owner.is_module or name not in owner.param_nodes:
            return []
        if any(b.kind != "param" for b in self.model.bindings(name, owner)):
            return []
        sites = self.call_sites(owner)
        if not sites:
            return []
        values: List[object] = []
        for call, _, target in sites:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return []
            pairs, _ = self.model.bind_arguments(target, call)
            given = [a for p, a in pairs if p == name]
            v = _literal(given[0]) if given else (
                _literal(owner.defaults[name]) if name in owner.defaults else UNKNOWN)
            if v is UNKNOWN:
                return []
            if v not in values:
                values.append(v)
        return values

    def _fields(self, info: ClassInfo, ctor: ast.Call, scope: Function, outer_env: Dict[str, object],
                outer: Optional[_Frame]) -> Optional[Dict[str, object]]:
        """Field values of an instance: constructor arguments, then class defaults."""
        order = self._field_order(info)
        values: Dict[str, object] = {}
        for name, default in order:
            values[name] = _literal(default) if default is not None else UNKNOWN
        if any(isinstance(a, ast.Starred) for a in ctor.args) or any(k.arg is None for k in ctor.keywords):
            return None
        for (name, _), a in zip(order, ctor.args):
            values[name] = self._eval(a, outer_env, outer)
        for kw in ctor.keywords:
            values[kw.arg] = self._eval(kw.value, outer_env, outer)
        return values

    def _field_order(self, info: ClassInfo, _seen=None) -> List[Tuple[str, Optional[ast.expr]]]:
        _seen = _seen or set()
        _seen.add(info.name)
        out: List[Tuple[str, Optional[ast.expr]]] = []
        for b in info.bases:
            base = self.model.classes.get(b)
            if base is not None and base.name not in _seen:
                out.extend(self._field_order(base, _seen))
        for stmt in info.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                out = [(n, d) for n, d in out if n != stmt.target.id]
                out.append((stmt.target.id, stmt.value))
        return out

    def _bind(self, method: Function, args: List[ast.expr], keywords: Dict[str, ast.expr], ev) \
            -> Optional[Dict[str, object]]:
        params = method.params[1:] if not method.is_staticmethod else method.params
        env: Dict[str, object] = {}
        if any(isinstance(a, ast.Starred) for a in args):
            return None
        for p in params + method.kwonly:
            d = method.defaults.get(p)
            env[p] = _literal(d) if d is not None else UNKNOWN
        for p, a in zip(params, args):
            env[p] = ev(a)
        for k, v in keywords.items():
            if k in env:
                env[k] = ev(v)
        return env

    def _eval(self, e: Optional[ast.AST], env: Dict[str, object], frame: Optional[_Frame]) -> object:
        if e is None:
            return UNKNOWN
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return env.get(e.id, UNKNOWN)
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and frame is not None \
                and e.value.id == "self":
            return frame.fields.get(e.attr, UNKNOWN)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = self._eval(e.operand, env, frame)
            return UNKNOWN if v is UNKNOWN else (not v)
        if isinstance(e, ast.BoolOp):
            vals = [self._eval(v, env, frame) for v in e.values]
            if isinstance(e.op, ast.And):
                if any(v is not UNKNOWN and not v for v in vals):
                    return False
                return UNKNOWN if any(v is UNKNOWN for v in vals) else all(vals)
            if any(v is not UNKNOWN and v for v in vals):
                return True
            return UNKNOWN if any(v is UNKNOWN for v in vals) else any(vals)
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            a = self._eval(e.left, env, frame)
            b = self._eval(e.comparators[0], env, frame)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            op = e.ops[0]
            try:
                if isinstance(op, (ast.Eq, ast.Is)):
                    return a == b
                if isinstance(op, (ast.NotEq, ast.IsNot)):
                    return a != b
            except Exception:  # pragma: no cover - literals always compare
                return UNKNOWN
            return UNKNOWN
        if isinstance(e, ast.IfExp):
            t = self._eval(e.test, env, frame)
            if t is UNKNOWN:
                a, b = self._eval(e.body, env, frame), self._eval(e.orelse, env, frame)
                return a if a is not UNKNOWN and a == b else UNKNOWN
            return self._eval(e.body if t else e.orelse, env, frame)
        return UNKNOWN

    def _run(self, info: ClassInfo, method: Function, fields: Dict[str, object], env: Dict[str, object],
             out: List[Need], depth: int, active: Set[Tuple[int, int]]) -> None:
        key = (id(method), depth)
        if depth > _MAX_DEPTH or id(method) in {k for k, _ in active}:
            return
        active = active | {key}
        frame = _Frame(info, fields, dict(env))
        self._block(method.node.body, frame, method, True, out, depth, active)

    def _block(self, stmts, frame: _Frame, method: Function, certain: bool, out: List[Need],
               depth: int, active) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                t = self._eval(s.test, frame.env, frame)
                self._exprs(s.test, frame, method, certain, out, depth, active)
                if t is UNKNOWN:
                    self._block(s.body, frame, method, False, out, depth, active)
                    self._block(s.orelse, frame, method, False, out, depth, active)
                    self._forget(s, frame)
                else:
                    self._block(s.body if t else s.orelse, frame, method, certain, out, depth, active)
                continue
            if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                self._exprs(s.iter if not isinstance(s, ast.While) else s.test, frame, method, certain, out,
                            depth, active)
                self._forget(s, frame)
                # a loop over ``self.features`` or ``range(n)`` may run zero times
                self._block(s.body, frame, method, False, out, depth, active)
                self._block(s.orelse, frame, method, False, out, depth, active)
                self._forget(s, frame)
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)):
                self._block(s.body, frame, method, certain, out, depth, active)
                continue
            if isinstance(s, ast.Try):
                self._block(s.body, frame, method, False, out, depth, active)
                for h in s.handlers:
                    self._block(h.body, frame, method, False, out, depth, active)
                self._block(s.orelse, frame, method, False, out, depth, active)
                self._block(s.finalbody, frame, method, certain, out, depth, active)
                self._forget(s, frame)
                continue
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            self._exprs(s, frame, method, certain, out, depth, active)
            if isinstance(s, ast.Assign):
                self._assign(s, frame, method)
            elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                frame.env[s.target.id] = UNKNOWN
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    self._variable_update(t, frame, method, certain, out)
            if isinstance(s, (ast.Return, ast.Raise)):
                return

    def _forget(self, s: ast.stmt, frame: _Frame) -> None:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                frame.env[n.id] = UNKNOWN
                frame.ctors.pop(n.id, None)
                frame.partials.pop(n.id, None)

    def _assign(self, s: ast.Assign, frame: _Frame, method: Function) -> None:
        if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            frame.env[name] = self._eval(s.value, frame.env, frame)
            v = s.value
            if isinstance(v, ast.Call):
                frame.ctors.pop(name, None)
                frame.partials.pop(name, None)
                if self._submodule_kind(v, method) is not None:
                    frame.ctors[name] = (v, method)
                elif self.model.qualname(v.func, method) in K.PARTIAL and v.args and \
                        isinstance(v.args[0], (ast.Name, ast.Attribute)) and \
                        self._submodule_kind(ast.Call(func=v.args[0], args=[], keywords=[]), method) is not None:
                    frame.partials[name] = (v, method)
                coll = self._variable_collection(v, method)
                if coll is not None:
                    frame.variables[name] = coll
            return
        for t in s.targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    frame.env[n.id] = UNKNOWN
                    frame.ctors.pop(n.id, None)
                    frame.partials.pop(n.id, None)

    @staticmethod
    def _variable_collection(call: ast.Call, method: Function) -> Optional[str]:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "variable" and isinstance(f.value, ast.Name) \
                and f.value.id == method.self_name and call.args:
            coll = const_str(call.args[0])
            if coll is not None and coll != "params":
                return coll
        return None

    def _variable_update(self, t: ast.AST, frame: _Frame, method: Function, certain: bool,
                         out: List[Need]) -> None:
        """``v.value = ...`` where ``v = self.variable("counter", ...)`` (here or in setup)."""
        if not (certain and isinstance(t, ast.Attribute) and t.attr == "value"):
            return
        holder = t.value
        coll = None
        if isinstance(holder, ast.Name):
            coll = frame.variables.get(holder.id)
        elif isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name) \
                and holder.value.id == method.self_name:
            setup = self.model.class_method(frame.info, "setup")
            values = self._setup_values(frame.info, holder.attr)
            if setup is not None and len(values) == 1 and isinstance(values[0], ast.Call):
                coll = self._variable_collection(values[0], setup)
        if coll is not None:
            out.append(Need("collection", coll, t, f"`{ast.unparse(t)} = ...`",
                            frame.info.name))

    def _setup_values(self, info: ClassInfo, attr: str, _seen=None) -> List[ast.expr]:
        got = info.setup_attrs.get(attr)
        if got:
            return got
        _seen = _seen or set()
        _seen.add(info.name)
        for b in info.bases:
            base = self.model.classes.get(b)
            if base is not None and base.name not in _seen:
                got = self._setup_values(base, attr, _seen)
                if got:
                    return got
        return []

    def _submodule_kind(self, ctor: ast.Call, scope: Function):
        f = ctor.func
        layer = layer_for(self.model.qualname(f, scope))
        if layer is not None:
            return layer
        if isinstance(f, ast.Name):
            info = self.model.classes.get(f.id)
            if info is not None and info.module_kind == "linen":
                return info
        return None

    def _exprs(self, node: ast.AST, frame: _Frame, method: Function, certain: bool, out: List[Need],
               depth: int, active) -> None:
        for n in _walk_no_defs(node):
            if isinstance(n, ast.Call):
                self._call(n, frame, method, certain, out, depth, active)

    def _call(self, call: ast.Call, frame: _Frame, method: Function, certain: bool, out: List[Need],
              depth: int, active) -> None:
        f = call.func
        selfname = method.self_name
        # self.make_rng("dropout")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == selfname:
            if f.attr == "make_rng":
                stream = const_str(call.args[0]) if call.args else "params"
                if stream is not None and certain:
                    out.append(Need("rng", stream, call, f"`self.make_rng({stream!r})`", frame.info.name))
                return
            if f.attr == "put_variable" and call.args:
                coll = const_str(call.args[0])
                if coll is not None and coll != "params" and certain:
                    out.append(Need("collection", coll, call, f"`self.put_variable({coll!r}, ...)`",
                                    frame.info.name))
                return
            # a submodule made in setup, or a helper method
            values = self._setup_values(frame.info, f.attr)
            if values:
                setup = self.model.class_method(frame.info, "setup")
                if len(values) == 1 and isinstance(values[0], ast.Call) and setup is not None:
                    self._apply_submodule(values[0], setup, call, frame, method, certain, out, depth,
                                          active, ctor_in_setup=True)
                return
            helper = self.model.class_method(frame.info, f.attr)
            if helper is not None and not helper.is_staticmethod:
                keywords = {k.arg: k.value for k in call.keywords if k.arg}
                if any(k.arg is None for k in call.keywords):
                    return
                env = self._bind(helper, list(call.args), keywords,
                                 lambda e: self._eval(e, frame.env, frame))
                if env is None:
                    return
                sub: List[Need] = []
                self._run(frame.info, helper, frame.fields, env, sub, depth + 1, active)
                out.extend(n for n in sub if certain)
            return
        # nn.Dropout(...)(x) / Block(...)(x)
        if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id in frame.partials:
            part, scope = frame.partials[f.func.id]
            merged = ast.Call(func=part.args[0], args=list(part.args[1:]) + list(f.args),
                              keywords=list(part.keywords) + list(f.keywords))
            self._apply_submodule(merged, scope, call, frame, method, certain, out, depth, active)
            return
        if isinstance(f, ast.Call):
            if self._submodule_kind(f, method) is not None:
                self._apply_submodule(f, method, call, frame, method, certain, out, depth, active)
            return
        # drop = nn.Dropout(...); drop(x)
        if isinstance(f, ast.Name) and f.id in frame.ctors:
            ctor, scope = frame.ctors[f.id]
            self._apply_submodule(ctor, scope, call, frame, method, certain, out, depth, active)

    def _apply_submodule(self, ctor: ast.Call, ctor_scope: Function, call: ast.Call, frame: _Frame,
                         method: Function, certain: bool, out: List[Need], depth: int, active,
                         ctor_in_setup: bool = False) -> None:
        kind = self._submodule_kind(ctor, ctor_scope)
        # constructor arguments evaluated where the constructor runs: in setup only fields are known
        ctor_env = {} if ctor_in_setup else frame.env
        if isinstance(kind, Layer):
            if not certain:
                return
            self._layer(kind, ctor, call, frame, ctor_env, out)
        elif isinstance(kind, ClassInfo):
            fields = self._fields(kind, ctor, ctor_scope, ctor_env, frame)
            sub_method = self.model.class_method(kind, "__call__")
            if fields is None or sub_method is None:
                return
            keywords = {k.arg: k.value for k in call.keywords if k.arg}
            if any(k.arg is None for k in call.keywords):
                return
            env = self._bind(sub_method, list(call.args), keywords, lambda e: self._eval(e, frame.env, frame))
            if env is None:
                return
            sub: List[Need] = []
            self._run(kind, sub_method, fields, env, sub, depth + 1, active)
            if certain:
                out.extend(sub)

    def _layer(self, layer: Layer, ctor: ast.Call, call: ast.Call, frame: _Frame, ctor_env, out) -> None:
        def ctor_arg(name: str, pos: Optional[int]) -> Optional[ast.expr]:
            for kw in ctor.keywords:
                if kw.arg == name:
                    return kw.value
            if pos is not None and len(ctor.args) > pos:
                return ctor.args[pos]
            return None

        def call_arg(name: str, pos: Optional[int]) -> Optional[ast.expr]:
            for kw in call.keywords:
                if kw.arg == name:
                    return kw.value
            if pos is not None and len(call.args) > pos + 1:
                return call.args[pos + 1]
            return None

        if any(isinstance(a, ast.Starred) for a in list(ctor.args) + list(call.args)) or \
                any(k.arg is None for k in list(ctor.keywords) + list(call.keywords)):
            return
        switch_expr = call_arg(layer.switch, layer.switch_call_pos)
        switch = self._eval(switch_expr, frame.env, frame) if switch_expr is not None else UNKNOWN
        if switch_expr is None:
            ctor_switch = ctor_arg(layer.switch, layer.switch_field_pos)
            switch = self._eval(ctor_switch, ctor_env, frame) if ctor_switch is not None else UNKNOWN
        if switch is UNKNOWN or switch is None or bool(switch):
            return
        if layer.rate is not None:
            rate_expr = ctor_arg(layer.rate, layer.rate_field_pos)
            rate = self._eval(rate_expr, ctor_env, frame) if rate_expr is not None else layer.rate_default
            if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate == 0:
                return
            if rate is None:
                return
        what = f"`{layer.short}`"
        if layer.stream is not None:
            if layer.explicit_rng and call_arg(layer.explicit_rng, None) is not None:
                return
            stream = layer.stream
            if layer.stream_field:
                s = ctor_arg(layer.stream_field, None)
                if s is not None:
                    stream = const_str(s)
                    if stream is None:
                        return
            out.append(Need("rng", stream, call, what, frame.info.name))
        if layer.collection is not None:
            out.append(Need("collection", layer.collection, call, what, frame.info.name))


def _literal(e: Optional[ast.AST]) -> object:
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        v = _literal(e.operand)
        return UNKNOWN if v is UNKNOWN else (not v)
    return UNKNOWN


def _walk_no_defs(node: ast.AST):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            stack.append(c)


def flax_facts(model: SemanticModel) -> FlaxFacts:
    return model.facts(FlaxFacts)
