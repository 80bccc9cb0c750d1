"""``--jobs N``: one project analysed and linted by N forked worker processes.

Each worker owns a share of the project's modules for the whole run.  It reads,
hashes, parses and indexes its modules, builds their models, computes their
outgoing calls and exported facts, and at the end lints them; only small
summaries travel through the pipes:

1. ``index``: the workers take the modules, longest file first, from one shared
   counter (so they finish together); a worker owns the modules it took.  The
   parent merges their hashes and indexes and sends every worker the others'
   (the project's static names and ``resolve_function`` need the whole index);
2. ``outgoing``, once per round of the fixpoint: the dirty modules' calls into
   other modules under the seeds the parent sends; the parent plants the seeds
   (:meth:`Project._analyse` drives both this and the serial analysis, so the
   seeds and exports are the same);
3. ``exports``: the exporters' facts about each module's functions;
4. ``lint``: with every module's exports, each worker lints its files among
   those asked for and returns the findings by cache key; the parent's lint
   functions answer from them.

A worker keeps its models between the steps (the analysis's model of a file is
the one its lint uses, as in one process).  What a worker stores in the cache
comes back as a journal the parent replays, so one process writes the cache.
Workers are forked (Linux) and never from a process that has imported JAX (a
forked child of JAX's threads may deadlock); any failure falls back to one
process.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import signal
import sys
import traceback
from typing import Callable, Dict, List, Optional, Sequence

from .analysis.project import Module, Project, index_entry, set_index
from .workspace import _read

# below this many modules per worker, forking costs more than it saves
MIN_MODULES_PER_JOB = 2
# a project whose cache already holds findings for this share of the files is linted
# in one process: answering from the cache is faster than starting workers
WARM_SHARE = 0.9


class WorkerFailed(Exception):
    pass


def can_fork() -> bool:
    """Forking is available and safe: Linux-style ``fork``, and JAX not imported here."""
    return "fork" in multiprocessing.get_all_start_methods() and "jax" not in sys.modules


def run(ws, project: Project, paths: Sequence[str], lint_for: Callable, jobs: int) -> Optional[Dict[str, list]]:
    """Analyse ``project`` (unless it is already) and lint its modules among ``paths`` in
    ``jobs`` workers; the findings by cache key, or None when it was not worth it or
    failed (the caller then lints in this process; a failed analysis is forgotten)."""
    jobs = min(jobs, len(project.modules) // MIN_MODULES_PER_JOB)
    if jobs <= 1 or not can_fork() or _warm(project, paths):
        return None
    pool = None
    analysed = project._analysed
    try:
        order = _longest_first(project.modules, ws.file_sizes(project.root))
        pool = _Pool(ws, project, order, lint_for, jobs)
        if not analysed:
            driver = _Driver(project, pool)
            project.analyse(driver)
            owner = driver.owner
        else:   # the workers have the analysis already (forked): deal the modules out
            owner = {p: i % jobs for i, p in enumerate(order)}
            pool.call([("own", [p for p, w in owner.items() if w == k]) for k in range(jobs)])
        seeds: List[Dict[str, object]] = [{} for _ in range(jobs)]
        for p, per in project.seeds.items():
            if p in owner:
                seeds[owner[p]][p] = per
        exports = {m.path: m.exports for m in project.modules if m.exports}
        todo: List[List[str]] = [[] for _ in range(jobs)]
        for p in paths:
            w = owner.get(os.path.abspath(p))
            if w is not None:
                todo[w].append(p)
        found: Dict[str, list] = {}
        for entries, linted in _replay(project, pool.call([("lint", (seeds[w], exports, project._exports_key,
                                                                     todo[w])) for w in range(jobs)])):
            found.update(entries)
            ws._prefetched.update(linted)
        pool.close(wait=False)      # they exit after answering ``lint``: no need to wait for it
        return found
    except Exception:   # WorkerFailed, a pipe closed by a dying worker...: one process does it all
        if pool is not None:
            pool.close()
        if not analysed and ws.projects.get(project.root) is project:
            del ws.projects[project.root]   # half analysed: the next lookup starts again
        return None


def _warm(project: Project, paths: Sequence[str]) -> bool:
    if project.cache is None:
        return False
    tags = project.cache.tags("findings")
    mine = [p for p in paths if project.module_for(p) is not None]
    return bool(mine) and sum(os.path.abspath(p) in tags for p in mine) >= WARM_SHARE * len(mine)


def reap() -> None:
    """Collect the workers that have exited (they are not waited for)."""
    multiprocessing.active_children()


def _longest_first(mods: List[Module], sizes: Dict[str, int]) -> List[str]:
    """The order the workers take the modules in for indexing (and own them for the rest of
    the run): the largest file first.  ``sizes``: the files' sizes from the project's folder walk
    (reading every file here to count its lines cost 25 ms before the workers could start, for an
    order that shares the work out no better: per-module costs measured on jax/flax/optax, the
    slowest worker's total is within 3% of an even split either way)."""
    return sorted((m.path for m in mods), key=lambda p: (-sizes.get(p, 0), p))


_STOPS = {signal.SIGINT, signal.SIGTERM}


def _block(signals) -> Optional[set]:
    """Block ``signals`` in this thread; the previous mask (None where signal masks do not exist)."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, signals)


def _unblock(old: Optional[set]) -> None:
    """Restore the mask ``old`` (None: unblock Ctrl-C and SIGTERM)."""
    if hasattr(signal, "pthread_sigmask"):
        if old is None:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        else:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Pool:
    """The parent's end: one pipe per worker, requests answered in worker order."""

    def __init__(self, ws, project: Project, order: List[str], lint_for: Callable, jobs: int):
        """``order``: the modules, in the order the workers take them for indexing."""
        if project.cache is not None:
            project.cache.load()      # read once here; the workers share the copy
        ctx = multiprocessing.get_context("fork")
        taken = ctx.Value("i", 0)     # how many of ``order`` the workers have taken
        self.conns, self.procs = [], []
        # a worker is forked with Ctrl-C and SIGTERM blocked and unblocks them once it has its own
        # handlers (_serve): one interrupted before that would run the parent's handlers (a
        # traceback from a worker that Ctrl-C reached, or that the parent stopped, right after
        # its fork); here they are delivered when the workers have started
        old = _block(_STOPS)
        try:
            for _ in range(jobs):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(theirs, ws, project, (order, taken), lint_for),
                                   daemon=True)
                proc.start()
                theirs.close()
                self.conns.append(mine)
                self.procs.append(proc)
        except BaseException:
            _unblock(old)
            self.close()
            raise
        _unblock(old)

    def call(self, requests: List[tuple]) -> List[object]:
        """Send each worker its request, then collect the answers (and replay the
        cache entries the workers stored)."""
        for conn, req in zip(self.conns, requests):
            conn.send(req)
        return [self._answer(conn) for conn in self.conns]

    def broadcast(self, request: tuple) -> List[object]:
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        for conn in self.conns:
            conn.send_bytes(data)
        return [self._answer(conn) for conn in self.conns]

    def _answer(self, conn) -> object:
        status, value, journal = conn.recv()
        if status != "ok":
            raise WorkerFailed(value)
        return value, journal

    def close(self, wait: bool = True) -> None:
        """Stop the workers (``wait``: and reap them; otherwise multiprocessing reaps
        them later, and their exit overlaps with this process's work)."""
        for conn in self.conns:
            try:
                conn.send(("stop", None))
                conn.close()
            except OSError:
                pass
        for proc in self.procs if wait else ():
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(1)
        self.conns, self.procs = [], []


