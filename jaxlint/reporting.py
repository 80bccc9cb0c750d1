"""Output formats: text (rich), concise (one line per finding), json, github (workflow
annotations), sarif 2.1.0, gitlab (GitLab code quality), junit (JUnit XML), pylint (pylint's
parseable text format)."""
from __future__ import annotations

import collections
import hashlib
import json
import os
import re
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, TextIO, Tuple

from . import __version__
from .fixes.edits import SAFE

if TYPE_CHECKING:
    from .checkers import Finding

FORMATS = ("text", "concise", "json", "github", "sarif", "gitlab", "junit", "pylint")

# findings the front end makes itself (not rules in the registry)
PSEUDO_RULES = {"JAX000": ("unused-noqa", "A `# noqa` directive names a jaxlint rule that reports nothing there")}


def _symbol(code: str) -> str:
    from .config import rule_catalogue     # (the registry's symbols, without importing the rules)
    symbol = rule_catalogue().get(code)
    return symbol if symbol is not None else PSEUDO_RULES.get(code, (code.lower(),))[0]


def cell_of(source, line: int) -> Tuple[Optional[int], int]:
    """``(cell, line in cell)`` for a notebook's joined source, ``(None, line)`` for a file."""
    where = getattr(source, "cell_position", None)
    if where is None:
        return None, line
    cell, in_cell = where(line)
    return cell, in_cell


def location(f: Finding, source) -> str:
    """``path:line:col`` or, in a notebook, ``nb.ipynb:cell 3:line 2:col``."""
    cell, line = cell_of(source, f.line)
    if cell is None:
        return f"{f.path}:{f.line}:{f.col + 1}"
    return f"{f.path}:cell {cell}:line {line}:{f.col + 1}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _fix_note(f: Finding) -> str:
    if f.fix is None:
        return ""
    return "" if f.fix.applicability == SAFE else " (unsafe fix: --unsafe-fixes)"


# ---------------------------------------------------------------- text
_CONFIRM_STYLE = {"confirmed": "bold green", "not-confirmed": "yellow", "unreached": "dim"}


def _confirm_note(f: Finding) -> Optional[tuple]:
    c = f.confirmation
    if not c:
        return None
    status = c.get("status", "unreached")
    detail = c.get("evidence") if status != "unreached" else c.get("reason")
    return status, detail or ""


