"""Runtime confirmation (``jaxlint check --confirm``, ``jaxlint confirm -- CMD``).

Fixture modules live in ``tests/confirm_fixtures/``.  A line that ends with
``# confirm: <CODE> <status>`` gets a finding of that code built directly
(so the tests do not depend on which rules are registered) and must come
out with that status.  All fixture modules are confirmed in one run (one
worker per module) shared by the parametrized tests.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxlint.analysis import SemanticModel, SourceFile
from jaxlint.checkers import Finding
from jaxlint.cli import main
from jaxlint.confirm import ConfirmOptions, confirm_results, load_confirm_config
from jaxlint.confirm.plan import annotation_spec, entry_chain, module_location, plan_file
from jaxlint.confirm.rules import STRATEGY
from jaxlint.confirm.specs import ConfirmConfig, SpecError, parse_spec
from jaxlint.engine import FileResult

ROOT = Path(__file__).resolve().parent.parent
FX = Path(__file__).resolve().parent / "confirm_fixtures"
MARK = re.compile(r"#\s*confirm:\s*(JAX\d{3})\s+(confirmed|not-confirmed|unreached)")
MAIN_MODULES = ["cf_trace_errors.py", "cf_state.py", "cf_keys_loops.py", "cf_compiles.py", "cf_flax.py",
                "cf_synth.py", "cf_pmap.py", "cf_flax_apply.py", "cf_pytree.py", "cf_module_past.py",
                "cf_flax_state.py", "cf_static.py"]
FAILING_MODULES = ["cf_fail_raise.py", "cf_fail_exit.py", "cf_fail_sleep.py", "cf_fail_abort.py",
                   "cf_module_level.py"]


def _stmt_ends(tree):
    ends = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt):
            compound = isinstance(n, (ast.For, ast.While, ast.If, ast.With, ast.FunctionDef, ast.ClassDef))
            ends.setdefault(n.lineno, n.lineno if compound else n.end_lineno)
    return ends


def marked_results(names):
    """FileResults with one finding per ``# confirm:`` marker; finding.expect = status."""
    results = []
    for name in names:
        path = FX / name
        src = SourceFile.from_path(str(path))
        ends = _stmt_ends(src.parse())
        findings = []
        for i, line in enumerate(src.text.splitlines(), 1):
            m = MARK.search(line)
            if m:
                f = Finding(m.group(1), "confirm-test", str(path), i, 0, ends.get(i, i), 1, "test finding")
                f.expect = m.group(2)
                findings.append(f)
        results.append(FileResult(str(path), findings, source=src))
    return results


def _markers(names):
    for name in names:
        for i, line in enumerate((FX / name).read_text().splitlines(), 1):
            m = MARK.search(line)
            if m:
                yield pytest.param(name, i, m.group(1), m.group(2), id=f"{name}:{i}:{m.group(1)}:{m.group(2)}")


@pytest.fixture(scope="module")
def confirmed_main():
    results = marked_results(MAIN_MODULES)
    summary = confirm_results(results, load_confirm_config(str(FX / "pyproject.toml")), ConfirmOptions(timeout=120))
    by_key = {(os.path.basename(f.path), f.line, f.code): f for r in results for f in r.findings}
    return summary, by_key


@pytest.mark.parametrize("name,line,code,status", list(_markers(MAIN_MODULES)))
def test_fixture_marker(confirmed_main, name, line, code, status):
    summary, by_key = confirmed_main
    c = by_key[(name, line, code)].confirmation
    detail = c.get("evidence") or c.get("reason")
    assert c["status"] == status, f"{name}:{line} {code}: {c['status']}: {detail}"
    assert detail
    if status != "unreached":
        assert c["entry"].split(":")[0] == name[:-3] and c["inputs"]
        assert c["device"] and c["backend"]


def test_every_strategy_has_a_positive_and_a_lookalike():
    seen = {}
    for p in _markers(MAIN_MODULES):
        _, _, code, status = p.values
        seen.setdefault(code, set()).add(status)
    for code in STRATEGY:
        assert {"confirmed", "not-confirmed"} <= seen.get(code, set()), code


