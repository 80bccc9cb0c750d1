"""``[tool.jaxlint.confirm]`` and the argument-spec language (no JAX here).

Argument specs describe the inputs the confirmation worker traces a function
with.  They are parsed here, in the parent process, into a small JSON-able
form that the worker turns into ``jax.ShapeDtypeStruct`` values::

    "f32[8,3]"        an array: dtype and shape      {"t": "array", "dtype": "float32", "shape": [8, 3]}
    "i32[]"           a scalar array
    "f32[batch,3]"    named dimensions take their size from ``dims`` (else ``dim-size``)
    "key"             a typed PRNG key (``jax.random.key``); "key[4]" a batch of keys
    "None"            the Python value None
    other strings     a static Python string
    1, 0.5, true      static Python literals
    [..]              a Python list (a pytree; each item a spec)
    {a = .., b = ..}  a dict (a pytree; each value a spec)

A function's entry maps ``"package.module:function"`` (or ``:Class.method``,
or ``path/to/file.py:function``) to a list (positional arguments) or a table
(keyword arguments)::

    [tool.jaxlint.confirm]
    timeout = 60                # seconds per module (finite, positive)
    memory-limit = 8192         # MiB per worker, its children included
    command-timeout = 1800      # seconds for the harness command
    run-main = true             # plain --confirm may run a module's `if __name__ == "__main__":` block
    dim-size = 4
    dims = { batch = 8 }
    array-shape = [4]
    "examples.train:loss_fn" = [{ w = "f32[784,10]", b = "f32[10]" }, "f32[32,784]", "i32[32]"]
    "examples.model:MLP" = { features = 16 }          # constructor arguments for methods
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore

DTYPES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "c64": "complex64", "c128": "complex128", "bool": "bool", "b": "bool",
}
for _v in list(DTYPES.values()):
    DTYPES[_v] = _v

_ARRAY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*\[([^\]]*)\]\s*$")
_KEY = re.compile(r"^\s*key\s*(?:\[([^\]]*)\])?\s*$")

SETTINGS = {"timeout", "device", "dim-size", "dims", "array-shape", "array-dtype", "memory-limit",
            "command-timeout", "run-main"}
DEVICES = ("cpu", "gpu", "tpu")


class SpecError(ValueError):
    pass


@dataclass
class ConfirmConfig:
    timeout: float = 60.0               # seconds per module (a worker past it is killed)
    memory_limit: int = 8192            # MiB of resident memory per worker (and its children)
    command_timeout: float = 1800.0     # seconds for the harness command (`jaxlint confirm -- CMD`)
    run_main: bool = True               # plain --confirm may run a module's `__main__` block (mainrun.py)
    device: Optional[str] = None
    dim_size: int = 4
    dims: Dict[str, int] = field(default_factory=dict)
    array_shape: List[int] = field(default_factory=lambda: [4])
    array_dtype: str = "float32"
    # "module:qualname" or "path.py:qualname" -> {"args": [...], "kwargs": {...}}
    specs: Dict[str, dict] = field(default_factory=dict)
    root: str = "."
    # from [tool.jaxlint]: what the project analysis that plans confirmation must know too
    traced_functions: List[str] = field(default_factory=list)
    exclude: List[str] = field(default_factory=list)

    def dim(self, name: str) -> int:
        return self.dims.get(name, self.dim_size)

    def array_default(self) -> dict:
        return {"t": "array", "dtype": self.array_dtype, "shape": list(self.array_shape)}

    def spec_for(self, module: Optional[str], path: Optional[str], qualname: str) -> Optional[dict]:
        """The declared spec for ``qualname`` of the module ``module`` at ``path``."""
        for key, spec in self.specs.items():
            where, _, qual = key.rpartition(":")
            if qual != qualname:
                continue
            if module is not None and where == module:
                return spec
            if path is not None and where.endswith(".py"):
                cand = where if os.path.isabs(where) else os.path.join(self.root, where)
                if os.path.realpath(cand) == os.path.realpath(path):
                    return spec
        return None


def _dims(text: str, cfg: ConfirmConfig, what: str) -> List[int]:
    out: List[int] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if re.fullmatch(r"\d+", part):
            out.append(int(part))
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out.append(cfg.dim(part))
        else:
            raise SpecError(f"{what}: bad dimension {part!r}")
    return out


def parse_spec(value: Any, cfg: ConfirmConfig, what: str = "spec") -> dict:
    """One argument spec (TOML value) -> its JSON-able form."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return {"t": "static", "v": value}
    if isinstance(value, str):
        if value.strip() == "None":
            return {"t": "static", "v": None}
        m = _KEY.match(value)
        if m:
            return {"t": "key", "shape": _dims(m.group(1) or "", cfg, what)}
        m = _ARRAY.match(value)
        if m and m.group(1).lower() in DTYPES:
            return {"t": "array", "dtype": DTYPES[m.group(1).lower()], "shape": _dims(m.group(2), cfg, what)}
        if m:
            raise SpecError(f"{what}: unknown dtype {m.group(1)!r} in {value!r}")
        return {"t": "static", "v": value}
    if isinstance(value, list):
        return {"t": "list", "items": [parse_spec(v, cfg, f"{what}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        return {"t": "dict", "items": {str(k): parse_spec(v, cfg, f"{what}.{k}") for k, v in value.items()}}
    raise SpecError(f"{what}: unsupported value {value!r}")


def parse_call_spec(value: Any, cfg: ConfirmConfig, what: str) -> dict:
    if isinstance(value, list):
        return {"args": [parse_spec(v, cfg, f"{what}[{i}]") for i, v in enumerate(value)], "kwargs": {}}
    if isinstance(value, dict):
        return {"args": [], "kwargs": {str(k): parse_spec(v, cfg, f"{what}.{k}") for k, v in value.items()}}
    raise SpecError(f"{what}: expected a list (positional arguments) or a table (keyword arguments)")


def is_static(spec: dict) -> bool:
    t = spec["t"]
    if t == "static":
        return True
    if t == "list":
        return all(is_static(s) for s in spec["items"])
    if t == "dict":
        return all(is_static(s) for s in spec["items"].values())
    return False


def describe(spec: dict) -> str:
    t = spec["t"]
    if t == "concrete":
        return describe(spec["of"])
    if t == "array":
        short = {v: k for k, v in DTYPES.items() if len(k) <= 4}.get(spec["dtype"], spec["dtype"])
        return f"{short}[{','.join(str(d) for d in spec['shape'])}]"
    if t == "key":
        return "key" + (f"[{','.join(str(d) for d in spec['shape'])}]" if spec["shape"] else "")
    if t == "static":
        return repr(spec["v"])
    if t == "list":
        return "[" + ", ".join(describe(s) for s in spec["items"]) + "]"
    if t == "dict":
        return "{" + ", ".join(f"{k}: {describe(s)}" for k, s in spec["items"].items()) + "}"
    return "?"


def load_confirm_config(pyproject: Optional[str]) -> ConfirmConfig:
    """``[tool.jaxlint.confirm]`` of ``pyproject`` (defaults when None or absent).

    Raises :class:`SpecError` with a one-line message on a bad entry.
    """
    if pyproject is None:
        return ConfirmConfig(root=os.getcwd())
    cfg = ConfirmConfig(root=os.path.dirname(os.path.abspath(pyproject)))
    from ..discovery import read_regular
    try:
        data = tomllib.loads(read_regular(pyproject, 16 << 20).decode("utf-8", "replace"))
    except OSError as exc:
        raise SpecError(f"{pyproject}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{pyproject}: {exc}") from None
    tool = data.get("tool", {}).get("jaxlint", {})
    if isinstance(tool, dict):
        for key, attr in (("traced-functions", "traced_functions"), ("exclude", "exclude"),
                          ("extend-exclude", "exclude")):
            v = tool.get(key)
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                getattr(cfg, attr).extend(v)
    section = tool.get("confirm", {}) if isinstance(tool, dict) else {}
    if not isinstance(section, dict):
        raise SpecError(f"{pyproject}: [tool.jaxlint.confirm] must be a table")
    where = f"{pyproject}: [tool.jaxlint.confirm]"
    for key, value in section.items():
        if ":" in key:
            continue
        if key not in SETTINGS:
            raise SpecError(f"{where}: unknown key {key!r} (function entries look like \"pkg.module:function\")")
    for key in ("timeout", "command-timeout"):
        if key in section:
            v = section[key]
            # (nan and inf would disable the limit: a finite positive number only)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise SpecError(f"{where}: {key} must be a positive (finite) number of seconds")
            setattr(cfg, key.replace("-", "_"), float(v))
    if "run-main" in section:
        if not isinstance(section["run-main"], bool):
            raise SpecError(f"{where}: run-main must be true or false")
        cfg.run_main = section["run-main"]
    if "memory-limit" in section:
        v = section["memory-limit"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 64:
            raise SpecError(f"{where}: memory-limit must be a whole number of MiB (at least 64)")
        cfg.memory_limit = v
    if "device" in section:
        if section["device"] not in DEVICES:
            raise SpecError(f"{where}: device must be one of {', '.join(DEVICES)}")
        cfg.device = section["device"]
    if "dim-size" in section:
        v = section["dim-size"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise SpecError(f"{where}: dim-size must be a non-negative integer")
        cfg.dim_size = v
    if "dims" in section:
        dims = section["dims"]
        if not isinstance(dims, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                 for v in dims.values()):
            raise SpecError(f"{where}: dims must map dimension names to sizes")
        cfg.dims = dict(dims)
    if "array-shape" in section:
        v = section["array-shape"]
        if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v):
            raise SpecError(f"{where}: array-shape must be a list of sizes")
        cfg.array_shape = list(v)
    if "array-dtype" in section:
        v = section["array-dtype"]
        if not isinstance(v, str) or v.lower() not in DTYPES:
            raise SpecError(f"{where}: unknown array-dtype {v!r}")
        cfg.array_dtype = DTYPES[v.lower()]
    for key, value in section.items():
        if ":" not in key:
            continue
        mod, _, qual = key.rpartition(":")
        if not mod or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", qual):
            raise SpecError(f"{where}: bad entry name {key!r} (expected \"package.module:function\")")
        cfg.specs[key] = parse_call_spec(value, cfg, f"{where} {key!r}")
    return cfg
