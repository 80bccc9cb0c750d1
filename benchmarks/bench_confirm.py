"""The cost of runtime confirmation (``jaxlint check --confirm``) on this machine's default backend.

    python benchmarks/bench_confirm.py [--sizes 1,8,32] [--repeat 2] [--examples] [--device cpu]

A generated module holds N jitted functions, each with one finding of a trace-time strategy (a
``print`` of a tracer, a Python ``if`` on one, a ``jnp.where`` lookalike: confirmed, confirmed,
not-confirmed); confirming it takes ``fixed + N * per_finding`` seconds.  For each N the script
prints the wall time of confirmation (planning, the worker: starting Python, importing JAX and the
module, every verdict) and the worker's own phases, then the least-squares fit: **fixed cost** and
**per-finding cost**.  Compile-based evidence (JAX501/JAX502 compilations per step, JAX504 compile
times, JAX601 runs on several devices) is outside this measure.  ``--examples`` also confirms each
file of ``examples/`` (real lint findings) and prints its time and verdicts.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from jaxlint.analysis import SourceFile  # noqa: E402
from jaxlint.checkers import Finding  # noqa: E402
from jaxlint.engine import FileResult  # noqa: E402

SHAPES = (
    ("JAX101", "    print(\"x\", x)\n"),                                     # confirmed: print got a tracer
    ("JAX201", "    if x.sum() > 0:\n        x = -x\n"),                   # confirmed: TracerBoolConversionError
    ("JAX201", "    x = jnp.where(x.sum() > 0, -x, x)\n"),                 # not-confirmed: a lookalike
)


def module_text(n: int):
    """A module of ``n`` jitted functions, one finding each: (text, [(code, line)])."""
    lines = ["import jax", "import jax.numpy as jnp", ""]
    marks = []
    for i in range(n):
        code, body = SHAPES[i % len(SHAPES)]
        lines += ["", "@jax.jit", f"def f{i}(x: jax.Array):"]
        marks.append((code, len(lines) + 1))
        lines += body.rstrip("\n").split("\n")
        lines += [f"    return x * {i + 1}", ""]
    return "\n".join(lines) + "\n", marks


def confirm_once(path: str, marks, device):
    from jaxlint.confirm import plan_results
    from jaxlint.confirm.runner import run_jobs
    from jaxlint.confirm.specs import ConfirmConfig
    src = SourceFile.from_path(path)
    findings = [Finding(code, "bench", path, line, 0, line, 1, "bench") for code, line in marks]
    t0 = time.perf_counter()
    jobs, by_id = plan_results([FileResult(path, findings, source=src)], ConfirmConfig(root=os.path.dirname(path)))
    planned = time.perf_counter() - t0
    outcomes = run_jobs(jobs, 120, device, lambda job, out: None)
    wall = time.perf_counter() - t0
    out = outcomes[0]
    statuses = {}
    for r in out.results.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    verdict_s = sum(r.get("seconds") or 0.0 for r in out.results.values())
    return {"wall": wall, "plan": planned, "worker": out.wall, "import_jax": (out.device or {}).get("import_jax_s"),
            "import_module": out.import_module_s, "verdicts": verdict_s, "statuses": statuses,
            "device": out.device}


def fit(points):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def examples(device):
    from jaxlint.cli import main
    import contextlib
    import io
    import json
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        if not name.endswith(".py"):
            continue
        path = os.path.join(ROOT, "examples", name)
        buf, err = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            main(["check", path, "--confirm", "--format", "json", "--exit-zero", "--no-cache", "--no-progress",
                  *(["--device", device] if device else [])])
        wall = time.perf_counter() - t0
        found = json.loads(buf.getvalue() or "[]")
        st = {}
        for f in found:
            s = (f.get("confirmation") or {}).get("status", "none")
            st[s] = st.get(s, 0) + 1
        slow = max(((f.get("confirmation") or {}).get("seconds") or 0.0 for f in found), default=0.0)
        print(f"  examples/{name:<18} {len(found):3d} findings  {wall:6.2f} s  (slowest verdict {slow:5.2f} s)  "
              f"{', '.join(f'{v} {k}' for k, v in sorted(st.items()))}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8,32")
    ap.add_argument("--repeat", type=int, default=2, help="best of N runs per size")
    ap.add_argument("--examples", action="store_true")
    ap.add_argument("--device", default=None, choices=("cpu", "gpu", "tpu"))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="bench-confirm-")
    points = []
    dev = None
    try:
        print(f"{'findings':>8} {'wall s':>8} {'plan s':>7} {'worker s':>9} {'import jax':>10} "
              f"{'import module':>13} {'verdicts s':>10}  statuses")
        for n in sizes:
            text, marks = module_text(n)
            path = os.path.join(tmp, f"bench_{n}.py")
            with open(path, "w") as fh:
                fh.write(text)
            best = None
            for _ in range(args.repeat):
                r = confirm_once(path, marks, args.device)
                if best is None or r["wall"] < best["wall"]:
                    best = r
            dev = dev or best["device"]
            points.append((n, best["wall"]))
            st = ", ".join(f"{v} {k}" for k, v in sorted(best["statuses"].items()))
            print(f"{n:8d} {best['wall']:8.2f} {best['plan']:7.2f} {best['worker']:9.2f} "
                  f"{best['import_jax'] or 0:10.2f} {best['import_module'] or 0:13.2f} {best['verdicts']:10.2f}  {st}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fixed, per = fit(points) if len(points) > 1 else (points[0][1], 0.0)
    d = dev or {}
    print(f"device: {d.get('device_kind')} ({d.get('backend')} backend, jax {d.get('jax')}), {os.cpu_count()} CPUs")
    print(f"fixed cost: {fixed:.2f} s    per finding: {per:.3f} s    (target: <= 2 s fixed, <= 0.1 s per finding)")
    if args.examples:
        print("examples (plain `jaxlint check --confirm FILE`, lint included):")
        examples(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
