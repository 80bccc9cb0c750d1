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
import sys
import time
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .cache import Cache, digest, file_digest
from .discovery import find_root, iter_python_files, read_regular

if TYPE_CHECKING:   # the analysis, the rules and the engine are imported when a file is linted:
    # a warm run that the cache answers imports none of them
    from .analysis import SourceFile
    from .analysis.project import Project
    from .checkers import Finding, Rule, Settings

# a project with more Python files than this is linted file by file (no cross-module index)
MAX_PROJECT_FILES = 20000
# a file modified (or its inode changed) less than this before its ``stat`` may change again within
# the same tick of the file system's clock and keep its times: warm runs hash it again
RECENT_NS = 2_000_000_000
# how many warm-run records (one per configuration and jaxlint, see warm_key) a project's cache keeps
MANIFEST_SLOTS = 8


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
        # --jobs: absolute path -> (findings key, SHA-1 of the text linted, the notebook's partial
        # error) of each file a worker linted (what take_prefetched answers from); in a worker,
        # what it records of the files it lints
        self._prefetched: Dict[str, Tuple[str, str, Optional[str]]] = {}
        self._config_keys: Dict[tuple, str] = {}
        # the results cache's record of unchanged projects (see warm_results): project root ->
        # each project file's os.stat before it was read, and the findings key each linted file used
        self._stats: Dict[str, Dict[str, tuple]] = {}
        self._used: Dict[str, Dict[str, Tuple[str, str]]] = {}     # root -> path -> (key, SHA-1 of the text)
        self._records: Dict[str, dict] = {}     # root -> the record warm_results found (see unread)
        self._walked: Dict[str, tuple] = {}     # root -> (project files, their stat) as warm_results found them
        self._sizes: Dict[str, Dict[str, int]] = {}     # root -> file -> size, from the folder walk

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
            _load_rules()
            from .analysis.project import Project
            files, stats = self._walked.pop(root, None) or self._walk(root)
            self._sizes[root] = {os.path.abspath(p): st.st_size for p, st in stats.items()}
            if len(files) > MAX_PROJECT_FILES:
                self.projects[root] = None
            else:
                sigs = _signatures(root, files, stats) if self.use_cache else None
                if sigs is not None:    # taken before any file is read (see warm_results)
                    self._stats[root] = sigs
                self.projects[root] = Project(root, files, self.traced_functions, cache=self.cache_for(root),
                                              loader=_read, bytes_loader=_source_from_bytes)
        return self.projects[root]

    def file_sizes(self, root: str) -> Dict[str, int]:
        """The size of each file of the project at ``root`` (absolute paths), as its walk found it."""
        return self._sizes.get(root, {})

    def _walk(self, root: str) -> Tuple[List[str], Dict[str, os.stat_result]]:
        """The project's files under ``root`` and their ``os.stat`` (taken before any is read)."""
        stats: Dict[str, os.stat_result] = {}
        files = [p for p, exists in iter_python_files([root], self.exclude, root=root, stats=stats)
                 if exists and p.endswith((".py", ".ipynb"))]
        return files, stats

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
        from .analysis.source import SourceError
        from .engine import AnalysisLimit, InternalError, crash_message, lint_source, too_deep
        project = self.project_for(path) if path and path != "-" else None
        cache = self.cache_for(project.root) if project is not None else None
        config = self._config_key(rules, settings, apply_noqa)
        first = [True]      # the first call lints the file as it is on disk (later ones: fix passes)

        def lint(source: SourceFile) -> List[Finding]:
            key = None
            if project is not None:
                self._analysed(project)
                _raise_failure(project, source.path)
            if project is not None and (cache is not None or self._memo or self._recording is not None):
                sha = file_digest(source.text.encode("utf-8"))
                key = project.cache_key(source.path, "findings", project.exports_digest(), config, sha=sha)
                if first[0] and cache is not None:
                    self._used.setdefault(project.root, {})[os.path.abspath(source.path)] = (key, sha)
                if first[0] and self._recording is not None:
                    self._prefetched[os.path.abspath(source.path)] = (key, sha, source.partial_error)
            first[0] = False
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
                self._recording[key] = [_entry(f) for f in found]
            elif key is not None and cache is not None:
                cache.put("findings", key, [_entry(f) for f in found], os.path.abspath(source.path))
            return found

        def unread() -> Optional[Tuple[list, str]]:
            """``(findings entries, SHA-1 of the text)`` of the file as it is on disk, without reading
            it here: when its bytes are those a recorded run linted (the analysis hashed them) and
            its findings under what the project knows now are cached; else None (lint it)."""
            record = self._records.get(project.root) if project is not None and cache is not None else None
            m = project.module_for(path) if record is not None and first[0] else None
            if m is None:
                return None
            self._analysed(project)
            rel = _rel(path, project.root)
            was, got = record["files"].get(rel), record["findings"].get(rel)
            if m.failure is not None or m.sha is None or was is None or got is None or was[4] != m.sha:
                return None
            key = project.cache_key(path, "findings", project.exports_digest(), config, sha=got[1])
            entries = self._memo.pop(key, None)
            if entries is not None:
                cache.put("findings", key, entries, m.path)
            else:
                entries = cache.get("findings", key)
            if entries is None or not _entries_ok(entries):
                return None
            first[0] = False
            self._used.setdefault(project.root, {})[m.path] = (key, got[1])
            return entries, got[1]

        lint.unread = unread
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
            project = self.project_for(p) if p.endswith((".py", ".ipynb")) else None
            if project is not None and project.module_for(p) is not None:
                groups.setdefault(project.root, []).append(p)
        for root, todo in groups.items():
            if len(todo) >= 2 * jobs:
                found = run_jobs(self, self.projects[root], todo, lint_for, jobs)
                self._memo.update(found or {})

    def take_prefetched(self, path: str) -> Optional[Tuple[list, str]]:
        """``(findings entries, SHA-1 of the text)`` of ``path`` as a ``--jobs`` worker linted it
        with this run's lint function for the file (stored in the cache as the lint function
        would), so that the caller need not read a file without findings; None when no worker
        linted it (or it is a notebook checked only in part: lint it as usual)."""
        full = os.path.abspath(path)
        got = self._prefetched.pop(full, None)
        if got is None or got[2] is not None:
            return None
        key, sha, _ = got
        entries = self._memo.pop(key, None)
        if entries is None:
            return None
        root = self.root_for(path)
        cache = self.cache_for(root)
        if cache is not None:
            cache.put("findings", key, entries, full)
            self._used.setdefault(root, {})[full] = (key, sha)
        return entries, sha

    def recorded(self, path: str) -> bool:
        """Whether a warm-run record of ``path``'s project was found (what ``unread`` answers from)."""
        return bool(self._records) and self.root_for(path) in self._records

    def flush(self) -> None:
        """Write the caches back (call once, at the end of a run)."""
        for cache in self.caches.values():
            cache.flush()
        if "jaxlint.jobs" in sys.modules:
            sys.modules["jaxlint.jobs"].reap()
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    # ------------------------------------------------------------ warm runs
    def warm_results(self, paths: Sequence[str], run_key: str) -> Optional[Dict[str, Tuple[list, str]]]:
        """A warm run without the analysis: ``path -> (cached findings entries, the file's SHA-1)``
        for every one of ``paths`` when nothing changed in their projects since a run recorded
        with the same ``run_key`` (what else decides the findings: jaxlint, the configuration)
        by :meth:`record_warm`; else None (then lint as usual).

        Nothing changed when every project file (the same set of files) has the ``os.stat``
        (size, modification and change times, inode) it had before that run read it; a file
        modified within two seconds of that ``stat`` is hashed again (a second change in the
        same clock tick would keep its times).  Only what the cache's signature vouches for
        is used: the record, then each file's findings entry (a miss anywhere: None)."""
        if not self.use_cache:
            return None
        by_root: Dict[str, List[str]] = {}
        for p in paths:
            root = self.root_for(p)
            if root is None:
                return None
            by_root.setdefault(root, []).append(p)
        out: Dict[str, Tuple[list, str]] = {}
        for root, todo in by_root.items():
            cache = self.cache_for(root)
            record = cache.get("manifest", run_key) if cache is not None else None
            if record is None:
                return None
            self._records[root] = record
            files, keys = record["files"], record["findings"]
            now, stats = self._walked[root] = self._walk(root)
            if len(now) != len(files) or len(stats) != len(now):
                return None
            cut = len(root) + (not root.endswith(os.sep))
            for p in now:       # (found under ``root`` as it is spelled: each path starts with it)
                was, st = files.get(p[cut:]), stats[p]
                if was is None or was[:4] != [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]:
                    return None
                if was[5] and was[4] and _sha_of(p) != was[4]:
                    return None
            for p in todo:
                rel = _rel(p, root)
                got, was = keys.get(rel), files.get(rel)
                entries = cache.get("findings", got[0]) if got is not None and was is not None else None
                if entries is None or not _entries_ok(entries):
                    return None
                out[p] = (entries, was[4])
        return out

    def record_warm(self, run_key: str, clean: Iterable[str]) -> None:
        """Record, for :meth:`warm_results`, each analysed project's files as they were before
        this run read them, and the findings key and SHA-1 of the text of each file of ``clean``
        (absolute paths: the files checked without an error) (call before :meth:`flush`, after a
        run whose findings are exactly the cached ones: no fixes, no extra findings, no standard
        input).  A later run that finds a file changed still answers the unchanged files without
        reading them when their findings are cached (the lint function's ``unread``)."""
        clean = set(clean)
        for root, used in self._used.items():
            project, cache, sigs = self.projects.get(root), self.caches.get(root), self._stats.get(root)
            used = {p: k for p, k in used.items() if p in clean}
            if project is None or cache is None or sigs is None or not used:
                continue
            shas = {m.path: m.sha for m in project.modules}
            files = {}
            for path, (rel, size, mtime, ctime, ino, recent) in sigs.items():
                sha = shas.get(path, "")        # "": not a module (never read by the analysis)
                if sha is None:                 # a module that could not be read
                    break
                files[rel] = [size, mtime, ctime, ino, sha, recent]
            else:
                keys = {_rel(p, root): list(k) for p, k in used.items()}
                old = cache.get("manifest", run_key)
                if old is not None and old["files"] == files:
                    keys = {**old["findings"], **keys}
                # one record per slot: a few configurations (an editor's, the terminal's) or jaxlint
                # versions alternating keep theirs, and the table stays small
                cache.put("manifest", run_key, {"files": files, "findings": keys},
                          f"manifest#{int(run_key[:2], 16) % MANIFEST_SLOTS}")

    def done(self, path: str) -> None:
        """The file was linted: its model and tree may be freed."""
        project = self.projects.get(self.root_for(path) or "")
        if project is not None:
            project.release(path)