def render_text(results, out: TextIO, *, quiet: bool = False, color: Optional[bool] = None,
                fix_summary: Optional[str] = None, show_fix_hints: bool = True,
                confirm_summary: Optional[str] = None, checked: Optional[int] = None,
                notes: Sequence[str] = ()) -> None:
    console, Text = _console(out, color)
    counts: Dict[str, int] = collections.Counter()
    fixable_safe = fixable_unsafe = 0
    total = 0
    for res in results:
        for f in res.findings:
            total += 1
            counts[f.code] += 1
            if f.fix is not None:
                if f.fix.applicability == SAFE:
                    fixable_safe += 1
                else:
                    fixable_unsafe += 1
            head = Text()
            head.append(f"{location(f, res.source)}:", style="bold")
            head.append(" ")
            head.append(f.code, style="bold red")
            head.append(" ")
            head.append(f.message)
            if f.confidence != "certain":
                head.append(f" [{f.confidence}]", style="dim")
            note = _confirm_note(f)
            if note is not None and quiet:
                head.append(f" [{note[0]}]", style=_CONFIRM_STYLE.get(note[0], ""))
            console.print(head)
            if quiet or res.source is None:
                if note is not None and not quiet:
                    console.print(Text("  = ", style="blue") + Text(f"{note[0]}: ", style=_CONFIRM_STYLE.get(
                        note[0], "")) + Text(note[1]))
                continue
            raw_line = res.source.line_text(f.line)
            line_text = raw_line.expandtabs(4)
            start = len(raw_line[:f.col].expandtabs(4))
            if f.end_line == f.line:
                width = len(raw_line[:f.end_col].expandtabs(4)) - start
            else:
                width = len(line_text) - start
            gutter = f"{cell_of(res.source, f.line)[1]} | "
            console.print(Text(gutter, style="blue") + Text(line_text))
            caret = Text(" " * (len(gutter) - 2) + "| ", style="blue")
            caret.append(" " * start + "^" * max(1, width), style="bold red")
            console.print(caret)
            if f.fix is not None and show_fix_hints:
                console.print(Text(" " * (len(gutter) - 2) + "= help: ", style="blue")
                              + Text(f"{f.fix.title}{_fix_note(f)}"))
            if note is not None:
                console.print(Text(" " * (len(gutter) - 2) + "= ", style="blue")
                              + Text(f"{note[0]}: ", style=_CONFIRM_STYLE.get(note[0], "")) + Text(note[1]))
            console.print()
    if quiet:
        return
    if confirm_summary:
        console.print(Text(confirm_summary, style="bold"))
    if fix_summary:
        console.print(Text(fix_summary, style="bold"))
    checked_note = f" ({_plural(checked, 'file')} checked)" if checked is not None else ""
    if total:
        files = sum(1 for res in results if res.findings)
        console.print(Text(f"Found {_plural(total, 'finding')} in {_plural(files, 'file')}{checked_note}.",
                           style="bold"))
        extra = []
        if fixable_safe:
            extra.append(f"{fixable_safe} fixable with --fix")
        if fixable_unsafe:
            extra.append(f"{fixable_unsafe} fixable only with --fix --unsafe-fixes")
        if extra:
            console.print(Text(f"Of these, {'; '.join(extra)}."))
        for code in sorted(counts):
            console.print(Text(f"  {code}  {_symbol(code):<40} {counts[code]:>4}"))
    for note in notes:
        console.print(Text(f"Note: {note}."))
    if total:
        return
    if checked == 0:
        console.print(Text("No files were checked.", style="bold yellow"))
    elif notes:
        console.print(Text(f"No findings to show{checked_note}.", style="bold"))
    else:
        console.print(Text(f"All checks passed{checked_note}.", style="bold green"))


def _console(out: TextIO, color: Optional[bool]):
    """``(console, Text)`` for :func:`render_text`: rich's, or, for a stream rich would not treat
    as a terminal (a pipe, a file: what pre-commit and CI read), a plain writer that prints the
    same characters without importing rich."""
    if _plain(out, color):
        return _PlainConsole(out, color), _PlainText
    from rich.console import Console
    from rich.text import Text
    return Console(file=out, highlight=False, soft_wrap=True, force_terminal=color,
                   no_color=(color is False) or None, emoji=False), Text


def _plain(out: TextIO, color: Optional[bool]) -> bool:
    """rich would write no escape codes: colour is off, or ``out`` is not a terminal and nothing
    makes rich treat it as one (``FORCE_COLOR``, ``TTY_COMPATIBLE``; IPython, where rich may
    display through Jupyter, keeps rich)."""
    import builtins
    if color is True or hasattr(builtins, "get_ipython"):
        return False
    if color is False:
        return True
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    isatty = getattr(out, "isatty", None)
    try:
        return isatty is None or not isatty()
    except ValueError:
        return True


# what rich leaves out of any text it prints (rich.control.STRIP_CONTROL_CODES: BEL, BS, VT, FF, CR)
_RICH_STRIPS = {c: None for c in (7, 8, 11, 12, 13)}


class _PlainText:
    """The part of rich's ``Text`` that :func:`render_text` uses, without styles (not shown)."""

    __slots__ = ("plain",)

    def __init__(self, text: str = "", style: str = "") -> None:
        self.plain = text.translate(_RICH_STRIPS)

    def append(self, text: str, style: str = "") -> "_PlainText":
        self.plain += text.translate(_RICH_STRIPS)
        return self

    def __add__(self, other: "_PlainText") -> "_PlainText":
        joined = _PlainText()
        joined.plain = self.plain + other.plain
        return joined


