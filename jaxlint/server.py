"""The jaxlint language server (LSP over stdio, built on pygls).

``jaxlint server`` (or ``python -c "from jaxlint.server import main; main()"``)
speaks the Language Server Protocol on stdin/stdout and offers, for Python
documents:

* diagnostics on open, on save and as you type (once a burst of changes pauses
  for :data:`CHANGE_DELAY` seconds): one per finding, severity Warning
  (Information for findings of ``inferred`` confidence), ``code`` the rule code,
  ``source`` ``"jaxlint"`` and ``codeDescription`` a link to the rule's page;
  a file that cannot be checked (syntax error, bad ``[tool.jaxlint]``) gets one
  diagnostic saying so rather than an empty, "clean" list;
* quick fixes (``textDocument/codeAction``) from the rules' own fixes: a safe
  fix is marked preferred (what "fix all"/"auto fix" picks), an unsafe one is
  offered with "(unsafe)" in its title and never preferred;
* a "suppress with ``# noqa: CODE``" action that appends the code to an existing
  ``# noqa: X`` list or adds the comment at the end of the finding's line
  (not offered where a comment would land inside a string or after a backslash);
* a ``source.fixAll.jaxlint`` action (what editors' fix-on-save asks for) that
  applies every safe fix, as ``jaxlint --fix`` would;
* hover on a diagnostic's range: the rule's summary, why it matters, the fix
  and a link to the documentation.

The document is linted with :func:`jaxlint.engine.lint_source` with the
configuration of the nearest ``pyproject.toml`` that has ``[tool.jaxlint]``
(``select``/``ignore``/``per-file-ignores``/``exclude``/rule settings), re-read
when it changes on disk.  In a project (a folder with ``pyproject.toml``,
``setup.cfg``, ``setup.py`` or ``.git``) the cross-module index of a
:class:`jaxlint.workspace.Workspace` is built in a worker thread; the open
documents are then linted again with its lint function (what other modules tell
about them), and the index is rebuilt after each save.  Positions follow the encoding negotiated with the client
(UTF-16 by default); jaxlint's own columns are characters.

Diagnostics are published only for the document's current version; when the project index
is ready, an open document gets a second set only if the index changed its diagnostics.  Every request is answered: invalid params (a hover without a
position, a negative line) with InvalidParams, a request after ``shutdown`` with InvalidRequest,
a document the client never opened with an empty result, a jaxlint bug with a one-line
InternalError (the traceback goes to stderr, never into the reply).  A message whose
``Content-Length`` is over :data:`MAX_MESSAGE_BYTES` is skipped, not read into memory.  ``exit``
ends the process at once, even while a project index is being built (in a daemon thread).
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .analysis import INFERRED, SourceError, SourceFile
from .checkers import REGISTRY, Finding
from .config import Config, ConfigError, find_config, load_config
from .engine import InternalError, lint_source
from .fixes.applier import fix_text
from .fixes.edits import SAFE, Edit
from .fixes.noqa import add_noqa_edits

log = logging.getLogger("jaxlint.server")

NAME = "jaxlint"
SOURCE = "jaxlint"
DOCS_URL = "https://github.com/jaxlint/jaxlint/blob/main/docs/rules/{code}.md"

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"
# seconds of quiet after a change before the document is linted again
CHANGE_DELAY = 0.2
# the code action kind of "apply every safe fix" (editors' fix-on-save asks for source.fixAll)
FIX_ALL = "source.fixAll.jaxlint"
# the largest message read (a whole document in didOpen/didChange); a larger Content-Length is
# skipped with a note on stderr rather than allocated
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

def rule_url(code: str) -> str:
    return DOCS_URL.format(code=code)


# ----------------------------------------------------------------- positions
def to_client_col(line: str, col: int, encoding: str) -> int:
    """A character column of ``line`` in the client's position units."""
    prefix = line[:col]
    if encoding == UTF32:
        return len(prefix)
    if encoding == UTF8:
        return len(prefix.encode("utf-8", "surrogatepass"))
    return len(prefix) + sum(1 for c in prefix if ord(c) > 0xFFFF)