class _Driver:
    """The per-module steps of :meth:`Project._analyse`, run by the workers."""

    def __init__(self, project: Project, pool: _Pool):
        self.p, self.pool = project, pool
        self.owner: Dict[str, int] = {}     # module path -> the worker that took it

    def _replay(self, answers) -> List[object]:
        return _replay(self.p, answers)

    def index(self, mods: List[Module]) -> None:
        parts = self._replay(self.pool.broadcast(("index", None)))
        for w, part in enumerate(parts):
            self.owner.update((s[0], w) for s in part)
        summaries = [s for part in parts for s in part]
        if len(self.owner) != len(self.p.modules):
            raise WorkerFailed("a module was not indexed")
        _apply_index(self.p, summaries)
        self._replay(self.pool.broadcast(("others", summaries)))

    def _per_module(self, cmd: str, mods: List[Module]) -> List[object]:
        asks: List[list] = [[] for _ in self.pool.conns]
        for m in mods:
            asks[self.owner[m.path]].append((m.path, self.p.seeds.get(m.path)))
        got: Dict[str, object] = {}
        for ask, (values, failures) in zip(asks, self._replay(self.pool.call([(cmd, ask) for ask in asks]))):
            got.update(zip((path for path, _ in ask), values))
            _apply_failures(self.p, failures)
        return [got[m.path] for m in mods]

    def outgoing(self, mods: List[Module]):
        return self._per_module("outgoing", mods)

    def exports(self, mods: List[Module]):
        return self._per_module("exports", mods)


