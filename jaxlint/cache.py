"""The results cache: ``.jaxlint_cache/`` at the project root.

Every entry is keyed by the SHA-1 of a file's bytes plus everything else its
content depends on (jaxlint's version, the configuration, what the rest of the
project knows about the file), so an entry is never stale: a changed file, a
changed dependency or a new jaxlint simply asks for another key.  Entries are
JSON (a cache folder can arrive with a cloned repository; JSON cannot run code
when it is read).  The folder holds its own ``.gitignore`` so it is never
committed.  ``--no-cache`` bypasses it.

Kinds of entry (one JSON file each):

``index``     a module's top-level functions, classes and import aliases
``outgoing``  the calls its traced code makes into other modules
``exports``   the facts other modules read about its functions
``findings``  the findings of one file under one configuration

``--jobs`` workers (:mod:`jaxlint.jobs`) read a copy of the tables forked from
the parent and send what they store back in a journal, which the parent
replays: one process writes the folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from . import __version__

CACHE_DIR = ".jaxlint_cache"
KINDS = ("index", "outgoing", "exports", "findings")


def digest(*parts: Any) -> str:
    """A stable key for JSON-serialisable parts (strings are hashed as they are: a key
    is computed for every file of every run, warm ones included)."""
    h = hashlib.sha1()
    for p in parts:
        if p.__class__ is str:
            h.update(b"s")
            h.update(p.encode("utf-8", "surrogatepass"))
        else:
            h.update(b"j")
            h.update(json.dumps(p, sort_keys=True, default=str).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def file_digest(raw: bytes) -> str:
    return hashlib.sha1(raw).hexdigest()


class Cache:
    """One JSON file per kind of entry, read once per run and written back by
    :meth:`flush` (atomically).  Each entry carries a tag (the file it is
    about): storing a new entry for a tag drops the old one, so the cache
    holds one entry per file and kind and never grows with edits.  A failing
    disk never fails a lint run: the cache is then simply empty."""

    def __init__(self, root: str):
        self.dir = os.path.join(root, CACHE_DIR, __version__)
        self.hits = 0
        self.misses = 0
        self._tables: Dict[str, Dict[str, Any]] = {}
        self._tags: Dict[str, Dict[str, str]] = {}
        self._dirty = False
        # set in a --jobs worker: every put is also recorded here, for the parent to replay
        self.journal: Optional[List[Tuple[str, str, Any, str]]] = None

    def load(self) -> None:
        """Read every table now (before forking workers, so that they share the copy)."""
        for kind in KINDS:
            self._table(kind)

    def tags(self, kind: str) -> Dict[str, str]:
        """tag (the file an entry is about) -> key of its entry."""
        self._table(kind)
        return self._tags[kind]

    def _table(self, kind: str) -> Dict[str, Any]:
        table = self._tables.get(kind)
        if table is None:
            try:
                with open(os.path.join(self.dir, kind + ".json"), encoding="utf-8") as f:
                    table = json.load(f)
                if not isinstance(table, dict):
                    table = {}
            except (OSError, ValueError):
                table = {}
            self._tables[kind] = table
            self._tags[kind] = {entry.get("t"): key for key, entry in table.items() if isinstance(entry, dict)}
        return table

    def get(self, kind: str, key: str) -> Optional[Any]:
        entry = self._table(kind).get(key)
        if not isinstance(entry, dict) or "v" not in entry:
            self.misses += 1
            return None
        self.hits += 1
        return entry["v"]

    def put(self, kind: str, key: str, value: Any, tag: str) -> None:
        """Store ``value`` under ``key``; the previous entry with the same ``tag`` goes."""
        table = self._table(kind)
        old = self._tags[kind].get(tag)
        if old is not None and old != key:
            table.pop(old, None)
        table[key] = {"t": tag, "v": value}
        self._tags[kind][tag] = key
        self._dirty = True
        if self.journal is not None:
            self.journal.append((kind, key, value, tag))

    def flush(self) -> None:
        """Write the tables back (nothing when this run only read)."""
        if not self._dirty:
            return
        try:
            os.makedirs(self.dir, exist_ok=True)
            ignore = os.path.join(os.path.dirname(self.dir), ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w", encoding="utf-8") as f:
                    f.write("# created by jaxlint: this folder is a cache\n*\n")
            for kind, table in self._tables.items():
                fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as f:
                        f.write(json.dumps(table, separators=(",", ":")))   # dumps: the C encoder
                    os.replace(tmp, os.path.join(self.dir, kind + ".json"))
                except (OSError, TypeError, ValueError):
                    if os.path.exists(tmp):
                        os.unlink(tmp)
        except OSError:
            return
        self._dirty = False
