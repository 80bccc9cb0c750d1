"""``jaxlint --show-settings PATH`` and ``jaxlint --show-files [PATHS]``: what jaxlint will do
and why, without checking anything.

``--show-settings`` prints the resolved configuration for one file: the configuration file, the
selected rules and those off for this file (and which setting turned each off), per-file ignores,
``traced-functions``, rule settings, the baseline and ``[tool.jaxlint.confirm]``, each with where it
came from (the command line, the ``pyproject.toml`` that set it, or the default).

``--show-files`` prints every file that would be checked, then every path that is skipped and
why: a default exclude, an ``exclude`` pattern, a ``.gitignore`` entry, ``--force-exclude``,
``--changed-since``, a missing path or a file that is not a regular file.  Files that are neither
Python modules nor notebooks are not listed.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, TextIO, Tuple

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore

from .checkers import Settings, all_rules
from .config import Config, _matches


def _section(cfg: Config) -> dict:
    if not cfg.path:
        return {}
    try:
        with open(cfg.path, "rb") as fh:
            return tomllib.load(fh).get("tool", {}).get("jaxlint", {}) or {}
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _display(path: Optional[str]) -> Optional[str]:
    if path is None:
        return None
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def settings_report(path: str, cfg: Config, cli: Optional[Mapping[str, object]] = None,
                    confirm=None) -> dict:
    """The resolved settings for ``path`` as a JSON-able dict: each entry ``{"value": ...,
    "from": "command line (--select)" | "<pyproject.toml>" | "default"}``.

    ``cli`` maps the options given on the command line to their values (``{"select": [...],
    "ignore": [...], "extend_select": [...], "baseline": ..., "confirm_timeout": ..., "device":
    ...}``); ``confirm`` is the :class:`jaxlint.confirm.specs.ConfirmConfig` (loaded from
    ``cfg.path`` when not given)."""
    cli = {k: v for k, v in (cli or {}).items() if v is not None}
    section = _section(cfg)
    where = _display(cfg.path)

    def origin(key: str, option: Optional[str] = None, attr: Optional[str] = None) -> str:
        if option and (attr or key.replace("-", "_")) in cli:
            return f"command line ({option})"
        return where if key in section else "default"

    selected = {r.code for r in cfg.rules()}
    for_file = cfg.rules_for(path)
    on = {r.code for r in for_file}
    ignored_here = cfg.ignored_for(path)
    off = []
    for r in all_rules():
        if r.code in on:
            continue
        if r.code in selected:
            pats = [p for p, codes in cfg.per_file_ignores.items() if _matches(r.code, codes)
                    and Config(per_file_ignores={p: codes}, root=cfg.root).ignored_for(path)]
            why = "per-file-ignores " + ", ".join(f"{p!r}" for p in pats)
        elif cfg.ignore and _matches(r.code, cfg.ignore):
            why = "ignore"
        elif cfg.select is not None:
            why = "not in select"
        else:
            why = "off by default"
        off.append({"code": r.code, "symbol": r.symbol, "why": why})

    from .discovery import is_excluded
    defaults = Settings()
    report = {
        "file": path,
        "configuration": where,
        "project-root": cfg.root,
        "excluded": is_excluded(path, cfg.exclude, cfg.root),
        "select": {"value": cfg.select if cfg.select is not None else "every default-enabled rule",
                   "from": origin("select", "--select")},
        "extend-select": {"value": cfg.extend_select, "from": origin("extend-select", "--extend-select")},
        "ignore": {"value": cfg.ignore, "from": origin("ignore", "--ignore")},
        "per-file-ignores": {"value": dict(cfg.per_file_ignores), "from": origin("per-file-ignores"),
                             "matching-this-file": sorted(set(ignored_here))},
        "exclude": {"value": list(cfg.exclude), "from": origin("exclude") if "exclude" in section
                    else origin("extend-exclude")},
        "rules-enabled": [{"code": r.code, "symbol": r.symbol} for r in for_file],
        "rules-off": off,
        "traced-functions": {"value": list(cfg.traced_functions), "from": origin("traced-functions")},
        "unrolled-loop-threshold": {"value": cfg.settings.unrolled_loop_threshold,
                                    "from": origin("unrolled-loop-threshold")
                                    if cfg.settings.unrolled_loop_threshold != defaults.unrolled_loop_threshold
                                    or "unrolled-loop-threshold" in section else "default"},
        "strict": {"value": cfg.settings.strict,
                   "from": "command line (--strict)" if cli.get("strict")
                   else origin("strict") if "strict" in section else "default"},
        "baseline": {"value": cli.get("baseline", cfg.baseline),
                     "from": "command line (--baseline)" if "baseline" in cli else origin("baseline")},
    }
    report["confirm"] = _confirm_report(cfg, cli, confirm, section.get("confirm") or {}, where)
    return report


def _confirm_report(cfg: Config, cli: Mapping[str, object], confirm, section: dict, where) -> dict:
    if confirm is None:
        try:
            from .confirm import load_confirm_config
            confirm = load_confirm_config(cfg.path)
        except Exception as exc:       # a bad [tool.jaxlint.confirm] is shown, not raised
            return {"error": str(exc)}

    def entry(key: str, value, option: Optional[str] = None, attr: Optional[str] = None) -> dict:
        if option and attr in cli:
            return {"value": cli[attr], "from": f"command line ({option})"}
        return {"value": value, "from": where if key in section else "default"}

    functions = sorted(confirm.specs)
    return {
        "timeout": entry("timeout", confirm.timeout, "--confirm-timeout", "confirm_timeout"),
        "device": entry("device", confirm.device or "JAX's default backend", "--device", "device"),
        "dim-size": entry("dim-size", confirm.dim_size),
        "dims": entry("dims", dict(confirm.dims)),
        "array-shape": entry("array-shape", list(confirm.array_shape)),
        "array-dtype": entry("array-dtype", confirm.array_dtype),
        "function-inputs": {"value": functions, "from": where if functions else "default"},
    }


def _fmt(value) -> str:
    if isinstance(value, (list, dict)):
        return json.dumps(value) if value else ("[]" if isinstance(value, list) else "{}")
    return str(value)


def render_settings(report: dict, out: TextIO, fmt: str = "text") -> None:
    if fmt == "json":
        json.dump(report, out, indent=2)
        out.write("\n")
        return
    lines = [f"Settings for {report['file']}"]
    lines.append(f"  configuration file       {report['configuration'] or 'none (defaults)'}")
    lines.append(f"  project root             {report['project-root']}")
    if report["excluded"]:
        lines.append("  excluded                 yes: checked only when named on the command line "
                     "without --force-exclude")
    for key in ("select", "extend-select", "ignore", "per-file-ignores", "exclude", "traced-functions",
                "unrolled-loop-threshold", "strict", "baseline"):
        e = report[key]
        lines.append(f"  {key:<24} {_fmt(e['value'])}  [{e['from']}]")
    if report["per-file-ignores"]["matching-this-file"]:
        lines.append(f"  {'ignored for this file':<24} {', '.join(report['per-file-ignores']['matching-this-file'])}")
    enabled = report["rules-enabled"]
    lines.append(f"  rules enabled ({len(enabled)})")
    lines.extend(f"    {r['code']}  {r['symbol']}" for r in enabled)
    if report["rules-off"]:
        lines.append(f"  rules off ({len(report['rules-off'])})")
        lines.extend(f"    {r['code']}  {r['symbol']:<36} {r['why']}" for r in report["rules-off"])
    lines.append("  [tool.jaxlint.confirm]")
    confirm = report["confirm"]
    if "error" in confirm:
        lines.append(f"    error: {confirm['error']}")
    else:
        for key, e in confirm.items():
            lines.append(f"    {key:<22} {_fmt(e['value'])}  [{e['from']}]")
    out.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------ --show-files
def _first_match(rel: str, name: str, patterns: Sequence[str]) -> Optional[str]:
    from .discovery import _match
    for p in patterns:
        if _match(rel, name, [p]):
            return p
    return None


def _is_regular(path: str) -> bool:
    import stat
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def explain_files(paths: Sequence[str], cfg: Config, force_exclude: bool = False,
                  changed: Optional[Set[str]] = None, changed_ref: str = "") -> Tuple[List[str], List[Tuple[str, str]]]:
    """``(files, skipped)``: the files ``jaxlint check PATHS`` would check, in its order (from
    :func:`jaxlint.discovery.iter_python_files`, the same walk the check runs), and each skipped
    path with the reason: ``[(path, why)]``."""
    from .discovery import DEFAULT_EXCLUDE, SUFFIXES, _display as shown, _gitignore, iter_python_files

    paths = [p for p in (paths or ["."]) if p != "-"]
    files: List[str] = []
    skipped: List[Tuple[str, str]] = []
    noted: Set[str] = set()

    def skip(path: str, why: str) -> None:
        if path not in noted:
            noted.add(path)
            skipped.append((path, why))

    problems: List[tuple] = []
    try:       # a discovery that reports what it skips (non-regular files, unlistable folders)
        found = iter_python_files(paths, cfg.exclude, cfg.root, force_exclude=force_exclude, problems=problems)
    except TypeError:
        found = iter_python_files(paths, cfg.exclude, cfg.root, force_exclude=force_exclude)
    for p, exists in found:
        if not exists:
            skip(p, "no such file or directory")
        elif changed is not None and os.path.realpath(p) not in changed:
            skip(p, f"not changed since {changed_ref}" if changed_ref else "not changed")
        elif not _is_regular(p):
            skip(p, "not a regular file")
        else:
            files.append(p)
    for problem in problems:
        skip(problem[0], problem[1])

    root = os.path.abspath(cfg.root)
    configured = list(cfg.exclude)
    where = _display(cfg.path) or "the configuration"

    def reason(rel: str, name: str, ignores: Sequence[Tuple[str, str]]) -> Optional[str]:
        hit = _first_match(rel, name, DEFAULT_EXCLUDE)
        if hit is not None:
            return f"default exclude `{hit}`"
        hit = _first_match(rel, name, configured)
        if hit is not None:
            return f"exclude `{hit}` in {where}"
        for pattern, source in ignores:
            if _first_match(name, name, [pattern]) is not None:
                return f".gitignore `{pattern.strip()}` in {source}"
        return None

    for p in paths:
        if not os.path.exists(p):
            continue
        if force_exclude:
            from .discovery import is_excluded
            if is_excluded(p, cfg.exclude, cfg.root):
                skip(shown(p), "named on the command line but excluded (--force-exclude)")
                continue
        if not os.path.isdir(p):
            continue
        inherited: Dict[str, List[Tuple[str, str]]] = {}
        for dirpath, dirnames, filenames in os.walk(p):
            here = [(line, _display(os.path.join(dirpath, ".gitignore"))) for line in _gitignore(dirpath)]
            ignores = inherited.get(dirpath, []) + here
            absdir = os.path.abspath(dirpath)
            keep = []
            for d in sorted(dirnames):
                full = os.path.join(absdir, d)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                relp = os.path.relpath(full, os.path.abspath(p)).replace(os.sep, "/")
                why = reason(rel, d, ignores) or reason(relp, d, ())
                if why is not None:
                    skip(shown(os.path.join(dirpath, d)) + "/", why)
                    continue
                keep.append(d)
                inherited[os.path.join(dirpath, d)] = [(i, s) for i, s in ignores if "/" not in i.strip("/")]
            dirnames[:] = keep
            for f in sorted(filenames):
                if not f.endswith(SUFFIXES):
                    continue
                full = shown(os.path.join(dirpath, f))
                rel = os.path.relpath(os.path.abspath(full), root).replace(os.sep, "/")
                why = reason(rel, f, ignores)
                if why is not None:
                    skip(full, why)
                elif full not in files and not _is_regular(full):
                    skip(full, "not a regular file")
    return files, skipped


def render_files(files: Sequence[str], skipped: Iterable[Tuple[str, str]], out: TextIO, fmt: str = "text") -> None:
    skipped = list(skipped)
    if fmt == "json":
        json.dump({"files": list(files), "skipped": [{"path": p, "reason": why} for p, why in skipped]},
                  out, indent=2)
        out.write("\n")
        return
    for f in files:
        out.write(f + "\n")
    if skipped:
        out.write("\nSkipped:\n")
        width = max(len(p) for p, _ in skipped)
        for p, why in skipped:
            out.write(f"  {p:<{width}}  {why}\n")
    n = len(files)
    out.write(f"\n{n} file{'s' if n != 1 else ''} would be checked"
              + (f"; {len(skipped)} path{'s' if len(skipped) != 1 else ''} skipped" if skipped else "") + ".\n")
