"""Confirmation reach (issue 22, item 2): notebooks, namespace packages, top-level key reuse,
and reasons that name the cause."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import Finding
from jaxlint.cli import main
from jaxlint.confirm import ConfirmOptions, confirm_results
from jaxlint.confirm.specs import ConfirmConfig
from jaxlint.engine import FileResult
from jaxlint.confirm.plan import module_location
from jaxlint.confirm.reasons import import_failure, timed_out


def test_import_failures_name_their_cause():
    assert import_failure("ModuleNotFoundError", "No module named 'tensorflow'").startswith(
        "missing dependency: `tensorflow`")
    assert import_failure("ModuleNotFoundError", "No module named 'jax.experimental.maps'",
                          versions={"jax": "0.10.2"}).startswith("code written for another JAX version")
    assert "another JAX version" in import_failure(
        "ImportError", "cannot import name 'optim' from 'flax' (/x/flax/__init__.py)")
    assert "another JAX version" in import_failure(
        "AttributeError", "module 'jax.interpreters.xla' has no attribute 'pytype_aval_mappings'")
    assert import_failure("FileNotFoundError", "[Errno 2] No such file or directory: 'cache/hand.json'",
                          ["OSError"]).startswith("missing data file: the module reads `cache/hand.json`")
    assert "pip install -e ." in import_failure("PackageNotFoundError", "No package metadata was found for exponax")
    assert import_failure("RuntimeError", "no dataset") == ""
    assert timed_out("importing the module", 60).startswith("module-level work timed out")
    assert timed_out("confirming JAX101 at line 3", 60) == "timed out after 60 s while confirming JAX101 at line 3"


def test_a_folder_without_init_below_a_package_is_a_namespace_package(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text("x = 1\n")
    name, folder = module_location(str(pkg / "sub" / "mod.py"))
    assert name == "pkg.sub.mod" and folder == str(tmp_path)


NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "import jax\nkey = jax.random.PRNGKey(0)\na = jax.random.normal(key, (2,))\n"},
        {"cell_type": "markdown", "metadata": {}, "source": "Another draw"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "%matplotlib inline\nb = jax.random.normal(key, (2,))\nprint(a, b)\n"},
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3", "display_name": "Python 3"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.mark.slow
def test_a_notebook_runs_cell_by_cell_and_shows_a_top_level_key_reuse(tmp_path, capsys, monkeypatch):
    nb = tmp_path / "draws.ipynb"
    nb.write_text(json.dumps(NOTEBOOK))
    monkeypatch.chdir(tmp_path)
    code = main(["check", "draws.ipynb", "--confirm", "--strict", "--select", "JAX401", "--format", "json",
                 "--no-cache", "--exit-zero"])
    assert code == 0
    found = json.loads(capsys.readouterr().out)
    assert found, "JAX401 should report the reuse across cells"
    c = found[0]["confirmation"]
    assert c["status"] == "confirmed", c
    assert "importing the module raised KeyReuseError" in c["evidence"]


@pytest.mark.slow
def test_device_gpu_with_a_fake_backend(tmp_path, monkeypatch):
    # CI has no accelerator: a fake backend name takes the `--device gpu` path end to end
    from jaxlint.analysis import SourceFile
    from jaxlint.checkers import Finding
    from jaxlint.confirm import ConfirmOptions, confirm_results
    from jaxlint.confirm.specs import ConfirmConfig
    from jaxlint.engine import FileResult
    mod = tmp_path / "gpu_step.py"
    mod.write_text("import jax\n\n\n@jax.jit\ndef step(x: jax.Array):\n    print(x)\n    return x\n")
    src = SourceFile.from_path(str(mod))
    res = [FileResult(str(mod), [Finding("JAX101", "t", str(mod), 6, 0, 6, 1, "m")], source=src)]
    monkeypatch.setenv("JAXLINT_CONFIRM_FAKE_BACKEND", "gpu")
    summary = confirm_results(res, ConfirmConfig(root=str(tmp_path)), ConfirmOptions(timeout=60, device="gpu"))
    c = res[0].findings[0].confirmation
    assert c["status"] == "confirmed" and c["backend"] == "gpu", c
    assert summary.device["device_kind"].startswith("gpu (faked on ")


FX = Path(__file__).resolve().parent / "confirm_fixtures"
REACH = FX / "cf_reach.py"
REACH_TAG = re.compile(r"#\s*reach:\s*([\w-]+)")
KEY_REUSE = ("JAX401", "PRNG key `{k}` is reused: already consumed by `jax.random.{f}` on line {first}, "
                       "then by `jax.random.{f}`")
REACH_FINDINGS = {
    "instance-jit": KEY_REUSE[1].format(k="subkey", f="randint", first="{first}"),
    "instance-split": KEY_REUSE[1].format(k="k2", f="randint", first="{first}"),
    "instance-plain": KEY_REUSE[1].format(k="key", f="normal", first="{first}"),
    "instance-no-ctor": KEY_REUSE[1].format(k="key", f="uniform", first="{first}"),
    "made-state": KEY_REUSE[1].format(k="key", f="normal", first="{first}"),
    "made-state-split": KEY_REUSE[1].format(k="k2", f="normal", first="{first}"),
    "lambda-on-the-line": "boolean mask `x > 0` indexes a traced array inside `positive_mean`",
    "lambda-on-the-line-ok": "boolean mask `x > 0` indexes a traced array inside `positive_mean_ok`",
    "nnx-init": KEY_REUSE[1].format(k="key", f="uniform", first="{first}"),
    "nnx-init-ok": KEY_REUSE[1].format(k="rngs.params()", f="uniform", first="{first}"),
    "global-read-fails": "module-level `SCALE` is read inside `normalize` (jitted with `jax.jit`) but is "
                         "rebound in `set_scale`",
    "global-last-axis": "module-level `OFFSET` is read inside `center` (jitted with `jax.jit`) but is "
                        "rebound in `fit_offset`",
    "instance-print-plain": "`print` of traced value `x` inside `_step`",
    "instance-print-jit": "`print` of traced value `x` inside `_jstep`",
}


@pytest.fixture(scope="module")
def reach_verdicts():
    src = SourceFile.from_path(str(REACH))
    findings = {}
    for i, text in enumerate(src.text.splitlines(), 1):
        m = REACH_TAG.search(text)
        if m:
            tag = m.group(1)
            code = "JAX101" if "print" in tag else "JAX204" if "lambda" in tag else \
                "JAX103" if "global" in tag else "JAX401"
            findings[tag] = Finding(code, "t", str(REACH), i, 0, i, 1, REACH_FINDINGS[tag].format(first=i - 1))
    res = [FileResult(str(REACH), list(findings.values()), source=src)]
    confirm_results(res, ConfirmConfig(root=str(FX)), ConfirmOptions(timeout=120))
    return {k: f.confirmation for k, f in findings.items()}


def _text(c):
    return c.get("evidence") or c.get("reason")


@pytest.mark.slow
def test_a_transform_a_constructor_binds_is_called_on_the_instance(reach_verdicts):
    # `self.reset = jax.jit(reset)` in `__init__`: `_reset_state` is nested and nothing module-level
    # reaches it, but `Grid()` (its defaults) has the program's own jitted `reset`
    c = reach_verdicts["instance-jit"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_reach:Grid().reset" and "KeyReuseError" in c["evidence"]
    assert "key=key[] (concrete, synthesized)" in c["arguments"]
    # the lookalike that splits before each use: the same entry, run, finds no reuse
    c = reach_verdicts["instance-split"]
    assert c["status"] == "not-confirmed", _text(c)
    assert c["entry"] == "cf_reach:Grid().respawn"


@pytest.mark.slow
def test_a_plain_function_a_constructor_binds_shows_key_reuse_only(reach_verdicts):
    # `self.noise = _noise` (no transform here): run as it is, a reuse shows all the same
    c = reach_verdicts["instance-plain"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_reach:Grid().noise"
    # ... but what only a trace shows (a `print` handed a tracer) is not judged by an eager run of
    # a function the program may trace elsewhere
    c = reach_verdicts["instance-print-plain"]
    assert c["status"] == "unreached", _text(c)
    c = reach_verdicts["instance-print-jit"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_reach:Printer().jstep"


@pytest.mark.slow
def test_an_instance_that_cannot_be_constructed_stays_unreached(reach_verdicts):
    c = reach_verdicts["instance-no-ctor"]
    assert c["status"] == "unreached", _text(c)
    assert "cannot construct `FromSpec" in c["reason"]


@pytest.mark.slow
def test_a_state_argument_is_what_the_instances_own_reset_returns(reach_verdicts):
    # `_step(key, state: EnvState, action)`: a namespace of zeros is not a state the program makes
    # (here `_step` rejects it); the constructor also binds `reset(key) -> Tuple[..., EnvState]`, so
    # the state is what the instance's own `reset` returns for a synthesized key
    c = reach_verdicts["made-state"]
    assert c["status"] == "confirmed", _text(c)
    assert "made by `self.reset`" in c["arguments"] and c["entry"] == "cf_reach:Walker().step_env"
    c = reach_verdicts["made-state-split"]
    assert c["status"] == "not-confirmed", _text(c)
    assert "made by `self.reset`" in c["arguments"]


@pytest.mark.slow
def test_a_lambda_transformed_on_its_own_line_is_reached_through_the_function_around_it(reach_verdicts):
    # `jax.vmap(lambda row: positive_mean(row))(xs)` in `batch_means`: the lambda is nothing we can
    # call by name, and `positive_mean` is never traced alone; `batch_means` (eager) runs the vmap
    c = reach_verdicts["lambda-on-the-line"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_reach:batch_means" and "NonConcreteBooleanIndexError" in c["evidence"]
    c = reach_verdicts["lambda-on-the-line-ok"]
    assert c["status"] == "not-confirmed", _text(c)
    assert c["entry"] == "cf_reach:batch_means_ok"


LIKE_NUMBA = '''import sys

import jax

_home = sys.modules[print.__module__]   # what numba does with every builtin when it is imported
assert getattr(_home, print.__qualname__) is print

key = jax.random.key(0)
a = jax.random.normal(key, (2,))
b = jax.random.normal(key, (2,))
'''


@pytest.mark.slow
def test_the_print_spy_stands_for_the_builtin_while_a_module_imports(tmp_path, capsys, monkeypatch):
    # numba looks every builtin up by its module and name when imported (PGMax's notebooks import it):
    # the spy that replaces `print` must be found there, or the import fails on our account
    (tmp_path / "like_numba.py").write_text(LIKE_NUMBA)
    monkeypatch.chdir(tmp_path)
    main(["check", "like_numba.py", "--confirm", "--select", "JAX401", "--format", "json", "--no-cache",
          "--exit-zero"])
    found = json.loads(capsys.readouterr().out)
    assert found and found[0]["confirmation"]["status"] == "confirmed", found


@pytest.mark.slow
def test_an_nnx_constructor_runs_eagerly_with_the_rngs_it_is_given(reach_verdicts):
    # `rngs: nnx.Rngs` is what every NNX constructor gets (not something "called like a function"),
    # and a constructor is run as the program builds the module: eagerly, not traced by a jit of ours
    c = reach_verdicts["nnx-init"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_reach:Scales.__init__" and "rngs=Rngs" in c["arguments"]
    assert c["evidence"].startswith("with `jax_debug_key_reuse`, running")
    c = reach_verdicts["nnx-init-ok"]
    assert c["status"] == "not-confirmed", _text(c)


@pytest.mark.slow
def test_a_global_read_whose_trace_fails_is_not_judged(reach_verdicts):
    # `batch / SCALE` with a synthesized batch of 4 columns against 8: the trace fails at the line
    # with the global changed or not -- no program was built, so the claim was not put to the test
    c = reach_verdicts["global-read-fails"]
    assert c["status"] == "unreached", _text(c)
    assert "no program showed what it bakes in" in c["reason"]


@pytest.mark.slow
def test_an_argument_combined_with_a_module_array_gets_its_last_axis(reach_verdicts):
    # `batch - OFFSET`, OFFSET = np.zeros(NUM_COLS): the batch is synthesized with 6 columns, as it
    # must be to broadcast (with 4 the trace fails at the line and proves nothing)
    c = reach_verdicts["global-last-axis"]
    assert c["status"] == "confirmed", _text(c)
    assert "batch=float32[" in c["arguments"] and ",6] (tracer" in c["arguments"]
