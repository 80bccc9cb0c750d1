"""The project: every module under one root, and what crosses between them.

Real JAX code is multi-module: the jitted step lives in ``train.py`` and the
helper with the pitfall in ``utils.py``.  One :class:`Project` indexes the
Python modules under the project root (the nearest ``pyproject.toml``,
``setup.cfg``, ``setup.py`` or ``.git`` above the checked paths), gives each
file its importable module name, and runs a fixpoint over the modules' models:

* a traced function of module A that calls a function of module B with traced
  arguments makes that function traced in B (confidence ``inferred``, the call
  chain in the description: "called from `train_step` in train.py:42");
* a transform applied in A to a function of B (``jax.jit(losses.loss_fn)``)
  makes it traced in B;
* ``[tool.jaxlint] traced-functions`` entries (``"mypkg.losses:*"``,
  ``"mypkg.envs.Env.step"``) make the functions they name traced.

The facts travel as :class:`~jaxlint.analysis.model.Seed` records; each
module's model is rebuilt with its seeds until nothing changes.  Rules ask the
same model questions as before; the answers now cross module boundaries.
"""
from __future__ import annotations

import ast
import gc
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from . import knowledge as K
from .flow import export_static_items, export_static_results
from .narrowing import export_tracer_tests
from .returns import export_flows, export_returned_params
from .model import ARRAYISH, CONTAINER, TRACED, Seed, SemanticModel, proven
from ..cache import digest, file_digest
from ..discovery import ROOT_MARKERS, find_root  # noqa: F401 (the project root: defined with discovery)
from .names import ImportTable
from .statics import data_names, is_staticmethod, module_constants, static_names
from .source import SourceError, SourceFile

# how many rounds of cross-module propagation (call chains deeper than this are rare)
MAX_ROUNDS = 8
# kinds that travel with a traced argument into the callee
_KIND_BITS = TRACED | ARRAYISH | CONTAINER


def module_name_for(path: str, root: Optional[str] = None) -> Tuple[str, bool, str]:
    """``(dotted name, is_package, import folder)`` of a Python file, the way
    Python imports it: the chain of folders holding ``__init__.py`` above the
    file makes the package; the first folder without one (or whose name is no
    identifier) is on ``sys.path``.
    With the project ``root``, a folder without ``__init__.py`` below a package
    is a namespace package (PEP 420: ``maxtext/common/types.py`` under a
    ``maxtext/__init__.py`` is ``maxtext.common.types``)."""
    path = os.path.abspath(path)
    folder, base = os.path.split(path)
    stem = base[:-3] if base.endswith(".py") else base
    is_package = stem == "__init__"
    parts: List[str] = [] if is_package else [stem]
    # (a folder whose name is no identifier -- ``jax-aht`` -- is no package whatever it holds:
    # Python cannot import it by name, so it is the folder on ``sys.path``)
    while os.path.exists(os.path.join(folder, "__init__.py")) and os.path.basename(folder).isidentifier():
        folder, pkg = os.path.split(folder)
        parts.insert(0, pkg)
        if not pkg:
            break
    if root is not None:
        root = os.path.abspath(root)
        top, d = None, folder
        while d.startswith(root + os.sep):   # the top-most package folder above, inside the project
            if os.path.exists(os.path.join(d, "__init__.py")):
                top = d
            d = os.path.dirname(d)
        if top is not None:
            extra = os.path.relpath(folder, os.path.dirname(top)).split(os.sep)
            parts = extra + parts
            folder = os.path.dirname(top)
    return ".".join(parts), is_package, folder


@dataclass(frozen=True)
class Outgoing:
    """A call or transform, in this module, of a function this module does not
    define.  Facts of this module alone (which function of which module it
    reaches is decided by the :class:`Project`), so they can be cached with the
    file's hash and the seeds it was analysed with."""

    qualname: str                            # what the callee resolves to through the imports
    args: Tuple[Tuple[object, int], ...]     # (position or keyword, value kind) per argument
    where: str                               # "train.py:42"
    caller: str                              # "`train_step`"
    transform: Optional[str] = None          # jax.jit(mod.f): the transform applied to it
    static_nums: Tuple[int, ...] = ()
    static_names: Tuple[str, ...] = ()
    unstaged: bool = False                   # the caller does not stage constants (vmap/grad only)