def _raise_failure(project: Project, path: str) -> None:
    """The project analysis failed on this module (:meth:`Project.guarded`): say so, for it alone."""
    from .engine import AnalysisLimit, InternalError
    m = project.module_for(path)
    if m is not None and m.failure is not None:
        raise (InternalError if m.failure_internal else AnalysisLimit)(m.failure)


def run_jobs(ws, project, paths, lint_for, jobs):
    """:func:`jaxlint.jobs.run` (imported when a run forks)."""
    from .jobs import run
    return run(ws, project, paths, lint_for, jobs)


def jobs_can_fork() -> bool:
    from .jobs import can_fork
    return can_fork()


def __getattr__(name: str):
    """``Project`` (:class:`jaxlint.analysis.project.Project`), imported when first asked for."""
    if name == "Project":
        from .analysis.project import Project
        return Project
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load_rules() -> None:
    """Import the rules before a project is analysed: rule families register the facts their
    modules export to others (``register_exporter``) when they are imported."""
    from .checkers import all_rules
    all_rules()


def _entry(f: Finding) -> dict:
    """A finding as the cache stores it: :meth:`Finding.to_dict`, and the title of its rule's
    fix (a warm run that reads it back need not import the rules)."""
    d = f.to_dict()
    if f.fix_title is not None:
        d["fix_title"] = f.fix_title
    return d


