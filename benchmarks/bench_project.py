"""Project-mode speed: lint the installed jax, flax and optax trees with the
project index and the results cache, cold, warm and with one file touched.

    python benchmarks/bench_project.py [--packages jax flax optax] [--jobs N]

Fetches nothing: it copies the installed packages' sources into a temporary
folder with a ``pyproject.toml`` (one project), then prints, against reading
and ``ast.parse``-ing the same files in one process:

* cold: no cache, every module indexed, analysed and linted, in one process, then with
  ``--jobs N`` worker processes;
* warm: the same run again with the cache filled;
* touched: one module edited (a comment appended) after a warm run.

Targets (issue 9): cold <= 2.0x, warm <= 0.10x, one edited file <= 0.5 s.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_lint import run_parse  # noqa: E402  (read + ast.parse, the baseline both benchmarks share)
from jaxlint.checkers import all_rules  # noqa: E402
from jaxlint.workspace import Workspace, lint_files  # noqa: E402


def copy_packages(names, dest):
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            sys.exit(f"package {name!r} is not installed (pip install -e '.[test]')")
        src = os.path.dirname(spec.origin)
        shutil.copytree(src, os.path.join(dest, name),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    with open(os.path.join(dest, "pyproject.toml"), "w") as f:
        f.write("[project]\nname = 'bench'\n")


def python_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".jaxlint_cache")
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return out


def run_lint(files, root, use_cache, jobs=1):
    rules = [r for r in all_rules() if r.default_enabled]
    ws = Workspace(use_cache=use_cache, root=root)
    t = time.perf_counter()
    n = sum(len(found) for _, found in lint_files(files, rules, workspace=ws, jobs=jobs))
    return time.perf_counter() - t, n, ws


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", nargs="+", default=["jax", "flax", "optax"])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the --jobs run (default 2)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="jaxlint-bench-")
    try:
        copy_packages(args.packages, tmp)
        files = python_files(tmp)
        parse_s, lines = run_parse(files)
        cold_s, n, _ = run_lint(files, tmp, use_cache=False)
        jobs_s, n_jobs, _ = run_lint(files, tmp, use_cache=False, jobs=args.jobs)
        fill_s, _, _ = run_lint(files, tmp, use_cache=True)
        warm_s, n_warm, ws = run_lint(files, tmp, use_cache=True)
        cache = next(iter(ws.caches.values()))
        touched = files[len(files) // 2]
        with open(touched, "a", encoding="utf-8") as f:
            f.write("\n# touched by bench_project.py\n")
        touch_s, _, _ = run_lint(files, tmp, use_cache=True)
        print(f"packages        {' '.join(args.packages)}")
        print(f"files           {len(files)}")
        print(f"lines           {lines}")
        print(f"ast.parse       {parse_s:.3f} s")
        print(f"cold            {cold_s:.3f} s   ratio {cold_s / parse_s:.2f}  (target <= 2.0)  findings {n}")
        print(f"cold --jobs {args.jobs}   {jobs_s:.3f} s   ratio {jobs_s / parse_s:.2f}  (target <= 1.3 with 2 jobs on 2 cores)"
              f"  findings {n_jobs}")
        print(f"cache fill      {fill_s:.3f} s   ratio {fill_s / parse_s:.2f}")
        print(f"warm            {warm_s:.3f} s   ratio {warm_s / parse_s:.3f} (target <= 0.10)  "
              f"findings {n_warm}  cache hits {cache.hits} misses {cache.misses}")
        print(f"one file edited {touch_s:.3f} s   (target <= 0.5 s)  {os.path.relpath(touched, tmp)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