def _replay(project: Project, answers) -> List[object]:
    """The workers' answers; the cache entries they stored are stored here."""
    values = []
    for value, journal in answers:
        if project.cache is not None:
            for kind, key, entry, tag in journal:
                project.cache.put(kind, key, entry, tag)
        values.append(value)
    return values


def _apply_index(project: Project, summaries) -> None:
    for path, sha, mentions_jax, error, entry, failure in summaries:
        m = project.by_path[path]
        m.sha, m.mentions_jax, m.error = sha, mentions_jax, error
        _apply_failures(project, [(path, failure)])
        if entry is not None and not m.indexed:
            set_index(m, entry)


def _apply_failures(project: Project, failures) -> None:
    """A worker's modules whose step raised (:meth:`Project.guarded`): failed here too."""
    for path, failure in failures:
        if failure is not None:
            m = project.by_path[path]
            m.failure, m.failure_internal = failure


def _failures(mods) -> list:
    return [(m.path, (m.failure, m.failure_internal) if m.failure is not None else None) for m in mods]


def _set_seeds(project: Project, seeds) -> None:
    for path, per in seeds:
        if per:
            project.seeds[path] = dict(per)
        else:
            project.seeds.pop(path, None)
        project._seed_keys.pop(path, None)


# ------------------------------------------------------------------ the worker
def _serve(conn, ws, project: Project, queue, lint_for: Callable) -> None:
    """A worker's loop: answer the parent's requests about the modules it owns."""
    # the parent's SIGTERM handler (raise like Ctrl-C, for its clean-ups) is not the worker's:
    # a worker the parent terminates just ends; Ctrl-C (sent to the whole foreground group) is
    # the parent's to handle: the worker then sees its pipe close and exits, without a traceback
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _unblock(None)      # (forked with them blocked: see _Pool; one pending now ends the worker or is ignored)
    gc.disable()    # the worker's models live until its files are linted (as in one process)
    if project.cache is not None:
        project.cache.journal = []
    mods: List[Module] = []     # the modules this worker owns
    while True:
        try:
            cmd, arg = conn.recv()
        except (EOFError, OSError):
            break
        if cmd == "stop":
            break
        try:
            value = _HANDLERS[cmd](ws, project, mods, arg if cmd != "index" else queue, lint_for)
            journal = project.cache.journal if project.cache is not None else []
            conn.send(("ok", value, journal or []))
        except BaseException:   # the parent falls back to one process
            conn.send(("error", traceback.format_exc(), []))
            break
        if cmd == "lint":
            break       # the last request: exit now (the parent does not wait for it)
        if project.cache is not None:
            project.cache.journal = []
    conn.close()


def _index(ws, project, mods, queue, lint_for):
    """Take modules from the shared counter until none is left; index each."""
    order, taken = queue
    while True:
        with taken.get_lock():
            i = taken.value
            taken.value = i + 1
        if i >= len(order):
            break
        m = project.by_path[order[i]]
        project.guarded("indexing", m, project._fingerprint, None)
        mods.append(m)
    return [(m.path, m.sha, m.mentions_jax, m.error, index_entry(m) if m.indexed else None,
             (m.failure, m.failure_internal) if m.failure is not None else None) for m in mods]


def _own(ws, project, mods, paths, lint_for):
    mods.extend(project.by_path[p] for p in paths)


def _others(ws, project, mods, summaries, lint_for):
    _apply_index(project, summaries)


def _outgoing(ws, project, mods, ask, lint_for):
    _set_seeds(project, ask)
    asked = [project.by_path[path] for path, _ in ask]
    return ([project.guarded("cross-module calls", m, project._outgoing_of, []) for m in asked],
            _failures(asked))


def _exports(ws, project, mods, ask, lint_for):
    _set_seeds(project, ask)
    asked = [project.by_path[path] for path, _ in ask]
    return [project.guarded("exported facts", m, project._exports_of, {}) for m in asked], _failures(asked)


def _lint(ws, project, mods, arg, lint_for):
    seeds, exports, exports_key, paths = arg
    _set_seeds(project, [(m.path, seeds.get(m.path)) for m in mods])
    for m in project.modules:
        m.exports = exports.get(m.path, {})
    project._exports_key = exports_key
    project._analysed = True
    ws._recording, ws._prefetched = {}, {}
    for p in paths:
        m = project.module_for(p)
        try:
            source = m.source if m is not None and m.source is not None else _read(p)     # (a notebook too)
            lint_for(p)(source)
        except Exception:   # the parent lints this file again and reports the problem
            pass
        ws.done(p)
    found, ws._recording = ws._recording, None
    return found, ws._prefetched


_HANDLERS = {"index": _index, "own": _own, "others": _others, "outgoing": _outgoing, "exports": _exports, "lint": _lint}
