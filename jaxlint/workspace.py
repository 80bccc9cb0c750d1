"""Linting files with their whole project's context: the project index, the
results cache, and the per-file lint function every front end uses.

A :class:`Workspace` groups the files it is asked about by project root (the
nearest ``pyproject.toml``, ``setup.cfg``, ``setup.py`` or ``.git``), indexes
each project once (:class:`~jaxlint.analysis.project.Project`: every Python
module under the root, so that ``jaxlint check one_file.py`` and the editor
plugins see the same cross-module findings as ``jaxlint check .``), and hands
out lint functions that build each file's model with what the rest of the
project knows about it.  With a cache, findings are stored per file text,
seeds and configuration: an unchanged file whose dependencies did not change
is not parsed again.
"""
from __future__ import annotations

import gc
import os
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from .analysis import SourceFile
from .analysis.project import Project, find_root
from .cache import Cache, digest, file_digest
from .checkers import Finding, Rule, Settings
from .discovery import iter_python_files, read_regular
from .analysis.source import SourceError
from .engine import AnalysisLimit, InternalError, crash_message, lint_source, too_deep
from .jobs import can_fork as jobs_can_fork, reap as reap_jobs, run as run_jobs

# a project with more Python files than this is linted file by file (no cross-module index)
MAX_PROJECT_FILES = 20000


class Workspace:
    def __init__(self, *, traced_functions: Sequence[str] = (), exclude: Sequence[str] = (),
                 use_cache: bool = True, root: Optional[str] = None, batch: bool = True):
        """``root``: force one project root (default: found per file).
        ``exclude``: gitignore-style patterns of files that are not part of the project.
        ``batch``: a run that ends (CLI, plugins, scripts): once a project is analysed, its
        models are moved out of the garbage collector's sight (``gc.freeze``) until
        :meth:`flush`; a long-lived process (the language server) passes False."""
        self.traced_functions = list(traced_functions)
        self.exclude = list(exclude)
        self.use_cache = use_cache
        self.fixed_root = os.path.abspath(root) if root else None
        self.projects: Dict[str, Optional[Project]] = {}
        self.caches: Dict[str, Cache] = {}
        self._roots: Dict[str, Optional[str]] = {}
        self.batch = batch
        self._frozen = False
        # findings computed by prefetch workers, by cache key, until the file is linted here
        self._memo: Dict[str, list] = {}
        self._recording: Optional[Dict[str, list]] = None   # set in a --jobs worker
        self._config_keys: Dict[tuple, str] = {}

    # ------------------------------------------------------------ projects
    def root_for(self, path: str) -> Optional[str]:
        if self.fixed_root is not None:
            return self.fixed_root
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = find_root(folder)
        return self._roots[folder]

    def project_for(self, path: str) -> Optional[Project]:
        """The analysed project ``path`` belongs to (None: no project root, or too big)."""
        root = self.root_for(path)
        if root is None:
            return None
        if root not in self.projects:
            files = [p for p, exists in iter_python_files([root], self.exclude, root=root)
                     if exists and p.endswith((".py", ".ipynb"))]
            if len(files) > MAX_PROJECT_FILES:
                self.projects[root] = None
            else:
                self.projects[root] = Project(root, files, self.traced_functions, cache=self.cache_for(root),
                                              loader=_read)
        return self.projects[root]

    def cache_for(self, root: Optional[str]) -> Optional[Cache]:
        if not self.use_cache or root is None:
            return None
        if root not in self.caches:
            self.caches[root] = Cache(root)
        return self.caches[root]

    # ------------------------------------------------------------ linting
    def lint_function(self, path: Optional[str], rules: Sequence[Rule], settings: Optional[Settings] = None,
                      apply_noqa: bool = True) -> Callable[[SourceFile], List[Finding]]:
        """The per-file lint function for ``path``: the first pass, every fix pass
        and the re-lint after fixing all see the project's facts about the file."""
        project = self.project_for(path) if path and path != "-" else None
        cache = self.cache_for(project.root) if project is not None else None
        config = self._config_key(rules, settings, apply_noqa)

        def lint(source: SourceFile) -> List[Finding]:
            key = None
            if project is not None:
                self._analysed(project)
                _raise_failure(project, source.path)
            if project is not None and (cache is not None or self._memo or self._recording is not None):
                key = project.cache_key(source.path, "findings", project.exports_digest(), config,
                                        sha=file_digest(source.text.encode("utf-8")))
            if key is not None:
                hit = self._memo.pop(key, None)
                if hit is not None and cache is not None:
                    cache.put("findings", key, hit, os.path.abspath(source.path))
                if hit is None and cache is not None:
                    hit = cache.get("findings", key)
                found = _findings_from(hit, source.path) if hit is not None else None
                if found is not None:
                    return found
            # the model is built with the garbage collector paused, as lint_source does: the
            # project's other models are alive, and collecting would traverse them all
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                try:
                    model = project.model_for_source(source) if project is not None else None
                except RecursionError:
                    raise AnalysisLimit(too_deep("the semantic model")) from None
                except SourceError:
                    raise
                except Exception as exc:    # a bug: this file fails, the others are checked
                    raise InternalError(crash_message(exc, "the semantic model")) from None
                found = lint_source(source, rules, settings, apply_noqa=apply_noqa, model=model)
            finally:
                if was_enabled:
                    gc.enable()
            if key is not None and self._recording is not None:
                self._recording[key] = [f.to_dict() for f in found]
            elif key is not None and cache is not None:
                cache.put("findings", key, [f.to_dict() for f in found], os.path.abspath(source.path))
            return found

        return lint

    def _config_key(self, rules: Sequence[Rule], settings: Optional[Settings], apply_noqa: bool) -> str:
        """The configuration's part of the findings keys (asked for once per file, so memoised)."""
        options = vars(settings) if settings is not None else None
        memo_key = (tuple(r.code for r in rules), repr(options), apply_noqa)
        got = self._config_keys.get(memo_key)
        if got is None:
            got = self._config_keys[memo_key] = digest(sorted(memo_key[0]), options, apply_noqa)
        return got

    def _analysed(self, project: Project) -> None:
        project.analyse()
        if self.batch and not self._frozen:
            # every module's model is alive until its file is linted: without this, each
            # collection in the lint phase traverses them all (6x slower on jax/flax/optax)
            gc.freeze()
            self._frozen = True

    def prefetch(self, paths: Sequence[str], lint_for: Callable[[str], Callable[[SourceFile], List[Finding]]],
                 jobs: int) -> None:
        """``--jobs N``: analyse each project of ``paths`` and lint its modules among them
        in ``jobs`` forked worker processes (:mod:`jaxlint.jobs`), and keep what they
        found; the lint functions then answer from memory.  ``lint_for(path)`` is the
        caller's own per-file lint function, so a worker computes exactly what the caller
        would.  Without ``fork`` (not Linux), in a process that has imported JAX (a forked
        child of JAX's threads may deadlock), for a handful of files, or when the cache
        already holds most results, it does nothing and all happens in this process."""
        if jobs <= 1 or not jobs_can_fork():
            return
        groups: Dict[str, List[str]] = {}
        for p in paths:
            project = self.project_for(p) if p.endswith(".py") else None
            if project is not None and project.module_for(p) is not None:
                groups.setdefault(project.root, []).append(p)
        for root, todo in groups.items():
            if len(todo) >= 2 * jobs:
                found = run_jobs(self, self.projects[root], todo, lint_for, jobs)
                self._memo.update(found or {})

    def flush(self) -> None:
        """Write the caches back (call once, at the end of a run)."""
        for cache in self.caches.values():
            cache.flush()
        reap_jobs()
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    def done(self, path: str) -> None:
        """The file was linted: its model and tree may be freed."""
        project = self.projects.get(self.root_for(path) or "")
        if project is not None:
            project.release(path)


