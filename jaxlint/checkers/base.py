"""The rule contract and the one registry every front end reads.

A rule is a class with a stable ``code`` (``JAX101``), a ``symbol``
(``print-under-trace``, read as "allow print under trace"), a one-line
``summary``, an optional declared fix (``fix_applicability``), and its
documentation in the class docstring, in fixed sections::

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    ## Fix safety

``check(ctx)`` yields findings by asking the semantic model questions.
The CLI, the flake8 and pylint plugins, ``jaxlint rule CODE``, the generated
docs and the fixture tests are all derived from :data:`REGISTRY`.
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional

from ..analysis import CERTAIN, Function, SemanticModel, SourceFile
from ..fixes.edits import Edit, Fix

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")


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
                   d["message"], d["confidence"], fix, _rule_fix_title(d["code"]) if fix is not None else None,
                   dict(d["confirmation"]) if d.get("confirmation") is not None else None)


@dataclass
class Settings:
    """Rule options from ``[tool.jaxlint]`` (see docs/configuration.md)."""

    unrolled_loop_threshold: int = 16


class Context:
    """What a rule sees while checking one file."""

    def __init__(self, model: SemanticModel, source: SourceFile, settings: Optional[Settings] = None):
        self.model = model
        self.source = source
        self.settings = settings or Settings()
        self.path = source.path

    def finding(self, rule: "Rule", node: ast.AST, message: str, *, confidence: str = CERTAIN,
                fix: Optional[Fix] = None, end_node: Optional[ast.AST] = None) -> Finding:
        src = self.source
        line = node.lineno
        col = src.char_col(line, node.col_offset)
        last = end_node or node
        end_line = getattr(last, "end_lineno", None) or line
        end_col = src.char_col(end_line, getattr(last, "end_col_offset", None) or node.col_offset)
        return Finding(rule.code, rule.symbol, self.path, line, col, end_line, end_col, message,
                       confidence, fix, rule.fix_title if fix is not None else None)


class Rule:
    code: str = ""
    symbol: str = ""
    summary: str = ""
    fix_title: Optional[str] = None
    fix_applicability: Optional[str] = None   # the applicability of the fix this rule offers, if any
    default_enabled: bool = True
    # how runtime confirmation (jaxlint/confirm/) shows this rule's findings with JAX:
    # a strategy name, or a tuple of the name and the evidence it looks for; None: not confirmable
    confirm: Optional[object] = None

    def check(self, ctx: Context) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    # ------------------------------------------------------------ docs
    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def doc_sections(cls) -> Dict[str, str]:
        sections: Dict[str, str] = {}
        current = None
        buf: List[str] = []
        for line in cls.documentation().splitlines():
            m = re.match(r"^##\s+(.*?)\s*$", line)
            if m:
                if current is not None:
                    sections[current] = "\n".join(buf).strip()
                current, buf = m.group(1), []
            elif current is not None:
                buf.append(line)
        if current is not None:
            sections[current] = "\n".join(buf).strip()
        return sections

    @classmethod
    def markdown(cls) -> str:
        head = f"# {cls.code} `{cls.symbol}`\n\n{cls.summary}\n\n"
        meta = [f"- Default: {'enabled' if cls.default_enabled else 'disabled (opt in with --select)'}"]
        meta.append(f"- Fix: {cls.fix_applicability or 'none'}"
                    + (f" — {cls.fix_title}" if cls.fix_title else ""))
        return head + "\n".join(meta) + "\n\n" + cls.documentation() + "\n"


REGISTRY: Dict[str, Rule] = {}


def _rule_fix_title(code: str) -> Optional[str]:
    rule = REGISTRY.get(code)
    return rule.fix_title if rule is not None else None


def register(cls):
    """Class decorator: add a rule to the registry (codes must be unique)."""
    inst = cls()
    if not re.fullmatch(r"JAX\d{3}", cls.code):
        raise ValueError(f"bad rule code {cls.code!r}")
    if cls.code in REGISTRY:
        raise ValueError(f"duplicate rule code {cls.code}")
    if any(r.symbol == cls.symbol for r in REGISTRY.values()):
        raise ValueError(f"duplicate rule symbol {cls.symbol}")
    REGISTRY[cls.code] = inst
    return cls


def traced_functions(ctx: Context) -> Iterator[Function]:
    """The traced contexts of the file, in source order."""
    for fn in ctx.model.functions:
        if fn.contexts:
            yield fn