def from_client_col(line: str, units: int, encoding: str) -> int:
    """The character column of ``line`` at ``units`` client position units."""
    if encoding == UTF32:
        return min(units, len(line))
    seen = 0
    for i, c in enumerate(line):
        if seen >= units:
            return i
        if encoding == UTF8:
            seen += len(c.encode("utf-8", "surrogatepass"))
        else:
            seen += 2 if ord(c) > 0xFFFF else 1
    return len(line)


# ----------------------------------------------------------------- checking
@dataclass
class Checked:
    """One lint of one version of a document."""

    uri: str
    version: Optional[int]
    text: str
    source: Optional[SourceFile] = None
    findings: List[Finding] = field(default_factory=list)
    error: Optional[str] = None          # why the document could not be checked
    skipped: bool = False                 # excluded by the configuration / not Python
    project: bool = False                 # linted with the project index (cross-module facts)
    relint: Optional[Callable[[SourceFile], List[Finding]]] = None   # the same lint, for fix passes


@dataclass
class _ProjectIndex:
    workspace: Optional[object] = None    # a jaxlint.workspace.Workspace whose project is analysed
    stale: bool = False                   # a file was saved since it was built
    building: bool = False
    failed: bool = False
    unavailable: bool = False             # no index for this root (too many files, no modules)


class Linter:
    """Lints document texts with the configuration of the project each belongs to."""

    def __init__(self, root: Optional[str] = None):
        self.root = root
        self._configs: Dict[Optional[str], Tuple[float, Config]] = {}
        self.projects: Dict[str, _ProjectIndex] = {}

    # ------------------------------------------------------------ the project index
    def project_root(self, path: Optional[str]) -> Optional[str]:
        if path is None:
            return None
        try:
            from .analysis.project import find_root
        except ImportError:  # pragma: no cover - no project analysis in this version
            return None
        return find_root(path)

    def wants_build(self, root: Optional[str]) -> bool:
        """Whether the index of ``root`` is missing or stale and no build is under way."""
        if root is None:
            return False
        index = self.projects.setdefault(root, _ProjectIndex())
        return ((index.workspace is None or index.stale) and not index.building and not index.failed
                and not index.unavailable)

    def build_project(self, root: str):
        """A :class:`jaxlint.workspace.Workspace` for the project at ``root`` with its index built
        and analysed (the modules as saved on disk), or None (too big, no modules).

        Pure: touches no state of the linter, so it may run in a worker thread.  No results
        cache: the editor never writes ``.jaxlint_cache`` into the project on its own."""
        from .workspace import Workspace

        cfg = self.config_for(os.path.join(root, "pyproject.toml"))
        ws = Workspace(traced_functions=tuple(getattr(cfg, "traced_functions", None) or ()),
                       exclude=cfg.exclude, use_cache=False, root=root, batch=False)
        project = ws.project_for(os.path.join(root, "pyproject.toml"))
        if project is None or not project.modules:
            return None
        project.analyse()
        for path in list(project.models):
            project.release(path)    # keep the seeds, not every module's model
        return ws

    def _lint_function(self, path: Optional[str], rules, settings) -> Tuple[Callable[[SourceFile], List[Finding]], bool]:
        """``(lint, with_project)``: the workspace's project-aware lint when the index of the
        file's project is ready, else the file alone."""
        index = self.projects.get(self.project_root(path) or "") if path is not None else None
        if index is not None and index.workspace is not None:
            return index.workspace.lint_function(path, rules, settings), True
        return (lambda src: lint_source(src, rules, settings)), False

    def config_for(self, path: Optional[str]) -> Config:
        start = path if path else (self.root or os.getcwd())
        found = find_config([start])
        mtime = os.stat(found).st_mtime if found else 0.0
        cached = self._configs.get(found)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        cfg = load_config(found)
        if found is None and self.root:
            cfg.root = self.root
        self._configs[found] = (mtime, cfg)
        return cfg

    def check(self, uri: str, text: str, version: Optional[int] = None, path: Optional[str] = None) -> Checked:
        result = Checked(uri, version, text)
        display = path or uri
        try:
            cfg = self.config_for(path)
        except (ConfigError, OSError) as exc:
            result.error = f"configuration error: {exc}"
            return result
        if path is not None and _excluded(path, cfg):
            result.skipped = True
            return result
        rules = cfg.rules_for(path)
        source = SourceFile(display, text)
        result.source = source

        lint, result.project = self._lint_function(path, rules, cfg.settings)

        def relint(src: SourceFile) -> List[Finding]:
            try:
                return lint(src)
            except (SourceError, InternalError):
                raise
            except Exception as exc:  # the project index must never cost the file its diagnostics
                log.warning("project-aware lint failed for %s, linting the file alone: %s", path, exc)
                return lint_source(src, rules, cfg.settings)

        result.relint = relint
        try:
            result.findings = relint(source)
        except SourceError as exc:
            result.error = str(exc)
        except InternalError as exc:
            result.error = str(exc)
        return result


