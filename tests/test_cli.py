"""The command line: exit codes, output formats, configuration, noqa, bad input, --fix/--diff."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxlint import __version__
from jaxlint.checkers import REGISTRY
from jaxlint.cli import main

BAD = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp


    @jax.jit
    def step(x):
        y = jnp.sin(x)
        print("y", y)
        if y.sum() > 0:
            y = -y
        return y
""")
CLEAN = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp


    @jax.jit
    def step(x):
        return jnp.where(x > 0, x, -x)
""")


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_codes(project, capsys):
    assert run(["check", "clean.py"], capsys)[0] == 0
    assert run(["check", "bad.py"], capsys)[0] == 1
    assert run(["check", "bad.py", "--exit-zero"], capsys)[0] == 0
    assert run(["check", "missing.py"], capsys)[0] == 2
    code, _, err = run(["check", "--select", "NOPE1", "bad.py"], capsys)
    assert code == 2 and "unknown rule" in err


def test_default_path_is_cwd_and_recurses(project, capsys):
    (project / "pkg").mkdir()
    (project / "pkg" / "inner.py").write_text(BAD)
    (project / ".venv").mkdir()
    (project / ".venv" / "skip.py").write_text(BAD)
    (project / "build").mkdir()
    (project / "build" / "skip.py").write_text(BAD)
    code, out, _ = run(["check", "--format", "json"], capsys)
    paths = {Path(f["path"]).as_posix() for f in json.loads(out)}
    assert code == 1
    assert any(p.endswith("pkg/inner.py") for p in paths)
    assert not any(".venv" in p or "build/" in p for p in paths)


def test_text_output_has_location_source_caret_help_and_summary(project, capsys):
    code, out, _ = run(["check", "bad.py", "--color", "never"], capsys)
    assert code == 1
    assert "bad.py:8:5: JAX101" in out
    assert '8 |     print("y", y)' in out
    assert "^^^^" in out
    assert "help: Use `jax.debug.print`" in out
    assert "Found 2 findings" in out and "JAX201" in out


def test_quiet_prints_findings_only(project, capsys):
    _, out, _ = run(["check", "bad.py", "-q"], capsys)
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("bad.py:") for line in lines)


def test_json_format(project, capsys):
    _, out, _ = run(["check", "bad.py", "--format", "json"], capsys)
    data = json.loads(out)
    assert {d["code"] for d in data} == {"JAX101", "JAX201"}
    f = next(d for d in data if d["code"] == "JAX101")
    for key in ("path", "line", "col", "end_line", "end_col", "code", "symbol", "message", "confidence", "fix"):
        assert key in f
    assert f["line"] == 8 and f["col"] == 5 and f["symbol"] == "print-under-trace"
    assert f["fix"]["applicability"] == "safe" and f["fix"]["edits"]


def test_github_format(project, capsys):
    _, out, _ = run(["check", "bad.py", "--format", "github"], capsys)
    line = out.splitlines()[0]
    assert line.startswith("::warning file=bad.py,line=8,col=5,endLine=8,endColumn=")
    assert "title=JAX101 print-under-trace::JAX101 " in line


def test_sarif_format(project, capsys):
    _, out, _ = run(["check", "bad.py", "--format", "sarif"], capsys)
    doc = json.loads(out)
    assert doc["version"] == "2.1.0"
    run0 = doc["runs"][0]
    rules = run0["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == set(REGISTRY)
    res = run0["results"]
    assert {r["ruleId"] for r in res} == {"JAX101", "JAX201"}
    for r in res:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        region = r["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.py"


def test_select_and_ignore_prefixes(project, capsys):
    _, out, _ = run(["check", "bad.py", "--format", "json", "--select", "JAX2"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX201"}
    _, out, _ = run(["check", "bad.py", "--format", "json", "--ignore", "JAX101"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX201"}
    _, out, _ = run(["check", "bad.py", "--format", "json", "--ignore", "JAX2", "--select", "JAX201,JAX101"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX101", "JAX201"}
    _, out, _ = run(["check", "bad.py", "--format", "json", "--select", "print-under-trace"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX101"}


def test_noqa(project, capsys):
    src = BAD.replace('print("y", y)', 'print("y", y)  # noqa: JAX101').replace(
        "if y.sum() > 0:", "if y.sum() > 0:  # noqa")
    (project / "bad.py").write_text(src)
    code, out, _ = run(["check", "bad.py", "--format", "json"], capsys)
    assert code == 0 and json.loads(out) == []
    (project / "bad.py").write_text(BAD.replace('print("y", y)', 'print("y", y)  # noqa: JAX201'))
    _, out, _ = run(["check", "bad.py", "--format", "json"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX101", "JAX201"}


def test_pyproject_config_found_by_walking_up(project, capsys):
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.jaxlint]
        ignore = ["JAX201"]
        exclude = ["generated"]
        per-file-ignores = { "scripts/*" = ["JAX101"] }
    """))
    (project / "sub").mkdir()
    (project / "sub" / "a.py").write_text(BAD)
    (project / "scripts").mkdir()
    (project / "scripts" / "s.py").write_text(BAD)
    (project / "generated").mkdir()
    (project / "generated" / "g.py").write_text(BAD)
    _, out, _ = run(["check", "sub/a.py", "--format", "json"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX101"}
    code, out, _ = run(["check", ".", "--format", "json"], capsys)
    paths = {Path(d["path"]).as_posix() for d in json.loads(out)}
    assert not any("generated" in p for p in paths)
    assert not any("scripts" in p for p in paths)
    # command line wins over the file
    _, out, _ = run(["check", "sub/a.py", "--format", "json", "--ignore", "JAX101"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX201"}
    _, out, _ = run(["check", "sub/a.py", "--format", "json", "--isolated"], capsys)
    assert {d["code"] for d in json.loads(out)} == {"JAX101", "JAX201"}


def test_bad_config_is_one_line_error(project, capsys):
    (project / "pyproject.toml").write_text("[tool.jaxlint]\nselect = [1]\n")
    code, _, err = run(["check", "bad.py"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "select" in err
    (project / "pyproject.toml").write_text("[tool.jaxlint\n")
    code, _, err = run(["check", "bad.py"], capsys)
    assert code == 2 and "invalid TOML" in err


@pytest.mark.parametrize("name,content,needle", [
    ("syntax.py", b"def f(:\n", "syntax error at 1:"),
    ("latin.py", b'x = "\xff\xfe"\n', "cannot decode as utf-8"),
    ("binary.py", b"\x00\x01\x02\x03", "binary file"),
    ("cookie.py", b"# -*- coding: no-such-codec -*-\nx = 1\n", "encoding"),
])
def test_bad_input_one_line_and_others_still_checked(project, capsys, name, content, needle):
    (project / name).write_bytes(content)
    code, out, err = run(["check", name, "bad.py", "--format", "json"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error:") and needle in lines[0]
    assert "Traceback" not in err
    assert {d["code"] for d in json.loads(out)} == {"JAX101", "JAX201"}


def test_directory_with_bad_file_checks_the_rest(project, capsys):
    (project / "zz_syntax.py").write_bytes(b"def (\n")
    code, out, err = run(["check", ".", "-q"], capsys)
    assert code == 2 and "zz_syntax.py: error:" in err and "bad.py:8:5" in out


def test_modern_syntax_never_crashes(project, capsys):
    (project / "modern.py").write_text(textwrap.dedent("""\
        import jax
        import jax.numpy as jnp

        type Vec = list[float]

        def first[T](xs: list[T]) -> T:
            return xs[0]

        @(lambda f: f)
        async def fetch(x):
            async with x as y:
                async for z in y:
                    yield z

        @jax.jit
        def f(x, *, mode="a"):
            match mode:
                case "a" if (n := x.ndim) > 1:
                    return x
                case {"k": v, **rest}:
                    return v
                case [a, *others]:
                    return a
                case _:
                    return -x
    """))
    code, _, err = run(["check", "modern.py"], capsys)
    if sys.version_info >= (3, 12):
        assert code in (0, 1), err
    else:   # the file is fine; the interpreter is too old to read it, and the error says so
        assert code == 2 and "syntax error at 4:" in err and "looks like Python 3.12 syntax" in err
        (project / "fstring.py").write_text('x = {"a": 1}\nprint(f"{x["a"]}")\n')
        code, _, err = run(["check", "fstring.py"], capsys)
        assert code == 2 and "looks like Python 3.12 syntax" in err
        (project / "typo.py").write_text("def f(:\n    pass\n")
        code, _, err = run(["check", "typo.py"], capsys)
        assert code == 2 and "3.12" not in err


def test_stdin(project, capsys, monkeypatch):
    import io

    class FakeStdin:
        buffer = io.BytesIO(BAD.encode())

    monkeypatch.setattr(sys, "stdin", FakeStdin)
    code, out, _ = run(["check", "-", "--stdin-filename", "from_stdin.py", "-q"], capsys)
    assert code == 1 and "from_stdin.py:8:5: JAX101" in out


def test_fix_writes_safe_fixes_and_summarises(project, capsys):
    path = project / "bad.py"
    os.chmod(path, 0o640)
    code, out, _ = run(["check", "bad.py", "--fix", "--color", "never"], capsys)
    text = path.read_text()
    assert "jax.debug.print('y {y}', y=y)" in text
    assert "if y.sum() > 0:" in text          # no fix for JAX201
    assert code == 1                           # JAX201 remains
    assert "Fixed 1 finding (JAX101: 1); 1 remaining." in out
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert not [p for p in os.listdir(project) if p.endswith(".jaxlint")]


def test_diff_writes_nothing(project, capsys):
    before = (project / "bad.py").read_bytes()
    code, out, _ = run(["check", "bad.py", "--diff"], capsys)
    assert code == 1
    assert out.startswith("--- a/bad.py\n+++ b/bad.py\n")
    assert "-    print(\"y\", y)\n+    jax.debug.print('y {y}', y=y)\n" in out
    assert (project / "bad.py").read_bytes() == before
    code, out, _ = run(["check", "clean.py", "--diff"], capsys)
    assert code == 0 and out == ""


def test_fix_keeps_crlf_bom_and_non_ascii(project, capsys):
    src = BAD.replace('print("y", y)', 'print("ünïcødé", y)  # ✓ comment')
    raw = b"\xef\xbb\xbf" + src.replace("\n", "\r\n").encode("utf-8")
    (project / "crlf.py").write_bytes(raw)
    run(["check", "crlf.py", "--fix"], capsys)
    out = (project / "crlf.py").read_bytes()
    assert out.startswith(b"\xef\xbb\xbf")
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert "jax.debug.print('ünïcødé {y}', y=y)  # ✓ comment\r\n".encode() in out
    assert out.replace("jax.debug.print('ünïcødé {y}', y=y)".encode(),
                       'print("ünïcødé", y)'.encode()) == raw


def test_fix_on_read_only_file_is_a_clear_error(project, capsys):
    path = project / "bad.py"
    os.chmod(path, 0o444)
    before = path.read_bytes()
    code, _, err = run(["check", "bad.py", "--fix"], capsys)
    assert code == 2 and "bad.py: error: file is read-only" in err
    assert path.read_bytes() == before


def test_rules_and_rule_commands(capsys):
    code, out, _ = run(["rules"], capsys)
    assert code == 0
    for rule_code, rule in REGISTRY.items():
        assert rule_code in out and rule.symbol in out
    code, out, _ = run(["rule", "JAX101"], capsys)
    assert code == 0 and "## Why is this bad?" in out and "print-under-trace" in out
    code, out, _ = run(["rule", "python-control-flow-on-traced-value"], capsys)
    assert code == 0 and out.startswith("# JAX201")
    code, _, err = run(["rule", "JAX999"], capsys)
    assert code == 2 and "unknown rule" in err
    code, out, _ = run(["rules", "--format", "json"], capsys)
    assert {r["code"] for r in json.loads(out)} == set(REGISTRY)


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_usage_error_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", "--format", "xml"])
    assert exc.value.code == 2


def test_entry_points_run_without_importing_jax(project):
    code = ("import sys, jaxlint.cli as c\n"
            "rc = c.main(['check', 'bad.py', '-q'])\n"
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if m.startswith('jax'))\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "bad.py", "-q"], capture_output=True, text=True)
    assert proc.returncode == 1 and "bad.py:8:5: JAX101" in proc.stdout
