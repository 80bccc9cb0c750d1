"""Time against module size: generated modules of growing size, each shape doubling.

    python benchmarks/bench_scaling.py [--sizes 1000 2000 4000 8000] [--shapes jitted calls ...]
                                       [--project] [--by-rule] [--max-ratio R]

Every shape is a module generated with N units (a unit is a few lines: a jitted
function, a helper called from traced code, a transform site, a class with
methods, a PRNG split, a statement of one long function).  For each size it
prints the seconds jaxlint takes (read + parse + semantic model + every rule,
best of ``--repeat``), the seconds ``ast.parse`` takes, their ratio, and the
growth ratio t(N)/t(N/2): about 2 when the time is linear in the module's size,
about 4 when it is quadratic.  ``--project`` times the command line's path
instead (a one-module project: index, fixpoint, exports, lint; no cache).
``--by-rule`` prints, at the largest size, the seconds each rule takes beyond the
model.  ``--max-ratio R`` exits 1 when a growth ratio at the two largest sizes
exceeds R (a CI guard; 3.0 leaves room for noise on a busy machine).

The issue this answers (issue 20, item 9): 4,000 jitted functions took 3.5 s,
8,000 9.5 s and 16,000 41 s, one map of every transform site rebuilt per function.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxlint.analysis import SemanticModel, SourceFile  # noqa: E402
from jaxlint.checkers import Context, all_rules  # noqa: E402
from jaxlint.engine import lint_source  # noqa: E402


def _jitted(i: int) -> str:
    return (f"@jax.jit\ndef f{i}(x, y):\n    z = jnp.sin(x) * y + {i}\n    if z.sum() > 0:\n"
            f"        print(z)\n    return z\n\n")


def _calls(i: int) -> str:
    # a helper reached from traced code (propagation), and the jitted caller
    return (f"def h{i}(a, n):\n    for _ in range(n):\n        a = a * 2\n    return float(a)\n\n"
            f"@jax.jit\ndef c{i}(x):\n    return h{i}(x, 3) + x\n\n")


def _sites(i: int) -> str:
    return f"def s{i}(x, k):\n    return x * k\n\n\nv{i} = jax.vmap(s{i}, in_axes=(0, None))\nj{i} = jax.jit(s{i}, static_argnums=1)\n\n"


def _classes(i: int) -> str:
    return (f"class M{i}(nn.Module):\n    features: int = {i % 7 + 1}\n\n    @nn.compact\n"
            f"    def __call__(self, x, train: bool = False):\n        x = nn.Dense(self.features)(x)\n"
            f"        if train:\n            x = nn.Dropout(0.1, deterministic=False)(x)\n        return x\n\n")


def _keys(i: int) -> str:
    return (f"def k{i}(key, x):\n    key, sub = jax.random.split(key)\n    a = jax.random.normal(sub, x.shape)\n"
            f"    b = jax.random.normal(key, x.shape)\n    return a + b\n\n")


def _mixed(i: int) -> str:
    """A unit touching most families: a jitted method, a scan body, a key in a loop, a call
    site with a static argument, an isinstance guard, a global write, an unrolled loop."""
    return (f"class C{i}:\n    def __init__(self, n):\n        self.n = n\n\n    @partial(jax.jit, static_argnums=0)\n"
            f"    def run(self, x):\n        if isinstance(x, int):\n            return x\n"
            f"        def body(c, t):\n            return c + t, c\n"
            f"        c, ys = jax.lax.scan(body, x, jnp.arange(self.n))\n        return c\n\n"
            f"def loop{i}(key, x, n):\n    global STATE\n    out = []\n    for j in range(n):\n"
            f"        k = jax.random.fold_in(key, j)\n        out.append(jax.random.normal(k, x.shape))\n"
            f"    STATE = len(out)\n    return jnp.stack(out)\n\n"
            f"g{i} = jax.jit(loop{i}, static_argnums=2)\nr{i} = g{i}(jax.random.key({i}), jnp.ones(3), {i % 4 + 1})\n\n")


SHAPES = {
    "jitted": ("import jax\nimport jax.numpy as jnp\n\n", _jitted),
    "calls": ("import jax\nimport jax.numpy as jnp\n\n", _calls),
    "sites": ("import jax\n\n", _sites),
    "classes": ("import jax\nimport flax.linen as nn\n\n", _classes),
    "keys": ("import jax\n\n", _keys),
    "mixed": ("import jax\nimport jax.numpy as jnp\nfrom functools import partial\n\nSTATE = 0\n\n", _mixed),
}


def long_script(n: int) -> str:
    """Module-level code: ``n`` statements of a notebook-like script."""
    body = "".join(f"x{i} = jnp.ones(({i % 5 + 1},)) * {i}\nprint(x{i}.sum())\n" for i in range(n))
    return "import jax\nimport jax.numpy as jnp\n\n" + body


def guarded_function(n: int) -> str:
    """One jitted function of ``n`` isinstance guards with early exits (narrowing regions)."""
    body = "".join(f"    if not isinstance(a{i % 50}, int):\n        return x\n    x = x + a{i % 50}\n"
                   for i in range(n))
    params = ", ".join(f"a{i}" for i in range(50))
    return f"import jax\n\n\ndef step(x, {params}):\n{body}    return x\n\n\nj = jax.jit(step)\n"


def big_class(n: int) -> str:
    """One class of ``n`` methods calling each other through ``self`` under jit (a tree of calls)."""
    meths = "".join(f"    def m{i}(self, x):\n        return self.m{i // 2}(x) + {i}\n\n" if i else
                    "    def m0(self, x):\n        return x\n\n" for i in range(n))
    return (f"import jax\n\n\nclass Big:\n{meths}    @jax.jit\n    def run(self, x):\n"
            f"        return self.m{n - 1}(x)\n")


GENERATED = {"statements": lambda n: long_function(n), "script": long_script, "guards": guarded_function,
             "methods": big_class}


def long_function(n: int) -> str:
    """One jitted function of ``n`` statements (distinct names: a chain of one name is a
    recursion-depth case, see tests/test_hostile.py, not a size case)."""
    body = "".join(f"    v{i} = jnp.sin(v{i - 1}) + {i}\n" if i else "    v0 = x\n" for i in range(n))
    return f"import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef step(x):\n{body}    return v{n - 1}\n"


def generate(shape: str, n: int) -> str:
    if shape in GENERATED:
        return GENERATED[shape](n)
    head, unit = SHAPES[shape]
    return head + "\n" + "".join(unit(i) for i in range(n))


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def time_lint(text: str, rules, repeat: int) -> float:
    return _best(lambda: lint_source(SourceFile("bench_module.py", text), rules), repeat)


def time_project(text: str, repeat: int) -> float:
    from jaxlint.workspace import Workspace
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "pyproject.toml"), "w").close()
        path = os.path.join(d, "bench_module.py")
        with open(path, "w") as fh:
            fh.write(text)
        rules = [r for r in all_rules() if r.default_enabled]

        def once():
            ws = Workspace(use_cache=False, batch=False)
            ws.lint_function(path, rules)(SourceFile.from_path(path))
        return _best(once, repeat)


def by_rule(text: str, rules) -> None:
    source = SourceFile("bench_module.py", text)
    model = SemanticModel(source.parse(), source)
    ctx = Context(model, source, None)
    rows = []
    for rule in rules:
        t = time.perf_counter()
        list(rule.check(ctx))
        rows.append((time.perf_counter() - t, rule.code))
    for secs, code in sorted(rows, reverse=True)[:8]:
        print(f"      {code}  {secs:7.3f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES) + list(GENERATED),
                    choices=list(SHAPES) + list(GENERATED))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--project", action="store_true", help="time the command line's project path")
    ap.add_argument("--by-rule", action="store_true", help="seconds per rule at the largest size")
    ap.add_argument("--max-ratio", type=float, default=None,
                    help="exit 1 when t(N)/t(N/2) at the largest size exceeds this")
    args = ap.parse_args(argv)
    rules = [r for r in all_rules() if r.default_enabled]
    worst = 0.0
    print(f"{'shape':<11}{'units':>7}{'lines':>8}{'KiB':>7}{'jaxlint s':>11}{'parse s':>9}"
          f"{'x parse':>9}{'growth':>8}")
    for shape in args.shapes:
        prev = None
        for n in sorted(args.sizes):
            text = generate(shape, n)
            parse = _best(lambda: ast.parse(text), args.repeat)
            secs = time_project(text, args.repeat) if args.project else time_lint(text, rules, args.repeat)
            growth = secs / prev if prev else None
            print(f"{shape:<11}{n:>7}{text.count(chr(10)):>8}{len(text) // 1024:>7}{secs:>11.3f}{parse:>9.3f}"
                  f"{secs / parse:>9.1f}{(f'{growth:.2f}' if growth else '-'):>8}", flush=True)
            if growth is not None and n == max(args.sizes):
                worst = max(worst, growth)
            prev = secs
        if args.by_rule:
            by_rule(generate(shape, max(args.sizes)), rules)
    if args.max_ratio is not None and worst > args.max_ratio:
        print(f"growth ratio {worst:.2f} at the largest size exceeds {args.max_ratio}: not linear")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