class _PlainConsole:
    """Prints :class:`_PlainText` as rich prints text to a stream that is not a terminal with
    ``soft_wrap``: each line as it is.  A line with a tab goes through rich itself (it expands
    tabs by display cells)."""

    def __init__(self, out: TextIO, color: Optional[bool]) -> None:
        self.out, self.color, self.rich = out, color, None

    def print(self, text: Optional[_PlainText] = None) -> None:
        if text is None:
            self.out.write("\n")
        elif "\t" not in text.plain:
            self.out.write(text.plain + "\n")
        else:
            from rich.console import Console
            from rich.text import Text
            if self.rich is None:
                self.rich = Console(file=self.out, highlight=False, soft_wrap=True, force_terminal=self.color,
                                    no_color=(self.color is False) or None, emoji=False)
            self.rich.print(Text(text.plain))


# ---------------------------------------------------------------- statistics
def statistics(results) -> List[dict]:
    """Findings per rule, most frequent first: code, symbol, count, fixable (with --fix)."""
    counts: Dict[str, int] = collections.Counter()
    fixable: Dict[str, int] = collections.Counter()
    for res in results:
        for f in res.findings:
            counts[f.code] += 1
            if f.fix is not None and f.fix.applicability == SAFE:
                fixable[f.code] += 1
    return [{"code": c, "symbol": _symbol(c), "count": n, "fixable": fixable[c]}
            for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def render_statistics(fmt: str, results, out: TextIO) -> None:
    rows = statistics(results)
    if fmt in ("json", "sarif"):
        json.dump(rows, out, indent=2)
        out.write("\n")
        return
    for r in rows:
        mark = " [*]" if r["fixable"] else ""
        out.write(f"{r['count']:>5}  {r['code']}  {r['symbol']}{mark}\n")


# ---------------------------------------------------------------- json
def _finding_dict(f: Finding, source) -> dict:
    d = f.to_dict(source)
    cell, line = cell_of(source, f.line)
    if cell is not None:        # a notebook: line numbers count within the cell
        end_cell, end_line = cell_of(source, f.end_line)
        d.update(cell=cell, line=line, end_line=end_line if end_cell == cell else line)
        for e, entry in zip(f.fix.edits if f.fix is not None else (), (d.get("fix") or {}).get("edits", ())):
            for end, offset in (("start", e.start), ("end", e.end)):
                if end in entry:    # the offsets stay those of the joined text (what --fix applies)
                    c, ln, col = source.cell_location(offset)
                    entry[end] = {"cell": c, "line": ln, "col": col + 1}
    return d


def render_json(results, out: TextIO) -> None:
    data = [_finding_dict(f, res.source) for res in results for f in res.findings]
    json.dump(data, out, indent=2, ensure_ascii=False)
    out.write("\n")


# ---------------------------------------------------------------- github
def _gh_escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_escape_prop(s: str) -> str:
    return _gh_escape_data(s).replace(":", "%3A").replace(",", "%2C")


def render_github(results, out: TextIO) -> None:
    for res in results:
        if res.error:
            out.write(f"::error file={_gh_escape_prop(res.path)},title=jaxlint::{_gh_escape_data(res.error)}\n")
        for f in res.findings:
            cell, line = cell_of(res.source, f.line)
            if cell is None:
                span = f"line={f.line},col={f.col + 1},endLine={f.end_line},endColumn={f.end_col + 1}"
                title = f"{f.code} {_symbol(f.code)}"
            else:
                span = f"line={line},col={f.col + 1}"
                title = f"{f.code} {_symbol(f.code)} (cell {cell})"
            props = f"file={_gh_escape_prop(f.path)},{span},title={_gh_escape_prop(title)}"
            note = _confirm_note(f)
            extra = f" [{note[0]}: {note[1]}]" if note is not None else ""
            out.write(f"::warning {props}::{_gh_escape_data(f'{f.code} {f.message}{extra}')}\n")


# ---------------------------------------------------------------- sarif
def _uri(path: str) -> str:
    p = path.replace(os.sep, "/")
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            p = rel.replace(os.sep, "/")
        else:
            return "file://" + p
    if p.startswith("./"):
        p = p[2:]
    return p


def sarif_document(results) -> dict:
    from .checkers import REGISTRY, all_rules
    rules = all_rules()
    index = {r.code: i for i, r in enumerate(rules)}
    driver_rules = []
    pseudo = sorted({f.code for res in results for f in res.findings if f.code not in REGISTRY})
    for r in rules:
        sections = r.doc_sections()
        driver_rules.append({
            "id": r.code,
            "name": r.symbol,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": sections.get("Why is this bad?", r.summary)},
            "help": {"text": sections.get("Use instead", r.summary), "markdown": r.markdown()},
            "helpUri": f"https://github.com/jaxlint/jaxlint/blob/main/docs/rules/{r.code}.md",
            "defaultConfiguration": {"level": "warning", "enabled": r.default_enabled},
            "properties": {"tags": ["jax", r.symbol]},
        })
    for code in pseudo:
        symbol, text = PSEUDO_RULES.get(code, (code.lower(), code))
        index[code] = len(driver_rules)
        driver_rules.append({"id": code, "name": symbol, "shortDescription": {"text": text},
                             "defaultConfiguration": {"level": "warning", "enabled": False}})
    sarif_results = []
    notifications = []
    for res in results:
        if res.error:
            notifications.append({
                "level": "error",
                "message": {"text": f"{res.path}: {res.error}"},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(res.path)}}}],
            })
        for f in res.findings:
            item = {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": "warning",
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": f.line, "startColumn": f.col + 1,
                                   "endLine": f.end_line, "endColumn": f.end_col + 1},
                    }
                }],
                "properties": {"confidence": f.confidence, "profile": f.profile},
            }
            cell, line = cell_of(res.source, f.line)
            if cell is not None:
                item["properties"].update(cell=cell, line_in_cell=line)
            if f.basis is not None:
                item["properties"]["basis"] = f.basis
            if f.confirmation is not None:
                item["properties"]["confirmation"] = dict(f.confirmation)
            if f.fix is not None and res.source is not None:
                src = res.source
                replacements = []
                for e in f.fix.edits:
                    sl, sc = src.position(e.start)
                    el, ec = src.position(e.end)
                    replacements.append({
                        "deletedRegion": {"startLine": sl, "startColumn": sc + 1, "endLine": el, "endColumn": ec + 1},
                        "insertedContent": {"text": e.content},
                    })
                item["fixes"] = [{
                    "description": {"text": f"{f.fix.title} ({f.fix.applicability})"},
                    "artifactChanges": [{"artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                                         "replacements": replacements}],
                }]
            sarif_results.append(item)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "jaxlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": "https://github.com/jaxlint/jaxlint",
                "rules": driver_rules,
            }},
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + os.getcwd().replace(os.sep, "/") + "/"}},
            "results": sarif_results,
            "invocations": [{
                "executionSuccessful": not notifications,
                "toolExecutionNotifications": notifications,
            }],
        }],
    }