def test_evidence_texts(confirmed_main):
    summary, by_key = confirmed_main
    assert summary.device and summary.device["backend"] and summary.device["device_kind"]

    def ev(name, line, code):
        c = by_key[(name, line, code)].confirmation
        return c.get("evidence") or c.get("reason")
    text = (FX / "cf_keys_loops.py").read_text().splitlines()
    euler = next(i for i, t in enumerate(text, 1) if "JAX504 confirmed" in t)
    assert re.search(r"200 iterations → \d+ equations, [\d.]+ s to compile \(20 iterations: \d+ equations",
                     ev("cf_keys_loops.py", euler, "JAX504"))
    lines = (FX / "cf_compiles.py").read_text().splitlines()
    inner = next(i for i, t in enumerate(lines, 1) if "JAX501 confirmed" in t)
    assert re.search(r"compiled \d+ executables .* in [\d.]+ s of compiling .* 1 after jitting the whole step "
                     r"\([\d.]+ s\)",
                     ev("cf_compiles.py", inner, "JAX501"))
    lines = (FX / "cf_trace_errors.py").read_text().splitlines()
    untaken = next(i for i, t in enumerate(lines, 1) if "JAX101 unreached" in t)
    assert "did not run while tracing `branchy`" in ev("cf_trace_errors.py", untaken, "JAX101")
    unannotated = next(i for i, t in enumerate(lines, 1) if "def unannotated(" in t) + 1
    # nothing applies a transform to it: tracing it alone would assume the traced value JAX201 claims
    why = ev("cf_trace_errors.py", unannotated, "JAX201")
    assert "ran when running `unannotated` as the program does" in why and "but not under a trace" in why, why
    # inputs synthesized from uses: dict keys, attributes, lists of layers through a helper, keys
    slines = (FX / "cf_synth.py").read_text().splitlines()

    def synth(needle, code):
        c = by_key[("cf_synth.py", next(i for i, t in enumerate(slines, 1) if needle in t), code)].confirmation
        return c.get("evidence") or c.get("reason")
    # every verdict names its entry and each argument: how it enters the trace, where it came from
    assert ("params={b: float32[4,4], w: float32[4,4]} (tracer, synthesized), x=float32[4,4] (tracer, synthesized)"
            in synth("if h.sum() > 0", "JAX201"))
    assert "state={.params: {w: float32[4,4]}, .step: float32[4,4]} (tracer" in synth('print("step"', "JAX101")
    assert "params=[{w: float32[4,4]}, {w: float32[4,4]}, {w: float32[4,4]}] (tracer" in synth("int(y.sum())",
                                                                                                 "JAX202")
    assert "key=key[] (tracer" in synth("b = jax.random.normal(key, x.shape)  # confirm: JAX401 confirmed", "JAX401")
    assert "images=float32[4,4,4,4] (tracer" in synth("return images[bright", "JAX204")
    # a static argument is a Python value, never a tracer
    assert "mode='relu' (Python value, synthesized)" in synth("x[0] = 1.0", "JAX301")
    assert "(tracer, call site)" in synth("x.reshape(k, -1)", "JAX201") and "x=float32[8,3]" in synth("x.reshape(k",
                                                                                                     "JAX201")
    assert "tracing `run_scan`" in synth("if x > 0:", "JAX201")
    # a Flax module's variables from its `init`, an optax state from the transformation's `init`
    ev_opt = synth('print("updates"', "JAX101")
    assert "params={params: {Dense_0: {bias: float32[4], kernel: float32[4,4]}}}" in ev_opt, ev_opt
    assert "opt_state=((int32[], {params: {Dense_0: {bias: float32[4]" in ev_opt, ev_opt
    why = synth("if x.sum() > 0:  # confirm: JAX201 unreached", "JAX201")
    assert why.startswith("no inputs for `apply_fn`: `f` is called like a function; declare them in "
                          "[tool.jaxlint.confirm]: \"cf_synth:apply_fn\" = [\"?\", \"f32[4,4]\"]"), why
    # an inferred helper is reached through its jitted caller
    helper = next(i for i, t in enumerate(lines, 1) if "if x.std() > 0" in t)
    assert by_key[("cf_trace_errors.py", helper, "JAX201")].confirmation["entry"] == \
        "cf_trace_errors:standardize_step"
    fmt = next(i for i, t in enumerate(lines, 1) if 'print(f"loss {loss:.3f}")' in t)
    assert "formatting the traced value failed at trace time: TypeError" in ev("cf_trace_errors.py", fmt, "JAX101")


