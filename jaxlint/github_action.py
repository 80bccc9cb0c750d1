"""The lint step of the GitHub Action (``action.yml``): one jaxlint run gives both the
pull-request annotations and, when asked, the SARIF file for code scanning.

Run as a script (``python jaxlint/github_action.py`` from the action's checkout) or as
``python -m jaxlint.github_action``; it needs only the standard library and a ``jaxlint`` that
knows ``--format sarif``, so it also drives an older ``jaxlint-static`` pinned with the action's
``version`` input.  It reads its inputs from the environment:

``JAXLINT_ARGS``
    paths and options for ``jaxlint check``, split like a POSIX shell splits words (quotes and
    backslashes are honoured: ``"my src/" --select JAX1``), with no expansion of variables,
    globs or commands.
``JAXLINT_SARIF``
    where to write the SARIF file (relative to the working directory); empty for none.
``GITHUB_WORKSPACE``
    the repository's checkout: file names in the annotations and the SARIF file are made
    relative to it, so a ``working-directory`` below the repository root still points at the
    right files.
``GITHUB_OUTPUT``
    where the step's outputs go: ``sarif-file``, the SARIF file's absolute path.

The exit status is jaxlint's (0 clean, 1 findings, 2 a file could not be checked or bad options).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from typing import Dict, Iterable, List, Optional, Sequence
from urllib.parse import unquote, urlparse

# options the action sets itself
RESERVED = ("--format", "--output-file", "-o", "--statistics", "--diff", "--fix", "--add-noqa", "--write-baseline")


class ActionError(Exception):
    pass


def split_args(text: str) -> List[str]:
    """``text`` split into words like a POSIX shell does, without any expansion."""
    try:
        words = shlex.split(text or "", comments=False, posix=True)
    except ValueError as exc:      # an unclosed quote
        raise ActionError(f"args: {exc} in {text!r}") from None
    for w in words:
        name = w.split("=", 1)[0]
        if name in RESERVED or (w.startswith("-o") and not w.startswith("--")):
            raise ActionError(f"args: {name} is set by the action itself (annotations, and SARIF with "
                              f"`sarif: \"true\"`); leave it out")
    return words


# ------------------------------------------------------------------ annotations from SARIF
def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _local_path(uri: str, base: Optional[str]) -> str:
    """The file path a SARIF artifact URI names, relative URIs joined to ``base`` (a directory)."""
    if uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    path = unquote(uri)
    return os.path.join(base, path) if base else path


def _relative(path: str, root: Optional[str]) -> str:
    if root is None:
        return path.replace(os.sep, "/")
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == ".." or rel.startswith(".." + os.sep):
        return os.path.abspath(path).replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def _srcroot(doc: dict) -> Optional[str]:
    bases = (doc.get("runs") or [{}])[0].get("originalUriBaseIds", {})
    uri = bases.get("%SRCROOT%", {}).get("uri")
    return _local_path(uri, None) if uri else None


def rebase_sarif(doc: dict, root: str) -> dict:
    """``doc`` with every artifact URI relative to ``root`` (the repository), which code scanning
    resolves them against, and ``%SRCROOT%`` set to ``root``."""
    base = _srcroot(doc) or os.getcwd()

    def fix(loc: dict) -> None:
        if "uri" not in loc:
            return
        rel = _relative(_local_path(loc["uri"], base), root)
        if rel.startswith("/"):        # outside the repository: an absolute file URI
            loc["uri"] = "file://" + rel
            loc.pop("uriBaseId", None)
        else:
            loc["uri"], loc["uriBaseId"] = rel, "%SRCROOT%"

    for run in doc.get("runs", []):
        for result in run.get("results", []):
            for loc in result.get("locations", []):
                fix(loc.get("physicalLocation", {}).get("artifactLocation", {}))
            for f in result.get("fixes", []):
                for change in f.get("artifactChanges", []):
                    fix(change.get("artifactLocation", {}))
        for inv in run.get("invocations", []):
            for note in inv.get("toolExecutionNotifications", []):
                for loc in note.get("locations", []):
                    fix(loc.get("physicalLocation", {}).get("artifactLocation", {}))
        run["originalUriBaseIds"] = {"%SRCROOT%": {"uri": "file://" + os.path.abspath(root).rstrip("/") + "/"}}
    return doc


def annotations(doc: dict, root: Optional[str] = None) -> Iterable[str]:
    """GitHub workflow commands (``::warning file=...::...``) for a jaxlint SARIF document: the
    lines ``jaxlint --format github`` prints for the same run, file names relative to ``root``
    (default: the current directory)."""
    base = _srcroot(doc)
    root = root or os.getcwd()
    run = (doc.get("runs") or [{}])[0]
    rules = run.get("tool", {}).get("driver", {}).get("rules", [])
    names: Dict[str, str] = {r["id"]: r.get("name", r["id"].lower()) for r in rules}
    for inv in run.get("invocations", []):
        for note in inv.get("toolExecutionNotifications", []):
            locs = note.get("locations") or [{}]
            uri = locs[0].get("physicalLocation", {}).get("artifactLocation", {}).get("uri", "")
            path = _relative(_local_path(uri, base), root) if uri else ""
            text = note.get("message", {}).get("text", "")
            # jaxlint writes "PATH: why"; the annotation names the file itself
            head, sep, why = text.partition(": ")
            if sep and _relative(_local_path(head, base), root) == path:
                text = why
            yield f"::error file={_escape_prop(path)},title=jaxlint::{_escape_data(text)}"
    for result in run.get("results", []):
        code = result.get("ruleId", "")
        loc = result["locations"][0]["physicalLocation"]
        path = _relative(_local_path(loc["artifactLocation"]["uri"], base), root)
        region = loc.get("region", {})
        props = result.get("properties", {})
        title = f"{code} {names.get(code, code.lower())}"
        if "cell" in props:
            span = f"line={props.get('line_in_cell', region.get('startLine', 1))},col={region.get('startColumn', 1)}"
            title += f" (cell {props['cell']})"
        else:
            span = (f"line={region.get('startLine', 1)},col={region.get('startColumn', 1)},"
                    f"endLine={region.get('endLine', region.get('startLine', 1))},"
                    f"endColumn={region.get('endColumn', region.get('startColumn', 1))}")
        message = f"{code} {result.get('message', {}).get('text', '')}"
        confirmation = props.get("confirmation")
        if confirmation:
            status = confirmation.get("status", "unreached")
            detail = confirmation.get("evidence") if status != "unreached" else confirmation.get("reason")
            message += f" [{status}: {detail or ''}]"
        yield f"::warning file={_escape_prop(path)},{span},title={_escape_prop(title)}::{_escape_data(message)}"


# ------------------------------------------------------------------ the step
def jaxlint_command() -> List[str]:
    return [sys.executable, "-m", "jaxlint"]


def run(env: Optional[Dict[str, str]] = None, out=None, err=None) -> int:
    env = dict(os.environ if env is None else env)
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = split_args(env.get("JAXLINT_ARGS", "."))
    except ActionError as exc:
        err.write(f"jaxlint action: error: {exc}\n")
        return 2
    workspace = env.get("GITHUB_WORKSPACE") or None
    sarif = env.get("JAXLINT_SARIF", "").strip()
    target = os.path.abspath(sarif) if sarif else None
    with tempfile.TemporaryDirectory(prefix="jaxlint-action-") as tmp:
        report = target or os.path.join(tmp, "jaxlint.sarif")
        cmd = jaxlint_command() + ["check", "--format", "sarif", "--no-progress", "--output-file", report] + args
        rc = subprocess.call(cmd, env=env)
        try:
            with open(report, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            return rc      # jaxlint said why on stderr (bad options, an unreadable config)
        for line in annotations(doc, workspace):
            out.write(line + "\n")
        out.flush()
        if target is not None:
            if workspace:
                doc = rebase_sarif(doc, workspace)
            with open(target, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2, ensure_ascii=False)
                fh.write("\n")
            output = env.get("GITHUB_OUTPUT")
            if output:
                with open(output, "a", encoding="utf-8") as fh:
                    fh.write(f"sarif-file={target}\n")
    return rc


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run()


if __name__ == "__main__":
    sys.exit(main())
