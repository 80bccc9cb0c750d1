"""Real-code round trip for the fixer.

Copies the installed jax, flax and optax source trees to a temporary folder, runs
``jaxlint check --fix --unsafe-fixes`` on the copy, then checks that every file
still parses, that files without applied fixes are byte-identical, and that a
second run changes nothing.  Prints the fixes applied per rule.

    python benchmarks/fix_roundtrip.py [--packages jax flax optax] [--keep]
"""
from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import hashlib
import importlib.util
import io
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxlint.analysis import SourceFile  # noqa: E402
from jaxlint.checkers import all_rules  # noqa: E402
from jaxlint.engine import lint_source  # noqa: E402
from jaxlint.fixes.applier import fix_text, write_atomic  # noqa: E402


def digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packages", nargs="+", default=["jax", "flax", "optax"])
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="jaxlint-roundtrip-")
    files = []
    for name in args.packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            sys.exit(f"package {name!r} is not installed")
        dst = os.path.join(tmp, name)
        shutil.copytree(os.path.dirname(spec.origin), dst,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
        for dirpath, _, filenames in os.walk(dst):
            files.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    files.sort()
    rules = all_rules()
    lint = lambda src: lint_source(src, rules)  # noqa: E731

    before = {p: digest(p) for p in files}
    applied = collections.Counter()
    changed, broken, unstable, errors = [], [], [], []
    t = time.perf_counter()
    for path in files:
        try:
            source = SourceFile.from_path(path)
            report = fix_text(source, lint, unsafe=True)
        except Exception as exc:  # reading/parsing problems are reported, never fatal
            errors.append(f"{path}: {exc}")
            continue
        applied.update(report.applied)
        broken.extend(f"{path}:{line}: {code} {why}" for code, line, why in report.broken)
        if not report.stable:
            unstable.append(path)
        if report.text != source.text:
            write_atomic(path, source, report.text)
            changed.append(path)
    first_pass = time.perf_counter() - t

    not_parsing = []
    for path in files:
        with open(path, "rb") as fh:
            try:
                ast.parse(fh.read())
            except SyntaxError as exc:
                not_parsing.append(f"{path}: {exc}")
    untouched_changed = [p for p in files if p not in changed and digest(p) != before[p]]

    second_changes = []
    for path in changed:
        source = SourceFile.from_path(path)
        if fix_text(source, lint, unsafe=True).text != source.text:
            second_changes.append(path)

    print(f"packages            {' '.join(args.packages)}")
    print(f"files               {len(files)}")
    print(f"fix pass            {first_pass:.2f} s")
    print(f"files changed       {len(changed)}")
    print(f"fixes applied       {sum(applied.values())}")
    for code, n in sorted(applied.items()):
        print(f"  {code}            {n}")
    print(f"fixes discarded     {len(broken)} (result did not parse: a jaxlint bug)")
    print(f"files not parsing   {len(not_parsing)}")
    print(f"untouched changed   {len(untouched_changed)}")
    print(f"not idempotent      {len(second_changes)}")
    print(f"unstable            {len(unstable)}")
    print(f"read errors         {len(errors)}")
    for line in broken + not_parsing + untouched_changed + second_changes + unstable + errors:
        print("  " + line)
    if args.keep:
        print(f"copy kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    bad = broken or not_parsing or untouched_changed or second_changes or unstable
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