def test_failing_modules_are_unreached_and_the_run_goes_on():
    results = marked_results(FAILING_MODULES)
    confirm_results(results, ConfirmConfig(root=str(FX)), ConfirmOptions(timeout=6))
    got = {os.path.basename(f.path): f.confirmation for r in results for f in r.findings}
    for name in FAILING_MODULES:
        f = next(f for r in results for f in r.findings if f.path.endswith(name))
        assert got[name]["status"] == f.expect, (name, got[name])
    assert "importing the module failed: RuntimeError: no dataset found at import (at line 3)" == \
        got["cf_fail_raise.py"]["reason"]
    assert "sys.exit(3)" in got["cf_fail_exit.py"]["reason"]
    assert got["cf_fail_sleep.py"]["reason"].startswith("module-level work timed out: importing the module ran "
                                                         "past 6 s")
    assert "crashed (exit code 7) while importing the module" in got["cf_fail_abort.py"]["reason"]
    assert "importing the module raised TypeError at line 4" in got["cf_module_level.py"]["evidence"]


# ------------------------------------------------------------------ CLI
def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_json_sarif_and_confirmed_only(capsys, monkeypatch):
    monkeypatch.chdir(FX)
    code, out, err = run(["check", "cf_trace_errors.py", "--confirm", "--color", "never", "--device", "cpu",
                          "--format", "json"], capsys)
    assert code == 1
    assert err.count("--confirm imports your modules") == 1
    data = json.loads(out)
    by = {(f["line"], f["code"]): f["confirmation"] for f in data}
    relu = _line_of(FX / "cf_trace_errors.py", "JAX201 confirmed")
    assert by[(relu, "JAX201")]["status"] == "confirmed"
    assert "TracerBoolConversionError" in by[(relu, "JAX201")]["evidence"]
    assert all(c["backend"] == "cpu" for c in by.values() if c["status"] != "unreached")
    statuses = {c["status"] for c in by.values()}
    assert "confirmed" in statuses

    # text: evidence under each finding, the device once; --confirmed-only as a gate, in SARIF
    from jaxlint.reporting import render
    from io import StringIO
    res = [FileResult("cf_trace_errors.py", [Finding(f["code"], f["symbol"], f["path"], f["line"], f["col"] - 1,
                                                     f["end_line"], f["end_col"] - 1, f["message"],
                                                     confirmation=f["confirmation"]) for f in data],
                      source=SourceFile.from_path("cf_trace_errors.py"))]
    buf = StringIO()
    render("text", res, buf, color=False, confirm_summary="Confirmation on cpu (cpu backend, jax x): 1 confirmed")
    text = buf.getvalue()
    assert f"  = confirmed: tracing `relu` raised TracerBoolConversionError at line {relu}" in text
    assert text.count("Confirmation on cpu") == 1

    code, out, err = run(["check", "cf_trace_errors.py", "--confirmed-only", "--format", "sarif"], capsys)
    assert code == 1
    results = json.loads(out)["runs"][0]["results"]
    assert results and all(r["properties"]["confirmation"]["status"] == "confirmed" for r in results)
    assert len(results) == sum(1 for c in by.values() if c["status"] == "confirmed")