def _excluded(path: str, cfg: Config) -> bool:
    try:
        from .discovery import is_excluded
    except ImportError:  # pragma: no cover - older discovery module
        return False
    return is_excluded(path, cfg.exclude, cfg.root)


# ----------------------------------------------------------------- LSP payloads
def _lsp():
    from lsprotocol import types
    return types


def finding_range(source: SourceFile, f: Finding, encoding: str):
    t = _lsp()
    return t.Range(
        start=t.Position(line=f.line - 1, character=to_client_col(source.line_text(f.line), f.col, encoding)),
        end=t.Position(line=f.end_line - 1,
                       character=to_client_col(source.line_text(f.end_line), f.end_col, encoding)))


def offset_position(source: SourceFile, offset: int, encoding: str):
    t = _lsp()
    line, col = source.position(offset)
    return t.Position(line=line - 1, character=to_client_col(source.line_text(line), col, encoding))


def diagnostic(source: SourceFile, f: Finding, encoding: str):
    t = _lsp()
    severity = t.DiagnosticSeverity.Information if f.confidence == INFERRED else t.DiagnosticSeverity.Warning
    return t.Diagnostic(
        range=finding_range(source, f, encoding),
        message=f.message,
        severity=severity,
        code=f.code,
        code_description=t.CodeDescription(href=rule_url(f.code)),
        source=SOURCE,
        data={"symbol": f.symbol,
              "fix": f.fix.applicability if f.fix is not None else None},
    )


def diagnostics(checked: Checked, encoding: str) -> list:
    t = _lsp()
    if checked.skipped:
        return []
    if checked.error is not None:
        line = 0
        m = re.search(r"syntax error at (\d+):", checked.error)
        if m:
            line = max(0, int(m.group(1)) - 1)
        return [t.Diagnostic(
            range=t.Range(start=t.Position(line=line, character=0), end=t.Position(line=line, character=0)),
            message=f"jaxlint could not check this file: {checked.error}",
            severity=t.DiagnosticSeverity.Information if m else t.DiagnosticSeverity.Error,
            source=SOURCE)]
    return [diagnostic(checked.source, f, encoding) for f in checked.findings]


def _overlaps(source: SourceFile, f: Finding, start: Tuple[int, int], end: Tuple[int, int]) -> bool:
    """Whether the finding's span touches [start, end] (1-based lines, character columns)."""
    fs, fe = (f.line, f.col), (f.end_line, f.end_col)
    return fs <= end and start <= fe


def _client_to_source(source: SourceFile, pos, encoding: str) -> Tuple[int, int]:
    line = pos.line + 1
    return line, from_client_col(source.line_text(line), pos.character, encoding)


def text_edit(source: SourceFile, e: Edit, encoding: str):
    t = _lsp()
    return t.TextEdit(range=t.Range(start=offset_position(source, e.start, encoding),
                                    end=offset_position(source, e.end, encoding)),
                      new_text=e.content)


def _workspace_edit(checked: Checked, edits: Sequence, versioned: bool):
    t = _lsp()
    if versioned:
        return t.WorkspaceEdit(document_changes=[t.TextDocumentEdit(
            text_document=t.OptionalVersionedTextDocumentIdentifier(uri=checked.uri, version=checked.version),
            edits=list(edits))])
    return t.WorkspaceEdit(changes={checked.uri: list(edits)})


