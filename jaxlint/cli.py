"""Command line: ``jaxlint check``, ``jaxlint rules``, ``jaxlint rule CODE``.

Exit codes: 0 no findings, 1 findings (or, with ``--diff``, changes to make),
2 usage/configuration error or a file that could not be read or parsed.
Static checking never imports JAX or the code being checked.
"""
from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import List, Optional, Sequence

from . import __version__
from .analysis import SourceError, SourceFile
from .checkers import REGISTRY, all_rules, get_rule
from .config import Config, ConfigError, find_config, load_config, select_rules, validate_codes
from .discovery import iter_python_files
from .engine import FileResult, InternalError, lint_source
from .fixes.applier import fix_text, write_atomic
from .reporting import FORMATS, render

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(EXIT_ERROR, f"jaxlint: error: {message}\n")


def _codes(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jaxlint", description="Static linter for JAX tracing and purity pitfalls.")
    p.add_argument("--version", action="version", version=f"jaxlint {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("check", help="check files or directories (default: .)")
    c.add_argument("paths", nargs="*", help="files or directories; '-' reads standard input")
    c.add_argument("--select", type=_codes, default=None, metavar="CODES",
                   help="comma-separated codes or prefixes to enable (e.g. JAX1,JAX201); 'ALL' for every rule")
    c.add_argument("--extend-select", type=_codes, default=None, metavar="CODES",
                   help="codes or prefixes to enable on top of the selection")
    c.add_argument("--ignore", type=_codes, default=None, metavar="CODES", help="codes or prefixes to disable")
    c.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    c.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    c.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes (with --fix or --diff)")
    c.add_argument("--diff", action="store_true",
                   help="print the fixes as a unified diff and write nothing (exit 1 if there are changes)")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    c.add_argument("-q", "--quiet", action="store_true", help="print findings only, no context or summary")
    c.add_argument("--config", metavar="PYPROJECT", help="read [tool.jaxlint] from this file")
    c.add_argument("--isolated", action="store_true", help="ignore configuration files")
    c.add_argument("--stdin-filename", metavar="PATH", help="the name to report for '-' (standard input)")
    c.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    c.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    _add_confirm_options(c, with_switch=True)

    k = sub.add_parser("confirm", help="run COMMAND with JAX instrumentation and confirm findings with the "
                                       "recorded call signatures: jaxlint confirm [PATHS] -- COMMAND ...")
    k.add_argument("paths", nargs="*", help="files or directories to check (default: .)")
    for flag in ("--select", "--extend-select", "--ignore"):
        k.add_argument(flag, type=_codes, default=None, metavar="CODES")
    k.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    k.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    k.add_argument("-q", "--quiet", action="store_true", help="print findings only, no context or summary")
    k.add_argument("--config", metavar="PYPROJECT", help="read [tool.jaxlint] from this file")
    k.add_argument("--isolated", action="store_true", help="ignore configuration files")
    k.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    k.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    _add_confirm_options(k, with_switch=False)

    r = sub.add_parser("rules", help="list the rules")
    r.add_argument("--format", choices=("text", "json"), default="text")
    r.add_argument("--all", action="store_true", help="include rules that are off by default (always listed)")

    d = sub.add_parser("rule", help="show a rule's documentation")
    d.add_argument("code", help="rule code (JAX101) or symbol (print-under-trace)")
    return p


def _add_confirm_options(p: argparse.ArgumentParser, with_switch: bool) -> None:
    if with_switch:
        p.add_argument("--confirm", action="store_true",
                       help="confirm findings at runtime: import the checked modules (their top-level code runs) "
                            "and trace/compile the flagged functions with JAX, one subprocess per module")
    p.add_argument("--confirm-timeout", type=float, default=None, metavar="SECONDS",
                   help="time limit per module for runtime confirmation (default: 60)")
    p.add_argument("--confirmed-only", action="store_true",
                   help="report only findings confirmed at runtime (implies --confirm)")
    p.add_argument("--device", choices=("cpu", "gpu", "tpu"), default=None,
                   help="backend for runtime confirmation (default: JAX's default backend)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    harness = None
    if argv and argv[0] == "confirm" and "--" in argv:
        i = argv.index("--")
        argv, harness = argv[:i], argv[i + 1:]
    args = parser.parse_args(argv)
    try:
        if args.command == "confirm":
            if not harness:
                parser.error("confirm needs a command after '--' (e.g. jaxlint confirm -- pytest tests/)")
            args.harness_command = harness
            args.confirm = True
            args.fix = args.diff = args.unsafe_fixes = False
            args.stdin_filename = None
            return cmd_check(args)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "rules":
            return cmd_rules(args)
        if args.command == "rule":
            return cmd_rule(args)
    except ConfigError as exc:
        sys.stderr.write(f"jaxlint: error: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("jaxlint: interrupted\n")
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_ERROR
    parser.print_help(sys.stderr)
    return EXIT_ERROR


# ------------------------------------------------------------------- rules
def cmd_rules(args) -> int:
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
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("Code", no_wrap=True)
    table.add_column("Symbol", no_wrap=True)
    table.add_column("Fix", no_wrap=True)
    table.add_column("Default", no_wrap=True)
    table.add_column("Summary")
    for r in rules:
        table.add_row(r.code, r.symbol, r.fix_applicability or "-", "on" if r.default_enabled else "off", r.summary)
    console = Console(soft_wrap=False, highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)
    console.print(table)
    return EXIT_OK


def cmd_rule(args) -> int:
    rule = get_rule(args.code)
    if rule is None:
        sys.stderr.write(f"jaxlint: error: unknown rule {args.code!r} (see `jaxlint rules`)\n")
        return EXIT_ERROR
    sys.stdout.write(rule.markdown())
    return EXIT_OK


# ------------------------------------------------------------------- check
def _load_config(args) -> Config:
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
    return cfg


def _read_stdin(name: str) -> SourceFile:
    raw = sys.stdin.buffer.read()
    return SourceFile.from_bytes(name, raw)


def cmd_check(args) -> int:
    if args.diff and args.fix:
        pass  # --diff wins: show, write nothing
    confirm = args.confirm or args.confirmed_only or args.device is not None or args.confirm_timeout is not None
    if confirm and args.diff:
        raise ConfigError("--confirm cannot be combined with --diff")
    if args.confirm_timeout is not None and args.confirm_timeout <= 0:
        raise ConfigError("--confirm-timeout must be a positive number of seconds")
    cfg = _load_config(args)
    rules = cfg.rules()
    paths = args.paths or ["."]
    targets = list(iter_python_files([p for p in paths if p != "-"], cfg.exclude, cfg.root))
    use_stdin = "-" in paths
    fixing = args.fix or args.diff

    results: List[FileResult] = []
    diffs: List[str] = []
    fixed_total = 0
    fixed_by_rule = {}
    broken = []

    progress = None
    show_progress = (not args.no_progress and not args.quiet and sys.stderr.isatty()
                     and len(targets) >= 20 and args.format == "text")
    if show_progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.console import Console
        progress = Progress(TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(file=sys.stderr), transient=True)
        task = progress.add_task("check", total=len(targets))
        progress.start()

    def lint_one(source: SourceFile) -> List:
        ignored = cfg.ignored_for(source.path)
        active = [r for r in rules if not any(r.code.startswith(i.upper()) or r.symbol == i for i in ignored)]
        return lint_source(source, active, cfg.settings)

    jobs = [(p, exists) for p, exists in targets]
    if use_stdin:
        jobs.append(("-", True))
    try:
        for path, exists in jobs:
            if progress is not None and path != "-":
                progress.advance(task)
            display = args.stdin_filename or "<stdin>" if path == "-" else path
            if not exists:
                results.append(FileResult(path, error="no such file or directory"))
                continue
            try:
                source = _read_stdin(display) if path == "-" else SourceFile.from_path(path)
                findings = lint_one(source)
            except (SourceError, InternalError) as exc:
                results.append(FileResult(display, error=str(exc)))
                continue
            res = FileResult(display, findings, source=source)
            if fixing and any(f.fix is not None for f in findings):
                report = fix_text(source, lint_one, unsafe=args.unsafe_fixes)
                for code, n in report.applied.items():
                    fixed_by_rule[code] = fixed_by_rule.get(code, 0) + n
                for code, line, why in report.broken:
                    broken.append(f"{display}:{line}: {code} fix discarded: {why} (a jaxlint bug; please report it)")
                if report.text != source.text:
                    if args.diff:
                        diffs.append(_unified_diff(display, source.text, report.text))
                    elif path == "-":
                        sys.stdout.write(report.text)
                    else:
                        try:
                            write_atomic(path, source, report.text)
                        except SourceError as exc:
                            results.append(FileResult(display, error=str(exc), source=source,
                                                      findings=findings))
                            continue
                    if not args.diff:
                        fixed_total += report.total
                        new_source = SourceFile(source.path, report.text, source.encoding)
                        res = FileResult(display, lint_one(new_source), source=new_source, fixed=report.total)
                if not report.stable:
                    broken.append(f"{display}: fixes did not settle after the maximum number of passes")
            results.append(res)
    finally:
        if progress is not None:
            progress.stop()

    errors = [r for r in results if r.error]
    for r in errors:
        sys.stderr.write(f"{r.path}: error: {r.error}\n")
    for b in broken:
        sys.stderr.write(f"jaxlint: {b}\n")

    confirm_line = None
    if confirm:
        confirm_line = _confirm(args, cfg, results)

    if args.diff:
        out = "".join(diffs)
        sys.stdout.write(out)
        n = sum(fixed_by_rule.values())
        if not args.quiet:
            sys.stderr.write(f"Would fix {n} finding{'s' if n != 1 else ''}.\n" if n else "No fixes available.\n")
        if errors:
            return EXIT_ERROR
        return EXIT_FINDINGS if out else EXIT_OK

    summary = None
    if args.fix:
        remaining = sum(len(r.findings) for r in results)
        unsafe_left = sum(1 for r in results for f in r.findings
                          if f.fix is not None and f.fix.applicability != "safe")
        parts = [f"Fixed {fixed_total} finding{'s' if fixed_total != 1 else ''}"]
        if fixed_by_rule:
            parts[0] += " (" + ", ".join(f"{c}: {n}" for c, n in sorted(fixed_by_rule.items())) + ")"
        parts.append(f"{remaining} remaining")
        if unsafe_left:
            parts.append(f"{unsafe_left} more fixable with --unsafe-fixes")
        summary = "; ".join(parts) + "."
        if args.format != "text" and not args.quiet:
            sys.stderr.write(summary + "\n")

    color = {"always": True, "never": False}.get(args.color)
    if args.format == "text":
        if path_results_empty(results) and args.quiet:
            pass
        render("text", [r for r in results if not r.error or r.findings], sys.stdout, quiet=args.quiet,
               color=color, fix_summary=summary, confirm_summary=confirm_line)
    else:
        if confirm_line and not args.quiet:
            sys.stderr.write(confirm_line + "\n")
        render(args.format, results, sys.stdout)

    if errors:
        return EXIT_ERROR
    if any(r.findings for r in results) and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def _confirm(args, cfg: Config, results: List[FileResult]) -> Optional[str]:
    """Runtime confirmation (imports JAX only in subprocesses); returns the summary line."""
    from .confirm import ConfirmOptions, SpecError, confirm_results, load_confirm_config, warning
    try:
        ccfg = load_confirm_config(None if args.isolated else cfg.path)
    except SpecError as exc:
        raise ConfigError(str(exc)) from None
    command = getattr(args, "harness_command", None)
    if not any(r.findings for r in results):
        return None
    opts = ConfirmOptions(timeout=args.confirm_timeout, device=args.device, command=command,
                          progress=not args.no_progress and not args.quiet and not command)
    sys.stderr.write(warning(opts.timeout or ccfg.timeout, command))
    summary = confirm_results([r for r in results if r.findings and not r.error], ccfg, opts, cfg.settings)
    if command and summary.command_rc:
        sys.stderr.write(f"jaxlint: the command exited with code {summary.command_rc}\n")
    if args.confirmed_only:
        for r in results:
            r.findings = [f for f in r.findings
                          if f.confirmation is not None and f.confirmation.get("status") == "confirmed"]
    return summary.line()


def path_results_empty(results) -> bool:
    return not any(r.findings for r in results)


def _unified_diff(path: str, before: str, after: str) -> str:
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    out = "".join(difflib.unified_diff(a, b, fromfile=f"a/{path}", tofile=f"b/{path}"))
    if out and not out.endswith("\n"):
        out += "\n"
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
