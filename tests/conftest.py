"""Shared pytest options."""


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots", action="store_true", default=False,
        help="rewrite the expected-output snapshots beside the rule fixtures (tests/test_snapshots.py)")