def noqa_edit(source: SourceFile, f: Finding) -> Optional[Edit]:
    """The edit that suppresses ``f`` with ``# noqa: CODE`` on its line, or None where no
    comment can go (the line continues a string or ends with a backslash)."""
    edits, _added, _skipped = add_noqa_edits(source, [f])
    return edits[0] if len(edits) == 1 else None


def _wanted(only: Optional[Sequence[str]], kind: str) -> bool:
    """Whether a code action of ``kind`` answers a request for the kinds ``only``."""
    return only is None or any(kind == str(k) or kind.startswith(str(k) + ".") for k in only)


def fix_all_action(checked: Checked, encoding: str, versioned: bool = True):
    """One ``source.fixAll.jaxlint`` action applying every safe fix (as ``jaxlint --fix`` would),
    as a single edit over the changed region; None when nothing is fixable."""
    t = _lsp()
    source = checked.source
    if source is None or checked.relint is None or not any(
            f.fix is not None and f.fix.applicability == SAFE for f in checked.findings):
        return None
    try:
        report = fix_text(source, checked.relint, unsafe=False)
    except (SourceError, InternalError) as exc:
        log.warning("fix all failed for %s: %s", checked.uri, exc)
        return None
    old, new = source.text, report.text
    if new == old:
        return None
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    edit = Edit(start, end_old, new[start:end_new])
    n = report.total
    return t.CodeAction(title=f"jaxlint: apply {n} safe fix{'es' if n != 1 else ''}", kind=FIX_ALL,
                        edit=_workspace_edit(checked, [text_edit(source, edit, encoding)], versioned))


def code_actions(checked: Checked, rng, encoding: str, versioned: bool = True,
                 only: Optional[Sequence[str]] = None) -> list:
    """Quick fixes and noqa actions for the findings touching ``rng``; with ``only`` asking for
    ``source.fixAll`` (fix on save), the fix-all action."""
    t = _lsp()
    if checked.source is None or checked.error is not None or checked.skipped:
        return []
    out = []
    if only is not None and _wanted(only, FIX_ALL):
        action = fix_all_action(checked, encoding, versioned)
        if action is not None:
            out.append(action)
    if not _wanted(only, t.CodeActionKind.QuickFix):
        return out
    source = checked.source
    start = _client_to_source(source, rng.start, encoding)
    end = _client_to_source(source, rng.end, encoding)
    fixes, suppress = [], []
    for f in checked.findings:
        if not _overlaps(source, f, start, end):
            continue
        diag = diagnostic(source, f, encoding)
        if f.fix is not None:
            safe = f.fix.applicability == SAFE
            title = f"{f.code}: {f.fix.title}" + ("" if safe else " (unsafe)")
            fixes.append(t.CodeAction(
                title=title, kind=t.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=safe,
                edit=_workspace_edit(checked, [text_edit(source, e, encoding) for e in f.fix.edits], versioned)))
        edit = noqa_edit(source, f)
        if edit is not None:
            suppress.append(t.CodeAction(
                title=f"{f.code}: suppress with `# noqa: {f.code}`", kind=t.CodeActionKind.QuickFix,
                diagnostics=[diag], is_preferred=False,
                edit=_workspace_edit(checked, [text_edit(source, edit, encoding)], versioned)))
    return out + fixes + suppress


def hover_markdown(f: Finding) -> str:
    rule = REGISTRY.get(f.code)
    parts = [f"**{f.code}** `{f.symbol}` (jaxlint)"]
    if rule is not None and rule.summary:
        parts.append(rule.summary[0].upper() + rule.summary[1:] + ".")
    parts.append(f.message)
    if rule is not None:
        why = rule.doc_sections().get("Why is this bad?", "")
        if why:
            parts.append("**Why is this bad?** " + why.split("\n\n")[0].replace("\n", " "))
    if f.fix is not None:
        parts.append(f"**Fix** ({f.fix.applicability}): {f.fix.title}")
    parts.append(f"[{f.code} documentation]({rule_url(f.code)})")
    return "\n\n".join(parts)


