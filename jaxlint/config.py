"""``[tool.jaxlint]`` in ``pyproject.toml``, found by walking up from the checked paths.

Keys (all optional)::

    [tool.jaxlint]
    select = ["JAX1", "JAX201"]          # codes or prefixes; default: every default-enabled rule
    ignore = ["JAX301"]
    exclude = ["legacy/", "*_pb2.py"]     # gitignore-style, added to the defaults
    per-file-ignores = { "tests/*" = ["JAX101"] }
    unrolled-loop-threshold = 16          # JAX504
    baseline = "jaxlint-baseline.json"    # report only findings not recorded there
"""
from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore
import re

from .discovery import read_regular

if TYPE_CHECKING:   # (imported when used: listing the rules imports every rule module)
    from .checkers import Rule, Settings

KNOWN_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores",
              "unrolled-loop-threshold", "confirm", "baseline", "traced-functions", "strict"}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    select: Optional[List[str]] = None
    extend_select: List[str] = field(default_factory=list)
    ignore: List[str] = field(default_factory=list)
    exclude: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    # the rule options set by [tool.jaxlint] or the command line (the rest keep the defaults of
    # :class:`~jaxlint.checkers.Settings`, built when first asked for: see ``settings``)
    options: Dict[str, object] = field(default_factory=dict)
    root: str = "."
    path: Optional[str] = None
    baseline: Optional[str] = None      # a baseline file, relative to the current directory
    # functions traced by contract in this project ("pkg.mod:*", "pkg.mod.Class.method")
    traced_functions: List[str] = field(default_factory=list)

    @property
    def settings(self) -> "Settings":
        """The rule options (:class:`~jaxlint.checkers.Settings`) with :attr:`options` applied."""
        got = self.__dict__.get("_settings")
        if got is None:
            from .checkers import Settings
            got = self.__dict__["_settings"] = Settings(**self.options)
        return got

    def set_option(self, name: str, value: object) -> None:
        """Set a rule option (``strict``, ``unrolled_loop_threshold``)."""
        self.options[name] = value
        if "_settings" in self.__dict__:
            setattr(self.__dict__["_settings"], name, value)

    def rules(self) -> List["Rule"]:
        return select_rules(self.select, self.ignore, self.extend_select)

    def rules_for(self, path: Optional[str]) -> List["Rule"]:
        """The rules to run on ``path``: :meth:`rules` minus its ``per-file-ignores``.

        The one place per-file-ignores are applied (CLI, flake8 and pylint plugins,
        language server); entries may be codes, prefixes or rule symbols.
        """
        rules = self.rules()
        ignored = self.ignored_for(path) if path else []
        if not ignored:
            return rules
        return [r for r in rules if not _matches(r.code, ignored)]

    def ignored_for(self, path: str) -> List[str]:
        if not self.per_file_ignores:
            return []
        rel = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        base = os.path.basename(path)
        out: List[str] = []
        for pattern, codes in self.per_file_ignores.items():
            p = pattern.rstrip("/")
            if fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(base, p) or rel.startswith(p + "/"):
                out.extend(codes)
        return out


def _matches(code: str, prefixes: Iterable[str]) -> bool:
    registry = _registry()
    symbol = registry[code].symbol if registry else rule_catalogue().get(code)
    return any(code.startswith(p.upper()) or symbol == p for p in prefixes)


def _registry():
    """The rule registry if the rules are loaded (else None: they are not imported for it)."""
    checkers = sys.modules.get("jaxlint.checkers")
    return getattr(checkers, "REGISTRY", None) if checkers is not None else None


def validate_codes(codes: Iterable[str], what: str) -> None:
    catalogue = rule_catalogue()
    for c in codes:
        if c.upper() == "ALL":
            continue
        if not any(code.startswith(c.upper()) or symbol == c for code, symbol in catalogue.items()):
            raise ConfigError(f"{what}: unknown rule code or prefix {c!r}")


# a rule module's name: its code and symbol (see checkers/base.py, ``rule_identity``)
_RULE_MODULE = re.compile(r"jax(\d{3})_([a-z0-9]+(?:_[a-z0-9]+)*)")
_CATALOGUE: Dict[str, str] = {}