def test_cli_confirmed_only_gate(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.py").write_text(textwrap.dedent("""\
        import jax


        @jax.jit
        def step(x, flag=False):
            if flag:
                print("x", x)
            return x
    """))
    code, out, err = run(["check", "ok.py", "--confirm", "--select", "JAX101", "--color", "never"], capsys)
    assert code == 1 and "= unreached: line 7 did not run while tracing `step` with inputs (x=float32[4,4])" in out
    assert "Confirmation on " in out
    # --confirmed-only over findings that were all unreached says the gate checked nothing, and fails
    (tmp_path / "fn_param.py").write_text(textwrap.dedent("""\
        import jax


        @jax.jit
        def apply(f, x):
            print("x", x)
            return f(x)
    """))
    code, out, err = run(["check", "fn_param.py", "--confirmed-only", "--select", "JAX101", "-q"], capsys)
    assert code == 1 and out == "" and "--confirmed-only checked nothing: none of the 1 finding" in err
    code, out, err = run(["check", "fn_param.py", "--confirmed-only", "--select", "JAX101", "-q", "--exit-zero"],
                         capsys)
    assert code == 0 and "checked nothing" in err
    from jaxlint.confirm import confirmed_only
    res = [FileResult("ok.py", [Finding("JAX101", "s", "ok.py", 7, 8, 7, 9, "m",
                                        confirmation={"status": "unreached", "reason": "r"})])]
    assert "--confirmed-only checked nothing: none of the 1 finding" in confirmed_only(res)
    assert res[0].findings == []
    res = [FileResult("ok.py", [Finding("JAX101", "s", "ok.py", 7, 8, 7, 9, "m", confirmation={"status": s})
                                for s in ("unreached", "not-confirmed")])]
    assert confirmed_only(res) is None and res[0].findings == []


def test_cli_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.confirm]\n"a:f" = ["q32[3]"]\n')
    code, _, err = run(["check", "a.py", "--confirm"], capsys)
    assert code == 2 and "unknown dtype 'q32'" in err
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.confirm]\ntimeout = 5\n')
    assert run(["check", "a.py", "--confirm"], capsys)[0] == 0          # no findings: nothing runs
    code, _, err = run(["check", "a.py", "--confirm", "--diff"], capsys)
    assert code == 2 and "--diff" in err
    code, _, err = run(["check", "a.py", "--confirm-timeout", "0"], capsys)
    assert code == 2
    with pytest.raises(SystemExit) as exc:
        main(["confirm", "a.py"])
    assert exc.value.code == 2


# ------------------------------------------------------------------ harness mode
def _line_of(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


def test_harness_on_bundled_training_script(capsys):
    mlp = ROOT / "examples" / "harness" / "mlp.py"
    src = SourceFile.from_path(str(mlp))
    want = {
        ("JAX401", _line_of(mlp, "keep = jax.random.bernoulli(key")): "confirmed",
        ("JAX101", _line_of(mlp, 'print("step loss"')): "confirmed",
        ("JAX201", _line_of(mlp, "if norm > max_norm")): "confirmed",
        ("JAX502", _line_of(mlp, "predict_fn = jax.jit(")): "confirmed",
    }
    findings = [Finding(code, "t", str(mlp), line, 4, line, 10, "m") for code, line in want]
    results = [FileResult(str(mlp), findings, source=src)]
    cmd = [sys.executable, str(ROOT / "examples" / "harness" / "train_small.py"), "--steps", "2"]
    summary = confirm_results(results, ConfirmConfig(root=str(ROOT)), ConfirmOptions(command=cmd, timeout=60))
    for f in findings:
        c = f.confirmation
        assert c["status"] == want[(f.code, f.line)], (f.code, c)
    by = {f.code: f.confirmation for f in findings}
    assert by["JAX101"]["inputs"].startswith("harness (")
    assert "uint32[2]" in by["JAX401"]["inputs"]                     # the recorded legacy key
    assert "compiled `jit(<lambda>)` 4 times" in by["JAX502"]["evidence"]
    # not called by the command: confirmed afterwards with inputs synthesized from its uses
    assert by["JAX201"]["inputs"].startswith("synthesized (grads=") and "did not reach it" in by["JAX201"]["inputs"]
    assert summary.command_rc == 0
    assert "step 1: loss" in capsys.readouterr().err                  # the command's output, on stderr


def test_cli_confirm_command_records_errors_of_the_run(capsys, monkeypatch):
    monkeypatch.chdir(FX)
    line = _line_of(FX / "cf_trace_errors.py", "JAX201 confirmed")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import jax.numpy as jnp, cf_trace_errors as m\n"
            "m.relu(jnp.ones(3))\n" % str(FX))
    rc, out, err = run(["confirm", "cf_trace_errors.py", "--format", "json", "--",
                        sys.executable, "-c", code], capsys)
    assert rc == 1
    by = {(f["line"], f["code"]): f["confirmation"] for f in json.loads(out)}
    c = by[(line, "JAX201")]
    assert c["status"] == "confirmed"
    assert c["evidence"].startswith(f"the run raised TracerBoolConversionError at line {line}")
    assert "the command exited with code 1" in err
    # findings the command did not reach were confirmed the ordinary way afterwards
    others = [c for k, c in by.items() if k != (line, "JAX201") and c["status"] == "confirmed"]
    assert others and all("did not reach it" in c["inputs"] for c in others)


def test_harness_records_the_transforms_its_records_name(tmp_path):
    """The harness wraps each transform whose knowledge record is `instrumented`; the command
    here marks vmap, grad and lax.scan so (whatever the shipped table says) they are recorded."""
    mod = tmp_path / "hmod.py"
    mod.write_text(textwrap.dedent("""\
        import jax, jax.numpy as jnp


        def body(c, x):
            if x > 0:
                c = c + x
            return c, x


        def per_example(v):
            print("v", v)
            return v * 2


        def loss(w, x):
            l = jnp.sum((x @ w) ** 2)
            print("loss", l)
            return l


        def eager(a, b):
            return a @ b


        def smooth(x, steps=30):
            for _ in range(steps):
                x = 0.5 * x + 0.5 * jnp.roll(x, 1)
            return x
    """))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""\
        import dataclasses, sys
        from jaxlint.analysis import knowledge as K
        for n in ("jax.vmap", "jax.grad", "jax.lax.scan"):
            K.TRANSFORMS[n] = dataclasses.replace(K.TRANSFORMS[n], instrumented=True)
        sys.path.insert(0, {str(tmp_path)!r})
        import jax, jax.numpy as jnp
        import hmod
        try:
            jax.lax.scan(hmod.body, 0.0, jnp.arange(3.0))
        except Exception:
            pass
        jax.vmap(hmod.per_example)(jnp.ones((5, 3)))
        jax.grad(hmod.loss)(jnp.ones((3, 2)), jnp.ones((4, 3)))
        hmod.eager(jnp.ones((2, 3)), jnp.ones((3, 4)))
        jax.jit(hmod.smooth, static_argnames="steps")(jnp.ones(3), steps=3)
    """))
    fs = [Finding("JAX201", "t", str(mod), 5, 0, 5, 1, "m"), Finding("JAX101", "t", str(mod), 11, 0, 11, 1, "m"),
          Finding("JAX101", "t", str(mod), 17, 0, 17, 1, "m"), Finding("JAX504", "t", str(mod), 26, 0, 27, 1, "m")]
    res = [FileResult(str(mod), fs, source=SourceFile.from_path(str(mod)))]
    confirm_results(res, ConfirmConfig(root=str(tmp_path)), ConfirmOptions(command=[sys.executable, str(script)],
                                                                           timeout=60))
    scan, vmap, grad, loop = (f.confirmation for f in fs)
    # the command ran the loop 3 times; the finding names its default trip count, 30
    assert loop["status"] == "confirmed" and loop["evidence"].startswith(
        "tracing `smooth` unrolled the loop at line 26: 30 iterations → "), loop
    assert "ran it 3 times, so it was traced again with `steps=30` (its default)" in loop["evidence"]
    assert scan["status"] == "confirmed" and scan["evidence"].startswith("the run raised TracerBoolConversionError")
    assert vmap["status"] == "confirmed" and vmap["inputs"] == "harness (float32[3])"       # one example, unbatched
    assert grad["status"] == "confirmed" and grad["inputs"] == "harness (float32[3,2], float32[4,3])"