def _plain(markdown: str) -> str:
    """The hover text for clients that show only plain text."""
    text = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1: \2", markdown)
    return text.replace("**", "").replace("\n\n---\n\n", "\n\n")


def hover(checked: Checked, pos, encoding: str, markdown: bool = True):
    t = _lsp()
    if checked.source is None or checked.error is not None or checked.skipped:
        return None
    source = checked.source
    here = _client_to_source(source, pos, encoding)
    hits = [f for f in checked.findings if (f.line, f.col) <= here <= (f.end_line, f.end_col)]
    if not hits:
        return None
    first = hits[0]
    value = "\n\n---\n\n".join(hover_markdown(f) for f in hits)
    content = (t.MarkupContent(kind=t.MarkupKind.Markdown, value=value) if markdown
               else t.MarkupContent(kind=t.MarkupKind.PlainText, value=_plain(value)))
    return t.Hover(contents=content, range=finding_range(source, first, encoding))


# ----------------------------------------------------------------- the server
def _path_of(uri: str) -> Optional[str]:
    if not uri.startswith("file:"):
        return None
    from pygls.uris import to_fs_path
    return to_fs_path(uri)


def _is_python(uri: str, language_id: Optional[str]) -> bool:
    if language_id is not None:
        return language_id == "python"
    path = uri.split("?", 1)[0]
    return path.endswith(".py")


def _run_build(linter: Linter, root: str):
    """``(workspace or None, error or None)``: never raises (it runs in a worker thread)."""
    try:
        return linter.build_project(root), None
    except Exception as exc:  # a bug in the project analysis must not take the server down
        return None, f"{type(exc).__name__}: {exc}"


class GuardedReader:
    """Standard input for the server's message loop, less the messages nobody should read: a
    ``Content-Length`` header over ``limit`` (or too long to be a number) is dropped, so the
    message's body is skipped as unrecognised header lines instead of being allocated."""

    _LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.I)

    def __init__(self, stream, limit: int = MAX_MESSAGE_BYTES):
        self.stream = stream
        self.limit = limit

    def readline(self) -> bytes:
        line = self.stream.readline()
        m = self._LENGTH.match(line)
        if m and (len(m.group(1)) > 15 or int(m.group(1)) > self.limit):
            log.error("a message of %s bytes was skipped (the limit is %d bytes)",
                      m.group(1)[:20].decode("ascii") + ("..." if len(m.group(1)) > 20 else ""), self.limit)
            return b"X-Jaxlint-Skipped: content-length over the limit\r\n"
        return line

    def read(self, n: int) -> bytes:
        return self.stream.read(min(n, self.limit))


class _Answered:
    """A request that was answered while it was read (its params did not fit): nothing to run."""

    jsonrpc = "2.0"


def _protocol_class():
    """pygls' LSP protocol, answering what it would leave unanswered: a request whose params do
    not fit its type (InvalidParams) and a request after ``shutdown`` (InvalidRequest)."""
    from lsprotocol import types as t
    from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
    from pygls.protocol import LanguageServerProtocol

    class Protocol(LanguageServerProtocol):
        def structure_message(self, data):
            try:
                return super().structure_message(data)
            except JsonRpcException as exc:
                if not (isinstance(data, dict) and "id" in data and "method" in data
                        and isinstance(data["id"], (int, str))):
                    raise
                error = exc if isinstance(exc, JsonRpcInvalidParams) else JsonRpcInvalidParams()
                self._send_response(data["id"], error=t.ResponseError(
                    code=error.code, message=f"invalid params for {data['method']}"))
                return _Answered()

        def handle_message(self, message):
            if isinstance(message, _Answered):
                return
            method = getattr(message, "method", None)
            if self._shutdown and method not in (None, t.EXIT) and getattr(message, "id", None) is not None:
                error = JsonRpcInvalidRequest()
                self._send_response(message.id, error=t.ResponseError(
                    code=error.code, message=f"the server is shutting down: {method} was not run"))
                return
            super().handle_message(message)

    return Protocol