def _entries_ok(entries) -> bool:
    """Cached findings entries of the shape :func:`_findings_from` reads back (it checks the rest)."""
    return all(isinstance(d, dict) for d in entries)


def _findings_from(entries, path: str) -> Optional[List[Finding]]:
    """Cached findings back as :class:`Finding` objects; None (a miss) for an entry of the
    wrong shape (the cache is then recomputed, never trusted half-way)."""
    from .findings import Finding
    try:
        found = [Finding.from_dict(d) for d in entries]
        for f, d in zip(found, entries):
            if f.fix is not None and "fix_title" in d:
                f.fix_title = d["fix_title"]
            if not (isinstance(f.code, str) and isinstance(f.message, str)
                    and (f.fix_title is None or isinstance(f.fix_title, str))
                    and all(isinstance(v, int) for v in (f.line, f.col, f.end_line, f.end_col))
                    and (f.fix is None or all(isinstance(e.start, int) and isinstance(e.end, int)
                                              and isinstance(e.content, str) for e in f.fix.edits))):
                return None
            f.path = path
        return found
    except Exception:
        return None


def _rel(path: str, root: str) -> str:
    """``path`` relative to ``root`` (an absolute, normalised folder)."""
    full = os.path.abspath(path)
    if full.startswith(root) and full[len(root):len(root) + 1] == os.sep:
        return full[len(root) + 1:]
    return os.path.relpath(full, root)


