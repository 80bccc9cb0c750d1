"""What jaxlint says about itself: ``jaxlint --version`` (which distribution is installed, and
whether the unrelated ``jaxlint`` distribution clashes with it) and the help texts of the
command line that list every way in.

The PyPI name ``jaxlint`` belongs to an unrelated project that ships the same import package and
command; this project is the distribution ``jaxlint-static``.  With both installed, whichever was
installed last owns ``jaxlint/`` and the ``jaxlint`` command, so ``--version`` names the
distribution that owns the running code and says how to repair a clash.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List

from . import __version__

DISTRIBUTION = "jaxlint-static"
OTHER = "jaxlint"       # the unrelated project on the package index


def _distributions() -> Dict[str, str]:
    """The installed distributions of both names: name -> version.  The other ``jaxlint``
    ships the top-level package ``jaxlint`` and a ``jaxlint`` command, so installed at all it
    clashes with this one."""
    from importlib import metadata
    out: Dict[str, str] = {}
    for name in (DISTRIBUTION, OTHER):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def version_text() -> str:
    """``jaxlint --version``: the version, the distribution it comes from, Python, and a warning
    with the fix when the unrelated ``jaxlint`` distribution is installed too."""
    dists = _distributions()
    here = os.path.dirname(os.path.abspath(__file__))
    python = f"Python {sys.version.split()[0]}"
    ours = dists.get(DISTRIBUTION)
    if ours is not None:
        line = f"jaxlint {__version__} (distribution {DISTRIBUTION} {ours}, {python}, {here})"
    else:
        line = f"jaxlint {__version__} (not installed as {DISTRIBUTION}: running from {here}, {python})"
    if OTHER in dists:
        line += (f"\nwarning: the unrelated distribution {OTHER} {dists[OTHER]} is installed too and ships the same "
                 f"`jaxlint` package and command; remove it and reinstall this one:\n"
                 f"  python -m pip uninstall {OTHER} && python -m pip install --force-reinstall {DISTRIBUTION}")
    return line


class VersionAction(argparse.Action):
    """``--version``, computed only when asked (reading the installed distributions takes time)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and the installed distribution, and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print_version()
        parser.exit()


def print_version() -> None:
    sys.stdout.write(version_text() + "\n")      # stdout, as argparse's own version action
    sys.stdout.flush()


# ------------------------------------------------------------------ `jaxlint confirm --help`
CONFIRM_USAGE = ("jaxlint confirm [PATHS ...] [OPTIONS] -- COMMAND [ARGS ...]\n"
                 "       jaxlint confirm [PATHS ...] [OPTIONS] --pytest [PYTEST ARGS ...]")

CONFIRM_DESCRIPTION = (
    "Check PATHS, then run a program you already have with JAX instrumented and confirm each "
    "finding with the calls that program really makes (harness mode).")

CONFIRM_EPILOG = """\
the program to run (one of them is required, after the options):
  -- COMMAND [ARGS ...]    run COMMAND (e.g. `-- python train.py --steps 3`); everything after
                           `--` is the command, passed as it is
  --pytest [PYTEST ARGS]   run the project's own test suite with pytest (e.g. `--pytest tests/ -x`);
                           everything after --pytest goes to pytest

examples:
  jaxlint confirm src/ -- python train.py --steps 3
  jaxlint confirm --pytest tests/test_model.py -k step
  jaxlint confirm src/ --confirmed-only --format sarif -o jaxlint.sarif -- python train.py

`jaxlint check --confirm` confirms without a program of yours (inputs from annotations,
call sites or [tool.jaxlint.confirm]); see docs/confirmation.md."""


def confirm_parser_kwargs() -> dict:
    """The keyword arguments for the ``confirm`` sub-parser that make its ``--help`` list
    ``-- COMMAND`` and ``--pytest``: usage, description, epilog and a formatter that keeps the
    epilog's lines."""
    return {"usage": CONFIRM_USAGE, "description": CONFIRM_DESCRIPTION, "epilog": CONFIRM_EPILOG,
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def ways_in() -> List[str]:
    """What ``jaxlint confirm --help`` must mention (tests compare the help against it)."""
    return ["-- COMMAND", "--pytest"]