def _answering(handler):
    """A request handler whose unexpected exceptions become a one-line InternalError (the
    traceback is logged on stderr, never sent in the reply)."""
    import functools
    from pygls.exceptions import JsonRpcException, JsonRpcInternalError

    @functools.wraps(handler)
    def run(params):
        try:
            return handler(params)
        except JsonRpcException:
            raise
        except Exception as exc:
            log.exception("%s failed", handler.__name__)
            raise JsonRpcInternalError(message=f"jaxlint: {type(exc).__name__}: {exc}") from None
    return run


def create_server():
    """The pygls server with jaxlint's features registered (not started)."""
    from lsprotocol import types as t
    from pygls.lsp.server import LanguageServer
    from urllib.parse import unquote

    ls = LanguageServer(NAME, __version__, text_document_sync_kind=t.TextDocumentSyncKind.Full,
                        protocol_cls=_protocol_class())
    # published: uri -> (version, diagnostics) last sent, so nothing stale or repeated is sent
    state: Dict[str, object] = {"linter": Linter(), "checked": {}, "languages": {}, "pending": {},
                                "published": {}, "shutdown": False}

    def encoding() -> str:
        enc = ls.workspace.position_encoding
        return str(getattr(enc, "value", enc) or UTF16)

    def versioned() -> bool:
        caps = ls.client_capabilities
        ws = getattr(caps, "workspace", None)
        wse = getattr(ws, "workspace_edit", None) if ws else None
        return bool(wse and wse.document_changes)

    def is_open(uri: str) -> bool:
        return unquote(uri) in ls.workspace.text_documents

    def publish(uri: str, checked: Checked, only_if_changed: bool = False) -> None:
        """Send the diagnostics of ``checked`` if it is the document's current version (and,
        with ``only_if_changed``, if they differ from what the client last received for it)."""
        if not is_open(uri) or ls.workspace.get_text_document(uri).version != checked.version:
            return     # the document changed (or closed) since: its own lint will publish
        diags = diagnostics(checked, encoding())
        if only_if_changed and state["published"].get(uri) == (checked.version, diags):
            return
        state["published"][uri] = (checked.version, diags)
        ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
            uri=uri, version=checked.version, diagnostics=diags))

    def lint(uri: str, only_if_changed: bool = False) -> Optional[Checked]:
        doc = ls.workspace.get_text_document(uri)
        if not _is_python(uri, state["languages"].get(uri)):
            return None
        checked = state["linter"].check(uri, doc.source, doc.version, _path_of(uri))
        state["checked"][uri] = checked
        if checked.error is not None:
            log.info("%s: %s", uri, checked.error)
        publish(uri, checked, only_if_changed)
        index_project(_path_of(uri))
        return checked

    def index_project(path: Optional[str]) -> None:
        """Build (or rebuild) the project index of ``path`` in a daemon thread (``exit`` never
        waits for it); when it is ready, lint the open documents of that project again with it."""
        linter: Linter = state["linter"]
        root = linter.project_root(path)
        if not linter.wants_build(root):
            return
        index = linter.projects[root]
        index.building = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:   # no event loop (synchronous transport): build in place
            loop = None
        if loop is None:
            installed(root, linter, _run_build(linter, root))
            return

        def build():
            outcome = _run_build(linter, root)
            try:
                loop.call_soon_threadsafe(installed, root, linter, outcome)
            except RuntimeError:    # the loop closed: the server is exiting
                pass

        threading.Thread(target=build, name=f"jaxlint-index {root}", daemon=True).start()

    def installed(root: str, linter: Linter, outcome) -> None:
        index = linter.projects[root]
        index.building = False
        workspace, error = outcome
        if error is not None:
            index.failed = True      # tried again after the next save
            log.warning("project analysis of %s failed; linting file by file: %s", root, error)
            return
        if workspace is None:
            index.unavailable = True     # too big or no modules: file by file for good
            return
        index.workspace, index.stale = workspace, False
        if state["linter"] is not linter or state["shutdown"]:
            return
        for uri in list(state["checked"]):
            p = _path_of(uri)
            if uri in state["pending"] or not is_open(uri):
                continue     # a lint is due anyway (it will use the index)
            if p is not None and linter.project_root(p) == root:
                lint(uri, only_if_changed=True)     # a second set only if the index changed it

    def current(uri: str) -> Optional[Checked]:
        """The lint of the open document ``uri`` as it is now; None for a document the client
        has not opened (its text is not ours to read)."""
        if not is_open(uri):
            return None
        checked = state["checked"].get(uri)
        doc = ls.workspace.get_text_document(uri)
        if checked is None or checked.text != doc.source:
            checked = lint(uri)
        return checked

    @ls.feature(t.INITIALIZE)
    def initialize(params: t.InitializeParams):
        root = None
        if params.root_uri:
            root = _path_of(params.root_uri)
        elif params.root_path:
            root = params.root_path
        state["linter"] = Linter(root)

    @ls.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: t.DidOpenTextDocumentParams):
        state["languages"][params.text_document.uri] = params.text_document.language_id
        state["published"].pop(params.text_document.uri, None)
        lint(params.text_document.uri)

    @ls.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: t.DidChangeTextDocumentParams):
        # typing sends a change per keystroke: lint once the burst pauses (code actions and
        # hover lint on demand when they find the last lint out of date)
        uri = params.text_document.uri
        pending = state["pending"]
        handle = pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            lint(uri)
            return

        def fire():
            if pending.pop(uri, None) is not None and uri in state["languages"] and is_open(uri):
                lint(uri)

        pending[uri] = loop.call_later(CHANGE_DELAY, fire)

    @ls.feature(t.TEXT_DOCUMENT_DID_SAVE, t.SaveOptions(include_text=False))
    def did_save(params: t.DidSaveTextDocumentParams):
        uri = params.text_document.uri
        handle = state["pending"].pop(uri, None)
        if handle is not None:
            handle.cancel()
        # what this file now plants in its neighbours (and they in it) needs a fresh index
        linter: Linter = state["linter"]
        root = linter.project_root(_path_of(uri))
        if root is not None and root in linter.projects:
            linter.projects[root].stale = True
            linter.projects[root].failed = False
        if is_open(uri):
            lint(uri)      # and rebuilds the index
        else:
            index_project(_path_of(uri))

    @ls.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: t.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        handle = state["pending"].pop(uri, None)
        if handle is not None:
            handle.cancel()
        state["checked"].pop(uri, None)
        state["languages"].pop(uri, None)
        state["published"].pop(uri, None)
        ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @ls.feature(t.TEXT_DOCUMENT_CODE_ACTION,
                t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix, FIX_ALL],
                                    resolve_provider=False))
    @_answering
    def code_action(params: t.CodeActionParams):
        checked = current(params.text_document.uri)
        if checked is None:
            return []
        return code_actions(checked, params.range, encoding(), versioned(), params.context.only)

    @ls.feature(t.TEXT_DOCUMENT_HOVER)
    @_answering
    def on_hover(params: t.HoverParams):
        checked = current(params.text_document.uri)
        if checked is None:
            return None
        return hover(checked, params.position, encoding(), markdown_hover())

    @ls.feature(t.SHUTDOWN)
    def shutdown(params):
        state["shutdown"] = True
        for handle in state["pending"].values():
            handle.cancel()
        state["pending"].clear()

    @ls.feature(t.EXIT)
    def on_exit(params):
        # nothing is left to save (the server writes no files): end now, without waiting for an
        # index build or the thread blocked reading standard input; 0 after shutdown, else 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(0 if state["shutdown"] else 1)

    def markdown_hover() -> bool:
        caps = ls.client_capabilities
        td = getattr(caps, "text_document", None)
        formats = getattr(getattr(td, "hover", None), "content_format", None) if td else None
        return not formats or t.MarkupKind.Markdown in formats

    return ls


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Serve the language server over stdio until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="jaxlint server: %(message)s")
    try:
        server = create_server()
    except ImportError as exc:
        sys.stderr.write(f"jaxlint: error: the language server needs pygls>=2 and lsprotocol ({exc})\n")
        return 2
    server.start_io(stdin=GuardedReader(sys.stdin.buffer))
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
