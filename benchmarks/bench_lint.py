"""Lint the installed jax, flax and optax source trees and compare with ``ast.parse``.

    python benchmarks/bench_lint.py [--repeat N] [--packages jax flax optax] [--by-rule]

Prints files, lines, seconds, lines/second, the ratio of jaxlint's full
pipeline (read + decode + parse + semantic model + every default rule) to
merely reading and ``ast.parse``-ing the same files, and peak memory.
Single process; best of ``--repeat`` runs.  Target ratio: <= 2.0.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import os
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxlint.analysis import SemanticModel, SourceFile  # noqa: E402
from jaxlint.checkers import Context, all_rules  # noqa: E402
from jaxlint.engine import lint_source  # noqa: E402


def package_files(names):
    files = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            sys.exit(f"package {name!r} is not installed (pip install -e '.[test]')")
        root = os.path.dirname(spec.origin)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(".py"):
                    files.append(os.path.join(dirpath, f))
    return files


def run_parse(files):
    lines = 0
    t = time.perf_counter()
    for path in files:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
        lines += text.count("\n")
        ast.parse(text)
    return time.perf_counter() - t, lines


def run_lint(files, rules):
    counts = collections.Counter()
    errors = 0
    t = time.perf_counter()
    for path in files:
        try:
            for f in lint_source(SourceFile.from_path(path), rules):
                counts[f.code] += 1
        except Exception as exc:  # a crash is a bug: report it, keep measuring
            errors += 1
            print(f"  error: {path}: {exc}", file=sys.stderr)
    return time.perf_counter() - t, counts, errors


def by_rule(files, rules):
    """Model and per-rule times.  All trees are held at once here, so the cyclic
    GC is paused as the engine does per file; otherwise it would re-walk every
    held tree and the model time would mostly measure the collector."""
    import gc
    sources = [SourceFile.from_path(p) for p in files]
    trees = [s.parse() for s in sources]
    gc.collect()
    gc.disable()
    t = time.perf_counter()
    models = [SemanticModel(tr, s) for tr, s in zip(trees, sources)]
    model_time = time.perf_counter() - t
    print(f"  semantic model          {model_time:7.3f} s")
    for rule in rules:
        t = time.perf_counter()
        for m, s in zip(models, sources):
            list(rule.check(Context(m, s)))
        print(f"  {rule.code} {rule.symbol:<38} {time.perf_counter() - t:7.3f} s")
    gc.enable()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--packages", nargs="+", default=["jax", "flax", "optax"])
    ap.add_argument("--by-rule", action="store_true", help="also time the model and each rule separately")
    args = ap.parse_args()

    files = package_files(args.packages)
    rules = [r for r in all_rules() if r.default_enabled]
    parse_times, lint_times = [], []
    counts = errors = lines = None
    for _ in range(args.repeat):
        pt, lines = run_parse(files)
        lt, counts, errors = run_lint(files, rules)
        parse_times.append(pt)
        lint_times.append(lt)
    tracemalloc.start()
    run_lint(files[: min(len(files), 200)], rules)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    pt, lt = min(parse_times), min(lint_times)
    print(f"packages        {' '.join(args.packages)}")
    print(f"python          {sys.version.split()[0]}")
    print(f"files           {len(files)}")
    print(f"lines           {lines}")
    print(f"rules           {len(rules)}")
    print(f"ast.parse       {pt:.3f} s  ({lines / pt:,.0f} lines/s)")
    print(f"jaxlint         {lt:.3f} s  ({lines / lt:,.0f} lines/s)")
    print(f"ratio           {lt / pt:.2f}  (target <= 2.0)")
    print(f"peak memory     {peak / 2**20:.1f} MiB (tracemalloc, first 200 files)")
    print(f"findings        {sum(counts.values())}  " + " ".join(f"{c}={n}" for c, n in sorted(counts.items())))
    print(f"crashes         {errors}")
    if args.by_rule:
        by_rule(files, rules)
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
