"""Fuzzing the command line with generated programs (issue 20): deep and wide, under
``jax.jit`` and not, valid and broken, plus mutated rule fixtures.

For each program, with a fixed budget (``JAXLINT_FUZZ_SECONDS``, default 4 s; at least
``MIN_PROGRAMS``) and a fixed seed (``JAXLINT_FUZZ_SEED``, default 20: CI sees the same
programs every run; set another seed to explore):

* ``jaxlint check`` never prints a traceback and exits 0 (no finding, nothing on
  stderr), 1 (findings, no error) or 2 (each error one line naming the file) -- never 3,
  an internal error (docs/guarantees.md);
* ``jaxlint check --fix --unsafe-fixes`` exits the same way, leaves a file that parsed
  parsing (and one that did not untouched), and a second ``--fix`` changes nothing.

A failure names the seed and the program, and keeps the program in the test's folder.
"""
from __future__ import annotations

import ast
import json
import os
import random
import time
from pathlib import Path

import pytest

from jaxlint.cli import main

SEED = int(os.environ.get("JAXLINT_FUZZ_SEED", "20"))
BUDGET_S = float(os.environ.get("JAXLINT_FUZZ_SECONDS", "4"))
MIN_PROGRAMS = 8
FIXTURES = sorted((Path(__file__).parent / "fixtures").rglob("*.py"))


# ------------------------------------------------------------------ the generator
class Gen:
    """Random JAX programs: functions under transforms, with the constructs the rules
    look at (print, Python control flow on values, keys, global state, loops), some
    expressions nested far past the recursion limit, some modules very wide."""

    NAMES = ["x", "y", "z", "key", "state", "params", "batch", "n"]

    def __init__(self, rng: random.Random):
        self.r = rng

    def expr(self, depth: int) -> str:
        r = self.r
        if depth <= 0:
            return r.choice(self.NAMES + ["(1)", "(2.0)", "(None)", "jnp.ones(3)", "x.shape[0]", "len(batch)"])
        k = r.randrange(12)
        sub = lambda: self.expr(depth - 1)  # noqa: E731
        if k == 0:
            return f"({sub()} + {sub()})"
        if k == 1:
            return f"jnp.{r.choice(['sin', 'sum', 'where', 'asarray', 'mean'])}({sub()})"
        if k == 2:
            return f"{sub()}.T"
        if k == 3:
            return f"{sub()}[0]"
        if k == 4:
            return f"[{sub()}, {sub()}]"
        if k == 5:
            return f"({sub()} if {sub()} > 0 else {sub()})"
        if k == 6:
            return f"jax.random.normal({r.choice(['key', 'sub'])}, ({sub()},))"
        if k == 7:
            return f"{sub()}.at[0].set({sub()})"
        if k == 8:
            return f"float({sub()})"
        if k == 9:
            return f"(lambda v: v * 2)({sub()})"
        if k == 10:
            return f"{{'a': {sub()}}}['a']"
        return f"jax.lax.stop_gradient({sub()})"

    def deep_expr(self) -> str:
        """Valid Python nested past the analysis' recursion limit (the parser takes it)."""
        n = self.r.choice([150, 300, 450])
        kind = self.r.randrange(4)
        if kind == 0:
            return " + ".join(["x"] * n)
        if kind == 1:
            return "x" + ".T" * n
        if kind == 2:
            return "x" + "[0]" * n
        return "(" * 90 + "x" + ")" * 90

    def stmt(self, indent: str, depth: int) -> list:
        r = self.r
        k = r.randrange(16)
        e = lambda: self.expr(r.randrange(1, 4))  # noqa: E731
        name = r.choice(self.NAMES)
        if k == 0:
            return [f"{indent}print({e()})"]
        if k == 1 and depth < 3:
            return [f"{indent}if {e()} > 0:"] + self.block(indent + "    ", depth + 1)
        if k == 2 and depth < 3:
            return [f"{indent}for i in range({r.choice(['3', 'n', 'x.shape[0]'])}):"] + \
                self.block(indent + "    ", depth + 1)
        if k == 3:
            return [f"{indent}key, sub = jax.random.split(key)"]
        if k == 4:
            return [f"{indent}global STATE", f"{indent}STATE = {e()}"]
        if k == 5:
            return [f"{indent}CACHE.append({e()})"]
        if k == 6:
            return [f"{indent}{name} = {self.deep_expr() if r.random() < 0.15 else e()}"]
        if k == 7 and depth < 3:
            return [f"{indent}while {e()} > 0:"] + self.block(indent + "    ", depth + 1) + [f"{indent}    break"]
        if k == 8:
            return [f"{indent}assert {e()} is not None"]
        if k == 9 and depth < 3:
            return [f"{indent}try:"] + self.block(indent + "    ", depth + 1) + \
                [f"{indent}except Exception:", f"{indent}    pass"]
        if k == 10:
            return [f"{indent}{name} = [{e()} for _ in range(3)]"]
        if k == 11 and depth < 3:
            return [f"{indent}def inner(v):"] + self.block(indent + "    ", depth + 1) + [f"{indent}    return v",
                                                                                          f"{indent}{name} = inner({e()})"]
        if k == 12:
            return [f"{indent}{name} = y = {e()}"]
        if k == 13:
            return [f"{indent}x = {e()}  # noqa: JAX101"]
        if k == 14:
            return [f"{indent}{name} += {e()}"]
        return [f"{indent}{name} = {e()}"]

    def block(self, indent: str, depth: int) -> list:
        out = []
        for _ in range(self.r.randrange(1, 4)):
            out += self.stmt(indent, depth)
        return out

    def function(self, i: int) -> list:
        r = self.r
        deco = r.choice(["@jax.jit", "@partial(jax.jit, static_argnums=(1,))", "@jax.vmap", "@jax.grad", "",
                         "@partial(jax.jit, static_argnames=('n',))", "@jax.checkpoint"])
        lines = [deco] if deco else []
        lines.append(f"def f{i}(x, n=3, key=None, state=None, params=None, batch=(), y=0, z=0):")
        lines += self.block("    ", 1)
        lines.append(f"    return {self.expr(2)}")
        return lines

    def module(self) -> str:
        r = self.r
        lines = ["import jax", "import jax.numpy as jnp", "from functools import partial", "", "STATE = 0",
                 "CACHE = []", ""]
        wide = r.random() < 0.1
        for i in range(r.randrange(40, 80) if wide else r.randrange(1, 5)):
            lines += self.function(i) + [""]
        if r.random() < 0.2:     # a long elif chain, past the recursion limit
            lines += ["@jax.jit", "def chain(x):", "    if x == 0:", "        return 0"]
            lines += [f"    elif x == {j}:\n        return {j}" for j in range(1, r.choice([50, 1000]))]
            lines.append("")
        if r.random() < 0.15:    # a deep expression under jit
            lines += ["@jax.jit", "def deep(x):", f"    y = {self.deep_expr()}", "    print(y)", "    return y", ""]
        if r.random() < 0.5:
            lines += ["for step in range(10):", f"    out = jax.jit(f0)(jnp.ones(3))",
                      "    k = jax.random.PRNGKey(0)", "    a = jax.random.normal(k, (2,))",
                      "    b = jax.random.normal(k, (2,))"]
        return "\n".join(lines) + "\n"


