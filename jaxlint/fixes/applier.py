"""Apply fixes: resolve overlaps, re-parse, re-lint, repeat until stable."""
from __future__ import annotations

import ast
import collections
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Callable, Counter, List, Sequence, Set, Tuple

from ..analysis.source import SourceError, SourceFile
from ..discovery import read_regular
from .edits import SAFE, UNSAFE, apply_edits

MAX_PASSES = 10


@dataclass
class FixReport:
    text: str
    applied: Counter = field(default_factory=collections.Counter)   # per rule code
    broken: List[Tuple[str, int, str]] = field(default_factory=list)   # (code, line, why)
    passes: int = 0
    stable: bool = True

    @property
    def total(self) -> int:
        return sum(self.applied.values())


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def allowed_applicabilities(unsafe: bool) -> Set[str]:
    return {SAFE, UNSAFE} if unsafe else {SAFE}


def _as_source(source: SourceFile, text: str):
    """``text`` as a source of the same kind as ``source`` (a notebook stays a notebook, so
    its cells keep their positions and a cell that does not parse stays left out), or None
    when it does not parse as well as ``source`` did: a plain file must parse; a notebook
    must parse with the same cells left out as before (never one more)."""
    make = getattr(source, "with_text", None)
    if make is None:
        return SourceFile(source.path, text, source.encoding) if _parses(text) else None
    try:
        candidate = make(text)
        candidate.parse()
    except (SourceError, ValueError, RecursionError, MemoryError):
        return None
    return candidate if candidate.partial_error == source.partial_error else None


def fix_text(source: SourceFile, lint: Callable[[SourceFile], Sequence], unsafe: bool = False) -> FixReport:
    """Fix ``source`` with the findings ``lint`` returns; never returns text that does not parse.

    Each pass takes the fixable findings in source order, keeps those whose
    edits do not overlap an earlier one, applies them together and re-parses.
    If the combination does not parse, the fixes are retried one at a time and
    any fix whose result does not parse is dropped and reported as a jaxlint
    bug.  The file is then re-linted and the next pass runs, until no fix
    applies or ``MAX_PASSES`` is reached (then ``stable`` is False).
    """
    allowed = allowed_applicabilities(unsafe)
    report = FixReport(source.text)
    failed: Set[Tuple] = set()
    current = source
    for _ in range(MAX_PASSES):
        findings = lint(current)
        fixable = [f for f in findings if f.fix is not None and f.fix.applicability in allowed
                   and _key(f) not in failed]
        if not fixable:
            report.stable = True
            break
        report.passes += 1
        fixable.sort(key=lambda f: f.fix.span)
        chosen = []
        for f in fixable:
            if not any(f.fix.overlaps(c.fix) for c in chosen):
                chosen.append(f)
        text = current.text
        fixed = _as_source(source, apply_edits(text, [e for f in chosen for e in f.fix.edits]))
        if fixed is not None:
            accepted = chosen
        else:
            accepted = []
            for f in chosen:
                trial = _as_source(source, apply_edits(text, [e for g in accepted + [f] for e in g.fix.edits]))
                if trial is not None:
                    accepted.append(f)
                    fixed = trial
                else:
                    failed.add(_key(f))
                    report.broken.append((f.code, f.line, "the fixed code does not parse"))
        if not accepted:
            continue
        for f in accepted:
            report.applied[f.code] += 1
        current = fixed
    else:
        report.stable = not [f for f in lint(current) if f.fix is not None and f.fix.applicability in allowed
                             and _key(f) not in failed]
    report.text = current.text
    return report


def _key(f) -> Tuple:
    return (f.code, f.line, f.col, tuple((e.start, e.end, e.content) for e in f.fix.edits))


def write_atomic(path: str, source: SourceFile, text: str) -> None:
    """Write ``text`` back in the file's own encoding (BOM included), atomically,
    keeping its permission bits.  Raises :class:`SourceError` with one line.

    A symbolic link is written through to its target (the link stays a link and
    every other user of the target sees the fix); a file with several hard links
    is rewritten in place so the links stay shared (not atomic: a rename would
    split them).  When ``source`` holds the bytes it was read from (``raw``), a file
    that no longer holds them (an editor saved it meanwhile) is left alone.  The
    temporary file (``.NAME.XXXX.jaxlint`` beside it) is removed on every failure,
    Ctrl-C and SIGTERM included; a folder where it cannot be created (read-only) is
    a one-line error, nothing written."""
    path = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SourceError("file vanished before the fix could be written; nothing was changed") from None
    except OSError as exc:
        raise SourceError(f"cannot stat: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SourceError("not a regular file; fixes were not written")
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise SourceError("file is read-only; fixes were not written")
    try:
        data = source.encode(text)
    except UnicodeEncodeError as exc:
        raise SourceError(f"fixed text cannot be encoded as {source.encoding}: {exc.reason}") from None
    expected = getattr(source, "raw", None)
    if st.st_nlink > 1:
        try:
            with open(path, "r+b") as fh:
                _unchanged(fh.read(), expected)
                fh.seek(0)
                fh.write(data)
                fh.truncate()
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        try:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".jaxlint")
        except OSError as exc:
            raise SourceError(f"cannot create a temporary file in its folder ({exc.strerror or exc}: a read-only "
                              f"folder?); fixes were not written") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        if expected is not None:    # as late as can be: the file still holds what was read
            try:
                current = read_regular(path)
            except OSError as exc:
                raise SourceError(f"cannot read it again before writing ({exc.strerror or exc}); "
                                  f"fixes were not written") from None
            _unchanged(current, expected)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}; the file was left unchanged") from None
    finally:
        if tmp is not None:     # any failure, Ctrl-C, SIGTERM: no temporary file is left behind
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _unchanged(current: bytes, expected) -> None:
    if expected is not None and current != expected:
        raise SourceError("the file changed on disk since jaxlint read it (saved by an editor?); "
                          "fixes were not written")