def render_sarif(results, out: TextIO) -> None:
    json.dump(sarif_document(results), out, indent=2, ensure_ascii=False)
    out.write("\n")


# ---------------------------------------------------------------- shared by the line formats
def _with_note(f: Finding) -> str:
    """The message, with the runtime confirmation's status and evidence when there is one."""
    note = _confirm_note(f)
    if note is None:
        return f.message
    status, detail = note
    return f"{f.message} [{status}: {detail}]" if detail else f"{f.message} [{status}]"


def _checked_count(results) -> int:
    return sum(1 for res in results if res.source is not None or getattr(res, "cached", False))


def _report_path(path: str, root: Optional[str]) -> str:
    """``path`` relative to ``root`` (forward slashes), as CI systems that know only the
    repository expect; a path outside ``root`` stays as it was given."""
    if root is None:
        return path.replace(os.sep, "/")
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == ".." or rel.startswith(".." + os.sep):
        return path.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def _error_line(error: str) -> int:
    """The line a file error names (``syntax error at 3:5``), else 1."""
    m = re.search(r"\bat (?:line )?(\d+)", error)
    return int(m.group(1)) if m else 1


# ---------------------------------------------------------------- concise
def render_concise(results, out: TextIO, **_ignored) -> None:
    """One line per finding (``path:line:col: CODE message``, ``[*]`` when ``--fix`` fixes it),
    then one summary line."""
    total = files = fixable = 0
    for res in results:
        if res.findings:
            files += 1
        for f in res.findings:
            total += 1
            mark = ""
            if f.fix is not None and f.fix.applicability == SAFE:
                mark, fixable = " [*]", fixable + 1
            conf = "" if f.confidence == "certain" else f" [{f.confidence}]"
            out.write(f"{location(f, res.source)}: {f.code}{mark} {_with_note(f)}{conf}\n")
    checked = _checked_count(results)
    if total:
        out.write(f"Found {_plural(total, 'finding')} in {_plural(files, 'file')} "
                  f"({_plural(checked, 'file')} checked).\n")
        if fixable:
            out.write(f"[*] {fixable} fixable with --fix.\n")
    elif checked:
        out.write(f"All checks passed ({_plural(checked, 'file')} checked).\n")