def rule_catalogue() -> Dict[str, str]:
    """code -> symbol of every rule.  The registry's when it is loaded; otherwise read from the
    names of the rule modules (``checkers/<family>/jaxNNN_symbol.py`` or ``.../jaxNNN_symbol/``),
    which is where the registry takes them from, without importing them: checking a
    configuration does not import the rules and the model (a warm run may need neither)."""
    registry = _registry()
    if registry:
        return {code: rule.symbol for code, rule in registry.items()}
    if not _CATALOGUE:
        _CATALOGUE.update(_catalogue_from_files(os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkers")))
    return _CATALOGUE


def _catalogue_from_files(folder: str) -> Dict[str, str]:
    """What :func:`rule_catalogue` reads: the family packages under ``folder`` and their rule
    modules and packages, as ``pkgutil.iter_modules`` lists them."""
    out: Dict[str, str] = {}
    try:
        families = sorted(os.listdir(folder))
    except OSError:
        return out
    for family in families:
        fdir = os.path.join(folder, family)
        if "." in family or not os.path.isfile(os.path.join(fdir, "__init__.py")):
            continue
        try:
            names = sorted(os.listdir(fdir))
        except OSError:
            continue
        for name in names:
            if name.endswith(".py"):
                module = name[:-3]
            elif "." not in name and os.path.isfile(os.path.join(fdir, name, "__init__.py")):
                module = name
            else:
                continue
            m = _RULE_MODULE.fullmatch(module)
            if m is not None:
                out["JAX" + m.group(1)] = m.group(2).replace("_", "-")
    return out


def select_rules(select: Optional[Sequence[str]], ignore: Sequence[str],
                 extend_select: Sequence[str] = ()) -> List["Rule"]:
    from .checkers import all_rules
    out = []
    for rule in all_rules():
        if select is None:
            on = rule.default_enabled
        elif any(s.upper() == "ALL" for s in select):
            on = True
        else:
            on = _matches(rule.code, select)
        if extend_select and _matches(rule.code, extend_select):
            on = True
        if on and ignore and _matches(rule.code, ignore):
            # a more specific select wins over a broader ignore (JAX2 ignored, JAX201 selected)
            sel = [s for s in (list(select or []) + list(extend_select)) if _matches(rule.code, [s])]
            ign = [i for i in ignore if _matches(rule.code, [i])]
            on = bool(sel) and max(len(s) for s in sel) > max(len(i) for i in ign)
        if on:
            out.append(rule)
    return out


def find_config(paths: Sequence[str]) -> Optional[str]:
    start = os.path.abspath(paths[0] if paths else ".")
    if not os.path.isdir(start):
        start = os.path.dirname(start)
    d = start
    while True:
        cand = os.path.join(d, "pyproject.toml")
        if os.path.isfile(cand):
            try:
                data = tomllib.loads(_read_toml(cand))
            except OSError as exc:
                raise ConfigError(f"{cand}: cannot read: {exc.strerror or exc}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{cand}: invalid TOML: {exc}") from None
            if "jaxlint" in data.get("tool", {}):
                return cand
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _read_toml(path: str) -> str:
    """A configuration file's text: a regular file only (a FIFO or ``/dev/zero`` is an error,
    never a hang), at most 16 MiB; raises ``OSError`` or ``TOMLDecodeError``."""
    raw = read_regular(path, 16 << 20)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise tomllib.TOMLDecodeError(f"not UTF-8 at byte {exc.start}") from None


def _str_list(value, key: str, path: str) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{path}: [tool.jaxlint] {key} must be a list of strings")


def load_config(path: Optional[str]) -> Config:
    if path is None:
        return Config(root=os.getcwd())
    try:
        data = tomllib.loads(_read_toml(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    section = data.get("tool", {}).get("jaxlint", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.jaxlint] must be a table")
    unknown = set(section) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown [tool.jaxlint] key(s): {', '.join(sorted(unknown))}")
    cfg = Config(root=os.path.dirname(os.path.abspath(path)), path=path)
    if "select" in section:
        cfg.select = _str_list(section["select"], "select", path)
        validate_codes(cfg.select, path)
    if "extend-select" in section:
        cfg.extend_select = _str_list(section["extend-select"], "extend-select", path)
        validate_codes(cfg.extend_select, path)
    if "ignore" in section:
        cfg.ignore = _str_list(section["ignore"], "ignore", path)
        validate_codes(cfg.ignore, path)
    for key in ("exclude", "extend-exclude"):
        if key in section:
            cfg.exclude.extend(_str_list(section[key], key, path))
    pfi = section.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{path}: [tool.jaxlint] per-file-ignores must be a table")
    for pattern, codes in pfi.items():
        cfg.per_file_ignores[pattern] = _str_list(codes, f"per-file-ignores.{pattern}", path)
        validate_codes(cfg.per_file_ignores[pattern], path)
    if "baseline" in section:
        v = section["baseline"]
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{path}: [tool.jaxlint] baseline must be a file name")
        cfg.baseline = os.path.relpath(os.path.join(cfg.root, v))
    if "traced-functions" in section:
        cfg.traced_functions = _str_list(section["traced-functions"], "traced-functions", path)
    if "strict" in section:
        v = section["strict"]
        if not isinstance(v, bool):
            raise ConfigError(f"{path}: [tool.jaxlint] strict must be true or false")
        cfg.set_option("strict", v)
    if "unrolled-loop-threshold" in section:
        v = section["unrolled-loop-threshold"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{path}: unrolled-loop-threshold must be a positive integer")
        cfg.set_option("unrolled_loop_threshold", v)
    return cfg


@lru_cache(maxsize=256)
def config_for_dir(directory: str) -> Config:
    """The configuration that applies to files in ``directory`` (what the plugins and the
    language server use per file).  A broken ``pyproject.toml`` is reported once on stderr
    and the defaults apply, since a plugin cannot stop its host tool."""
    try:
        return load_config(find_config([directory]))
    except ConfigError as exc:
        sys.stderr.write(f"jaxlint: {exc}\n")
        return Config(root=directory)