def test_pytest_as_the_harness(tmp_path):
    """`jaxlint confirm --pytest ARGS`: the project's tests are the command that records inputs."""
    from jaxlint.confirm.harness import pytest_command
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        import jax


        @jax.jit
        def scale(x, factor):
            print("scaling", x)
            return x * factor
    """))
    (tmp_path / "test_model.py").write_text(textwrap.dedent("""\
        import jax.numpy as jnp
        import model


        def test_scale():
            assert model.scale(jnp.ones((2, 5)), 3.0).shape == (2, 5)
    """))
    mod = tmp_path / "model.py"
    f = Finding("JAX101", "t", str(mod), 6, 4, 6, 9, "m")
    cmd = pytest_command(["--rootdir", str(tmp_path), str(tmp_path / "test_model.py")])
    assert cmd[1:3] == ["-m", "pytest"]
    summary = confirm_results([FileResult(str(mod), [f], source=SourceFile.from_path(str(mod)))],
                              ConfirmConfig(root=str(tmp_path)), ConfirmOptions(command=cmd, timeout=60))
    assert summary.command_rc == 0
    assert f.confirmation["status"] == "confirmed" and f.confirmation["inputs"] == "harness (float32[2,5], float32[])"


def test_missing_jax_is_one_line(monkeypatch, capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    results = marked_results(["cf_module_level.py"])
    summary = confirm_results(results, ConfirmConfig(root=str(FX)), ConfirmOptions(timeout=5))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs JAX, which is not installed" in err and "-m pip install jax" in err
    assert all(f.confirmation == {"status": "unreached", "reason": "JAX is not installed"}
               for r in results for f in r.findings)
    assert summary.modules == 1 and summary.counts == {"unreached": len(results[0].findings)}


def test_device_choice_is_checked(capsys):
    results = marked_results(["cf_module_level.py"])
    path = results[0].path
    results[0].findings[0] = Finding("JAX101", "t", path, 1, 0, 1, 1, "m")
    confirm_results(results, ConfirmConfig(root=str(FX)), ConfirmOptions(timeout=60, device="gpu"))
    c = results[0].findings[0].confirmation
    assert c["backend"] == "gpu" or c["reason"].startswith("no gpu visible to JAX (default backend: ")


# ------------------------------------------------------------------ static parts (no JAX)
def test_confirm_package_never_imports_jax():
    code = ("import sys\n"
            "import jaxlint.confirm, jaxlint.confirm.plan, jaxlint.confirm.runner, jaxlint.confirm.harness\n"
            "import jaxlint.confirm.instrument, jaxlint.confirm.specs, jaxlint.confirm.rules\n"
            "from jaxlint.cli import main\n"
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if m.startswith('jax.'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr


def test_spec_language():
    cfg = ConfirmConfig(dims={"batch": 8}, dim_size=3)
    assert parse_spec("f32[8,3]", cfg) == {"t": "array", "dtype": "float32", "shape": [8, 3]}
    assert parse_spec("i32[]", cfg) == {"t": "array", "dtype": "int32", "shape": []}
    assert parse_spec("bfloat16[batch, n]", cfg)["shape"] == [8, 3]
    assert parse_spec("key", cfg) == {"t": "key", "shape": []}
    assert parse_spec("key[4]", cfg) == {"t": "key", "shape": [4]}
    assert parse_spec(True, cfg) == {"t": "static", "v": True}
    assert parse_spec("relu", cfg) == {"t": "static", "v": "relu"}
    assert parse_spec("None", cfg) == {"t": "static", "v": None}
    tree = parse_spec({"w": "f32[2]", "layers": [1, "u8[3]"]}, cfg)
    assert tree["t"] == "dict" and tree["items"]["layers"]["items"][1]["dtype"] == "uint8"
    with pytest.raises(SpecError):
        parse_spec("f33[2]", cfg)
    with pytest.raises(SpecError):
        parse_spec("f32[2,?]", cfg)


def test_config_loading(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text(textwrap.dedent("""\
        [tool.jaxlint]
        select = ["JAX1"]
        [tool.jaxlint.confirm]
        timeout = 5
        dims = { batch = 2 }
        array-shape = [3, 3]
        "pkg.mod:f" = ["f32[batch]", 1]
        "pkg.mod:Model.__call__" = { x = "f32[2,3]" }
        "src/tool.py:g" = []
    """))
    from jaxlint.config import load_config
    load_config(str(p))                                     # `confirm` is a known [tool.jaxlint] key
    cfg = load_confirm_config(str(p))
    assert cfg.timeout == 5 and cfg.array_default()["shape"] == [3, 3]
    assert cfg.spec_for("pkg.mod", None, "f")["args"][0]["shape"] == [2]
    assert cfg.spec_for("pkg.mod", None, "Model.__call__")["kwargs"]["x"]["shape"] == [2, 3]
    assert cfg.spec_for(None, str(tmp_path / "src" / "tool.py"), "g") == {"args": [], "kwargs": {}}
    assert cfg.spec_for("other", None, "f") is None
    p.write_text('[tool.jaxlint.confirm]\ntimeoutt = 5\n')
    with pytest.raises(SpecError, match="unknown key 'timeoutt'"):
        load_confirm_config(str(p))
    p.write_text('[tool.jaxlint.confirm]\ndevice = "npu"\n')
    with pytest.raises(SpecError):
        load_confirm_config(str(p))


def _model(text):
    src = SourceFile("m.py", textwrap.dedent(text))
    return SemanticModel(src.parse(), src)


def test_annotations_to_specs():
    m = _model("""\
        from __future__ import annotations
        from typing import TYPE_CHECKING, Optional
        import jax
        if TYPE_CHECKING:
            from jaxtyping import Array, Float, Int, Key, PRNGKeyArray

        def f(a: Float[Array, "batch 3"], b: Int[Array, ""], c: jax.Array, d: Optional[jax.Array],
              e: PRNGKeyArray, k: Key[Array, "n"], g: float, h: "Float[Array, '*b n+1']", i: dict):
            pass
    """)
    cfg = ConfirmConfig(dims={"batch": 8}, dim_size=3, array_shape=[5])
    fn = m.module.defs["f"]
    specs = {p: annotation_spec(m, fn.param_nodes[p].annotation, cfg) for p in fn.params}
    assert specs["a"] == {"t": "array", "dtype": "float32", "shape": [8, 3]}
    assert specs["b"] == {"t": "array", "dtype": "int32", "shape": []}
    assert specs["c"]["shape"] == [5] and specs["d"]["shape"] == [5]
    assert specs["e"] == {"t": "key", "shape": []} and specs["k"] == {"t": "key", "shape": [3]}
    assert specs["g"] == {"t": "array", "dtype": "float32", "shape": [], "weak": True}
    assert specs["h"]["shape"] == [4]
    assert specs["i"] is None


def test_entry_chain_prefers_the_certain_entry():
    m = _model("""\
        import jax
        from jax import lax

        def helper(x):
            return x * 2

        def body(carry, _):
            return helper(carry), None

        @jax.jit
        def run(x):
            y, _ = lax.scan(body, x, None, length=3)
            return y
    """)
    chain = [f.qualname for f in entry_chain(m, m.module.defs["helper"])]
    assert chain[0] in ("body", "run") and "run" in chain and chain[-1] == "helper"
    assert chain.index("run") < chain.index("helper")


def test_plan_and_module_location(tmp_path):
    pkg = tmp_path / "pkg" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    mod = pkg / "train.py"
    mod.write_text(textwrap.dedent("""\
        import jax

        class Net:
            def apply(self, x: jax.Array):
                return [v for v in x]

        def outer(x):
            def inner(y):
                return y
            return jax.jit(inner)(x)
    """))
    assert module_location(str(mod)) == ("pkg.sub.train", str(tmp_path))
    src = SourceFile.from_path(str(mod))
    fs = [Finding("JAX201", "s", str(mod), 5, 0, 5, 1, "m"), Finding("JAX201", "s", str(mod), 9, 0, 9, 1, "m"),
          Finding("JAX503", "s", str(mod), 1, 0, 1, 1, "m")]
    job, ids = plan_file(src, fs, ConfirmConfig(root=str(tmp_path)))
    assert job["module"] == "pkg.sub.train" and sorted(ids) == [0, 1, 2]
    t0, t1, t2 = job["targets"]
    assert t0["entries"] == ["Net.apply"] and job["entries"]["Net.apply"]["owner"] == "Net"
    assert job["entries"]["Net.apply"]["params"][0]["name"] == "x"          # self skipped
    assert "nested function" in t1["unreached"]
    assert t2.get("module_level")
