"""Why a module could not be confirmed, in the user's terms (no JAX here).

An import that fails says little by its exception alone; the fix differs by cause: a missing
dependency (install it), a data file the module reads at import (make it available, or guard the
read), code written for another JAX/Flax than the one installed (the finding may be stale), the
project's own package not installed (``pip install -e .``), module-level work that outlives the
time limit (guard it with ``if __name__ == "__main__":``).  :func:`import_failure` names the cause.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

# the JAX ecosystem: an API of these missing means the code targets another version
JAX_FAMILY = ("jax", "jaxlib", "flax", "optax", "chex", "equinox", "haiku", "orbax", "distrax")
_NO_MODULE = re.compile(r"No module named '([^']+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)' from '([^']+)'")
_NO_ATTR = re.compile(r"module '([^']+)' has no attribute '([^']+)'")
_NO_METADATA = re.compile(r"No package metadata was found for (\S+)")
_FILE = re.compile(r"No such file or directory: '([^']+)'")


def _family(module: str) -> bool:
    return module.split(".")[0] in JAX_FAMILY


def import_failure(err_type: str, message: str, mro: Iterable[str] = (), versions: Optional[dict] = None) -> str:
    """The cause of an import failure, as the words that start its reason ("" when unknown)."""
    mro = set(mro) | {err_type}
    installed = ", ".join(f"{k} {v}" for k, v in (versions or {}).items() if v)
    installed = f" (installed: {installed})" if installed else ""
    m = _NO_MODULE.search(message)
    if m and "ModuleNotFoundError" in mro:
        name = m.group(1)
        if _family(name) and "." in name:
            return f"code written for another JAX version: `{name}` does not exist in the installed one{installed}"
        return f"missing dependency: `{name.split('.')[0]}` is not installed for this Python"
    m = _CANNOT_IMPORT.search(message)
    if m and _family(m.group(2)):
        return (f"code written for another JAX version: `{m.group(2)}` has no `{m.group(1)}` in the installed "
                f"one{installed}")
    m = _NO_ATTR.search(message)
    if m and "AttributeError" in mro and _family(m.group(1)):
        return (f"code written for another JAX version: `{m.group(1)}` has no `{m.group(2)}` in the installed "
                f"one{installed}")
    m = _NO_METADATA.search(message)
    if m:
        return (f"the package `{m.group(1)}` is not installed (its code is here, but it reads its own installed "
                f"metadata): `pip install -e .` in the project")
    m = _FILE.search(message)
    if m and ("FileNotFoundError" in mro or "OSError" in mro):
        return f"missing data file: the module reads `{m.group(1)}` when imported"
    if "ImportError" in mro and "relative import" in message:
        return "not importable as part of its package (a relative import with no package above it)"
    return ""


def timed_out(phase: str, seconds: float) -> str:
    """The reason for a worker stopped at its time limit, by the phase it was in."""
    if phase.startswith("importing the module"):
        return (f"module-level work timed out: importing the module ran past {seconds:g} s (its top-level code "
                f"runs on import: guard long work with `if __name__ == \"__main__\":`, or raise "
                f"[tool.jaxlint.confirm] timeout)")
    return f"timed out after {seconds:g} s while {phase}"
