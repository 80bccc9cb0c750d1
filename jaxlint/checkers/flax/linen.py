"""What the Flax linen rules ask about a file: which module instance an ``apply`` runs, what its
layers need for the arguments it is given, and the shape of the variables dict passed to it.

Built on the semantic model (classes and their module kinds, scopes and bindings, qualified names,
callables and argument binding); cached per model by ``model.facts(FlaxFacts)``.

* **Apply sites** (:meth:`FlaxFacts.apply_sites`, here): ``model.apply(variables, ...)`` where
  ``model`` is bound once to an instance of a linen module of this file or a Flax layer, and
  ``state.apply_fn(variables, ...)`` where every ``TrainState.create(apply_fn=m.apply, ...)``
  of the file names the same instance; with the instances, the call sites of this file's
  functions and the values their parameters receive.
* **Needs** (:meth:`FlaxFacts.needs`, :mod:`.evaluate`): what the module's layers certainly
  need (an rng stream, a mutable collection) when run with a site's arguments.
* **Variables shapes** (:meth:`FlaxFacts.shape`, :mod:`.variables`): ``"inner"`` for the
  parameter dict itself, ``"full"`` for a variables dict.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Collection, Dict, Iterator, List, Optional, Set, Tuple

from ...analysis import CallTarget, ClassInfo, Function, SemanticModel
from ...analysis import knowledge as K
from ..messages import short
from ..pytree.boundary import stored_callable
from .contracts import INIT_METHODS, MAPS_ARGUMENTS, Layer, layer_for
from .evaluate import RAISES, ModuleEvaluator, Need
from .variables import VariablesShapes


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

    def shown_flags(self) -> List[str]:
        """The module's keywords this call gives as constants, as messages show them
        (`` `train=True` ``)."""
        return [f"`{kw.arg}={short(kw.value, 20)}`" for kw in self.call.keywords
                if kw.arg not in (None, "rngs", "mutable", "method", "variables")
                and isinstance(kw.value, ast.Constant)]


class FlaxFacts(VariablesShapes, ModuleEvaluator):
    """Everything the JAX61x rules ask about one file (see the module docstring)."""

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

    def unpacked_value(self, name: str, fn: Function) -> Optional[Tuple[ast.expr, Function]]:
        """``model, params = init_model(key)``, the only binding of ``name``, where every
        ``return`` of ``init_model`` (a function of this file) is a tuple display: the element at
        ``name``'s position of the one return (when there is one), in ``init_model``'s scope."""
        scope = self.binding_scope(name, fn)
        if scope is None:
            return None
        bs = self.model.bindings(name, scope)
        if len(bs) != 1:
            return None
        return self.unpacked_binding(bs[0], scope)

    def unpacked_binding(self, b, scope: Function) -> Optional[Tuple[ast.expr, Function]]:
        """``unpacked_value`` for one binding ``b`` of a name of ``scope``."""
        bs = [b]
        if bs[0].kind != "=" or not bs[0].path or len(bs[0].path) != 1 or \
                not isinstance(bs[0].value, ast.Call):
            return None
        call = bs[0].value
        if not isinstance(call.func, (ast.Name, ast.Attribute)):
            return None
        target = self.model.resolve_callable(call.func, scope)
        if target is None or target.transforms or target.function.is_lambda or target.function.is_module:
            return None
        rets = target.function.of_type(ast.Return)
        i = bs[0].path[0]
        if len(rets) != 1 or not isinstance(rets[0].value, ast.Tuple) or i >= len(rets[0].value.elts) or \
                any(isinstance(e, ast.Starred) for e in rets[0].value.elts):
            return None
        elt = rets[0].value.elts[i]
        if isinstance(elt, ast.Name):
            inner = self.single_value(elt.id, target.function)
            if inner is not None:
                return inner
        return elt, target.function

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
        q = self.model.qualname(f, scope)
        layer = layer_for(q)
        if layer is not None:
            return Instance(call, scope, layer=layer)
        if q is not None and q.startswith("flax.linen.") and q.rsplit(".", 1)[1][:1].isupper() and \
                q.rsplit(".", 1)[1] not in _NOT_MODULES:
            # a library module (``nn.Sequential([...])``, ``nn.Dense(4)``): a module whose
            # variables are opaque here, known only to be a linen module
            return Instance(call, scope)
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
            sv = self.single_value(expr.id, fn) or self.unpacked_value(expr.id, fn)
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
            if inst is None or (found is not None and not _same_instance(found, inst)):
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
        stored = self.model.self_attr_value(method.cls, expr.attr)
        if stored is None:
            return None
        value, where = stored
        if isinstance(value, ast.Name):
            # self.model = model, a parameter of __init__: what every Trainer(...) of the file passes
            return self.instance(value, where)
        return self.instance_of_ctor(value, where)

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

    def apply_fn_runs_apply(self, state: ast.expr) -> bool:
        """Every ``TrainState.create`` of the file that can have made ``state`` was given a
        module's ``apply`` as ``apply_fn`` (``model.apply``, ``jax.jit(model.apply)``), so
        ``state.apply_fn(v, ...)`` takes the variables dict first; a function of the user's own
        (``def apply_fn(p, x): return model.apply({"params": p}, x)``) takes whatever it is
        written to take."""
        creates = self._creates_for(state)
        if not creates:
            return False
        for call, fn in creates:
            v = next(k for k in call.keywords if k.arg == "apply_fn").value
            if isinstance(v, ast.Call) and len(v.args) == 1 and self._passes_arguments(v, fn):
                v = v.args[0]
            if not (isinstance(v, ast.Attribute) and v.attr == "apply"):
                return False
        return True

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
            if inst is None or (found is not None and not _same_instance(found, inst)):
                return None
            found = inst
        return found

    # ------------------------------------------------------------ apply sites
    def apply_sites(self) -> List[ApplySite]:
        if self._sites is not None:
            return self._sites
        out: List[ApplySite] = []
        if not self.model.imports.mentions_any(("flax",)):
            self._sites = out   # no Flax module can be applied or initialised here
            return out
        for fn in self.model.functions:
            for call in fn.of_type(ast.Call):
                f = call.func
                where = fn
                if isinstance(f, (ast.Name, ast.Attribute)) and not _runs_module(f):
                    bound = self._bound_runner(f, fn)
                    if bound is None:
                        continue
                    f, where = bound   # predict = jax.jit(model.apply); self.apply_fn = model.apply
                if isinstance(f, ast.Call) and len(f.args) == 1 and \
                        isinstance(f.args[0], ast.Attribute) and self._passes_arguments(f, where):
                    f = f.args[0]     # jax.jit(model.apply)(variables, x), jax.vmap(model.apply, ...)(...)
                if not _runs_module(f):
                    continue
                variables = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
                if variables is None:
                    want = "rngs" if f.attr in INIT_METHODS else "variables"
                    variables = next((kw.value for kw in call.keywords if kw.arg == want), None)
                if f.attr == "apply_fn":
                    out.append(ApplySite(call, fn, f.value, "apply_fn", self._state_instance(), variables))
                elif f.attr == "apply" or f.attr in INIT_METHODS:
                    inst = self.instance(f.value, where)
                    if inst is None:
                        continue
                    out.append(ApplySite(call, fn, f.value, f.attr, inst, variables))
        self._sites = out
        return out

    def _bound_runner(self, f: ast.expr, fn: Function) -> Optional[Tuple[ast.expr, Function]]:
        """(value, its scope) when the callable ``f`` -- a name bound once, or ``self.<attr>``
        assigned once in the class's methods -- holds ``model.apply`` itself or a transform of
        it (``predict = jax.jit(model.apply)``); None otherwise."""
        got: Optional[Tuple[ast.expr, Function]] = None
        if isinstance(f, ast.Name) and f.id in fn.param_nodes and self._passes_apply_functions() \
                and not any(b.kind != "param" for b in self.model.bindings(f.id, fn)):
            # ``def loss(params, apply_fn, x): apply_fn(params, x)`` whose every caller here passes
            # a module's apply (``jax.grad(loss)(state.params, state.apply_fn, x)``)
            passed = self.callers().get((id(fn), f.id)) or []
            if passed and all(isinstance(a, ast.Attribute) and a.attr in ("apply", "apply_fn") for a, _ in passed):
                return passed[0]
            return None
        if isinstance(f, ast.Name):
            got = self.single_value(f.id, fn)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            method = fn.enclosing_method()
            if method is None or method.cls is None or method.cls.module_kind is not None \
                    or f.value.id != method.self_name:
                return None
            got = self.model.self_attr_value(method.cls, f.attr)
        if got is None:
            return None
        value, scope = got
        if isinstance(value, ast.Attribute) and value.attr == "apply":
            return got
        if isinstance(value, ast.Call) and len(value.args) == 1 and isinstance(value.args[0], ast.Attribute) \
                and value.args[0].attr == "apply" and self._passes_arguments(value, scope):
            return got
        return None

    def _passes_apply_functions(self) -> bool:
        """The file hands a module's apply on as an argument somewhere (``state.apply_fn,`` or
        ``model.apply)`` in a call): only then can a parameter hold one (a text check first, so
        files that do not never build the call-site index for it)."""
        got = self.__dict__.get("_passes_apply")
        if got is None:
            text = getattr(self.model.source, "text", None)
            got = self.__dict__["_passes_apply"] = text is None or _PASSED_APPLY.search(text) is not None
        return got

    def _passes_arguments(self, wrapper: ast.Call, fn: Function) -> bool:
        """``wrapper`` (``jax.jit(f)``, ``jax.vmap(f, in_axes=...)``, ``jax.pmap(f)``) calls ``f``
        with the arguments it is given (or slices of them along a mapped axis: a stack of
        variables dicts is one variables dict per slice)."""
        tr = K.transform_for(self.model.qualname(wrapper.func, fn))
        return tr is not None and tr.kind in MAPS_ARGUMENTS

    def sites_needing(self, kind: str, ignore: Collection[str] = ()) -> Iterator[Tuple[ApplySite, List[Need]]]:
        """(site, needs) for each apply site (not ``init``) whose module certainly needs something
        of ``kind`` (``rng`` | ``collection``) for its arguments, other than the names in ``ignore``."""
        for site in self.apply_sites():
            if site.method == "init":
                continue
            found = self.needs(site)
            if any(n.kind == RAISES for n in found):
                continue    # the module raises SetAttributeFrozenModuleError first (JAX611)
            needs = [n for n in found if n.kind == kind and n.name not in ignore]
            if needs:
                yield site, needs

    def instance_method(self, func: ast.expr, fn: Function):
        """``trainer.step`` where ``trainer`` is bound once to ``Trainer(...)``, a plain class of
        this module: its method, ``self`` bound (what the model resolves for ``self.step``)."""
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return None
        sv = self.single_value(func.value.id, fn)
        if sv is None or not isinstance(sv[0], ast.Call) or not isinstance(sv[0].func, ast.Name):
            return None
        info = self.model.classes.get(sv[0].func.id)
        if info is None or info.module_kind is not None or self.model.qualname(sv[0].func, sv[1]) or \
                self.binding_scope(sv[0].func.id, sv[1]) is not self.model.module:
            return None
        return _plain_method_target(info, func.attr, self.model)

    def _constructor(self, func: ast.expr, fn: Function) -> Optional[CallTarget]:
        """``Trainer(model)``: the ``__init__`` of a plain class of this module, ``self`` bound."""
        if not isinstance(func, ast.Name) or self.model.qualname(func, fn) is not None:
            return None
        info = self.model.classes.get(func.id)
        if info is None or info.module_kind is not None or self.binding_scope(func.id, fn) is not self.model.module:
            return None
        init = info.methods.get("__init__")
        return CallTarget(init, 1) if init is not None else None

    # ------------------------------------------------------------ call sites
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
                    target = m.resolve_callable(call.func, fn) or self.instance_method(call.func, fn) or \
                        stored_callable(m, call.func, fn) or self._constructor(call.func, fn)
                    if target is None:
                        continue
                    self._call_sites.setdefault(id(target.function), []).append((call, fn, target))
                    pairs, _ = m.bind_arguments(target, call)
                    for p, a in pairs:
                        out.setdefault((id(target.function), p), []).append((a, fn))
            self._callers = out
        return self._callers


# ``state.apply_fn,`` / ``model.apply)``: a module's apply handed on as an argument
_PASSED_APPLY = re.compile(r"\.apply(?:_fn)?\s*[,)]")

# classes of ``flax.linen`` that are not modules
_NOT_MODULES = frozenset({"Module", "Variable", "Partitioned", "LogicallyPartitioned", "FrozenDict", "Scope"})


def _plain_method_target(info: ClassInfo, name: str, model: SemanticModel):
    fn = model.class_method(info, name)
    if fn is None or fn.is_staticmethod or any(
            model.qualname(d, fn.parent) in ("classmethod", "property") for d in fn.decorators
            if isinstance(d, (ast.Name, ast.Attribute))):
        return None
    return CallTarget(fn, 1)


def _runs_module(f: ast.expr) -> bool:
    """``x.apply``, ``x.apply_fn``, ``x.init``: a call that runs (or initialises) a module."""
    return isinstance(f, ast.Attribute) and (f.attr in ("apply_fn", "apply") or f.attr in INIT_METHODS)


def _same_instance(a: Instance, b: Instance) -> bool:
    """Two constructions of one module: the same call, or calls of the same class with the same
    constant arguments (``Net()`` in ``main`` and ``Net()`` in a trainer's ``__init__``)."""
    if a.ctor is b.ctor:
        return True
    if a.info is not b.info or a.layer is not b.layer:
        return False
    consts = all(isinstance(x, ast.Constant) for c in (a.ctor, b.ctor)
                 for x in list(c.args) + [k.value for k in c.keywords])
    return consts and ast.dump(a.ctor) == ast.dump(b.ctor)


def flax_facts(model: SemanticModel) -> FlaxFacts:
    return model.facts(FlaxFacts)