# ---------------------------------------------------------------- pylint
# pylint's `--output-format=parseable` line (pylint.reporters.text.ParseableTextReporter), which
# editors, Jenkins' Warnings plug-in and other pylint consumers read
PYLINT_LINE = "{path}:{line}: [{msg_id}({symbol}), {obj}] {msg}"


def render_pylint(results, out: TextIO) -> None:
    for res in results:
        if res.error:     # what pylint itself says of a file it cannot parse or read
            msg_id, symbol = ("E0001", "syntax-error") if "syntax error" in res.error else ("F0001", "fatal")
            out.write(PYLINT_LINE.format(path=res.path, line=_error_line(res.error), msg_id=msg_id,
                                         symbol=symbol, obj="", msg=res.error) + "\n")
        for f in res.findings:
            cell, line = cell_of(res.source, f.line)
            where = "" if cell is None else f" (cell {cell})"
            out.write(PYLINT_LINE.format(path=f.path, line=line, msg_id=f.code, symbol=_symbol(f.code),
                                         obj="", msg=_with_note(f) + where) + "\n")


# ---------------------------------------------------------------- gitlab
# GitLab code quality report: a JSON array of issues, each with description, check_name,
# fingerprint, severity (info, minor, major, critical, blocker) and location.path/lines.begin
GITLAB_SEVERITY = {"certain": "major", "inferred": "minor"}


def gitlab_report(results, root: Optional[str] = None) -> List[dict]:
    """The issues of a GitLab code quality report.  Paths are relative to ``root`` (default:
    ``$CI_PROJECT_DIR`` when set, else the current directory), as GitLab matches them against
    the repository.  A fingerprint is stable while the flagged line's text is (the same key a
    baseline uses), so moving code keeps an issue and GitLab reports only new ones as new."""
    if root is None:
        root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    issues: List[dict] = []
    seen: Dict[str, int] = collections.Counter()

    def fingerprint(*parts: str) -> str:
        key = "\0".join(parts)
        seen[key] += 1
        return hashlib.sha256(f"{key}\0{seen[key]}".encode("utf-8", "surrogatepass")).hexdigest()

    for res in results:
        path = _report_path(res.path, root)
        if res.error:
            issues.append({
                "type": "issue", "check_name": "jaxlint/file-not-checked",
                "description": f"jaxlint could not check this file: {res.error}",
                "categories": ["Bug Risk"], "severity": "critical",
                "fingerprint": fingerprint(path, "error", res.error),
                "location": {"path": path, "lines": {"begin": _error_line(res.error)}},
            })
        for f in res.findings:
            cell, line = cell_of(res.source, f.line)
            text = res.source.line_text(f.line).strip() if res.source is not None else ""
            description = f"{f.code} {_with_note(f)}" + ("" if cell is None else f" (cell {cell})")
            issues.append({
                "type": "issue", "check_name": f"{f.code} {_symbol(f.code)}", "description": description,
                # JAX5xx: compilation (recompiles, unrolled loops); the rest: wrong results or errors
                "categories": ["Performance"] if f.code.startswith("JAX5") else ["Bug Risk"],
                "severity": GITLAB_SEVERITY.get(f.confidence, "minor"),
                "fingerprint": fingerprint(path, f.code, text, "" if cell is None else str(cell)),
                "location": {"path": path, "lines": {"begin": line,
                                                     "end": line + (f.end_line - f.line)}},
            })
    return issues


