"""Text helpers for verdicts (no JAX here)."""
from __future__ import annotations

import re

_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+", re.I)


def clip(s: str, limit: int = 160) -> str:
    """``s`` cut to about ``limit`` characters, never inside a URL: a URL the cut would fall in is
    dropped whole (the cut moves before it), or kept whole when it starts early enough that
    dropping it would leave too little of the message."""
    if len(s) <= limit:
        return s
    cut = limit - 3
    for m in _URL.finditer(s):
        if m.start() < cut < m.end():
            if m.start() >= limit // 2:
                cut = m.start()
            else:
                cut = m.end()
            break
    head = s[:cut].rstrip(" \t([{<'\"")
    if cut >= len(s):
        return head
    return head + (" ..." if head[-1:] in (".", ":", ";", ",") else "...")