@dataclass
class Module:
    path: str
    name: str
    is_package: bool
    folder: str                         # the import folder (on sys.path)
    source: Optional[SourceFile] = None
    tree: Optional[ast.Module] = None
    error: Optional[str] = None
    # the module's index (what other modules may resolve in it)
    top_functions: Dict[str, List[str]] = field(default_factory=dict)      # name -> params
    classes: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)  # class -> method -> params
    aliases: Dict[str, str] = field(default_factory=dict)                 # top-level import aliases
    static_attrs: List[str] = field(default_factory=list)                 # see analysis/statics.py
    static_methods: List[str] = field(default_factory=list)
    data_attrs: List[str] = field(default_factory=list)                   # pytree fields that are leaves
    staticmethods: List[str] = field(default_factory=list)      # "Class.method" declared @staticmethod
    constants: List[str] = field(default_factory=list)          # string constants, enum members
    # facts other modules read about this module's functions: exporter -> function -> fact
    exports: Dict[str, Dict[str, object]] = field(default_factory=dict)
    indexed: bool = False
    sha: Optional[str] = None           # SHA-1 of the file's bytes (the cache key)
    mentions_jax: bool = False          # the text names a JAX-ecosystem library (worth analysing)
    released: bool = False              # linted and freed: its tree is not read again
    rel: Optional[str] = None           # the path relative to the project root (part of cache keys)
    # a step of the analysis raised on this module (see Project.guarded): why, in one line, and
    # whether it is a jaxlint bug (else: nested past the recursion limit); its facts are left out
    failure: Optional[str] = None
    failure_internal: bool = False


def _params(node: ast.AST) -> List[str]:
    a = node.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


