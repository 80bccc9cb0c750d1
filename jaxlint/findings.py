"""What a rule reports, :class:`Finding`, and the rule options, :class:`Settings`: the data the
front ends, the results cache and the rules share.  Importing this module imports neither the
rules nor the model (a warm run reads findings back from the cache and reports them with this
module alone); :mod:`jaxlint.checkers.base` re-exports both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from .analysis.scopes import CERTAIN
from .fixes.edits import Edit, Fix

if TYPE_CHECKING:
    from .analysis.source import SourceFile

# The two profiles (see docs/configuration.md): the default reports what the analysis proves and
# a maintainer acts on; ``strict`` adds findings that rest on something the analysis cannot see
# (a callee whose effect on a key is unknown) or that are deliberate more often than not (a key
# reused in test code).
DEFAULT_PROFILE = "default"
STRICT_PROFILE = "strict"


@dataclass
class Finding:
    code: str
    symbol: str
    path: str
    line: int            # 1-based
    col: int             # 0-based, in characters
    end_line: int
    end_col: int
    message: str
    confidence: str = CERTAIN
    fix: Optional[Fix] = None
    fix_title: Optional[str] = None
    # set by runtime confirmation (jaxlint check --confirm): status, evidence/reason, ...
    confirmation: Optional[dict] = None
    # DEFAULT_PROFILE, or STRICT_PROFILE with ``basis`` saying why it is reported only there
    profile: str = DEFAULT_PROFILE
    basis: Optional[str] = None
    # what the finding is about, when another rule may report the same pitfall (a dropout key
    # that repeats every step is JAX613's and JAX401's): the engine keeps the finding of the rule
    # that ``supersedes`` the other (one pitfall, one finding).  In-process only: never stored.
    subject: Optional[tuple] = field(default=None, compare=False, repr=False)

    def sort_key(self):
        return (self.path, self.line, self.col, self.code)

    def to_dict(self, source: Optional[SourceFile] = None) -> dict:
        d = {
            "path": self.path,
            "line": self.line,
            "col": self.col + 1,
            "end_line": self.end_line,
            "end_col": self.end_col + 1,
            "code": self.code,
            "symbol": self.symbol,
            "message": self.message,
            "confidence": self.confidence,
            "fix": None,
        }
        if self.fix is not None:
            fix = {"title": self.fix.title, "applicability": self.fix.applicability, "edits": []}
            for e in self.fix.edits:
                entry = {"content": e.content}
                if source is not None:
                    sl, sc = source.position(e.start)
                    el, ec = source.position(e.end)
                    entry.update({"start": {"line": sl, "col": sc + 1}, "end": {"line": el, "col": ec + 1}})
                entry.update({"start_offset": e.start, "end_offset": e.end})
                fix["edits"].append(entry)
            d["fix"] = fix
        if self.confirmation is not None:
            d["confirmation"] = dict(self.confirmation)
        d["profile"] = self.profile
        if self.basis is not None:
            d["basis"] = self.basis
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        """The inverse of :meth:`to_dict` (the results cache stores findings as JSON)."""
        fix = None
        if d.get("fix"):
            f = d["fix"]
            edits = tuple(Edit(e["start_offset"], e["end_offset"], e["content"]) for e in f["edits"])
            fix = Fix(f["title"], edits, f["applicability"])
        return cls(d["code"], d["symbol"], d["path"], d["line"], d["col"] - 1, d["end_line"], d["end_col"] - 1,
                   d["message"], d["confidence"], fix, _fix_title(d) if fix is not None else None,
                   dict(d["confirmation"]) if d.get("confirmation") is not None else None,
                   d.get("profile", DEFAULT_PROFILE), d.get("basis"))


@dataclass
class Settings:
    """Rule options from ``[tool.jaxlint]`` (see docs/configuration.md)."""

    unrolled_loop_threshold: int = 16
    # report the strict profile too (``--strict``, ``strict = true``)
    strict: bool = False


def _fix_title(d: dict) -> Optional[str]:
    """The title of the fix of the rule that made the finding ``d``: stored with it by the
    results cache, else asked of the registry (which imports the rules)."""
    title = d.get("fix_title")
    if isinstance(title, str):
        return title
    from .checkers.base import _rule_fix_title
    return _rule_fix_title(d["code"])
