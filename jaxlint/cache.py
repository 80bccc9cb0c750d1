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
``manifest``  the project's files as a run found them (their ``stat``) and the findings key of
              each file it checked: a later run with nothing changed is answered from it and
              ``findings`` alone (:meth:`jaxlint.workspace.Workspace.warm_results`)

A table is one JSON object written one entry per line; a run decodes only the entries it
asks for and writes back the others' bytes as it read them (only what it stored is encoded).

``--jobs`` workers (:mod:`jaxlint.jobs`) read a copy of the tables forked from
the parent and send what they store back in a journal, which the parent
replays: one process writes the folder.

Only a cache this installation wrote is read.  Each table starts with a line
holding an HMAC-SHA256 of its kind and content under a secret key of this user
(``$JAXLINT_CACHE_KEY``, else 32 random bytes kept in
``$XDG_CACHE_HOME/jaxlint/cache-key``, mode 0600): a cache folder committed to a
repository, or edited by hand, fails the check and counts as empty, so it can
never hide a finding.  A table that fails the check, does not parse, nests too
deeply or holds an entry of the wrong shape is read as empty (entries of the
wrong shape are misses); it is never an error.  Without a usable key the cache
is neither read nor written.  Only regular files are read (a FIFO or a link to
``/dev/zero`` in the folder is ignored), and a cache folder that is a symbolic
link is never written through.  Tables and the folder's ``.gitignore`` are
written atomically (a full disk leaves the old file, never an empty one; an
empty or damaged ``.gitignore`` is repaired on the next write).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import stat
from typing import Any, Dict, List, Optional, Tuple

from . import __version__
from .discovery import read_regular

CACHE_DIR = ".jaxlint_cache"
KINDS = ("index", "outgoing", "exports", "findings", "manifest")
HEADER = b"jaxlint-cache 1 "
GITIGNORE = "# created by jaxlint: this folder is a cache\n*\n"
# a table past this size is not one this installation wrote (read as empty)
MAX_TABLE_BYTES = 1 << 30


def _key_file() -> Optional[str]:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxlint", "cache-key") if os.path.isabs(base) else None


_KEY: List[Optional[bytes]] = []


def secret_key() -> Optional[bytes]:
    """This user's cache key (read or created once per process); None when there is none
    to be had (no home folder, a read-only one): the cache is then off."""
    if _KEY:
        return _KEY[0]
    key: Optional[bytes] = None
    env = os.environ.get("JAXLINT_CACHE_KEY")
    if env:
        key = env.encode("utf-8", "surrogatepass")
    else:
        path = _key_file()
        if path is not None:
            key = _read_key(path) or _create_key(path)
    _KEY.append(key)
    return key


def _read_key(path: str) -> Optional[bytes]:
    try:
        raw = read_regular(path, 4096)
    except OSError:
        return None
    return raw if len(raw) >= 16 else None


def _create_key(path: str) -> Optional[bytes]:
    import tempfile
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".cache-key.")
        try:
            os.write(fd, os.urandom(32))
            os.close(fd)
            try:
                os.link(tmp, path)      # never replaces a key another process made meanwhile
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    return _read_key(path)


def _mac(key: bytes, kind: str, body: bytes) -> bytes:
    return hmac.new(key, kind.encode() + b"\0" + body, hashlib.sha256).hexdigest().encode()


def _valid_index(v) -> bool:
    return (isinstance(v, dict) and _str_map(v.get("functions"), _str_list)
            and _str_map(v.get("classes"), lambda c: _str_map(c, _str_list))
            and _str_map(v.get("aliases"), lambda a: isinstance(a, str))
            and all(_str_list(v.get(k, [])) for k in ("static_attrs", "static_methods", "data_attrs", "constants",
                                                      "staticmethods")))


def _valid_outgoing(v) -> bool:
    return isinstance(v, list) and all(
        isinstance(e, list) and len(e) == 8 and isinstance(e[0], str) and isinstance(e[2], str)
        and isinstance(e[3], str) and (e[4] is None or isinstance(e[4], str))
        and isinstance(e[1], list) and all(isinstance(a, list) and len(a) == 2 and isinstance(a[0], (int, str))
                                           and isinstance(a[1], int) for a in e[1])
        and isinstance(e[5], list) and all(isinstance(i, int) for i in e[5]) and _str_list(e[6])
        and isinstance(e[7], bool) for e in v)


def _str_pair(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], str)


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _str_map(v, ok) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and ok(x) for k, x in v.items())


