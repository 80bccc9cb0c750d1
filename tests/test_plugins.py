"""flake8 and pylint report exactly what the CLI reports (same lines, codes and messages)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import REGISTRY, all_rules
from jaxlint.engine import lint_source
from jaxlint.pylint_plugin import JaxlintPylintChecker, pylint_msgid

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_files():
    return sorted(p for p in FIXTURES.glob("JAX*/*.py"))


def engine_findings(files):
    out = set()
    rules = [r for r in all_rules() if r.default_enabled]
    for p in files:
        for f in lint_source(SourceFile.from_path(str(p)), rules):
            out.add((str(p), f.line, f.col, f.code, f.message))
    return out


@pytest.fixture(scope="module")
def files():
    fs = fixture_files()
    assert fs
    return fs


def test_flake8_matches_cli(files, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("flake8")   # no config files above
    proc = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "JAX", "--format", "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s",
         *map(str, files)], capture_output=True, text=True, cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr
    got = set()
    for line in proc.stdout.splitlines():
        path, row, col, code, text = line.split("\t", 4)
        got.add((path, int(row), int(col) - 1, code, text))
    want = engine_findings(files)
    assert want, "fixtures produced no findings"
    assert got == want


def test_pylint_matches_cli(files, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("pylint")
    symbols = ",".join(r.symbol for r in all_rules() if r.default_enabled)
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=jaxlint.pylint_plugin", "--disable=all",
         f"--enable={symbols}", "--persistent=n", "--score=n",
         "--msg-template={path}\t{line}\t{column}\t{msg_id}\t{symbol}\t{msg}", *map(str, files)],
        capture_output=True, text=True, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    got = set()
    for line in proc.stdout.splitlines():
        if line.startswith("*") or "\t" not in line:
            continue
        path, row, col, msgid, symbol, msg = line.split("\t", 5)
        m = re.search(r" \((JAX\d{3})\)$", msg)
        assert m, msg
        code = m.group(1)
        assert msgid == pylint_msgid(code) and symbol == REGISTRY[code].symbol
        got.add((path, int(row), int(col), code, msg[: m.start()]))
    assert got == engine_findings(files)


def test_pylint_disable_by_symbol(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import jax\n\n@jax.jit\ndef f(x):\n    print(x)\n    if x > 0:\n        return x\n    return -x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=jaxlint.pylint_plugin", "--disable=all",
         "--enable=print-under-trace,python-control-flow-on-traced-value", "--disable=print-under-trace",
         "--persistent=n", "--score=n", str(p)], capture_output=True, text=True, cwd=tmp_path)
    assert "print-under-trace" not in proc.stdout
    assert "python-control-flow-on-traced-value" in proc.stdout


def test_pylint_message_table_is_generated_from_registry():
    from jaxlint.pylint_plugin import CHECKERS
    msgs = {}
    for checker in CHECKERS:
        assert len({m[:3] for m in checker.msgs}) == 1, "pylint requires one checker id per checker"
        msgs.update(checker.msgs)
    assert len(msgs) == len(REGISTRY)
    for rule in REGISTRY.values():
        msgid = pylint_msgid(rule.code)
        assert msgs[msgid][1] == rule.symbol
    assert JaxlintPylintChecker.msgs and all(m.startswith("W91") for m in JaxlintPylintChecker.msgs)
    assert pylint_msgid("JAX101") == "W9101" and pylint_msgid("JAX611") == "W9211"


def test_flake8_entry_point_is_registered():
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="flake8.extension") if ep.name == "JAX"]
    assert eps and eps[0].value == "jaxlint.flake8_plugin:JaxlintChecker"


PFI_SOURCE = "import jax\n\n@jax.jit\ndef f(x):\n    print(x)\n    if x > 0:\n        return x\n    return -x\n"


@pytest.mark.parametrize("entry", ["print-under-trace", "JAX101", "JAX10"])
def test_per_file_ignores_agree_across_front_ends(tmp_path, entry):
    """per-file-ignores accepts codes, prefixes and symbols in the CLI and both plugins alike."""
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.jaxlint]\nper-file-ignores = {{ "m.py" = ["{entry}"] }}\n')
    p = tmp_path / "m.py"
    p.write_text(PFI_SOURCE)
    cli = subprocess.run([sys.executable, "-m", "jaxlint", "check", "-q", "--color", "never", "m.py"],
                         capture_output=True, text=True, cwd=tmp_path)
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "JAX", "m.py"],
                            capture_output=True, text=True, cwd=tmp_path)
    pylint = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=jaxlint.pylint_plugin", "--disable=all",
         "--enable=print-under-trace,python-control-flow-on-traced-value", "--persistent=n", "--score=n",
         "--msg-template={path}:{line}:{msg}", "m.py"], capture_output=True, text=True, cwd=tmp_path)
    for name, proc in (("cli", cli), ("flake8", flake8), ("pylint", pylint)):
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        assert "JAX101" not in proc.stdout, (name, proc.stdout)
        assert "JAX201" in proc.stdout, (name, proc.stdout)


def test_config_rules_for_drops_per_file_ignores(tmp_path):
    from jaxlint.config import load_config
    (tmp_path / "pyproject.toml").write_text(
        '[tool.jaxlint]\nper-file-ignores = { "tests/*" = ["print-under-trace", "JAX2"] }\n')
    cfg = load_config(str(tmp_path / "pyproject.toml"))
    codes = {r.code for r in cfg.rules_for(str(tmp_path / "tests" / "t.py"))}
    assert "JAX101" not in codes and not any(c.startswith("JAX2") for c in codes)
    assert {r.code for r in cfg.rules_for(str(tmp_path / "src.py"))} == {r.code for r in cfg.rules()}
    assert cfg.rules_for(None) == cfg.rules()
