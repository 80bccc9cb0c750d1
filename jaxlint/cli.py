"""Command line: ``jaxlint [PATHS] [OPTIONS]`` (= ``jaxlint check``), ``jaxlint rules``,
``jaxlint rule CODE``, ``jaxlint confirm ... -- COMMAND``, ``jaxlint server``.

Exit codes: 0 no findings, 1 findings (or, with ``--diff``, changes to make; with
``--exit-non-zero-on-fix``, fixes applied), 2 usage/configuration error or a file
that could not be read, parsed or analysed (nested past the recursion limit), 3 an
internal error (a jaxlint bug; the message names the file and the rule or step),
130 interrupted (Ctrl-C), 143 terminated (SIGTERM).  Static checking never imports
JAX or the code being checked.  See docs/guarantees.md.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Sequence, Set, TextIO, Tuple

from .about import VersionAction, confirm_parser_kwargs, print_version

if TYPE_CHECKING:
    # What a command needs is imported when it runs: `jaxlint --version` imports nothing more,
    # and a warm `jaxlint check` that the results cache answers imports neither the model nor
    # the rules (docs/performance.md, start-up).
    from .analysis import SourceFile
    from .checkers import Finding
    from .config import Config
    from .engine import FileResult
    from .workspace import Workspace

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
COMMANDS = ("check", "confirm", "rules", "rule", "server")
DEFAULT_BASELINE = "jaxlint-baseline.json"
_CURRENT: List[Optional[str]] = [None]     # the file being checked (named by a crash report)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(EXIT_ERROR, f"jaxlint: error: {message}\n")


def _codes(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    from .fixes.noqa import UNUSED_NOQA_CODE
    p = _Parser(prog="jaxlint", description="Static linter for JAX tracing and purity pitfalls. "
                "`jaxlint [PATHS] [OPTIONS]` is short for `jaxlint check [PATHS] [OPTIONS]`.")
    p.add_argument("--version", action=VersionAction)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("check", help="check files or directories (default: .); the default command")
    c.add_argument("paths", nargs="*", help="files, directories or notebooks; '-' reads standard input")
    _add_selection_options(c)
    c.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    c.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes (with --fix or --diff)")
    c.add_argument("--diff", action="store_true",
                   help="print the fixes as a unified diff and write nothing (exit 1 if there are changes)")
    c.add_argument("--exit-non-zero-on-fix", action="store_true",
                   help="with --fix: exit 1 when a fix was applied, even if no finding remains")
    c.add_argument("--stdin-filename", metavar="PATH", help="the name to report for '-' (standard input)")
    c.add_argument("--force-exclude", action="store_true",
                   help="apply exclude patterns to paths named on the command line too (for pre-commit)")
    c.add_argument("--changed-since", metavar="REF",
                   help="check only files changed since the git revision REF (plus untracked files)")
    g = c.add_argument_group("adopting on a legacy codebase")
    g.add_argument("--add-noqa", action="store_true",
                   help="add `# noqa: CODE` to every line with a finding (keeps existing comments)")
    g.add_argument("--baseline", metavar="FILE",
                   help="report only findings not recorded in FILE (a jaxlint baseline)")
    g.add_argument("--no-baseline", action="store_true", help="ignore the baseline named in [tool.jaxlint]")
    g.add_argument("--write-baseline", action="store_true",
                   help=f"record every current finding in the --baseline FILE (default: {DEFAULT_BASELINE})")
    g.add_argument("--report-unused-noqa", action="store_true",
                   help=f"report `# noqa: JAX...` codes that suppress nothing ({UNUSED_NOQA_CODE})")
    s = c.add_argument_group("watching, and seeing what jaxlint will do")
    s.add_argument("--watch", action="store_true",
                   help="check, then check again whenever a file changes (needs: python -m pip install "
                        "'jaxlint-static[watch]')")
    s.add_argument("--show-settings", action="store_true",
                   help="print the resolved configuration for each of PATHS (and where each value came "
                        "from), then exit")
    s.add_argument("--show-files", action="store_true",
                   help="print the files that would be checked and why other paths are skipped, then exit")
    _add_output_options(c)
    _add_confirm_options(c, with_switch=True)

    k = sub.add_parser("confirm", help="run COMMAND with JAX instrumentation and confirm findings with the "
                                       "recorded call signatures: jaxlint confirm [PATHS] -- COMMAND ..., "
                                       "or jaxlint confirm [PATHS] --pytest [PYTEST ARGS] (the project's tests)",
                       **confirm_parser_kwargs())
    k.add_argument("paths", nargs="*", help="files or directories to check (default: .)")
    _add_selection_options(k)
    _add_output_options(k)
    _add_confirm_options(k, with_switch=False)

    r = sub.add_parser("rules", help="list the rules")
    r.add_argument("--format", choices=("text", "json"), default="text")
    r.add_argument("--all", action="store_true", help="include rules that are off by default (always listed)")

    d = sub.add_parser("rule", help="show a rule's documentation")
    d.add_argument("code", help="rule code (JAX101) or symbol (print-under-trace)")

    sub.add_parser("server", help="run the language server over stdio (for editors)")
    return p


def _add_selection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--select", type=_codes, default=None, metavar="CODES",
                   help="comma-separated codes or prefixes to enable (e.g. JAX1,JAX201); 'ALL' for every rule")
    p.add_argument("--extend-select", type=_codes, default=None, metavar="CODES",
                   help="codes or prefixes to enable on top of the selection")
    p.add_argument("--ignore", type=_codes, default=None, metavar="CODES", help="codes or prefixes to disable")
    p.add_argument("--strict", action="store_true", default=None,
                   help="also report the strict profile: findings that rest on an unknown or are "
                        "usually deliberate (a key reused in tests); see `jaxlint rule CODE`")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.jaxlint] from this file")
    p.add_argument("--isolated", action="store_true", help="ignore configuration files")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    from .reporting import FORMATS
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    p.add_argument("--output-file", "-o", metavar="PATH", help="write the report to PATH instead of stdout")
    p.add_argument("--statistics", action="store_true", help="print the number of findings per rule only")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    p.add_argument("-q", "--quiet", action="store_true", help="print findings only, no context or summary")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write .jaxlint_cache/ (the results cache at the project root)")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes for the analysis and linting (default: the CPU count; never forked "
                        "from a process that imported JAX)")


def _add_confirm_options(p: argparse.ArgumentParser, with_switch: bool) -> None:
    if with_switch:
        p.add_argument("--confirm", action="store_true",
                       help="confirm findings at runtime: import the checked modules (their top-level code runs) "
                            "and trace/compile the flagged functions with JAX, one subprocess per module")
    p.add_argument("--confirm-timeout", type=float, default=None, metavar="SECONDS",
                   help="time limit per module for runtime confirmation (default: 60)")
    if not with_switch:
        p.add_argument("--command-timeout", type=float, default=None, metavar="SECONDS",
                       help="time limit for the command; past it its process group is stopped (default: 1800)")
    p.add_argument("--confirmed-only", action="store_true",
                   help="report only findings confirmed at runtime (implies --confirm)")
    p.add_argument("--device", choices=("cpu", "gpu", "tpu"), default=None,
                   help="backend for runtime confirmation (default: JAX's default backend)")


def _with_default_command(argv: List[str]) -> List[str]:
    """``jaxlint src/ --fix`` means ``jaxlint check src/ --fix``."""
    if not argv:
        return ["check"]
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    return ["check"] + argv


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C, so that every clean-up on the way out
    runs (temporary files of ``--fix``, confirmation workers and their folders)."""