def _index_module(m: Module) -> None:
    """Top-level functions, classes with their methods, and import aliases."""
    imports = ImportTable(_package(m))
    for stmt in m.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            m.top_functions[stmt.name] = _params(stmt)
        elif isinstance(stmt, ast.ClassDef):
            m.classes[stmt.name] = {s.name: _params(s) if is_staticmethod(s) else _params(s)[1:] for s in stmt.body
                                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
            m.staticmethods.extend(f"{stmt.name}.{s.name}" for s in stmt.body
                                   if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_staticmethod(s))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.add(stmt)
    m.aliases = dict(imports.aliases)
    fields, methods = static_names(m.tree)
    m.static_attrs, m.static_methods = sorted(fields), sorted(methods)
    m.data_attrs = sorted(data_names(m.tree))
    m.constants = sorted(module_constants(m.tree))
    m.indexed = True


def _plain_methods(modules) -> frozenset:
    """The method names every project class that defines them declares ``@staticmethod``:
    ``obj.name`` is then one plain function, whatever ``obj`` is."""
    static, other = set(), set()
    for m in modules:
        declared = set(m.staticmethods)
        for cls, methods in m.classes.items():
            for meth in methods:
                (static if f"{cls}.{meth}" in declared else other).add(meth)
    return frozenset(static - other)


def _package(m: Module) -> str:
    return m.name if m.is_package else m.name.rpartition(".")[0]


def index_entry(m: Module) -> Dict[str, object]:
    """A module's index as JSON-able data (the cache entry, and what ``--jobs`` workers send)."""
    return {"functions": m.top_functions, "classes": m.classes, "aliases": m.aliases,
            "static_attrs": m.static_attrs, "static_methods": m.static_methods, "data_attrs": m.data_attrs,
            "constants": m.constants, "staticmethods": m.staticmethods}


def set_index(m: Module, entry: Dict[str, object]) -> None:
    m.top_functions, m.classes, m.aliases = entry["functions"], entry["classes"], entry["aliases"]
    m.static_attrs, m.static_methods = entry.get("static_attrs", []), entry.get("static_methods", [])
    m.data_attrs = entry.get("data_attrs", [])
    m.constants = entry.get("constants", [])
    m.staticmethods = entry.get("staticmethods", [])
    m.indexed = True


class _Serial:
    """The per-module steps of the analysis, run in this process."""

    def __init__(self, project: "Project"):
        self.p = project

    def index(self, mods: List[Module]) -> None:
        for m in mods:
            self.p.guarded("indexing", m, self.p._fingerprint, None)

    def outgoing(self, mods: List[Module]) -> List[List[Outgoing]]:
        return [self.p.guarded("cross-module calls", m, self.p._outgoing_of, []) for m in mods]

    def exports(self, mods: List[Module]) -> List[Dict[str, Dict[str, object]]]:
        return [self.p.guarded("exported facts", m, self.p._exports_of, {}) for m in mods]


class Project:
    """The modules of one project and the seeds that cross between them."""

    def __init__(self, root: str, paths: Iterable[str], traced_functions: Sequence[str] = (),
                 cache=None, loader: Callable[[str], SourceFile] = SourceFile.from_path,
                 bytes_loader: Optional[Callable[[str, bytes], SourceFile]] = None):
        """``cache``: a :class:`jaxlint.cache.Cache` (module indexes and outgoing
        calls are then read from it when the file's bytes are unchanged).
        ``loader``: how a path becomes source text (the workspace passes one that
        also reads notebooks: not importable, but their traced code reaches the
        project's modules)."""
        self.root = os.path.abspath(root)
        self.cache = cache
        self.loader = loader
        # ``loader`` given the bytes already read (the file's hash reads them): one read per file
        self.bytes_loader = bytes_loader
        self.modules: List[Module] = []
        self.by_path: Dict[str, Module] = {}
        self.by_name: Dict[str, List[Module]] = {}
        for p in paths:
            name, is_package, folder = module_name_for(p, self.root)
            if not name:
                continue
            m = Module(os.path.abspath(p), name, is_package, folder)
            self.modules.append(m)
            self.by_path[m.path] = m
            self.by_name.setdefault(name, []).append(m)
        self.traced_functions = list(traced_functions)
        self.seeds: Dict[str, Dict[str, Seed]] = {}
        self.models: Dict[str, SemanticModel] = {}
        self._built_with: Dict[str, Tuple[Seed, ...]] = {}
        self._analysed = False
        self._rounds: Dict[str, int] = {}
        self._static_names: Optional[Dict[str, frozenset]] = None
        self._statics_key: Optional[str] = None
        self._seed_keys: Dict[str, str] = {}
        self._exports_key = ""

    def guarded(self, step: str, m: Module, compute: Callable[[Module], object], default):
        """``compute(m)``, one module's step of the analysis (every driver calls its steps
        through this).  Any exception in it -- a module nested past Python's recursion
        limit, an analysis bug -- marks that module failed (:attr:`Module.failure`, one
        line naming the step) instead of stopping the whole project: the other modules
        are analysed without its facts, and linting it reports the failure."""
        if m.failure is not None:
            return default
        try:
            return compute(m)
        except Exception as exc:
            m.failure_internal = not isinstance(exc, RecursionError)
            m.failure = _failure_line(step, exc)
            self.models.pop(m.path, None)
            self._built_with.pop(m.path, None)
            return default

    # ----------------------------------------------------------- loading
    def _load(self, m: Module, raw: Optional[bytes] = None) -> bool:
        if m.tree is not None or m.error is not None or m.released:
            return m.tree is not None
        try:
            if raw is not None and self.bytes_loader is not None:
                m.source = self.bytes_loader(m.path, raw)
            else:
                m.source = self.loader(m.path)
            m.tree = m.source.parse()
        except SourceError as exc:
            m.error = str(exc)
            return False
        if not m.indexed:
            _index_module(m)
        return True

    def _statics(self) -> Dict[str, frozenset]:
        """The static attribute and method names every class of the project declares."""
        if self._static_names is None:
            self._static_names = {
                "static_attrs": frozenset(a for m in self.modules for a in m.static_attrs),
                "static_methods": frozenset(a for m in self.modules for a in m.static_methods),
                "data_attrs": frozenset(a for m in self.modules for a in m.data_attrs),
                "plain_methods": _plain_methods(self.modules),
                "static_constants": frozenset(f"{m.name}.{c}" for m in self.modules for c in m.constants)}
        return self._static_names

    def _fingerprint(self, m: Module) -> None:
        """Hash the file and read its index from the cache, or parse and index it."""
        try:
            with open(m.path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            m.error = f"cannot read: {exc.strerror or exc}"
            return
        m.sha = file_digest(raw)
        m.mentions_jax = any(w in raw for w in _JAX_WORDS)
        key = digest("index", 4, m.sha, m.name, m.is_package) if self.cache is not None else None
        entry = self.cache.get("index", key) if self.cache is not None else None
        if entry is not None:
            set_index(m, entry)
            return
        if self._load(m, raw) and self.cache is not None:
            self.cache.put("index", key, index_entry(m), m.path)

    def seeds_digest(self, path: str) -> str:
        """A key for what the project knows about ``path`` (part of every cache key):
        its seeds, the project's static names and whether it can be imported."""
        path = os.path.abspath(path)
        got = self._seed_keys.get(path)
        if got is None:
            if self._statics_key is None:
                st = self._statics()
                # (the project's classes, and which define their own truth value, are read by other
                # modules' annotations: kinds.annotation_kind)
                classes = sorted(f"{mod.name}.{c}" + ("!" if "__bool__" in ms or "__len__" in ms else "")
                                 for mod in self.modules for c, ms in mod.classes.items())
                self._statics_key = digest(sorted(st["static_attrs"]), sorted(st["static_methods"]),
                                           sorted(st["static_constants"]), sorted(st["data_attrs"]),
                                           sorted(st["plain_methods"]), classes)
            seeds = self.seeds.get(path, {})
            got = self._seed_keys[path] = digest(self._statics_key, sorted(
                (s.qualname, sorted(s.traced_params), sorted(s.param_kinds.items()), s.description, s.transform,
                 [sorted(u) for u in s.untaken], s.unstaged)
                for s in seeds.values()), self._unimportable().get(path) or "")
        return got

    def cache_key(self, path: str, *extra, sha: Optional[str] = None) -> Optional[str]:
        """The one recipe for cache keys of results about ``path``: its content
        (``sha``: of an edited text; default: the file as read), its place in the
        project, what the project knows about it, and ``extra``.  None when the file
        is not part of the project or was not read."""
        self.analyse()
        m = self.module_for(path)
        return None if m is None else self._key(m, *extra, sha=sha)

    def _key(self, m: Module, *extra, sha: Optional[str] = None) -> Optional[str]:
        sha = sha or m.sha
        if sha is None:
            return None
        if m.rel is None:
            m.rel = os.path.relpath(m.path, self.root)
        return digest(sha, m.rel, self.seeds_digest(m.path), *extra)

    def module_for(self, path: str) -> Optional[Module]:
        return self.by_path.get(os.path.abspath(path))

    def _find_module(self, name: str, near: Module) -> Optional[Module]:
        cands = self.by_name.get(name)
        if not cands:
            return None
        if len(cands) == 1:
            return cands[0]
        same = [c for c in cands if c.folder == near.folder]
        return same[0] if len(same) == 1 else None   # ambiguous: stay silent

    def _resolve(self, qualname: str, near: Module, pick, _depth: int = 0):
        """What ``pick(module, rest)`` finds for a qualified name of something a project module
        defines (``rest``: the parts after the module's name), following re-exports in
        ``__init__.py`` (``from .utils import helper``); None for anything else."""
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            mod = self._find_module(".".join(parts[:cut]), near)
            if mod is None or not (mod.indexed or self._load(mod)):
                continue
            rest = parts[cut:]
            got = pick(mod, rest)
            if got is not None:
                return got
            alias = mod.aliases.get(rest[0])
            if alias and _depth < 4 and alias != qualname:
                return self._resolve(".".join([alias] + rest[1:]), mod, pick, _depth + 1)
            return None
        return None

    def resolve_function(self, qualname: str, near: Module) -> Optional[Tuple[Module, str, List[str]]]:
        """``(module, "func" or "Class.method", params)`` for a qualified name of
        a function defined in a project module, following re-exports in
        ``__init__.py`` (``from .utils import helper``)."""
        def pick(mod: Module, rest: List[str]):
            if len(rest) == 1 and rest[0] in mod.top_functions:
                return mod, rest[0], mod.top_functions[rest[0]]
            if len(rest) == 2 and rest[1] in mod.classes.get(rest[0], {}):
                return mod, ".".join(rest), mod.classes[rest[0]][rest[1]]
            return None
        return self._resolve(qualname, near, pick)

    def _unimportable(self) -> Dict[str, str]:
        """Modules that cannot be imported, by path, with why: a top-level import of a module of
        the project's own packages that the project does not have (``from ..background.background
        import X`` with no ``background`` package beside it), or of such a module.  Nothing in
        them runs."""
        got = self.__dict__.get("_unimportable_memo")
        if got is not None:
            return got
        names = set(self.by_name)
        packages = {".".join(n.split(".")[:i]) for n in names for i in range(1, n.count(".") + 1)}
        known = names | packages

        def target(q: str) -> Tuple[Optional[str], Optional[str]]:
            """(the project module ``q`` imports from, the first missing module) -- one of them.
            ``q`` is what a top-level import binds: its last part may be a name the module
            defines (``from jax_fem import logger``), so only the parts before it must be modules."""
            parts = q.split(".")
            if parts[0] not in packages or len(parts) < 3:
                return None, None           # not an import of a submodule of the project's own packages
            for cut in range(len(parts) - 1, 1, -1):
                p = ".".join(parts[:cut])
                if p in known:
                    if cut < len(parts) - 1 and p in names and p not in packages:
                        return None, ".".join(parts[:cut + 1])   # a submodule of a plain module
                    return p, None
            return (None, ".".join(parts[:2])) if len(parts) > 2 else (None, None)

        def built(m: Module, missing: str) -> bool:
            """The missing module may exist once the project is built or installed: a private
            name (``_version``, ``_C``: generated or compiled), or a compiled or Cython file of
            that name in the folder where it would be."""
            leaf = missing.rsplit(".", 1)[-1]
            if leaf.startswith("_"):
                return True
            parent = self.by_name.get(missing.rsplit(".", 1)[0])
            folder = os.path.dirname(parent[0].path) if parent else None
            try:
                return folder is not None and any(f.startswith(leaf + ".") and not f.endswith(".py")
                                                  for f in os.listdir(folder))
            except OSError:
                return True

        def on_disk(missing: str) -> bool:
            """The module is a file or folder under the project root (or its ``src``), where Python
            finds it when the root is on ``sys.path`` -- a script run from the root -- whatever
            this project's own module names say (a root folder with an ``__init__.py`` of its own
            gives its modules names that start with the folder's)."""
            rel = missing.replace(".", os.sep)
            for base in (self.root, os.path.join(self.root, "src")):
                path = os.path.join(base, rel)
                if os.path.isfile(path + ".py") or os.path.isdir(path):
                    return True
            return False

        out: Dict[str, str] = {}
        for m in self.modules:
            for q in m.aliases.values():
                found, missing = target(q)
                if missing is not None and missing.rsplit(".", 1)[0] in packages and not built(m, missing) \
                        and not on_disk(missing):
                    out[m.path] = f"it imports `{missing}`, which the project does not have"
                    break
        bad = {m.name: m for m in self.modules if m.path in out}
        changed = True
        while changed:
            changed = False
            for m in self.modules:
                if m.path in out:
                    continue
                for q in m.aliases.values():
                    found, _missing = target(q)
                    if found in bad and bad[found] is not m:
                        out[m.path] = f"it imports `{found}`, which cannot be imported ({out[bad[found].path]})"
                        bad[m.name] = m
                        changed = True
                        break
        if all(m.indexed or m.error is not None for m in self.modules):
            self._unimportable_memo = out    # (else asked before the index was complete: ask again)
        return out

    def resolve_class(self, qualname: str, near: Module) -> Optional[Dict[str, List[str]]]:
        """The methods (name -> parameters) of the class ``qualname`` names from ``near``, a
        class defined in a project module (re-exports followed); None for anything else."""
        return self._resolve(qualname, near,
                             lambda mod, rest: mod.classes[rest[0]] if len(rest) == 1 and rest[0] in mod.classes
                             else None)

    # ------------------------------------------------------------ models
    def seeds_for(self, path: str) -> Tuple[Seed, ...]:
        """What the rest of the project knows about the functions of ``path``."""
        self.analyse()
        return tuple(self.seeds.get(os.path.abspath(path), {}).values())

    def _build(self, m: Module) -> Optional[SemanticModel]:
        if not self._load(m):
            return None
        seeds = tuple(self.seeds.get(m.path, {}).values())
        model = self._new_model(m, m.tree, m.source, seeds)
        self.models[m.path] = model
        self._built_with[m.path] = seeds
        return model

    def _new_model(self, m: Module, tree: ast.Module, source: SourceFile, seeds) -> SemanticModel:
        """A model of module ``m`` with what the project knows: seeds, static names, exported facts."""
        # (the index computed this tree's own static names already)
        local = (set(m.static_attrs), set(m.static_methods)) if tree is m.tree and m.indexed else None
        model = SemanticModel(tree, source, module_name=m.name, is_package=m.is_package, seeds=seeds,
                              local_statics=local, **self._statics())
        model.external_resolver = lambda q: self.external_facts(q, m)
        model.method_resolver = self.methods_named
        model.class_resolver = lambda q: self.resolve_class(q, m)
        model.unimportable = self._unimportable().get(m.path)
        model.rel_path = os.path.relpath(m.path, self.root)
        return model

    def _model_of(self, m: Module) -> Optional[SemanticModel]:
        model = self.models.get(m.path)
        if model is not None and self._built_with.get(m.path) == tuple(self.seeds.get(m.path, {}).values()):
            return model
        return self._build(m)

    def model_for(self, path: str) -> Optional[SemanticModel]:
        """The model of ``path`` (as it is on disk) with everything the project knows about it."""
        self.analyse()
        m = self.module_for(path)
        return self._model_of(m) if m is not None else None

    def model_for_source(self, source: SourceFile, tree: Optional[ast.Module] = None) -> SemanticModel:
        """The model of ``source`` (a file of the project, possibly edited: a fix
        pass, an editor buffer) with the project's seeds for its path.  The model
        built during the analysis is reused when the text is the same."""
        self.analyse()
        m = self.module_for(source.path)
        if m is None:
            return SemanticModel(tree if tree is not None else source.parse(), source)
        model = self.models.get(m.path)
        if (model is not None and model.source is not None and model.source.text == source.text
                and self._built_with.get(m.path) == self.seeds_for(m.path)):
            model.source = source
            return model
        if tree is None and m.tree is not None and m.source is not None and m.source.text == source.text:
            tree = m.tree   # parsed for the index: the same text
        return self._new_model(m, tree if tree is not None else source.parse(), source, self.seeds_for(m.path))

    def release(self, path: str) -> None:
        """Forget a module's model and parsed tree (after its file was linted)."""
        path = os.path.abspath(path)
        self.models.pop(path, None)
        self._built_with.pop(path, None)
        m = self.by_path.get(path)
        if m is not None and self._analysed:
            m.tree = m.source = None
            m.released = True

    # ---------------------------------------------------------- fixpoint
    def analyse(self, driver=None) -> None:
        if self._analysed:
            return
        self._analysed = True
        # Many syntax trees and models stay alive during the analysis: the cyclic garbage
        # collector would traverse them again and again as they are allocated (it made the
        # analysis of jax/flax/optax 4x slower); pause it, as the engine does for one file.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._analyse(driver)
        finally:
            if was_enabled:
                gc.enable()

    def _analyse(self, driver=None) -> None:
        """The fixpoint.  ``driver`` does the per-module work (index, outgoing calls,
        exports) for a list of modules: this process by default, or the worker processes
        of ``--jobs`` (:mod:`jaxlint.jobs`).  Each step depends on nothing but the module
        and the seeds it is given, so every driver reaches the same seeds and exports."""
        driver = driver or _Serial(self)
        self.__dict__.pop("_method_index", None)
        driver.index(self.modules)
        dirty = {m.path for m in self.modules if m.mentions_jax and m.error is None}
        for m in self.modules:
            if self._config_seeds(m):
                dirty.add(m.path)
        for _round in range(MAX_ROUNDS):
            if not dirty:
                break
            # every dirty module's calls under the seeds it has at the start of the round
            # (a seed planted in this round is seen in the next one, whatever the order)
            mods = [self.by_path[p] for p in sorted(dirty)]
            changed = set()
            for m, found in zip(mods, driver.outgoing(mods)):
                for out in found:
                    planted = self._plant(m, out)
                    if planted is not None and self._add_seed(*planted):
                        changed.add(planted[0].path)
            dirty = changed
        # each module's exports are computed with no other module's exports published (facts of
        # the module alone, cached as such, the same in any order), then all are published
        mods = [m for m in self.modules if m.error is None and (m.mentions_jax or m.path in self.seeds)]
        for m, exports in zip(mods, driver.exports(mods)):
            m.exports = exports
        # (the classes and their methods' parameters too: ``methods_named`` answers from them)
        self._exports_key = digest([sorted((m.path, m.exports) for m in self.modules if m.exports),
                                    sorted((m.path, m.classes) for m in self.modules if m.classes)])

    def _exports_of(self, m: Module) -> Dict[str, Dict[str, object]]:
        """What the registered exporters say about ``m``'s functions (cached like outgoing calls)."""
        if not EXPORTERS:
            return {}
        key = self._key(m, "exports", sorted(EXPORTERS)) if self.cache is not None else None
        if self.cache is not None and key is not None:
            entry = self.cache.get("exports", key)
            if entry is not None:
                return entry
        model = self._model_of(m)
        if model is None:
            return {}
        out = {name: exporter(model) for name, exporter in sorted(EXPORTERS.items())}
        model.forget_facts()   # computed before every module's exports were known: recompute when linting
        out = {k: v for k, v in out.items() if v}
        if self.cache is not None and key is not None:
            self.cache.put("exports", key, out, m.path)
        return out

    def external_facts(self, qualname: str, near: Module) -> Optional[Dict[str, object]]:
        """What the project knows about the function ``qualname`` names from ``near``
        (a function of another project module): its parameters and each exporter's fact."""
        found = self.resolve_function(qualname, near)
        if found is None or found[0] is near:
            return None
        target, name, params = found
        facts: Dict[str, object] = {"params": params}
        for exporter, per in target.exports.items():
            if name in per:
                facts[exporter] = per[name]
        return facts

    def methods_named(self, name: str) -> Optional[List[Dict[str, object]]]:
        """The facts of every project class's method ``name`` (``{"params": [...] without
        self, exporter: fact, ...}``), for a call on a receiver whose class is not known
        (``partitioner.setup(task, key)``); None when no project class defines one."""
        index = self.__dict__.get("_method_index")
        if index is None:
            index = self._method_index = {}
            for mod in self.modules:
                for cls, methods in mod.classes.items():
                    for meth, params in methods.items():
                        index.setdefault(meth, []).append((mod, f"{cls}.{meth}", params))
        out = []
        for mod, qual, params in index.get(name, ()):
            facts: Dict[str, object] = {"params": params}
            for exporter, per in mod.exports.items():
                if qual in per:
                    facts[exporter] = per[qual]
            out.append(facts)
        return out or None

    def exports_digest(self) -> str:
        """Changes when any module's exported facts change (part of findings cache keys)."""
        self.analyse()
        return self._exports_key

    def _rounds_of(self, m: Module) -> int:
        """How many times ``m``'s outgoing calls were asked for in this run: a
        module goes through the same seeds in the same order each run, so each
        step keeps its own cache entry."""
        n = self._rounds.get(m.path, 0)
        self._rounds[m.path] = n + 1
        return n

    def _outgoing_of(self, m: Module) -> List[Outgoing]:
        """``m``'s outgoing calls under its current seeds: from the cache, or from its model."""
        step = self._rounds_of(m)
        key = self._key(m, "outgoing") if self.cache is not None else None
        if self.cache is not None and key is not None:
            entry = self.cache.get("outgoing", key)
            if entry is not None:
                return [Outgoing(e[0], tuple((a, k) for a, k in e[1]), e[2], e[3], e[4],
                                 tuple(e[5]), tuple(e[6]), e[7])
                        for e in entry]
        model = self._model_of(m)
        if model is None:
            return []
        found = outgoing(model, self._where(model))
        if self.cache is not None and key is not None:
            self.cache.put("outgoing", key, [[o.qualname, [list(a) for a in o.args], o.where, o.caller,
                                              o.transform, list(o.static_nums), list(o.static_names),
                                              o.unstaged]
                                             for o in found], f"{m.path}#{step}")
        return found

    def _add_seed(self, target: Module, seed: Seed) -> bool:
        self._seed_keys.pop(target.path, None)
        per = self.seeds.setdefault(target.path, {})
        old = per.get(seed.qualname)
        if old is None:
            per[seed.qualname] = seed
            return True
        traced = old.traced_params | seed.traced_params
        kinds = dict(old.param_kinds)
        for p, k in seed.param_kinds.items():
            kinds[p] = kinds.get(p, 0) | k
        # falsy only where every call leaves it falsy
        untaken = tuple(a & b for a, b in zip(old.untaken, seed.untaken)) \
            if old.untaken and seed.untaken else (frozenset(),) * 4
        # unstaged only where every call is
        unstaged = old.unstaged and seed.unstaged
        if traced == old.traced_params and kinds == old.param_kinds and untaken == old.untaken \
                and unstaged == old.unstaged:
            return False
        per[seed.qualname] = Seed(old.qualname, frozenset(traced), kinds, old.description, old.transform, untaken,
                                  unstaged)
        return True

    def _where(self, model: SemanticModel) -> str:
        return os.path.relpath(model.source.path, self.root) if model.source is not None else "?"

    def _plant(self, m: Module, out: Outgoing) -> Optional[Tuple[Module, Seed]]:
        """The seed an outgoing call or transform plants in the module it reaches."""
        found = self.resolve_function(out.qualname, m)
        if found is None or found[0] is m:
            return None
        target, name, params = found
        if out.transform is not None:
            static = {params[i] for i in out.static_nums if 0 <= i < len(params)} | set(out.static_names)
            traced = [p for p in params if p not in static]
            return target, Seed(name, frozenset(traced), {p: TRACED for p in traced},
                                f"{out.caller} in {out.where}", out.transform, (), out.unstaged)
        traced, kinds = set(), {}
        passed, falsy, truthy = set(), set(), set()
        for slot, kind in out.args:
            p = params[slot] if isinstance(slot, int) and slot < len(params) else slot
            passed.add(p)
            if kind & FALSY_ARG:
                falsy.add(p)
            if kind & TRUTHY_ARG:
                truthy.add(p)
            kind &= ~(FALSY_ARG | TRUTHY_ARG)
            # only values the model knows to be arrays (or containers of them): the result of a call
            # it cannot see into is traced-but-unknown (a PartitionSpec, a config) and stays home
            if isinstance(p, str) and p in params and proven(kind) and kind & (ARRAYISH | CONTAINER):
                traced.add(p)
                kinds[p] = kinds.get(p, 0) | (kind & _KIND_BITS)
        # (passed a falsy literal, that or nothing; a truthy literal, that or nothing): see Seed.untaken
        unpassed = set(params) - passed
        untaken = (frozenset(),) * 4 if "*" in passed else \
            (frozenset(falsy), frozenset(falsy | unpassed), frozenset(truthy), frozenset(truthy | unpassed))
        return target, Seed(name, frozenset(traced), kinds,
                            f"called from {out.caller} in {out.where}", "project", untaken, out.unstaged)

    def _config_seeds(self, m: Module) -> bool:
        """``[tool.jaxlint] traced-functions``: ``pkg.mod:*``, ``pkg.mod:func``,
        ``pkg.mod.func``, ``pkg.mod.Class.method``."""
        added = False
        for entry in self.traced_functions:
            mod_name, sep, what = entry.partition(":")
            if not sep:
                mod_name, _, what = entry.rpartition(".")
                if mod_name and mod_name != m.name and mod_name.rpartition(".")[0] == m.name:
                    mod_name, what = m.name, entry[len(m.name) + 1:]
            if mod_name != m.name or not (m.indexed or self._load(m)):
                continue
            names: List[Tuple[str, List[str]]] = []
            if what == "*":
                names = list(m.top_functions.items())
            elif what in m.top_functions:
                names = [(what, m.top_functions[what])]
            elif "." in what:
                cls, _, meth = what.partition(".")
                if meth in m.classes.get(cls, {}):
                    names = [(what, m.classes[cls][meth])]
            for name, params in names:
                seed = Seed(name, frozenset(params), {p: TRACED for p in params},
                            "listed in `[tool.jaxlint] traced-functions`", "config")
                added |= self._add_seed(m, seed)
        return added


def outgoing(model: SemanticModel, where: str) -> List[Outgoing]:
    """The calls and transforms of ``model``'s traced code that reach functions
    the module does not define (``where``: the file, as messages show it)."""
    out: List[Outgoing] = []
    for site in model.transform_sites:
        if site.target is not None or site.call is None:
            continue
        tr, call = site.transform, site.call
        arg = model.transform_function_arg(call, tr)
        q = model.qualname(arg, site.scope) if arg is not None else None
        if q is None or q.startswith(_LIBRARY_PREFIXES):
            continue
        staged = model.site_staged(site)
        nums, names = model.untraced_spec(tr, call, staged)
        if staged:
            nums = nums + _passed_static(model, site, tr, call, nums)
        # differentiation applied outside any trace (``jax.jacrev(pop.mass_function)(x)`` in eager
        # code): its tracers carry concrete values, as an in-module ``jax.grad`` of a function does
        # (invoked where it is made: ``jax.jacrev(f)(x)``; a name bound to it may be called in traced code)
        concrete = not staged and tr.differentiates and \
            any(c.func is call for c in site.scope.of_type(ast.Call))
        out.append(Outgoing(q, (), f"{where}:{call.lineno}", tr.describe(), tr.name, tuple(nums), tuple(names),
                            unstaged=concrete))
    rooted: Dict[int, bool] = {}
    for fn in model.functions:
        if not fn.contexts or not _rooted_in_transform(fn, rooted):
            continue
        unstaged = None   # (asked once per function, when it has an outgoing call)
        if model.concrete_primal(fn):
            # every trace of ``fn`` runs on concrete values (differentiation, custom_jvp/custom_vjp,
            # jvp applied outside any staging trace): what it calls runs eagerly, traced by nobody
            continue
        for call in fn.of_type(ast.Call):
            q = model.call_qualname(call, fn)
            if q is None or q.startswith(_LIBRARY_PREFIXES) or K.transform_for(q) is not None:
                continue
            if model.in_untraced_branch(call, fn):
                continue   # a branch no trace of ``fn`` takes: the call runs on no tracer
            if model.resolve_callable(call.func, fn) is not None:
                continue   # a function of this module: the model handles it
            args: List[Tuple[object, int]] = []
            for i, a in enumerate(call.args):
                if isinstance(a, ast.Starred):
                    args.append(("*", 0))   # what else is passed is unknown
                    break
                args.append((i, _arg_kind(model, a, fn)))
            for kw in call.keywords:
                if kw.arg is not None:
                    args.append((kw.arg, _arg_kind(model, kw.value, fn)))
                else:
                    args.append(("*", 0))
            if unstaged is None:
                unstaged = not model.stages_constants(fn)
            out.append(Outgoing(q, tuple(args), f"{where}:{call.lineno}", fn.display(), unstaged=unstaged))
    return out


# an argument's kind in an outgoing call also says when it is a falsy literal (``debug=False``)
# or a truthy one (``use_jax=True``)
FALSY_ARG = 64
TRUTHY_ARG = 128


def _arg_kind(model: SemanticModel, a: ast.AST, fn) -> int:
    k = model.kind(a, fn)
    if a.__class__ is ast.Constant:
        if a.value in (False, None, 0):
            k |= FALSY_ARG
        elif a.value is not Ellipsis and bool(a.value):
            k |= TRUTHY_ARG
    return k


def _passed_static(model: SemanticModel, site, tr, call: ast.Call, nums) -> List[int]:
    """Under a staging trace, the arguments a transform passes through as they are
    (``jax.vmap(f, (0, None))``'s unmapped ones) are what the caller gives: when the transformed
    function is invoked at once (``jax.vmap(f, (0, None))(x, n)``) with a value the caller holds
    static (a ``static_argnums`` parameter), that argument stays a Python value in ``f``."""
    through, _ = model.untraced_spec(tr, call, False)
    through = [i for i in through if i not in nums]
    if not through:
        return []
    scope = site.scope
    invoked = next((c for c in scope.of_type(ast.Call) if c.func is call), None)
    if invoked is None or any(isinstance(a, ast.Starred) for a in invoked.args):
        return []
    return [i for i in through if i < len(invoked.args) and not model.kind(invoked.args[i], scope) & TRACED]


def _rooted_in_transform(fn, memo: Dict[int, bool]) -> bool:
    """Is ``fn`` traced because of a transform someone applies (here, or in another
    module: a seed), not only because it is a library module's method or contract
    function?  Those are traced with every parameter an unknown object (a sharding,
    a config record...); carrying their guesses into other modules made more noise
    than findings, so calls from them do not cross module boundaries."""
    key = id(fn)
    if key in memo:
        return memo[key]
    memo[key] = False   # recursion guard
    result = False
    for c in fn.contexts:
        if c.transform == "call":
            if c.caller is not None and _rooted_in_transform(c.caller, memo):
                result = True
                break
        elif K.transform_for(c.transform) is not None or c.transform in ("project", "config"):
            result = True
            break
    memo[key] = result
    return result


# Facts a rule family computes about the functions of a module and other modules read:
# name -> exporter(model) -> {"func" or "Class.method": JSON-serialisable fact}.  Families
# register theirs (e.g. the PRNG family: which parameters of a function draw from a key);
# the model answers ``model.external_facts(qualname)`` with them.
EXPORTERS: Dict[str, Callable[[SemanticModel], Dict[str, object]]] = {}


def register_exporter(name: str, exporter: Callable[[SemanticModel], Dict[str, object]]) -> None:
    EXPORTERS[name] = exporter


# the model's own: which returned tuple items are Python values (``return x, x.shape[1]``)
register_exporter("static_items", export_static_items)
register_exporter("static_result", export_static_results)
register_exporter("returned_params", export_returned_params)
register_exporter("flows", export_flows)
register_exporter("tracer_test", export_tracer_tests)


def _failure_line(step: str, exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return (f"nested too deeply for jaxlint's analysis (Python's recursion limit was reached in the "
                f"project analysis: {step}); not checked")
    import traceback
    tb = traceback.extract_tb(exc.__traceback__)
    frame = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return (f"internal error in the project analysis ({step}): {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}{frame} — please report this jaxlint bug")


# words whose presence in a file makes it worth analysing (a cheap byte test)
_JAX_WORDS = (b"jax", b"flax", b"optax", b"equinox", b"haiku", b"brax", b"gymnax")
# calls into these never reach project code
_LIBRARY_PREFIXES = ("jax.", "numpy.", "flax.", "optax.", "equinox.", "haiku.", "functools.",
                     "builtins.", "math.", "logging.", "os.", "sys.", "typing.", "collections.")
