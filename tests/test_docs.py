"""Documentation is derived from the registry and must be complete and current."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxlint.checkers import DOC_SECTIONS, REGISTRY, all_rules
from jaxlint.docsgen import render

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_documentation_sections(rule):
    sections = rule.doc_sections()
    for name in DOC_SECTIONS:
        assert sections.get(name, "").strip(), f"{rule.code} lacks a '{name}' section"
    assert "```python" in sections["Example"] and "```python" in sections["Use instead"]
    assert rule.summary and len(rule.summary) < 110
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.symbol)
    if rule.fix_applicability:
        assert rule.fix_title and rule.fix_applicability in ("safe", "unsafe")
        assert rule.fix_applicability in sections["Fix safety"].lower()


def test_generated_docs_are_current():
    for rel, text in render().items():
        path = ROOT / "docs" / rel
        assert path.exists(), f"{path} missing: run `python -m jaxlint.docsgen`"
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `python -m jaxlint.docsgen`"
    pages = {p.name for p in (ROOT / "docs" / "rules").glob("*.md")}
    assert pages == {f"{c}.md" for c in REGISTRY}


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", readme, re.S)
    commands = [line for line in blocks[0].splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, "README starts with exactly two set-up commands"
    assert "jaxlint check examples" in commands[0]
    assert "pytest" in commands[1] and "[test]" in commands[1]
    assert "README.md" in ci and "sed -n 2p" in ci, ".ci/run must read and run the README's test command"


DOC_FILES = sorted([ROOT / "README.md", ROOT / "action.yml", ROOT / ".pre-commit-hooks.yaml",
                    *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")])


def test_no_doc_installs_the_unrelated_pypi_jaxlint():
    """PyPI's `jaxlint` is another project: every install line names `jaxlint-static` (or a checkout)."""
    import tomllib
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == "jaxlint-static"
    wrong = re.compile(r"pip3? install +(?:-U +|--upgrade +)?['\"]?jaxlint(?![-\w.\[])|pip3? install +['\"]?jaxlint\[")
    for path in DOC_FILES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not wrong.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
    assert "pip install jaxlint-static" in (ROOT / "README.md").read_text()
    assert "pip install jaxlint-static" in (ROOT / "docs" / "integrations.md").read_text()


def test_ci_script_leaves_the_developers_venv_alone():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "rm -rf .venv" not in ci and "mktemp -d" in ci


def test_integrations_doc_shows_editor_precommit_and_github_setups():
    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    for needle in ("jaxlint server", "vim.lsp", "eglot", "VS Code", "pre-commit-config.yaml",
                   "id: jaxlint-fix", "uses: jaxlint/jaxlint@", "upload-sarif", "--changed-since",
                   "--baseline", "--add-noqa", "--statistics", "--output-file", "--exit-non-zero-on-fix"):
        assert needle in text, needle


def test_yaml_snippets_in_docs_parse():
    yaml = pytest.importorskip("yaml")
    for path in (ROOT / "README.md", ROOT / "docs" / "integrations.md"):
        blocks = re.findall(r"```ya?ml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
        assert blocks, path
        for block in blocks:
            yaml.safe_load(block)