def _on_sigterm(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError):     # not the main thread: leave it alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def main(argv: Optional[Sequence[str]] = None) -> int:
    with _sigterm_raises():
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    argv = _with_default_command(list(sys.argv[1:] if argv is None else argv))
    if argv[0] == "--version":      # what argparse does first with it, without building the parser
        print_version()
        raise SystemExit(0)
    from .baseline import BaselineError
    from .config import ConfigError
    from .engine import crash_message
    parser = build_parser()
    harness = None
    if argv[0] == "confirm" and "--pytest" in argv:
        # `jaxlint confirm [PATHS] --pytest [PYTEST ARGS]`: the project's own test suite is the harness
        i = argv.index("--pytest")
        rest = argv[i + 1:]
        argv, harness = argv[:i], pytest_command(rest[1:] if rest[:1] == ["--"] else rest)
    elif argv[0] == "confirm" and "--" in argv:
        i = argv.index("--")
        argv, harness = argv[:i], argv[i + 1:]
    args = parser.parse_args(argv)
    try:
        if args.command == "confirm":
            if not harness:
                parser.error("confirm needs a command after '--' (e.g. jaxlint confirm -- python train.py) "
                             "or --pytest [PYTEST ARGS]")
            # everything `check` knows, at its defaults, then what `confirm` was given
            check = parser.parse_args(["check"])
            vars(check).update(vars(args))
            check.harness_command, check.confirm = harness, True
            return cmd_check(check)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "rules":
            return cmd_rules(args)
        if args.command == "rule":
            return cmd_rule(args)
        if args.command == "server":
            return cmd_server(args)
    except (ConfigError, BaselineError) as exc:
        sys.stderr.write(f"jaxlint: error: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        if isinstance(exc, Terminated):
            sys.stderr.write("jaxlint: terminated\n")
            return EXIT_TERMINATED
        sys.stderr.write("jaxlint: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_ERROR
    except Exception as exc:    # a jaxlint bug outside any one file: one line, its own exit code
        where = f"`jaxlint {args.command}`" + (f" (while checking {_CURRENT[0]})" if _CURRENT[0] else "")
        sys.stderr.write(f"jaxlint: {crash_message(exc, where)}\n")
        if os.environ.get("JAXLINT_TRACEBACK"):
            import traceback
            traceback.print_exc()
        return EXIT_INTERNAL
    finally:
        _CURRENT[0] = None
    parser.print_help(sys.stderr)
    return EXIT_ERROR


def pytest_command(args: List[str]) -> List[str]:
    """``jaxlint confirm --pytest [ARGS]``: the harness command (:func:`jaxlint.confirm.harness.pytest_command`)."""
    from .confirm.harness import pytest_command as command
    return command(args)


def lint_and_fix(source, lint, **kw):
    """:func:`jaxlint.engine.lint_and_fix` (imported when a file is linted)."""
    from .engine import lint_and_fix as run
    return run(source, lint, **kw)


# ------------------------------------------------------------------- rules, rule, server
def cmd_rules(args) -> int:
    from .checkers import all_rules
    rules = all_rules()
    if args.format == "json":
        import json
        json.dump([{"code": r.code, "symbol": r.symbol, "summary": r.summary,
                    "default_enabled": r.default_enabled, "fix": r.fix_applicability} for r in rules],
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table
    console = Console(soft_wrap=False, highlight=False)
    if not console.is_terminal:     # piped: one line per rule, never wrapped
        rows = [("Code", "Symbol", "Fix", "Default", "Summary")] + [
            (r.code, r.symbol, r.fix_applicability or "-", "on" if r.default_enabled else "off", r.summary)
            for r in rules]
        width = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            sys.stdout.write("  ".join(cell.ljust(width[i]) for i, cell in enumerate(row[:4])) + "  " + row[4] + "\n")
        return EXIT_OK
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("Code", no_wrap=True)
    table.add_column("Symbol", no_wrap=True)
    table.add_column("Fix", no_wrap=True)
    table.add_column("Default", no_wrap=True)
    table.add_column("Summary")
    for r in rules:
        table.add_row(r.code, r.symbol, r.fix_applicability or "-", "on" if r.default_enabled else "off", r.summary)
    console.print(table)
    return EXIT_OK


def cmd_rule(args) -> int:
    from .checkers import get_rule
    rule = get_rule(args.code)
    if rule is None:
        sys.stderr.write(f"jaxlint: error: unknown rule {args.code!r} (see `jaxlint rules`)\n")
        return EXIT_ERROR
    sys.stdout.write(rule.markdown())
    return EXIT_OK


def cmd_server(args) -> int:
    try:
        from .server import main as server_main
    except ImportError as exc:
        sys.stderr.write(f"jaxlint: error: the language server is not available: {exc}\n")
        return EXIT_ERROR
    rc = server_main()
    return int(rc or 0)


# ------------------------------------------------------------------- check: set-up
def _load_config(args) -> Config:
    from .config import Config, find_config, load_config, validate_codes
    if args.isolated:
        cfg = Config(root=os.getcwd())
    elif args.config:
        cfg = load_config(args.config)
    else:
        cfg = load_config(find_config([p for p in args.paths if p != "-"] or ["."]))
    for attr, what in (("select", "--select"), ("ignore", "--ignore"), ("extend_select", "--extend-select")):
        value = getattr(args, attr)
        if value is not None:
            validate_codes(value, what)
            setattr(cfg, attr, value)
    if getattr(args, "strict", None):
        cfg.set_option("strict", True)
    return cfg


def _validate(args) -> bool:
    """Check option combinations; returns whether runtime confirmation was asked for."""
    import math
    from .config import ConfigError
    confirm = args.confirm or args.confirmed_only or args.device is not None or args.confirm_timeout is not None
    if confirm and args.diff:
        raise ConfigError("--confirm cannot be combined with --diff")
    for flag in ("confirm_timeout", "command_timeout"):
        value = getattr(args, flag, None)
        # (nan or inf would disable the limit)
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive (finite) number of seconds")
    if args.add_noqa and (args.fix or args.diff):
        raise ConfigError("--add-noqa cannot be combined with --fix or --diff")
    if args.write_baseline and (args.fix or args.diff or args.add_noqa):
        raise ConfigError("--write-baseline cannot be combined with --fix, --diff or --add-noqa")
    if args.add_noqa and "-" in args.paths:
        raise ConfigError("--add-noqa cannot edit standard input")
    return confirm


def _changed_files(ref: str) -> Set[str]:
    """Absolute paths of files changed since ``ref`` (committed or not) and untracked files."""
    import subprocess
    from .config import ConfigError

    def git(*cmd: str) -> str:
        try:
            proc = subprocess.run(["git", *cmd], capture_output=True, text=True)
        except OSError as exc:
            raise ConfigError(f"--changed-since needs git: {exc.strerror or exc}") from None
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or ["git failed"])[-1]
            raise ConfigError(f"--changed-since {ref}: {why}")
        return proc.stdout

    top = git("rev-parse", "--show-toplevel").strip()
    names = git("diff", "--name-only", "-z", ref, "--").split("\0")
    names += git("ls-files", "--others", "--exclude-standard", "-z", "--full-name").split("\0")
    return {os.path.realpath(os.path.join(top, n)) for n in names if n}


def _targets(args, cfg: Config, problems: Optional[list] = None) -> List[Tuple[str, bool]]:
    """The files to check; ``problems`` collects what discovery could not use (a FIFO, a
    folder that cannot be listed: see :func:`iter_python_files`)."""
    from .discovery import iter_python_files
    paths = [p for p in (args.paths or ["."]) if p != "-"]
    targets = list(iter_python_files(paths, cfg.exclude, cfg.root, force_exclude=args.force_exclude,
                                     problems=problems))
    if args.changed_since:
        changed = _changed_files(args.changed_since)
        targets = [(p, ok) for p, ok in targets if not ok or os.path.realpath(p) in changed]
    return targets


# ------------------------------------------------------------------- check: reading and writing
def read_source(path: str) -> SourceFile:
    """A file's source; notebooks (``.ipynb``) become their joined code cells.  Regular
    files only: a FIFO or a device is a one-line error, never a hang."""
    from .workspace import read_source_bytes
    return _source(path, read_source_bytes(path))


def _source(path: str, raw: bytes) -> SourceFile:
    """A file's bytes as source: notebooks (``.ipynb``) become their joined code cells."""
    if path.lower().endswith(".ipynb"):     # (notebook.is_notebook, without importing the notebook package)
        from .notebook import source_from_bytes
        return source_from_bytes(path, raw)
    from .analysis.source import SourceFile
    return SourceFile.from_bytes(path, raw)


def write_source(path: str, source: SourceFile, text: str) -> None:
    """Write fixed text back: notebooks through their own writer, files atomically."""
    writer = getattr(source, "write_fixed", None)
    if writer is not None:
        writer(text)
    else:
        from .fixes.applier import write_atomic
        write_atomic(path, source, text)


def _stdin_source(name: str, raw: bytes) -> SourceFile:
    """Standard input as a file, or as a notebook when --stdin-filename ends in .ipynb."""
    return _source(name, raw)


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:   # a text-only stream (tests)
        sys.stdout.write(data.decode("utf-8", "surrogateescape"))


class _Run:
    """What checking all files produced, before filtering and reporting."""

    def __init__(self) -> None:
        self.results: List[FileResult] = []
        self.diffs: List[str] = []
        self.fixed_by_rule: Dict[str, int] = {}
        self.problems: List[str] = []     # fixes discarded or unsettled (jaxlint bugs)
        self.skipped: List[str] = []      # files with nothing to check (an R notebook)
        self.checked = 0

    @property
    def fixed_total(self) -> int:
        return sum(self.fixed_by_rule.values())

    @property
    def errors(self) -> List[FileResult]:
        return [r for r in self.results if r.error]


def _linter(cfg: Config, rules, path: Optional[str], unused_noqa: bool = False,
            ws: Optional[Workspace] = None) -> Callable[[SourceFile], List[Finding]]:
    """The one per-file lint function (rules for this path, settings, noqa, and the
    project's cross-module facts through ``ws``), used for the first pass, every fix
    pass and the re-lint after fixing."""
    from .checkers import Finding
    selected = {r.code for r in cfg.rules_for(path)}
    active = [r for r in rules if r.code in selected]
    if ws is None:
        from .workspace import Workspace
        ws = Workspace(use_cache=False)
    if not unused_noqa:
        return ws.lint_function(path, active, cfg.settings)
    base = ws.lint_function(path, active, cfg.settings, apply_noqa=False)

    def lint(source: SourceFile) -> List[Finding]:
        raw = base(source)
        found = raw + _unused_noqa_findings(source, raw, active)
        return sorted((f for f in found if not source.is_suppressed(f.line, f.code)), key=Finding.sort_key)
    return lint


@contextlib.contextmanager
def _progress(args, total: int) -> Iterator[Callable[[], None]]:
    if args.no_progress or args.quiet or not sys.stderr.isatty() or total < 20 or args.format != "text":
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    progress = Progress(TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(file=sys.stderr), transient=True)
    task = progress.add_task("check", total=total)
    progress.start()
    try:
        yield lambda: progress.advance(task)
    finally:
        progress.stop()


def _check_one(args, cfg: Config, rules, path: str, run: _Run, ws: Workspace) -> None:
    from .analysis.source import SourceError
    from .discovery import is_excluded
    from .engine import FileResult, InternalError, crash_message, too_deep
    from .notebook.reading import NotPythonNotebook
    stdin = path == "-"
    display = (args.stdin_filename or "<stdin>") if stdin else path
    lint = _linter(cfg, rules, args.stdin_filename if stdin else path, args.report_unused_noqa, ws)
    echo = stdin and args.fix and not args.diff    # stdout must carry the source, fixed or not
    raw = sys.stdin.buffer.read() if stdin else b""
    if stdin and args.force_exclude and args.stdin_filename \
            and is_excluded(args.stdin_filename, cfg.exclude, cfg.root):
        if echo:
            _write_stdout(raw)
        return
    source = None
    try:
        source = _stdin_source(display, raw) if stdin else read_source(path)
        res = lint_and_fix(source, lint, fix=args.fix or args.diff, unsafe=args.unsafe_fixes)
    except Exception as exc:
        # one file's failure is one line for that file; the other files are checked
        if echo:
            _write_stdout(raw)
        if isinstance(exc, NotPythonNotebook):      # not checked, and not an error either
            run.skipped.append(f"{display}: skipped: {exc}")
        elif isinstance(exc, (SourceError, InternalError)):
            found = getattr(exc, "findings", [])     # what the other rules found, shown with the error
            run.results.append(FileResult(display, found, error=str(exc), source=source if found else None,
                                          internal=isinstance(exc, InternalError)))
        elif isinstance(exc, RecursionError):
            run.results.append(FileResult(display, error=too_deep("checking it")))
        else:
            run.results.append(FileResult(display, error=crash_message(exc, "checking it"), internal=True))
        return
    res.path = display
    run.checked += 1
    _note_fix_problems(run, display, res.fix_report)
    if args.diff:
        if res.fixed_source is not None:
            run.diffs.append(_unified_diff(display, source.text, res.fixed_source.text))
            _count_fixes(run, res.fix_report)
    elif echo:
        _echo_fixed(run, res, raw)
    elif res.fixed_source is not None:
        _write_fixed(run, res, path, args)
    run.results.append(res)


def _note_fix_problems(run: _Run, display: str, report) -> None:
    if report is None:
        return
    for code, line, why in report.broken:
        run.problems.append(f"{display}:{line}: {code} fix discarded: {why} (a jaxlint bug; please report it)")
    if not report.stable:
        run.problems.append(f"{display}: fixes did not settle after the maximum number of passes")


def _echo_fixed(run: _Run, res: FileResult, raw: bytes) -> None:
    """An editor's fix-on-save reads stdout: it carries the (fixed) source and nothing else."""
    from .analysis.source import SourceError
    if res.fixed_source is None:
        _write_stdout(raw)
        return
    try:
        data = res.source.encode(res.fixed_source.text)
    except (UnicodeEncodeError, SourceError) as exc:
        _write_stdout(raw)
        why = exc.reason if isinstance(exc, UnicodeEncodeError) else str(exc)
        res.error = f"fixes not applied ({why}); the input was echoed unchanged"
        return
    _write_stdout(data)
    report = res.fix_report
    res.accept_fixes()
    _count_fixes(run, report)


def _escape(path: str, args) -> Optional[str]:
    """Why ``path`` must not be written: a symbolic link found while walking a checked folder
    whose target lies outside that folder (``--fix .`` would rewrite a file elsewhere).
    A file named on the command line is written through its link (the user named it)."""
    if not os.path.islink(path) or os.path.normpath(path) in {os.path.normpath(p) for p in args.paths}:
        return None
    full = os.path.abspath(path)
    for d in [p for p in (args.paths or ["."]) if p != "-" and os.path.isdir(p)]:
        top = os.path.abspath(d)
        if full.startswith(top.rstrip(os.sep) + os.sep):
            real_top = os.path.realpath(top)
            target = os.path.realpath(path)
            if not target.startswith(real_top.rstrip(os.sep) + os.sep):
                return (f"a symbolic link to {target}, outside the checked folder {d}; fixes were not written "
                        f"(name the file itself to fix it)")
            return None
    return None


def _write_fixed(run: _Run, res: FileResult, path: str, args=None) -> None:
    from .analysis.source import SourceError
    why = _escape(path, args) if args is not None else None
    if why is not None:
        res.error = why
        return
    try:
        write_source(path, res.source, res.fixed_source.text)
    except SourceError as exc:
        res.error = str(exc)
        return
    report = res.fix_report
    res.accept_fixes()
    _count_fixes(run, report)


def _count_fixes(run: _Run, report) -> None:
    for code, n in report.applied.items():
        run.fixed_by_rule[code] = run.fixed_by_rule.get(code, 0) + n


def _check_all(args, cfg: Config, targets: List[Tuple[str, bool]], problems=(), warm: bool = False) -> _Run:
    """Check ``targets``.  ``warm``: the run reports exactly what the results cache holds (no
    fixes, no confirmation, no findings made outside the cache), so when nothing changed since
    a run with the same configuration the cache answers it alone (:meth:`Workspace.warm_results`)."""
    from .engine import FileResult
    from .workspace import Workspace, warm_key
    run = _Run()
    for path, message, is_error in problems:
        if is_error:    # a folder that cannot be listed, a FIFO named on the command line
            run.results.append(FileResult(path, error=message))
        else:           # a FIFO or a device found in a folder: never read
            run.skipped.append(f"{path}: skipped: {message}")
    # every file is linted with its project's context (the modules under its project root),
    # through the results cache unless --no-cache
    ws = Workspace(traced_functions=cfg.traced_functions, exclude=cfg.exclude,
                   use_cache=not args.no_cache)
    key = warm_key(cfg) if warm and not args.no_cache else None
    if key is not None and _answer_warm(ws, key, targets, run):
        ws.flush()
        return run
    rules = cfg.rules()
    if args.jobs > 1:
        ws.prefetch([p for p, exists in targets if exists],
                    lambda p: _linter(cfg, rules, p, args.report_unused_noqa, ws), args.jobs)
    jobs = list(targets) + ([("-", True)] if "-" in args.paths else [])
    with _progress(args, len(targets)) as advance:
        for path, exists in jobs:
            if path != "-":
                advance()
            if not exists:
                run.results.append(FileResult(path, error="no such file or directory"))
                continue
            _CURRENT[0] = path
            res = _unread(args, cfg, rules, path, ws) if warm else None
            if res is not None:
                run.results.append(res)
                run.checked += 1
            else:
                _check_one(args, cfg, rules, path, run, ws)
            if path != "-":
                ws.done(path)
    if key is not None:
        ws.record_warm(key, {os.path.abspath(r.path) for r in run.results
                             if not r.error and (r.source is not None or r.cached)})
    ws.flush()
    return run


def _unread(args, cfg: Config, rules, path: str, ws: Workspace) -> Optional[FileResult]:
    """The result of ``path`` without reading it when its findings are known already: a --jobs
    worker linted it, or it did not change since a recorded run and its findings under what the
    project knows now are cached (a file is then read only to show its findings)."""
    from .cache import file_digest
    got = ws.take_prefetched(path)
    if got is None and ws.recorded(path):
        got = getattr(_linter(cfg, rules, path, False, ws), "unread", lambda: None)()
    if got is None:
        return None
    entries, sha = got
    return _result(path, entries, lambda raw, source: file_digest(source.text.encode("utf-8")) == sha)


def _answer_warm(ws: Workspace, key: str, targets: List[Tuple[str, bool]], run: _Run) -> bool:
    """Check ``targets`` from the results cache alone, when nothing changed since a run that
    recorded them (:meth:`Workspace.warm_results`): files with findings are read (to show
    them), the others are not.  False (``run`` untouched) when the cache cannot answer."""
    from .cache import file_digest
    from .engine import FileResult
    answers = ws.warm_results([p for p, exists in targets if exists], key)
    if answers is None:
        return False
    results = []
    for path, exists in targets:
        if not exists:
            results.append(FileResult(path, error="no such file or directory"))
            continue
        entries, sha = answers[path]
        res = _result(path, entries, lambda raw, source: file_digest(raw) == sha)
        if res is None:
            return False
        results.append(res)
    run.results.extend(results)
    run.checked += sum(1 for r in results if r.cached or r.source is not None)
    return True


def _result(path: str, entries: list, same: Callable[[bytes, SourceFile], bool]) -> Optional[FileResult]:
    """The result of a file from findings computed without this process reading it (the results
    cache, a --jobs worker): without findings the file is not read; with findings it is (to show
    them), and must be the text they were found in (``same(raw, source)``).  None when it is not
    (it changed meanwhile) or the entries are not findings: lint it."""
    from .engine import FileResult
    from .workspace import _findings_from, read_source_bytes
    if not entries:
        return FileResult(path, cached=True)
    found = _findings_from(entries, path)
    if found is None:
        return None
    try:
        raw = read_source_bytes(path)
        source = _source(path, raw)
        if not same(raw, source):
            return None
    except Exception:
        return None
    return FileResult(path, found, source=source, error=source.partial_error)


# ------------------------------------------------------------------- check: legacy-code adoption
def _add_noqa(args, cfg: Config, run: _Run, out: TextIO) -> int:
    from .analysis.source import SourceError
    from .fixes.edits import apply_edits
    from .fixes.noqa import add_noqa_edits
    added = files = 0
    for res in run.results:
        if res.error or not res.findings or res.source is None:
            continue
        edits, n, skipped = add_noqa_edits(res.source, res.findings)
        for line in skipped:
            sys.stderr.write(f"{res.path}:{line}: cannot add `# noqa` (the line continues a string or a "
                             f"backslash continuation); suppress it by hand\n")
        if not edits:
            continue
        why = _escape(res.path, args)
        if why is not None:
            res.error = why.replace("fixes were", "noqa comments were")
            continue
        try:
            write_source(res.path, res.source, apply_edits(res.source.text, edits))
        except SourceError as exc:
            res.error = str(exc)
            continue
        added += n
        files += 1
    _print_errors(run, args.quiet)
    if not args.quiet:
        out.write(f"Added {added} noqa directive{'s' if added != 1 else ''} to {files} "
                  f"file{'s' if files != 1 else ''} ({run.checked} checked).\n")
    return _error_code(run) or EXIT_OK


def _unused_noqa_findings(source: SourceFile, raw: List[Finding], active) -> List[Finding]:
    from .checkers import Finding
    from .fixes.edits import SAFE, Fix
    from .fixes.noqa import UNUSED_NOQA_CODE, UNUSED_NOQA_SYMBOL, unused_noqa
    out = []
    for u in unused_noqa(source, raw, [r.code for r in active]):
        fix = Fix(f"Remove the unused `{u.code}` from the `noqa` directive", (u.edit,), SAFE)
        out.append(Finding(UNUSED_NOQA_CODE, UNUSED_NOQA_SYMBOL, source.path, u.line, u.col, u.line, u.end_col,
                           f"unused `noqa` directive: no {u.code} finding on this line", fix=fix))
    return out


# ------------------------------------------------------------------- check
def cmd_check(args) -> int:
    if getattr(args, "show_settings", False) or getattr(args, "show_files", False):
        return _show(args)
    if getattr(args, "watch", False):
        return _watch(args)
    confirm = _validate(args)
    cfg = _load_config(args)
    problems: List[Tuple[str, str, bool]] = []
    # a run whose findings are the cached ones may be answered by the results cache alone
    warm = not (confirm or args.fix or args.diff or args.add_noqa or args.report_unused_noqa or "-" in args.paths)
    run = _check_all(args, cfg, _targets(args, cfg, problems), problems, warm=warm)

    with _report_stream(args) as out:
        if args.add_noqa:
            return _add_noqa(args, cfg, run, out)
        _print_errors(run, args.quiet)
        baseline = args.baseline or (None if args.no_baseline else cfg.baseline)
        if args.write_baseline:
            from .baseline import write_baseline
            path = baseline or DEFAULT_BASELINE
            n = write_baseline(path, run.results)
            if not args.quiet:
                out.write(f"Wrote {n} finding{'s' if n != 1 else ''} to {path} ({run.checked} "
                          f"file{'s' if run.checked != 1 else ''} checked).\n")
            return _error_code(run) or EXIT_OK

        notes: List[str] = []
        partial = sum(1 for r in run.results if r.error and r.source is not None and r.error == r.source.partial_error)
        if partial:
            notes.append(f"{partial} notebook{'s' if partial != 1 else ''} checked only in part: "
                         f"a cell that does not parse was left out (the error names it)")
        failed = sum(1 for r in run.errors if r.source is None)    # (a fix not written: checked)
        if failed and args.format == "text":    # never "All checks passed" over a file not checked
            notes.append(f"{failed} file{'s' if failed != 1 else ''} could not be checked (the error"
                         f"{'s name them' if failed != 1 else ' names it'})")
        if baseline:
            from .baseline import apply_baseline
            hidden = apply_baseline(baseline, run.results)
            if hidden:
                notes.append(f"{hidden} finding{'s' if hidden != 1 else ''} in the baseline not shown")
        confirm_line = _confirm(args, cfg, run.results, notes) if confirm else None

        if args.diff:
            return _report_diff(args, run, out)
        _report(args, run, out, confirm_line, notes)
    return _exit_code(args, run)


def _show(args) -> int:
    """--show-settings and --show-files: what a check would do, and why; nothing is checked."""
    from .settings_view import explain_files, render_files, render_settings, settings_report
    cfg = _load_config(args)
    fmt = "json" if args.format == "json" else "text"
    paths = [p for p in args.paths if p != "-"] or ["."]
    with _report_stream(args) as out:
        if args.show_settings:
            given = {"select": args.select, "ignore": args.ignore, "extend_select": args.extend_select,
                     "baseline": args.baseline, "confirm_timeout": args.confirm_timeout, "device": args.device,
                     "strict": args.strict}
            for path in paths:
                render_settings(settings_report(path, cfg, given), out, fmt)
        if args.show_files:
            changed = _changed_files(args.changed_since) if args.changed_since else None
            files, skipped = explain_files(paths, cfg, args.force_exclude, changed, args.changed_since or "")
            render_files(files, skipped, out, fmt)
    return EXIT_OK


def _watch(args) -> int:
    """--watch: the same check now and after every change (jaxlint/watch.py)."""
    from .baseline import BaselineError
    from .config import ConfigError
    from .watch import WatchUnavailable, load_watchfiles, validate, watch
    validate(args)
    try:
        load_watchfiles()
    except WatchUnavailable as exc:
        raise ConfigError(str(exc)) from None
    cfg = _load_config(args)
    once = dict(vars(args), watch=False)
    return watch(args.paths or ["."], lambda: cmd_check(argparse.Namespace(**once)), exclude=cfg.exclude,
                 root=cfg.root, recoverable=(ConfigError, BaselineError))


def _print_errors(run: _Run, quiet: bool = False) -> None:
    for line in [] if quiet else run.skipped:
        sys.stderr.write(line + "\n")
    for r in run.errors:
        if r.internal and not r.error.startswith("internal error"):
            sys.stderr.write(f"{r.path}: internal error: {r.error}\n")
        else:
            sys.stderr.write(f"{r.path}: error: {r.error}\n")
    for p in run.problems:
        sys.stderr.write(f"jaxlint: {p}\n")


@contextlib.contextmanager
def _report_stream(args) -> Iterator[TextIO]:
    """Where the report goes: --output-file, stderr when stdout carries fixed source, else stdout."""
    if args.output_file:
        from .config import ConfigError
        try:
            d = os.path.dirname(os.path.abspath(args.output_file))
            os.makedirs(d, exist_ok=True)
            fh = open(args.output_file, "w", encoding="utf-8", newline="\n")
        except OSError as exc:
            raise ConfigError(f"--output-file {args.output_file}: {exc.strerror or exc}") from None
        with fh:
            yield fh
    elif "-" in args.paths and args.fix and not args.diff:
        yield sys.stderr
    else:
        yield sys.stdout


def _report_diff(args, run: _Run, out: TextIO) -> int:
    text = "".join(run.diffs)
    out.write(text)
    n = run.fixed_total
    if not args.quiet:
        sys.stderr.write(f"Would fix {n} finding{'s' if n != 1 else ''}.\n" if n else "No fixes available.\n")
    if run.errors:
        return _error_code(run)
    return EXIT_FINDINGS if text else EXIT_OK


def _fix_summary(run: _Run) -> str:
    remaining = sum(len(r.findings) for r in run.results)
    unsafe_left = sum(1 for r in run.results for f in r.findings
                      if f.fix is not None and f.fix.applicability != "safe")
    n = run.fixed_total
    head = f"Fixed {n} finding{'s' if n != 1 else ''}"
    if run.fixed_by_rule:
        head += " (" + ", ".join(f"{c}: {k}" for c, k in sorted(run.fixed_by_rule.items())) + ")"
    parts = [head, f"{remaining} remaining"]
    if unsafe_left:
        parts.append(f"{unsafe_left} of them fixable with --unsafe-fixes")
    return "; ".join(parts) + "."


def _report(args, run: _Run, out: TextIO, confirm_line: Optional[str], notes: List[str]) -> None:
    from .reporting import render, render_statistics
    summary = _fix_summary(run) if args.fix else None
    shown = [r for r in run.results if not r.error or r.findings]
    if args.statistics:
        render_statistics(args.format, shown, out)
        if summary and not args.quiet:
            sys.stderr.write(summary + "\n")
        return
    if args.format == "text":
        color = {"always": True, "never": False}.get(args.color)
        if args.output_file:
            color = False if args.color != "always" else True
        render("text", shown, out, quiet=args.quiet, color=color, fix_summary=summary,
               confirm_summary=confirm_line, checked=run.checked, notes=notes)
    else:
        if not args.quiet:
            for line in ([confirm_line] if confirm_line else []) + ([summary] if summary else []) + notes:
                sys.stderr.write(line + "\n")
            if run.checked == 0:
                sys.stderr.write("jaxlint: no files were checked\n")
        render(args.format, run.results, out)


def _error_code(run: _Run) -> Optional[int]:
    """3 when a file hit a jaxlint bug, 2 when one could not be checked, else None."""
    if any(r.internal for r in run.errors):
        return EXIT_INTERNAL
    return EXIT_ERROR if run.errors else None


def _exit_code(args, run: _Run) -> int:
    if run.errors:
        return _error_code(run)
    if args.exit_non_zero_on_fix and run.fixed_total:
        return EXIT_FINDINGS
    if any(r.findings for r in run.results) and not args.exit_zero:
        return EXIT_FINDINGS
    if getattr(args, "confirm_vacuous", False):
        return EXIT_FINDINGS
    return EXIT_OK


def _confirm(args, cfg: Config, results: List[FileResult], notes: List[str]) -> Optional[str]:
    """Runtime confirmation (imports JAX only in subprocesses); returns the summary line."""
    from .config import ConfigError
    from .confirm import ConfirmOptions, SpecError, confirm_results, load_confirm_config, warning
    try:
        ccfg = load_confirm_config(None if args.isolated else cfg.path)
    except SpecError as exc:
        raise ConfigError(str(exc)) from None
    command = getattr(args, "harness_command", None)
    if not any(r.findings for r in results):
        return None
    opts = ConfirmOptions(timeout=args.confirm_timeout, device=args.device, command=command,
                          progress=not args.no_progress and not args.quiet and not command,
                          command_timeout=getattr(args, "command_timeout", None))
    sys.stderr.write(warning(opts.timeout or ccfg.timeout, command))
    summary = confirm_results([r for r in results if r.findings and not r.error], ccfg, opts, cfg.settings)
    if command and summary.command_rc:
        sys.stderr.write(f"jaxlint: the command exited with code {summary.command_rc}\n")
    if args.confirmed_only:
        from .confirm import confirmed_only
        before = sum(len(r.findings) for r in results)
        vacuous = confirmed_only(results)
        if vacuous:     # every finding stayed unreached: an empty result would prove nothing
            sys.stderr.write(vacuous + "\n")
            args.confirm_vacuous = not args.exit_zero
        dropped = before - sum(len(r.findings) for r in results)
        if dropped:
            notes.append(f"{dropped} static finding{'s' if dropped != 1 else ''} not confirmed at runtime "
                         f"not shown (--confirmed-only)")
    return summary.line()


def _unified_diff(path: str, before: str, after: str) -> str:
    import difflib
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    out = "".join(difflib.unified_diff(a, b, fromfile=f"a/{path}", tofile=f"b/{path}"))
    if out and not out.endswith("\n"):
        out += "\n"
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
