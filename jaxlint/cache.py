"""The results cache: ``.jaxlint_cache/`` at the project root.

Every entry is keyed by the SHA-1 of a file's bytes plus everything else its
content depends on (jaxlint's version, the configuration, what the rest of the
project knows about the file), so an entry is never stale: a changed file, a
changed dependency or a new jaxlint simply asks for another key.  Entries are
JSON (a cache folder can arrive with a cloned repository; JSON cannot run code
when it is read).  The folder holds its own ``.gitignore`` so it is never
committed.  ``--no-cache`` bypasses it.

Kinds of entry (one folder each):

``index``     a module's top-level functions, classes and import aliases
``outgoing``  the calls its traced code makes into other modules
``findings``  the findings of one file under one configuration
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Optional

from . import __version__

CACHE_DIR = ".jaxlint_cache"


def digest(*parts: Any) -> str:
    """A stable key for JSON-serialisable parts."""
    h = hashlib.sha1()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def file_digest(raw: bytes) -> str:
    return hashlib.sha1(raw).hexdigest()


class Cache:
    """A folder of JSON entries; a failing disk never fails a lint run."""

    def __init__(self, root: str):
        self.dir = os.path.join(root, CACHE_DIR, __version__)
        self.hits = 0
        self.misses = 0
        self._ready = False

    def _prepare(self) -> bool:
        if self._ready:
            return True
        try:
            os.makedirs(self.dir, exist_ok=True)
            ignore = os.path.join(os.path.dirname(self.dir), ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w", encoding="utf-8") as f:
                    f.write("# created by jaxlint: this folder is a cache\n*\n")
            self._ready = True
        except OSError:
            return False
        return True

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.dir, kind, key[:2], key + ".json")

    def get(self, kind: str, key: str) -> Optional[Any]:
        try:
            with open(self._path(kind, key), encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, kind: str, key: str, value: Any) -> None:
        if not self._prepare():
            return
        path = self._path(kind, key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(value, f)
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError):
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass
