"""Which files to check: recursion, default excludes, ``exclude`` and ``.gitignore``;
and :func:`read_regular`, how jaxlint reads every file a repository supplies.

Only regular files are read (a FIFO named ``x.py`` would block every run, a link to
``/dev/zero`` would fill the memory): one found while walking a folder is skipped
with a one-line note, one named on the command line is an error, and so is a folder
that cannot be listed.
"""
from __future__ import annotations

import errno
import fnmatch
import functools
import os
import re
import stat
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

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
        text = read_regular(path, 16 << 20).decode("utf-8", "replace")
    except OSError:
        return []
    return [line.rstrip("\r") for line in text.split("\n")]


class NotRegular(OSError):
    """Raised by :func:`read_regular` for a FIFO, a device, a socket or a folder."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, for messages."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str, limit: Optional[int] = None) -> bytes:
    """The bytes of the regular file at ``path`` (through symbolic links).  Never blocks
    on a FIFO and never reads a device: the file is opened without blocking and checked
    with ``fstat`` on the open descriptor (no race with a swap after a check).  Raises
    :class:`NotRegular` (``strerror``: "not a regular file (a FIFO)"), or ``OSError``
    with ``strerror`` "file too large" past ``limit`` bytes, or what ``open`` raises."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, f"not a regular file ({file_kind(st.st_mode)})", path)
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, f"file too large ({st.st_size >> 20} MiB; the limit is {limit >> 20} MiB)",
                          path)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if limit is not None and total > limit:
                raise OSError(errno.EFBIG, f"file too large (the limit is {limit >> 20} MiB)", path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def regular_file_problem(path: str) -> Optional[str]:
    """Why ``path`` (an existing path) cannot be read as a file, or None for a regular file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None if stat.S_ISREG(st.st_mode) else f"not a regular file ({file_kind(st.st_mode)}); not checked"


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
                      force_exclude: bool = False,
                      problems: Optional[List[Tuple[str, str, bool]]] = None,
                      stats: Optional[Dict[str, os.stat_result]] = None) -> Iterator[Tuple[str, bool]]:
    """Yield ``(path, exists)`` for every Python file and notebook to check, in a stable order.

    A path named explicitly is always checked (even if excluded or not ending
    in ``.py``) unless ``force_exclude``; missing paths are yielded with
    ``exists=False`` so the caller can report them.  Directories yield
    ``*.py`` files and ``*.ipynb`` notebooks.

    ``problems`` (when given) collects ``(path, message, is_error)``: a non-regular
    file found in a folder is skipped (a note), one named explicitly is an error, and
    so is a folder that cannot be listed; either way nothing is yielded for it.

    ``stats`` (when given) receives the ``os.stat`` of every file found in a folder, taken
    before it is read (the results cache tells an unchanged file by it).
    """
    root = os.path.abspath(root)
    patterns = list(DEFAULT_EXCLUDE) + list(exclude)
    seen = set()

    def problem(path: str, message: str, error: bool) -> None:
        if problems is not None:
            problems.append((path, message, error))

    for p in paths:
        if not os.path.exists(p):
            yield p, False
            continue
        if force_exclude and is_excluded(p, exclude, root):
            continue
        if not os.path.isdir(p):
            p = _display(p)
            why = regular_file_problem(p)
            if why is not None and why.startswith("not a regular file"):
                problem(p, why, True)
                continue
            if p not in seen:
                seen.add(p)
                yield p, True
            continue

        def unlistable(exc: OSError) -> None:
            where = _display(exc.filename or p)
            problem(where, f"cannot list folder: {exc.strerror or exc}; its files were not checked", True)

        top = os.path.abspath(p)
        start_rel = os.path.relpath(top, root).replace(os.sep, "/")
        # (dirpath as os.walk spells it, its path relative to root and to p, the .gitignore
        # patterns it inherits), depth first in sorted order, as os.walk(p) with sorted names
        stack = [(p, start_rel, ".", [])]
        while stack:
            dirpath, rel_dir, relp_dir, inherited = stack.pop()
            listing = _scan(dirpath, unlistable)
            if listing is None:
                continue
            dirnames, files = listing
            ignores = inherited + (_gitignore(dirpath) if ".gitignore" in files else [])
            below = [i for i in ignores if "/" not in i.strip("/")]
            keep = []
            for d in sorted(dirnames):
                rel = d if rel_dir == "." else f"{rel_dir}/{d}"
                relp = d if relp_dir == "." else f"{relp_dir}/{d}"
                if _match(rel, d, patterns) or _match(relp, d, patterns) or _match(d, d, ignores):
                    continue
                keep.append((d, rel, relp))
            for f in sorted(files):
                if not f.endswith(SUFFIXES):
                    continue
                rel = f if rel_dir == "." else f"{rel_dir}/{f}"
                if _match(rel, f, patterns) or _match(f, f, ignores):
                    continue
                full = _display(os.path.join(dirpath, f))
                try:
                    st = files[f].stat()
                except OSError:
                    st = None
                if st is None or not stat.S_ISREG(st.st_mode):
                    why = regular_file_problem(full)
                    if why is not None and why.startswith("not a regular file"):
                        problem(full, why.replace("; not checked", ""), False)
                        continue
                elif stats is not None:
                    stats[full] = st
                if full not in seen:
                    seen.add(full)
                    yield full, True
            for d, rel, relp in reversed(keep):
                sub = os.path.join(dirpath, d)
                if not os.path.islink(sub):     # (os.walk does not follow links to folders)
                    stack.append((sub, rel, relp, below))


def _scan(dirpath: str, onerror) -> Optional[Tuple[List[str], Dict[str, os.DirEntry]]]:
    """A folder's sub-folders (through links) and other entries, as ``os.walk`` sorts them;
    None when it cannot be listed (``onerror`` is told)."""
    dirs: List[str] = []
    files: Dict[str, os.DirEntry] = {}
    try:
        it = os.scandir(dirpath)
    except OSError as exc:
        onerror(exc)
        return None
    with it:
        while True:
            try:
                entry = next(it)
            except StopIteration:
                break
            except OSError as exc:
                onerror(exc)
                return None
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                dirs.append(entry.name)
            else:
                files[entry.name] = entry
    return dirs, files


# what marks a project's root folder (see :func:`find_root`)
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


def find_root(path: str) -> Optional[str]:
    """The nearest folder at or above ``path`` holding a project marker."""
    d = os.path.abspath(path)
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    while True:
        if any(os.path.exists(os.path.join(d, m)) for m in ROOT_MARKERS):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