def _raise_failure(project: Project, path: str) -> None:
    """The project analysis failed on this module (:meth:`Project.guarded`): say so, for it alone."""
    m = project.module_for(path)
    if m is not None and m.failure is not None:
        raise (InternalError if m.failure_internal else AnalysisLimit)(m.failure)


def _findings_from(entries, path: str) -> Optional[List[Finding]]:
    """Cached findings back as :class:`Finding` objects; None (a miss) for an entry of the
    wrong shape (the cache is then recomputed, never trusted half-way)."""
    try:
        found = [Finding.from_dict(d) for d in entries]
        for f in found:
            if not (isinstance(f.code, str) and isinstance(f.message, str)
                    and all(isinstance(v, int) for v in (f.line, f.col, f.end_line, f.end_col))
                    and (f.fix is None or all(isinstance(e.start, int) and isinstance(e.end, int)
                                              and isinstance(e.content, str) for e in f.fix.edits))):
                return None
            f.path = path
        return found
    except Exception:
        return None


def _read(path: str) -> SourceFile:
    """A project file's source: a module, or a notebook's joined code cells (regular files
    only: a FIFO or a device that appeared since discovery is an error, never a hang)."""
    raw = read_source_bytes(path)
    if path.lower().endswith(".ipynb"):
        from .notebook import source_from_bytes
        return source_from_bytes(path, raw)
    return SourceFile.from_bytes(path, raw)


def read_source_bytes(path: str) -> bytes:
    """A checked file's bytes, or :class:`SourceError` with one line (no path: callers add it)."""
    try:
        return read_regular(path)
    except FileNotFoundError:
        raise SourceError("no such file or directory") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None


_PLUGIN_WORKSPACES: Dict[tuple, Workspace] = {}


def plugin_workspace(traced_functions: Sequence[str], exclude: Sequence[str]) -> Workspace:
    """The process-wide workspace of an editor or linter plugin (flake8, pylint):
    one per configuration, no disk cache (a plugin has no end-of-run hook to
    write it), so each process indexes a project once and reuses it for every
    file it is handed."""
    key = (tuple(traced_functions), tuple(exclude))
    ws = _PLUGIN_WORKSPACES.get(key)
    if ws is None:
        ws = _PLUGIN_WORKSPACES[key] = Workspace(traced_functions=traced_functions, exclude=exclude,
                                                 use_cache=False)
    return ws


def lint_files(paths: Iterable[str], rules: Sequence[Rule], settings: Optional[Settings] = None,
               workspace: Optional[Workspace] = None, jobs: int = 1):
    """``(path, findings)`` for each Python file, linted with its project's context
    (a convenience for scripts and benchmarks; the CLI adds fixes and reporting)."""
    ws = workspace or Workspace()
    paths = list(paths)
    ws.prefetch(paths, lambda p: ws.lint_function(p, rules, settings), jobs)
    for path in paths:
        lint = ws.lint_function(path, rules, settings)
        yield path, lint(SourceFile.from_path(path))
        ws.done(path)
    ws.flush()
