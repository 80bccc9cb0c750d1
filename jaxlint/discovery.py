"""Which files to check: recursion, default excludes, ``exclude`` and ``.gitignore``."""
from __future__ import annotations

import fnmatch
import functools
import os
import re
from typing import Iterator, List, Sequence, Tuple

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox",
    ".venv", ".vscode", "__pycache__", "__pypackages__", "_build", "buck-out", "build", "dist",
    "node_modules", "site-packages", "venv", "*.egg-info",
)


@functools.lru_cache(maxsize=256)
def _compiled(patterns: Tuple[str, ...]):
    """A pattern list, compiled once: one regex for the name-only patterns, and the
    path patterns (with their ``**/``-free spelling) as (pattern, regexes)."""
    names, paths = [], []
    for p in patterns:
        p = p.strip()
        if not p or p.startswith("#") or p.startswith("!"):
            continue
        p = p.rstrip("/")
        if "/" in p:
            p = p.lstrip("/")
            c = os.path.normcase(p)
            paths.append((p, re.compile(fnmatch.translate(c)), re.compile(fnmatch.translate(c.replace("**/", "")))))
        else:
            names.append(fnmatch.translate(os.path.normcase(p)))
    return (re.compile("|".join(names)) if names else None), tuple(paths)


def _match(rel: str, name: str, patterns: Sequence[str]) -> bool:
    names, paths = _compiled(tuple(patterns))
    if names is not None and names.match(os.path.normcase(name)):
        return True
    rel_c = os.path.normcase(rel)
    for p, whole, flat in paths:
        if whole.match(rel_c) or flat.match(rel_c) or rel.startswith(p + "/"):
            return True
    return False


def _gitignore(directory: str) -> List[str]:
    path = os.path.join(directory, ".gitignore")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return [line.rstrip("\n") for line in fh]
    except OSError:
        return []


SUFFIXES = (".py", ".ipynb")


def _display(path: str) -> str:
    """``./a.py`` -> ``a.py``; other spellings as given."""
    while path.startswith("./") and len(path) > 2:
        path = path[2:]
    return path


def is_excluded(path: str, exclude: Sequence[str] = (), root: str = ".") -> bool:
    """Whether ``path`` (or one of its parent folders) matches the default or given
    exclude patterns, relative to ``root``: what ``--force-exclude`` applies to paths
    named on the command line (pre-commit passes every staged file explicitly)."""
    patterns = list(DEFAULT_EXCLUDE) + list(exclude)
    full = os.path.abspath(path)
    rel = os.path.relpath(full, os.path.abspath(root)).replace(os.sep, "/")
    parts = rel.split("/") if not rel.startswith("../") else [os.path.basename(full)]
    for i in range(len(parts)):
        if _match("/".join(parts[: i + 1]), parts[i], patterns):
            return True
    return False


def iter_python_files(paths: Sequence[str], exclude: Sequence[str] = (), root: str = ".",
                      force_exclude: bool = False) -> Iterator[Tuple[str, bool]]:
    """Yield ``(path, exists)`` for every Python file and notebook to check, in a stable order.

    A path named explicitly is always checked (even if excluded or not ending
    in ``.py``) unless ``force_exclude``; missing paths are yielded with
    ``exists=False`` so the caller can report them.  Directories yield
    ``*.py`` files and ``*.ipynb`` notebooks.
    """
    root = os.path.abspath(root)
    patterns = list(DEFAULT_EXCLUDE) + list(exclude)
    seen = set()
    for p in paths:
        if not os.path.exists(p):
            yield p, False
            continue
        if force_exclude and is_excluded(p, exclude, root):
            continue
        if not os.path.isdir(p):
            p = _display(p)
            if p not in seen:
                seen.add(p)
                yield p, True
            continue
        base_ignores = {}
        for dirpath, dirnames, filenames in os.walk(p):
            ignores = base_ignores.get(dirpath, []) + _gitignore(dirpath)
            absdir = os.path.abspath(dirpath)
            keep = []
            for d in sorted(dirnames):
                full = os.path.join(absdir, d)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                relp = os.path.relpath(full, os.path.abspath(p)).replace(os.sep, "/")
                if _match(rel, d, patterns) or _match(relp, d, patterns) or _match(d, d, ignores):
                    continue
                keep.append(d)
                base_ignores[os.path.join(dirpath, d)] = [i for i in ignores if "/" not in i.strip("/")]
            dirnames[:] = keep
            for f in sorted(filenames):
                if not f.endswith(SUFFIXES):
                    continue
                full = _display(os.path.join(dirpath, f))
                rel = os.path.relpath(os.path.abspath(full), root).replace(os.sep, "/")
                if _match(rel, f, patterns) or _match(f, f, ignores):
                    continue
                if full not in seen:
                    seen.add(full)
                    yield full, True
