"""``jaxlint --watch``: check, then check again whenever a watched file changes.

File events come from `watchfiles <https://pypi.org/project/watchfiles/>`_ (Rust ``notify``
underneath: inotify, FSEvents, ReadDirectoryChangesW, with polling as the fallback), an optional
dependency: ``python -m pip install 'jaxlint-static[watch]'``.  Events are debounced (a save
that writes several files, or an editor's write-then-rename, is one batch) and filtered to what
can change a result: Python files and notebooks, ``pyproject.toml`` (the configuration) and
``.gitignore`` (discovery), never jaxlint's own cache, temporary files or excluded folders.

Each run is a complete ``jaxlint check`` of the same paths with the same options, so
cross-module findings stay right; with the results cache (``.jaxlint_cache``) only the changed
modules and what they reach are analysed again, which makes a re-check near-instant.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, Iterable, List, Optional, Sequence, Set, TextIO, Tuple

from .config import ConfigError

INSTALL_HINT = "python -m pip install 'jaxlint-static[watch]'"
# names that may change a result besides modules and notebooks
WATCHED_NAMES = ("pyproject.toml", ".gitignore")
WATCHED_SUFFIXES = (".py", ".ipynb")
# folders whose contents never change a result (on top of the default and configured excludes)
IGNORED_DIRS = (".jaxlint_cache", ".git", ".hg", ".svn", "__pycache__")
# debounce: how long a batch of events may keep growing (ms), as watchfiles counts it
DEBOUNCE_MS = 300


class WatchUnavailable(Exception):
    """``watchfiles`` is not installed."""


def load_watchfiles():
    try:
        import watchfiles
    except ImportError:
        raise WatchUnavailable(f"--watch needs the watchfiles package: {INSTALL_HINT}") from None
    return watchfiles


def validate(args) -> None:
    """Raise :class:`ConfigError` for options ``--watch`` cannot be combined with."""
    if "-" in (getattr(args, "paths", None) or []):
        raise ConfigError("--watch cannot read standard input ('-')")
    for attr, flag in (("add_noqa", "--add-noqa"), ("write_baseline", "--write-baseline"),
                       ("confirm", "--confirm"), ("confirmed_only", "--confirmed-only")):
        if getattr(args, attr, False):
            why = " (it would import and run your code on every change)" if "confirm" in attr else ""
            raise ConfigError(f"--watch cannot be combined with {flag}{why}")


def is_relevant(path: str, exclude: Sequence[str] = (), root: Optional[str] = None) -> bool:
    """Whether a change to ``path`` can change what ``jaxlint check`` reports."""
    name = os.path.basename(path)
    if not (name.endswith(WATCHED_SUFFIXES) or name in WATCHED_NAMES):
        return False
    if name.endswith(".jaxlint") or (name.startswith(".") and name not in WATCHED_NAMES):
        return False        # the fix applier's temporary files (.NAME.py.XXXX.jaxlint), editors' dot files
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if any(p in IGNORED_DIRS for p in parts[:-1]):
        return False
    if root is not None and name not in WATCHED_NAMES:
        from .discovery import is_excluded
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        if not rel.startswith(".."):
            return not is_excluded(path, exclude, root)
    return True


def watch_roots(paths: Sequence[str]) -> List[str]:
    """The existing paths to watch (a missing one is watched through its nearest existing folder,
    so creating it starts a run)."""
    roots: List[str] = []
    for p in paths or ["."]:
        if p == "-":
            continue
        cand = os.path.abspath(p)
        while not os.path.exists(cand):
            parent = os.path.dirname(cand)
            if parent == cand:
                break
            cand = parent
        if cand not in roots:
            roots.append(cand)
    return roots


def _describe(changed: Sequence[str]) -> str:
    names = [os.path.relpath(p) if not os.path.relpath(p).startswith("..") else p for p in changed]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} file{'s' if len(names) != 1 else ''} changed ({shown})"


def watch(paths: Sequence[str], check: Callable[[], int], *, out: Optional[TextIO] = None,
          exclude: Sequence[str] = (), root: Optional[str] = None,
          changes: Optional[Iterable[Set[Tuple[object, str]]]] = None,
          recoverable: Tuple[type, ...] = (ConfigError,), clear: Optional[bool] = None,
          stop_event=None) -> int:
    """Run ``check()`` now and after every batch of relevant changes under ``paths``, until
    Ctrl-C (or ``stop_event`` is set); returns 0 then.

    ``changes`` (batches of ``(change, path)``) replaces the file watcher, for tests.  An
    exception in ``recoverable`` (a broken ``pyproject.toml`` saved mid-edit) is reported in one
    line and watching goes on.  ``clear`` (default: when ``out`` is a terminal) clears the screen
    before each run, as ``ruff --watch`` does."""
    out = out or sys.stderr
    if clear is None:
        clear = bool(getattr(out, "isatty", lambda: False)())
    if changes is None:
        watchfiles = load_watchfiles()
        roots = watch_roots(paths)
        changes = watchfiles.watch(*roots, watch_filter=lambda _c, p: is_relevant(p, exclude, root),
                                   debounce=DEBOUNCE_MS, stop_event=stop_event, raise_interrupt=False)

    def run(header: str) -> None:
        if clear:
            out.write("\x1b[2J\x1b[H")
        out.write(f"[{time.strftime('%H:%M:%S')}] {header}\n")
        out.flush()
        try:
            check()
        except recoverable as exc:
            out.write(f"jaxlint: error: {exc}\n")
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        out.write(f"[{time.strftime('%H:%M:%S')}] watching for changes (Ctrl-C to stop)\n")
        out.flush()

    try:
        run("checking")
        for batch in changes:
            changed = sorted({p for _c, p in batch if is_relevant(p, exclude, root)})
            if not changed:
                continue
            run(f"{_describe(changed)}; checking again")
    except KeyboardInterrupt:
        pass
    return 0