def render_gitlab(results, out: TextIO) -> None:
    json.dump(gitlab_report(results), out, indent=2, ensure_ascii=False)
    out.write("\n")


# ---------------------------------------------------------------- junit
def _xml_text(s: str) -> str:
    """``s`` without the characters XML 1.0 cannot hold (control characters, lone surrogates)."""
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "\ufffd", s)


def junit_document(results):
    """The JUnit XML report (an :mod:`xml.etree.ElementTree` element ``<testsuites>``): one
    ``<testsuite>`` per file, one failed ``<testcase>`` per finding, one passing ``<testcase>``
    for a file without findings, an ``<error>`` for a file that could not be checked."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="jaxlint")
    totals = collections.Counter()
    for res in results:
        suite = ET.SubElement(root, "testsuite", name=_xml_text(res.path))
        counts = collections.Counter()
        if res.error:
            case = ET.SubElement(suite, "testcase", name="jaxlint", classname=_xml_text(res.path),
                                 file=_xml_text(res.path), line=str(_error_line(res.error)))
            ET.SubElement(case, "error", message=_xml_text(res.error), type="file-not-checked").text = \
                _xml_text(f"{res.path}: {res.error}")
            counts["tests"] += 1
            counts["errors"] += 1
        for f in res.findings:
            cell, line = cell_of(res.source, f.line)
            where = location(f, res.source)
            case = ET.SubElement(suite, "testcase", name=_xml_text(f"{f.code} {_symbol(f.code)} at {where}"),
                                 classname=_xml_text(res.path), file=_xml_text(f.path), line=str(line))
            body = f"{where}: {f.code} {_with_note(f)}"
            if res.source is not None:
                body += "\n" + res.source.line_text(f.line)
            ET.SubElement(case, "failure", message=_xml_text(f"{f.code} {_with_note(f)}"), type=f.code).text = \
                _xml_text(body)
            counts["tests"] += 1
            counts["failures"] += 1
        if not res.error and not res.findings:
            ET.SubElement(suite, "testcase", name="jaxlint", classname=_xml_text(res.path),
                          file=_xml_text(res.path))
            counts["tests"] += 1
        for key in ("tests", "failures", "errors"):
            suite.set(key, str(counts[key]))
        totals.update(counts)
    for key in ("tests", "failures", "errors"):
        root.set(key, str(totals[key]))
    return root


def render_junit(results, out: TextIO) -> None:
    import xml.etree.ElementTree as ET

    root = junit_document(results)
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode"))
    out.write("\n")


def render(fmt: str, results, out: TextIO, **kw) -> None:
    if fmt == "text":
        render_text(results, out, **kw)
    elif fmt == "concise":
        render_concise(results, out)
    elif fmt == "json":
        render_json(results, out)
    elif fmt == "github":
        render_github(results, out)
    elif fmt == "sarif":
        render_sarif(results, out)
    elif fmt == "gitlab":
        render_gitlab(results, out)
    elif fmt == "junit":
        render_junit(results, out)
    elif fmt == "pylint":
        render_pylint(results, out)
    else:  # pragma: no cover - argparse restricts choices
        raise ValueError(fmt)
