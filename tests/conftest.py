"""Shared pytest options and fixtures."""
import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots", action="store_true", default=False,
        help="rewrite the expected-output snapshots beside the rule fixtures (tests/test_snapshots.py)")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder holding `bad.py` (a print and a Python if under jit) and `clean.py`, as cwd."""
    from test_cli import BAD, CLEAN
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path

