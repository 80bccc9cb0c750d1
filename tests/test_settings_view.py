"""--show-settings and --show-files (jaxlint/settings_view.py), and --version and the confirm help
(jaxlint/about.py): what jaxlint will do and why, without checking anything."""
from __future__ import annotations

import argparse
import io
import json
import os

import pytest

from jaxlint import about
from jaxlint.config import load_config
from jaxlint.discovery import iter_python_files
from jaxlint.settings_view import explain_files, render_files, render_settings, settings_report

PYPROJECT = '''[tool.jaxlint]
ignore = ["JAX4"]
exclude = ["third_party/", "*_pb2.py"]
per-file-ignores = { "tests/*" = ["JAX101"], "src/sub/*" = ["JAX5", "print-under-trace"] }
traced-functions = ["pkg.envs.Env.step"]
unrolled-loop-threshold = 16

[tool.jaxlint.confirm]
timeout = 30
"pkg.mod:f" = { args = [1] }
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / ".gitignore").write_text("scratch.py\n")
    for d in ("src/sub", "build", "third_party", "notes", "tests"):
        (tmp_path / d).mkdir(parents=True)
    for f in ("src/a.py", "src/sub/b.py", "src/m_pb2.py", "build/x.py", "third_party/y.py", "scratch.py",
              "notes/readme.txt", "tests/test_a.py"):
        (tmp_path / f).write_text("x = 1\n")
    (tmp_path / "src" / "nb.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                           "nbformat_minor": 5}))
    return tmp_path


def test_settings_for_a_file_say_where_each_came_from(tree):
    cfg = load_config("pyproject.toml")
    report = settings_report("src/sub/b.py", cfg, {"select": None, "device": "cpu", "confirm_timeout": None})
    assert report["configuration"] == "pyproject.toml" and report["project-root"] == str(tree)
    assert report["select"] == {"value": "every default-enabled rule", "from": "default"}
    assert report["ignore"] == {"value": ["JAX4"], "from": "pyproject.toml"}
    assert report["per-file-ignores"]["matching-this-file"] == ["JAX5", "print-under-trace"]
    assert report["traced-functions"] == {"value": ["pkg.envs.Env.step"], "from": "pyproject.toml"}
    assert report["unrolled-loop-threshold"] == {"value": 16, "from": "pyproject.toml"}
    enabled = {r["code"] for r in report["rules-enabled"]}
    off = {r["code"]: r["why"] for r in report["rules-off"]}
    assert "JAX201" in enabled and not enabled & set(off)
    assert off["JAX101"] == "per-file-ignores 'src/sub/*'"      # only the pattern that matches this file
    assert off["JAX401"] == "ignore" and off["JAX504"] == "per-file-ignores 'src/sub/*'"
    assert off["JAX503"] == "off by default"
    confirm = report["confirm"]
    assert confirm["timeout"] == {"value": 30.0, "from": "pyproject.toml"}
    assert confirm["device"] == {"value": "cpu", "from": "command line (--device)"}
    assert confirm["dim-size"]["from"] == "default"
    assert confirm["function-inputs"] == {"value": ["pkg.mod:f"], "from": "pyproject.toml"}

    # the command line wins, and says so
    cfg.select = ["JAX1"]
    report = settings_report("src/a.py", cfg, {"select": ["JAX1"], "baseline": "b.json"})
    assert report["select"] == {"value": ["JAX1"], "from": "command line (--select)"}
    assert report["baseline"] == {"value": "b.json", "from": "command line (--baseline)"}
    assert dict((r["code"], r["why"]) for r in report["rules-off"])["JAX201"] == "not in select"

    out = io.StringIO()
    render_settings(report, out)
    text = out.getvalue()
    assert text.startswith("Settings for src/a.py\n  configuration file       pyproject.toml\n")
    assert '  select                   ["JAX1"]  [command line (--select)]' in text
    assert "  [tool.jaxlint.confirm]\n    timeout                30.0  [pyproject.toml]" in text
    out = io.StringIO()
    render_settings(report, out, "json")
    assert json.loads(out.getvalue()) == json.loads(json.dumps(report))


def test_settings_without_a_configuration_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None)
    report = settings_report("m.py", cfg)
    assert report["configuration"] is None and report["select"]["from"] == "default"
    assert report["confirm"]["timeout"] == {"value": 60.0, "from": "default"}
    out = io.StringIO()
    render_settings(report, out)
    assert "configuration file       none (defaults)" in out.getvalue()


def test_a_bad_confirm_table_is_shown_not_raised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.confirm]\ntimeout = "soon"\n')
    report = settings_report("m.py", load_config("pyproject.toml"))
    error = report["confirm"]["error"]
    assert "[tool.jaxlint.confirm]" in error and "timeout must be a positive" in error


def test_show_files_lists_what_is_checked_and_why_the_rest_is_skipped(tree):
    cfg = load_config("pyproject.toml")
    files, skipped = explain_files(["."], cfg)
    # exactly what the check walks
    assert files == [p for p, ok in iter_python_files(["."], cfg.exclude, cfg.root) if ok]
    assert files == ["src/a.py", "src/nb.ipynb", "src/sub/b.py", "tests/test_a.py"]
    why = dict(skipped)
    assert why["build/"] == "default exclude `build`"
    assert why["third_party/"] == "exclude `third_party/` in pyproject.toml"
    assert why["src/m_pb2.py"] == "exclude `*_pb2.py` in pyproject.toml"
    assert why["scratch.py"] == ".gitignore `scratch.py` in .gitignore"
    assert "notes/readme.txt" not in why         # not Python: not listed

    out = io.StringIO()
    render_files(files, skipped, out)
    text = out.getvalue()
    assert text.startswith("src/a.py\nsrc/nb.ipynb\nsrc/sub/b.py\ntests/test_a.py\n\nSkipped:\n")
    assert text.endswith(f"\n4 files would be checked; {len(skipped)} paths skipped.\n")
    out = io.StringIO()
    render_files(files, skipped, out, "json")
    data = json.loads(out.getvalue())
    assert data["files"] == files and {"path": "build/", "reason": "default exclude `build`"} in data["skipped"]


def test_show_files_named_paths_missing_paths_force_exclude_and_changed_since(tree):
    cfg = load_config("pyproject.toml")
    files, skipped = explain_files(["third_party/y.py", "nope.py", "src"], cfg)
    assert files[0] == "third_party/y.py"       # named explicitly: checked, though excluded
    assert ("nope.py", "no such file or directory") in skipped
    files, skipped = explain_files(["third_party/y.py", "src/a.py"], cfg, force_exclude=True)
    assert files == ["src/a.py"]
    assert ("third_party/y.py", "named on the command line but excluded (--force-exclude)") in skipped
    files, skipped = explain_files(["src"], cfg, changed={os.path.realpath("src/a.py")}, changed_ref="origin/main")
    assert files == ["src/a.py"] and ("src/sub/b.py", "not changed since origin/main") in skipped


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_show_files_names_a_fifo(tree):
    os.mkfifo(tree / "src" / "pipe.py")
    files, skipped = explain_files(["src"], load_config("pyproject.toml"))
    assert "src/pipe.py" not in files
    assert dict(skipped)["src/pipe.py"].startswith("not a regular file")


# ------------------------------------------------------------------ --version, confirm --help
def test_version_names_the_distribution():
    text = about.version_text()
    assert text.startswith(f"jaxlint {about.__version__} (distribution jaxlint-static ")
    assert "warning" not in text


def test_version_warns_when_the_unrelated_jaxlint_is_installed_too(tmp_path, monkeypatch):
    info = tmp_path / "jaxlint-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jaxlint\nVersion: 9.9\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = about.version_text()
    assert "warning: the unrelated distribution jaxlint 9.9 is installed too" in text
    assert "python -m pip uninstall jaxlint && python -m pip install --force-reinstall jaxlint-static" in text


def test_version_from_a_checkout_that_is_not_installed(monkeypatch):
    monkeypatch.setattr(about, "_distributions", lambda: {})
    assert "(not installed as jaxlint-static: running from " in about.version_text()


def test_version_action_prints_and_exits(capsys):
    p = argparse.ArgumentParser(prog="jaxlint")
    p.add_argument("--version", action=about.VersionAction)
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("jaxlint ")


def test_confirm_help_lists_every_way_in():
    p = argparse.ArgumentParser(prog="jaxlint")
    sub = p.add_subparsers(dest="command")
    k = sub.add_parser("confirm", **about.confirm_parser_kwargs())
    k.add_argument("paths", nargs="*")
    text = k.format_help()
    for way in about.ways_in():
        assert way in text.split("options:")[0], text      # in the usage, before the options
    assert "-- COMMAND [ARGS ...]    run COMMAND" in text and "--pytest [PYTEST ARGS]" in text
