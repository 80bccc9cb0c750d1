"""The semantic model: which code runs under which JAX transform, and which
values are traced.

Built in three steps over the standard library's ``ast``:

1. **Index** (one walk): every function/lambda becomes a :class:`Function`
   scope holding its own nodes grouped by type (nested function bodies belong
   to the nested scope); classes, imports and module-level bindings are
   recorded.
2. **Transforms**: every decorator and call that applies a transform
   (``jax.jit``, ``jax.vmap``, ``lax.scan`` bodies, ...) marks its target
   function as a traced context with ``certain`` confidence and records which
   parameters are static.  Flax/NNX/Equinox module methods are traced
   contexts with ``inferred`` confidence.
3. **Propagation** (fixpoint): inside each traced function the value kinds
   (traced / JAX array / NumPy array / container) of local names are computed;
   calls from a traced function into functions of the same module make the
   callee a traced context (``inferred``), and a callee's parameter is traced
   only when some traced call site passes a traced value into it.

Rules query the model (:meth:`SemanticModel.qualname`,
:meth:`SemanticModel.kind`, :meth:`Function.is_traced`, ...); they never
re-derive scopes or tracedness themselves.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple, Type, TypeVar

from . import contracts, statics
from . import knowledge as K
from .bindings import BindingsMixin
from .kinds import ARRAYISH, CONTAINER, JAX, NUMPY, TRACED, UNSURE, KindsMixin, proven
from .names import ImportTable, class_like
from .scopes import (CERTAIN, INDEXED, INFERRED, CallTarget, ClassInfo, Function, ScopeIndex, TraceContext,
                     TransformSite)
from .flow import FlowMixin
from .tracedness import TracednessMixin
from .transforms import TransformsMixin

__all__ = [
    "ARRAYISH", "CERTAIN", "CONTAINER", "INDEXED", "INFERRED", "JAX", "NUMPY", "TRACED", "UNSURE", "CallTarget",
    "ClassInfo", "Function", "Seed", "SemanticModel", "TraceContext", "TransformSite", "proven",
]

F = TypeVar("F")


@dataclass(frozen=True)
class Seed:
    """What another module (or the configuration) knows about one function of
    this module: it is traced, which parameters receive traced values and of
    what kind, and why ("called from `train_step` in train.py:42").
    ``transform``: the name of the trace context (``project``, ``config``, or
    the transform applied from the other module, e.g. ``jax.jit``)."""

    qualname: str                       # "helper" or "Class.method"
    traced_params: FrozenSet[str]
    param_kinds: Dict[str, int] = field(default_factory=dict, hash=False)
    description: str = ""
    transform: str = "project"
    # the parameters every call behind this seed leaves falsy or truthy: (those it passes a falsy
    # literal, ``debug=False``; those it passes a falsy literal or nothing, falsy when the callee's
    # default is; the same two for truthy literals, ``use_jax=True``); () for a transform (its
    # calls are unknown)
    untaken: tuple = ()
    # every call behind this seed comes from code traced only by ``grad``/``vmap``-style transforms
    # applied outside any trace (no staging: ``jnp`` on constants gives concrete arrays there)
    unstaged: bool = False


# folders of teaching material (notebooks, tutorials, documentation)
_TUTORIAL_FOLDERS = frozenset({"docs", "doc", "tutorials", "tutorial", "notebooks", "notebook", "colab", "colabs",
                               "examples", "example", "demos", "demo"})
_BENCHMARK_FOLDERS = frozenset({"benchmarks", "benchmark", "benchmarking", "bench"})
# folders a project marks as kept for reference, not maintained
_LEGACY_FOLDERS = frozenset({"legacy", "deprecated", "outdated", "archive", "archived", "old", "attic",
                             "legacy_examples", "unmaintained", "obsolete"})


def _is_main_test(t: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if t.__class__ is not ast.Compare or len(t.ops) != 1 or t.ops[0].__class__ is not ast.Eq:
        return False
    sides = [t.left, t.comparators[0]]
    return any(x.__class__ is ast.Name and x.id == "__name__" for x in sides) \
        and any(x.__class__ is ast.Constant and x.value == "__main__" for x in sides)
# names of functions written as a module's self-check (``regular_test``, ``bench_encoder``):
# when only the module's ``__main__`` block runs them, they are that block's code
_SELF_CHECK_NAME = re.compile(r"^(test|bench|benchmark|profile|demo)(_|$)|_(test|tests|benchmark|bench|demo)$")
# base classes of test cases (``unittest.TestCase``, absltest's and parameterized's)
_TEST_BASES = frozenset({"TestCase", "IsolatedAsyncioTestCase", "parameterized.TestCase"})


def _package_of(module_name: Optional[str], is_package: bool) -> Optional[str]:
    if not module_name:
        return None
    return module_name if is_package else module_name.rpartition(".")[0]


class SemanticModel(ScopeIndex, BindingsMixin, TransformsMixin, KindsMixin, TracednessMixin, FlowMixin):
    """The facade rules query.  Its parts live in ``scopes.py`` (index walk, names,
    classes), ``bindings.py``, ``transforms.py`` (transform sites, static
    parameters, propagation), ``kinds.py`` (value kinds) and ``tracedness.py``."""

    def __init__(self, tree: ast.Module, source=None, *, module_name: Optional[str] = None,
                 is_package: bool = False, seeds: Iterable["Seed"] = (),
                 static_attrs: Iterable[str] = (), static_methods: Iterable[str] = (),
                 static_constants: Iterable[str] = (), data_attrs: Optional[Iterable[str]] = None,
                 plain_methods: Optional[Iterable[str]] = None, local_statics=None):
        """``module_name`` (``pkg.sub.train``; ``is_package`` for an ``__init__.py``)
        resolves relative imports to absolute names; ``seeds`` are what the rest
        of the project knows about this module's functions (see
        :mod:`jaxlint.analysis.project`); ``static_attrs``/``static_methods``: names
        the project's classes declare static, ``static_constants`` the string constants and
        enum members its modules define (:mod:`jaxlint.analysis.statics`); ``local_statics``:
        ``statics.static_names(tree)`` when the caller has it already (the project's index)."""
        self.tree = tree
        self.source = source
        self.module_name = module_name
        self.imports = ImportTable(_package_of(module_name, is_package))
        self.seeds = tuple(seeds)
        # set by the project: qualname -> facts about another module's function (external_facts)
        self.external_resolver = None
        # set by the project: the file's path below the project root
        self.rel_path: Optional[str] = None
        # set by the project: method name -> facts of every project class's method of that name
        self.method_resolver = None
        # set by the project: qualified name -> methods of the project class it names, or None
        self.class_resolver = None
        # set by the project: why this module cannot be imported (an import of a project module
        # that does not exist), or None
        self.unimportable: Optional[str] = None
        self.module = Function(tree, "<module>", "<module>", None, None)
        self.functions: List[Function] = [self.module]
        self.classes: Dict[str, ClassInfo] = {}
        self.class_list: List[ClassInfo] = []
        self.scope_of_node: Dict[int, Function] = {}
        self.function_of_node: Dict[int, Function] = {}
        self.transform_sites: List[TransformSite] = []
        self._transform_calls: List[Tuple[ast.Call, Function]] = []
        self._loggers: Optional[Set[str]] = None
        self._return_kinds: Dict[int, int] = {}
        self._attrs_in_progress: Set[Tuple[int, str]] = set()
        # per-model results of topic analyses (``facts``): they live and die with
        # the model.  (A module-level WeakKeyDictionary whose values reference the
        # model would keep every model alive.)
        self._facts: Dict[type, object] = {}
        # attribute names declared as static pytree fields somewhere in this module
        self.static_fields: Set[str] = set(static_attrs)
        # method names whose result is a Python value (``def num_links(self) -> int``)
        self.static_methods: Set[str] = set(static_methods)
        local_fields, local_methods = statics.static_names(tree) if local_statics is None else local_statics
        self.static_fields |= local_fields
        self.static_methods |= local_methods
        # method names every class defining them declares @staticmethod (the project's, when it
        # passes them, else this module's): ``obj.name`` is one plain function whatever ``obj`` is
        self.plain_methods: Set[str] = set(plain_methods) if plain_methods is not None \
            else statics.plain_method_names(tree)
        # field names the project's pytree classes declare as leaves, and library pytrees' data
        # fields (the project's union when it passes one, else this module's): see kinds._field_kind
        self.data_fields: Set[str] = (set(data_attrs) if data_attrs is not None else statics.data_names(tree)) \
            | statics.LIBRARY_DATA_FIELDS
        # qualified names of string constants and enum members other modules define
        # (``common_types.MODEL_MODE_TRAIN``): comparing with one makes a Python value
        self.static_constants: Set[str] = set(static_constants)
        self._index()
        self.mentions_jax = self.imports.mentions_any(("jax", "flax", "equinox", "optax"))
        if self.mentions_jax or self.seeds or self.imports.mentions_any(contracts.CONTRACT_MODULES):
            self._classify_classes()
            self._find_transforms()
            self._seed_modules()
            contracts.apply_contracts(self)
            self._apply_seeds()
            self._propagate()
            if self._seed_modules(called=True):
                # NNX/Equinox modules run eagerly unless called from traced code: their methods
                # are seeded as traced (a guess, strict unless a transform here applies a module it
                # cannot name) only after the call graph from the real transforms is known, so the
                # guess does not open branches the real callers leave untaken
                self._propagate()
            self._container_arguments()
            self._note_module_application()

    def _note_module_application(self) -> None:
        """Does code a transform traces here apply a module it cannot name -- Flax's
        ``model.apply(variables, x)`` on an unresolved ``model``, or a call of one of its own
        parameters of no class it can name (``model(x)`` under ``nnx.jit``/``eqx.filter_jit``)?  Then this module's
        methods seeded as traced may run under that transform
        (``Function.traced_by_module_seed_only``)."""
        if not self.class_list or not any(c.module_kind for c in self.class_list):
            return
        for fn in self.functions:
            certain = fn.confidence == CERTAIN
            for call in fn.of_type(ast.Call):
                f = call.func
                if certain and f.__class__ is ast.Attribute and f.attr == "apply" \
                        and self.resolve_callable(f, fn) is None:
                    break
                if certain and f.__class__ is ast.Name and f.id in fn.param_nodes \
                        and self.resolve_callable(f, fn) is None:
                    # (a parameter annotated with a module class of this file is that class's
                    # ``__call__``: the call graph says which modules the transform reaches)
                    break
                # ``jax.vmap(model.apply, ...)``: the apply function handed to a transform
                if call.args and call.args[0].__class__ is ast.Attribute and call.args[0].attr == "apply" \
                        and f.__class__ in (ast.Name, ast.Attribute) and self.qualname(f, fn) in K.TRANSFORMS:
                    break
            else:
                continue
            self.module.module_applied_under_trace = True
            return
        self.module.module_applied_eagerly = self._linen_applied_eagerly()

    def _linen_applied_eagerly(self) -> bool:
        """The module applies a linen module eagerly: it calls ``model.init`` or ``model.apply``
        (``model`` made from a linen class of this file, or from an imported class, which may hold
        this file's modules: ``Machine(state_modules=...)``) outside traced code, and
        nothing here applies a module under a transform.  Flax's ``init`` and ``apply`` run the
        module eagerly unless a transform is around them; in a notebook, which shows every call
        its module gets, its module methods are then not known to run traced (the rules' profile
        split asks ``in_tutorial_code`` too: ``checkers.base.eager_module_seeds_strict``)."""
        linen = {c.name for c in self.class_list if c.module_kind == "linen"}
        if not linen:
            return False
        for fn in self.functions:
            if fn.under_trace:
                continue
            for call in fn.of_type(ast.Call):
                f = call.func
                if f.__class__ is not ast.Attribute or f.attr not in ("init", "apply"):
                    continue
                made = f.value
                if made.__class__ is ast.Name:
                    made = self.single_value(made.id, fn) if made.id in fn.locals or fn.is_module else None
                if made.__class__ is ast.Call and (made.func.__class__ is ast.Name and made.func.id in linen
                                                   or class_like(made.func)):
                    return True     # (a module of this file, or an imported one holding this file's)
        return False

    def _apply_seeds(self) -> None:
        """Mark the functions other modules trace (cross-module calls and
        transforms, configured traced functions) as traced contexts."""
        for seed in self.seeds:
            fn = self.top_level_function(seed.qualname)
            if fn is None:
                continue
            params = set(fn.all_params()) - ({fn.self_name} if fn.self_name else set())
            # a parameter annotated or defaulted as Python configuration (``reverse: bool = False``)
            # stays static whatever another module passes
            traced = {p for p in set(seed.traced_params) & params if not self._is_config_param(fn, p)}
            ctx = TraceContext(seed.transform, INFERRED, fn.node, seed.description, untaken=seed.untaken,
                               unstaged=seed.unstaged)
            self._add_context(fn, ctx, traced)
            for p, k in seed.param_kinds.items():
                if p in traced:
                    fn.param_kinds[p] = fn.param_kinds.get(p, 0) | k

    def external_facts(self, qualname: Optional[str]) -> Optional[dict]:
        """What the project knows about a function of another module that this module
        calls (``{"params": [...], exporter: fact, ...}``), or None: not a project
        function, or no project (a file linted on its own)."""
        if qualname is None or self.external_resolver is None:
            return None
        self._read_external = True   # (what was computed from it may be stale: see forget_facts)
        return self.external_resolver(qualname)

    def methods_named(self, name: str) -> Optional[list]:
        """The facts of every project class's method ``name`` (see
        :meth:`~jaxlint.analysis.project.Project.methods_named`), or None."""
        if self.method_resolver is None:
            return None
        self._read_external = True
        return self.method_resolver(name)

    def forget_facts(self) -> None:
        """Drop every cached topic analysis (``facts``) and value kind: they are
        recomputed on demand, with what other modules export by then."""
        if self.__dict__.pop("_read_external", False):
            self._facts.clear()   # facts that never asked another module stay valid
        if self.__dict__.pop("_kinds_read_exports", False):
            # kinds computed before other modules' exports were published read them
            self._forget_values()

    def top_level_function(self, name: str) -> Optional[Function]:
        """A module-level function (``helper``) or a method of a module-level
        class (``Class.method``) by name."""
        if "." in name:
            cls, _, meth = name.partition(".")
            info = self.classes.get(cls)
            return info.methods.get(meth) if info is not None and info.scope is self.module else None
        table = self.__dict__.get("_top_level")
        if table is None:
            table = self.__dict__["_top_level"] = {}
            for fn in self.functions:
                if fn.parent is self.module and not fn.is_lambda:
                    table.setdefault(fn.name, fn)   # the first, as the scan this replaces returned
        return table.get(name)

    # ------------------------------------------------------- facts
    def facts(self, cls: Type[F]) -> F:
        """The per-model instance of a facts class: ``cls(self)``, built on first
        use and kept as long as the model (one per class).  Family analyses
        (``PurityFacts``, ``KeyAnalysis``, ``CallIndex``, ...) are built this way
        so every rule of a file shares one."""
        got = self._facts.get(cls)
        if got is None:
            got = self._facts[cls] = cls(self)
        return got  # type: ignore[return-value]

    def has_facts(self, cls: type) -> bool:
        """Has ``facts(cls)`` been built for this model (tests of laziness)?"""
        return cls in self._facts

    # ------------------------------------------------------- test code
    def in_test_code(self, fn: Optional[Function] = None) -> bool:
        """``fn`` (or the module, without one) is test code: a test module by pytest's and
        unittest's conventions (``test_*.py``, ``*_test.py``, ``conftest.py``, a file under a
        ``tests``/``test`` folder), or a ``test_*`` function, a method of a ``Test*`` class or
        of a ``TestCase``.  Some pitfalls are deliberate there (one key given to two
        computations to compare them) and belong to the strict profile."""
        got = self.__dict__.get("_test_module")
        if got is None:
            folders, base = self._place()
            got = self._test_module = base.startswith("test_") or base.endswith("_test") \
                or base in ("conftest", "tests", "test") or any(p in ("tests", "test", "testing") for p in folders)
        if got or fn is None:
            return got
        s: Optional[Function] = fn
        while s is not None and not s.is_module:
            if s.name.startswith("test") or (s.cls is not None and (
                    s.cls.name.startswith("Test") or any(b.rpartition(".")[2] in _TEST_BASES for b in s.cls.bases))):
                return True
            s = s.parent
        return False

    def in_tutorial_code(self) -> bool:
        """The module is teaching material: a notebook (``.ipynb``, or a jupytext Python notebook),
        or a file under a ``docs``, ``tutorials``, ``notebooks``, ``colab``, ``examples`` or ``demos`` folder of the
        project.  Demonstrations keep one key on purpose to stay short; those findings belong to the strict profile
        (seven read samples: 13 key findings in example scripts, every one judged debatable)."""
        got = self.__dict__.get("_tutorial_module")
        if got is None:
            folders, _base = self._place()
            path = getattr(self.source, "path", None) or ""
            got = self._tutorial_module = path.endswith(".ipynb") or any(p in _TUTORIAL_FOLDERS for p in folders) \
                or self._jupytext_notebook()
        return got

    def _jupytext_notebook(self) -> bool:
        """The file is a notebook kept as Python by jupytext: a ``jupyter:``/``jupytext:`` header
        comment, or ``# %%`` cell markers (three or more)."""
        text = getattr(self.source, "text", None) or ""
        head = text[:2000]
        if "# jupyter:" in head and "jupytext" in head:
            return True
        return sum(1 for line in text.splitlines() if line.startswith("# %%")) >= 3

    def in_smoke_test(self, node: Optional[ast.AST]) -> bool:
        """``node`` sits in the ``if __name__ == "__main__":`` block of a module of a package
        (``nn/embed.py`` under ``nn/__init__.py``): a library module's self-check, run by hand
        (``python -m nn.embed``), not the program a script's main block is.  Also in a
        function of that module named as a self-check (``regular_test``, ``bench_hash_grid``)
        that only the ``__main__`` block refers to: the block's code, written as a function."""
        if node is None or "." not in (self.module_name or ""):
            return False
        line = getattr(node, "lineno", None)
        if line is None:
            return False
        mains = [(stmt.lineno, stmt.end_lineno or stmt.lineno) for stmt in self.tree.body
                 if stmt.__class__ is ast.If and _is_main_test(stmt.test)]
        if not mains:
            return False
        if any(a <= line <= b for a, b in mains):
            return True
        for stmt in self.tree.body:
            if stmt.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) \
                    and stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                if not _SELF_CHECK_NAME.search(stmt.name):
                    return False
                refs = self.name_reads().get(stmt.name, ())
                return bool(refs) and all(any(a <= r <= b for a, b in mains) for r in refs)
        return False

    def name_reads(self) -> Dict[str, List[int]]:
        """Lines where each name is read (``ast.Load``) anywhere in this module (built once, on
        first use)."""
        got = self.__dict__.get("_name_read_lines")
        if got is None:
            got = self._name_read_lines = {}
            for n in ast.walk(self.tree):
                if n.__class__ is ast.Name and n.ctx.__class__ is ast.Load:
                    got.setdefault(n.id, []).append(n.lineno)
        return got

    def in_benchmark_code(self) -> bool:
        """The module is a benchmark: a file under a ``benchmarks``/``benchmark``/``bench`` folder, or one
        named ``bench*``/``benchmark*``.  Benchmarks fix their seeds on purpose (every case, every
        run, the same inputs); key findings there belong to the strict profile."""
        got = self.__dict__.get("_benchmark_module")
        if got is None:
            folders, base = self._place()
            got = self._benchmark_module = base.lower().startswith("bench") \
                or any(p in _BENCHMARK_FOLDERS for p in folders)
        return got

    def in_legacy_code(self) -> bool:
        """The module sits in a folder its project marks as kept for reference (``legacy``,
        ``deprecated``, ``outdated``, ``archive``, ...): code nobody maintains, often broken on
        purpose or on an old API.  Findings there belong to the strict profile."""
        got = self.__dict__.get("_legacy_module")
        if got is None:
            folders, _base = self._place()
            # (``_attic``: a leading underscore marks the folder private, the name is the same)
            got = self._legacy_module = any(p.lstrip("_") in _LEGACY_FOLDERS or p.lstrip("_").startswith("legacy_")
                                            for p in folders)
        return got

    def _place(self) -> Tuple[List[str], str]:
        """(folders, file stem) of the module within its project: the path below the project
        root when the project is known, else the packages of its module name (never the folders
        above the project: a checkout under ~/tests/ is not test code)."""
        path = (self.rel_path or getattr(self.source, "path", None) or "").replace("\\", "/")
        base = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        if self.rel_path:
            folders = [p.lower() for p in self.rel_path.replace("\\", "/").split("/")[:-1]]
        else:
            folders = (self.module_name or "").split(".")[:-1]
        return folders, base

    # ------------------------------------------------------- conveniences
    def loggers(self) -> Set[str]:
        """Names bound to ``logging.getLogger(...)`` results anywhere in the module."""
        if self._loggers is None:
            out: Set[str] = set()
            for fn in self.functions:
                for n in fn.of_type(ast.Assign):
                    if isinstance(n.value, ast.Call) and self.qualname(n.value.func, fn) in K.LOGGER_FACTORIES:
                        for t in n.targets:
                            if isinstance(t, ast.Name):
                                out.add(t.id)
                            elif isinstance(t, ast.Attribute):
                                out.add(t.attr)
            self._loggers = out
        return self._loggers