def mutate(rng: random.Random, text: str) -> str:
    """A rule fixture with a line dropped, doubled or moved, or a bracket removed."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    i = rng.randrange(len(lines))
    k = rng.randrange(4)
    if k == 0:
        del lines[i]
    elif k == 1:
        lines.insert(i, lines[i])
    elif k == 2:
        lines.insert(rng.randrange(len(lines)), lines.pop(i))
    else:
        lines[i] = lines[i].replace(")", "", 1)
    return "".join(lines)


# ------------------------------------------------------------------ the checks
def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _check(capsys, path: Path, label: str) -> None:
    name = path.name
    before = path.read_bytes()

    def run(*extra):
        code = main(["check", name, "--no-cache", "--jobs", "1", *extra])
        out, err = capsys.readouterr()
        assert "Traceback" not in err, f"{label}: traceback\n{err}"
        assert code in (0, 1, 2), f"{label}: exit {code}\n{err}"
        errors = [ln for ln in err.splitlines() if ln.strip()]
        if code == 2:
            assert errors and all(ln.startswith(f"{name}: error: ") or ln.startswith("jaxlint: ")
                                  for ln in errors), f"{label}: {errors}"
        else:
            assert not [ln for ln in errors if ": error:" in ln], f"{label}: exit {code} with {errors}"
        return code, out, errors

    code, out, errors = run("--format", "json")
    found = json.loads(out)
    if code == 0:
        assert found == [] and not errors, label
    if code == 1:
        assert found, f"{label}: exit 1 without a finding"
    code, out, errors = run("--fix", "--unsafe-fixes", "-q")
    after = path.read_bytes()
    if _parses(before.decode("utf-8", "replace")):
        assert _parses(after.decode("utf-8", "replace")), f"{label}: --fix left a file that does not parse"
    else:
        assert after == before, f"{label}: --fix changed a file that did not parse"
    run("--fix", "--unsafe-fixes", "-q")
    assert path.read_bytes() == after, f"{label}: a second --fix changed the file again"


def test_fuzzed_programs_never_break_the_contract(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    rng = random.Random(SEED)
    gen = Gen(rng)
    start, n = time.monotonic(), 0
    while n < MIN_PROGRAMS or time.monotonic() - start < BUDGET_S:
        if n % 3 == 2 and FIXTURES:
            fixture = rng.choice(FIXTURES)
            text, what = mutate(rng, fixture.read_text(encoding="utf-8")), f"mutated {fixture.name}"
        else:
            text, what = gen.module(), "generated"
        path = tmp_path / f"p{n}.py"
        path.write_text(text)
        (tmp_path / f"p{n}.orig").write_text(text)      # kept for a failure's reproduction
        _check(capsys, path, f"seed {SEED}, program {n} ({what}, kept as {tmp_path / f'p{n}.orig'})")
        path.unlink()   # one module at a time: the project is this program alone
        n += 1
        if n >= 500:
            break