def _valid_manifest(v) -> bool:
    """A project's record for warm runs (see :meth:`jaxlint.workspace.Workspace.warm_results`):
    ``files``: relative path -> [size, mtime_ns, ctime_ns, inode, SHA-1 ("" when not a module),
    changed shortly before it was stat'ed]; ``findings``: relative path -> [findings key, SHA-1
    of the text linted]."""
    return (isinstance(v, dict) and _str_map(v.get("findings"), _str_pair)
            and _str_map(v.get("files"), lambda e: isinstance(e, list) and len(e) == 6
                         and all(isinstance(x, int) and not isinstance(x, bool) for x in e[:4])
                         and isinstance(e[4], str) and isinstance(e[5], bool)))


# what an entry's value must look like to be used (anything else is a miss)
VALID = {"index": _valid_index, "outgoing": _valid_outgoing,
         "exports": lambda v: _str_map(v, lambda d: isinstance(d, dict)),
         "findings": lambda v: isinstance(v, list) and all(isinstance(d, dict) for d in v),
         "manifest": _valid_manifest}


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
    disk never fails a lint run: the cache is then simply empty.

    A table is one JSON object laid out one entry per line (``{\n"key":{"t":tag,"v":value},\n...\n}``):
    reading it splits the lines and decodes an entry only when it is asked for, and
    writing it back copies the bytes of every entry this run did not store (only new
    entries are encoded).  A table of another layout (still a JSON object) is decoded
    whole."""

    def __init__(self, root: str):
        self.root = root
        self.dir = os.path.join(root, CACHE_DIR, __version__)
        self.key = secret_key()
        self.hits = 0
        self.misses = 0
        self._raw: Dict[str, Dict[str, bytes]] = {}         # kind -> key -> entry as read (undecoded)
        self._dec: Dict[str, Dict[str, Any]] = {}           # kind -> key -> decoded or stored entry
        self._fresh: Dict[str, set] = {}                    # kind -> keys whose entry must be encoded
        self._tagmap: Dict[str, Dict[bytes, str]] = {}      # kind -> tag (as JSON) -> key
        self._changed: set = set()                          # kinds to write back
        self._dirty = False
        # set in a --jobs worker: every put is also recorded here, for the parent to replay
        self.journal: Optional[List[Tuple[str, str, Any, str]]] = None

    def load(self) -> None:
        """Read every table now (before forking workers, so that they share the copy)."""
        for kind in KINDS:
            self._kind(kind)

    def tags(self, kind: str) -> Dict[str, str]:
        """tag (the file an entry is about) -> key of its entry."""
        out = {}
        for tag, key in self._tags(kind).items():
            try:
                out[json.loads(tag)] = key
            except ValueError:
                continue
        return out

    def _kind(self, kind: str) -> Dict[str, bytes]:
        raw = self._raw.get(kind)
        if raw is None:
            raw = self._raw[kind] = self._read(kind)
            self._dec.setdefault(kind, {})
            self._fresh.setdefault(kind, set())
        return raw

    def _table(self, kind: str) -> Dict[str, Any]:
        """Every entry of a table, decoded (the dictionary is the table: what is changed in it
        is written back by :meth:`flush`)."""
        raw = self._kind(kind)
        dec = self._dec[kind]
        for key, line in raw.items():
            if key not in dec:
                entry = _decode(line)
                if entry is not _BAD:
                    dec[key] = entry
        raw.clear()
        self._fresh[kind] = set(dec)
        self._tagmap.pop(kind, None)
        self._changed.add(kind)
        self._dirty = True
        return dec

    def _tags(self, kind: str) -> Dict[bytes, str]:
        tags = self._tagmap.get(kind)
        if tags is None:
            raw = self._kind(kind)
            tags = {}
            for key, line in raw.items():
                m = _TAG.match(line)
                if m is not None:
                    tags[m.group(1)] = key
            for key in self._fresh[kind]:
                entry = self._dec[kind].get(key)
                if isinstance(entry, dict) and isinstance(entry.get("t"), str):
                    tags[_tag_bytes(entry["t"])] = key
            self._tagmap[kind] = tags
        return tags

    def _read(self, kind: str) -> Dict[str, bytes]:
        """A table as this installation wrote it, or empty (never an error, never a hang):
        key -> the entry's JSON text, not decoded yet."""
        if self.key is None:
            return {}
        try:
            raw = read_regular(os.path.join(self.dir, kind + ".json"), MAX_TABLE_BYTES)
        except OSError:
            return {}
        head, _, body = raw.partition(b"\n")
        if not head.startswith(HEADER) or not hmac.compare_digest(head[len(HEADER):], _mac(self.key, kind, body)):
            return {}       # not written by this installation (committed, edited, damaged): ignored
        lines = _split(body)
        if lines is not None:
            return lines
        try:                # another layout of the same JSON object: decoded whole, written back in lines
            table = json.loads(body)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(table, dict):
            return {}
        dec = self._dec.setdefault(kind, {})
        dec.update(table)
        self._fresh.setdefault(kind, set()).update(table)
        return {}

    def get(self, kind: str, key: str) -> Optional[Any]:
        raw = self._kind(kind)
        entry = self._dec[kind].get(key)
        if entry is None:
            line = raw.get(key)
            entry = _decode(line) if line is not None else None
            if entry is not None and entry is not _BAD:
                self._dec[kind][key] = entry      # decoded once; still written back as it was read
        if not isinstance(entry, dict) or "v" not in entry or not VALID[kind](entry["v"]):
            self.misses += 1
            return None
        self.hits += 1
        return entry["v"]

    def put(self, kind: str, key: str, value: Any, tag: str) -> None:
        """Store ``value`` under ``key``; the previous entry with the same ``tag`` goes."""
        raw = self._kind(kind)
        tags = self._tags(kind)
        t = _tag_bytes(tag)
        old = tags.get(t)
        if old is not None and old != key:
            raw.pop(old, None)
            self._dec[kind].pop(old, None)
            self._fresh[kind].discard(old)
        raw.pop(key, None)
        self._dec[kind][key] = {"t": tag, "v": value}
        self._fresh[kind].add(key)
        tags[t] = key
        self._changed.add(kind)
        self._dirty = True
        if self.journal is not None:
            self.journal.append((kind, key, value, tag))

    def flush(self) -> None:
        """Write back the tables this run changed (nothing when it only read)."""
        if not self._dirty or self.key is None:
            return
        try:
            if not self._own_folder():
                return
            top = os.path.dirname(self.dir)
            ignore = os.path.join(top, ".gitignore")
            try:
                intact = read_regular(ignore, 4096).decode("utf-8", "replace") == GITIGNORE
            except OSError:
                intact = False
            if not intact:      # missing, or left empty by a full disk: (re)written atomically
                _write_atomic(top, ignore, GITIGNORE.encode("utf-8"))
            for kind in sorted(self._changed):
                body = self._body(kind)
                if body is None:
                    continue
                _write_atomic(self.dir, os.path.join(self.dir, kind + ".json"),
                              HEADER + _mac(self.key, kind, body) + b"\n" + body)
        except OSError:
            return
        self._dirty = False
        self._changed.clear()

    def _body(self, kind: str) -> Optional[bytes]:
        """The table's text: the entries read and not replaced as they were read, the others
        encoded (None when one cannot be: the table is then not written)."""
        raw, dec, fresh = self._raw.get(kind, {}), self._dec.get(kind, {}), self._fresh.get(kind, set())
        lines = [b'"' + key.encode("ascii") + b'":' + line for key, line in raw.items() if key not in fresh]
        try:
            for key in fresh:
                if key in dec:
                    lines.append(json.dumps(key).encode("utf-8") + b":"
                                 + json.dumps(dec[key], separators=(",", ":")).encode("utf-8"))   # the C encoder
        except (TypeError, ValueError, RecursionError):
            return None
        return b"{\n" + b",\n".join(lines) + b"\n}" if lines else b"{}"

    def _own_folder(self) -> bool:
        """Create the cache folder; False when it (or the folder above) is a symbolic link
        or not a folder: a repository could point it anywhere, so it is never written through."""
        top = os.path.join(self.root, CACHE_DIR)
        for d in (top, self.dir):
            try:
                st = os.lstat(d)
            except FileNotFoundError:
                os.mkdir(d)
                continue
            if not stat.S_ISDIR(st.st_mode):
                return False
        return True


# one line of a table: "key":{"t":tag,"v":value} (keys are hexadecimal digests; JSON text never
# holds a raw line break, so lines split where the layout put them)
_LINE = re.compile(rb'"([0-9a-f]{1,128})":(\{.*\})\Z', re.S)
_TAG = re.compile(rb'\{"t":("(?:[^"\\]|\\.)*"),"v":')
_BAD = object()


def _split(body: bytes) -> Optional[Dict[str, bytes]]:
    """key -> entry text of a table in the line layout; None for any other layout."""
    if body == b"{}":
        return {}
    if not (body.startswith(b"{\n") and body.endswith(b"\n}")):
        return None
    out: Dict[str, bytes] = {}
    for line in body[2:-2].split(b",\n"):
        m = _LINE.match(line)
        if m is None:
            return None
        out[m.group(1).decode("ascii")] = m.group(2)
    return out


def _decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return _BAD


def _tag_bytes(tag: str) -> bytes:
    return json.dumps(tag).encode("utf-8")


def _write_atomic(folder: str, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in ``folder`` and a rename: the
    old file or the new one, never a part (the temporary file goes on any failure or
    interrupt)."""
    import tempfile     # (imported when a table is written: a warm run writes none)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
