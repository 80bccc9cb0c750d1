"""Fixes as data: text edits over character ranges plus an applicability."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` (absolute character offsets) with ``content``."""

    start: int
    end: int
    content: str

    @classmethod
    def insert(cls, at: int, content: str) -> "Edit":
        return cls(at, at, content)

    @classmethod
    def delete(cls, start: int, end: int) -> "Edit":
        return cls(start, end, "")


@dataclass(frozen=True)
class Fix:
    title: str
    edits: Tuple[Edit, ...]
    applicability: str = SAFE

    @property
    def span(self) -> Tuple[int, int]:
        return (min(e.start for e in self.edits), max(e.end for e in self.edits))

    def overlaps(self, other: "Fix") -> bool:
        for a in self.edits:
            for b in other.edits:
                if a.start < b.end and b.start < a.end:
                    return True
                if a.start == a.end == b.start == b.end:
                    return True
        return False


def apply_edits(text: str, edits: List[Edit]) -> str:
    """Apply non-overlapping edits (any order) to ``text``."""
    out = []
    pos = 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < pos:
            raise ValueError("overlapping edits")
        out.append(text[pos:e.start])
        out.append(e.content)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)