def _signatures(root: str, files: List[str], stats: Dict[str, os.stat_result]) -> Optional[Dict[str, tuple]]:
    """file path -> (path relative to ``root``, size, mtime, ctime, inode, whether it changed
    within two seconds of this ``stat``: then its times may not tell a second change); None
    unless every file has one."""
    now = time.time_ns()
    out = {}
    for p in files:
        st = stats.get(p)
        if st is None:
            return None
        recent = now - max(st.st_mtime_ns, st.st_ctime_ns) < RECENT_NS
        out[os.path.abspath(p)] = (_rel(p, root), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, recent)
    return out


def _sha_of(path: str) -> Optional[str]:
    try:
        return file_digest(read_regular(path))
    except OSError:
        return None


def _read(path: str) -> SourceFile:
    """A project file's source: a module, or a notebook's joined code cells (regular files
    only: a FIFO or a device that appeared since discovery is an error, never a hang)."""
    return _source_from_bytes(path, read_source_bytes(path))


def _source_from_bytes(path: str, raw: bytes) -> SourceFile:
    """The source of a project file whose bytes are ``raw`` (see :func:`_read`)."""
    from .analysis import SourceFile
    if path.lower().endswith(".ipynb"):
        from .notebook import source_from_bytes
        return source_from_bytes(path, raw)
    return SourceFile.from_bytes(path, raw)


def read_source_bytes(path: str) -> bytes:
    """A checked file's bytes (a regular file only), or :class:`SourceError` with one line
    (no path: callers add it)."""
    from .analysis.source import read_bytes
    return read_bytes(path, read_regular)


def warm_key(cfg) -> Optional[str]:
    """What decides a run's findings besides the project's files, for :meth:`Workspace.warm_results`:
    jaxlint itself (its version and the size and time of each of its source files) and the
    configuration (``cfg``, a :class:`jaxlint.config.Config`: rule selection, per-file ignores,
    rule options, excludes, traced functions, the root per-file ignores are relative to).
    None when the rules loaded in this process are not the ones jaxlint's files declare (a rule
    registered at run time): such a run is neither answered nor recorded."""
    from . import __version__
    from .config import _catalogue_from_files, _registry
    registry = _registry()
    if registry and {c: r.symbol for c, r in registry.items()} != _catalogue_from_files(
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkers")):
        return None
    return digest("warm", 1, __version__, code_fingerprint(), cfg.select, cfg.extend_select, cfg.ignore,
                  cfg.per_file_ignores, cfg.options, cfg.exclude, cfg.traced_functions, os.path.abspath(cfg.root))


_CODE: List[str] = []


# what a check's findings never depend on: runtime confirmation (a run with --confirm is never
# answered from the cache) and the other front ends
_NOT_CHECK = {"confirm", "server.py", "flake8_plugin.py", "pylint_plugin.py", "github_action.py", "docsgen.py"}


def code_fingerprint() -> str:
    """The path, size and modification time of every source file of the jaxlint package that a
    check runs (read once per process): an edited or reinstalled jaxlint answers no warm run
    another one recorded."""
    if not _CODE:
        top = os.path.dirname(os.path.abspath(__file__))
        parts: List[str] = []
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if folder == top and e.name in _NOT_CHECK:
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != "__pycache__":
                            stack.append(e.path)
                    elif e.name.endswith(".py"):
                        st = e.stat()
                        parts.append(f"{os.path.relpath(e.path, top)}:{st.st_size}:{st.st_mtime_ns}")
                except OSError:
                    parts.append(f"{e.name}:?")
        _CODE.append(digest(sorted(parts)))
    return _CODE[0]


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
    from .analysis import SourceFile
    ws = workspace or Workspace()
    paths = list(paths)
    ws.prefetch(paths, lambda p: ws.lint_function(p, rules, settings), jobs)
    for path in paths:
        lint = ws.lint_function(path, rules, settings)
        yield path, lint(SourceFile.from_path(path))
        ws.done(path)
    ws.flush()
