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
from typing import Dict, List, Optional, Set, Tuple

from . import knowledge as K
from .bindings import BindingsMixin
from .kinds import ARRAYISH, CONTAINER, JAX, NUMPY, TRACED, KindsMixin
from .names import ImportTable
from .scopes import (CERTAIN, INDEXED, INFERRED, CallTarget, ClassInfo, Function, ScopeIndex, TraceContext,
                     TransformSite)
from .tracedness import TracednessMixin
from .transforms import TransformsMixin

__all__ = [
    "ARRAYISH", "CERTAIN", "CONTAINER", "INDEXED", "INFERRED", "JAX", "NUMPY", "TRACED", "CallTarget",
    "ClassInfo", "Function", "SemanticModel", "TraceContext", "TransformSite",
]


class SemanticModel(ScopeIndex, BindingsMixin, TransformsMixin, KindsMixin, TracednessMixin):
    """The facade rules query.  Its parts live in ``scopes.py`` (index walk, names,
    classes), ``bindings.py``, ``transforms.py`` (transform sites, static
    parameters, propagation), ``kinds.py`` (value kinds) and ``tracedness.py``."""

    def __init__(self, tree: ast.Module, source=None):
        self.tree = tree
        self.source = source
        self.imports = ImportTable()
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
        # per-model results of topic analyses (analysis/keys.py, calls.py, ...):
        # they live and die with the model.  (A module-level WeakKeyDictionary
        # whose values reference the model would keep every model alive.)
        self.cache: Dict[str, object] = {}
        # attribute names declared as static pytree fields somewhere in this module
        self.static_fields: Set[str] = set()
        self._index()
        self.mentions_jax = self.imports.mentions_any(("jax", "flax", "equinox", "optax"))
        if self.mentions_jax:
            self._classify_classes()
            self._find_transforms()
            self._seed_modules()
            self._propagate()
            self._container_arguments()

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
