"""The language server, driven by a real LSP client session over stdio (JSON-RPC, Content-Length framing)."""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

TIMEOUT = 60          # seconds for any one answer (the first lint imports every rule)
MODULE_SERVER = [sys.executable, "-c", "from jaxlint.server import main; main()"]
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "jaxlint")
# `jaxlint server`: the installed command when it sits beside this interpreter, else the same CLI via -m
CLI_SERVER = [_SCRIPT, "server"] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "jaxlint", "server"]

TRAIN = '''import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    s = "\U0001F600"; print(x)
    return x * 2


def sample():
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (3,))
    b = jax.random.normal(key, (3,))
    return a + b
'''


class LspClient:
    """A small LSP client: one reader thread, bounded waits, answers the server's own requests."""

    def __init__(self, cmd, cwd):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=str(cwd), env=env)
        self.inbox: "queue.Queue" = queue.Queue()
        self.notifications = []
        self.stderr = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            line = out.readline()
            if not line:
                self.inbox.put(None)
                return
            while line not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
                line = out.readline()
            body = out.read(length)
            self.inbox.put(json.loads(body.decode("utf-8")))

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def send(self, message):
        message = dict(message, jsonrpc="2.0")
        body = json.dumps(message).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method, params):
        self.send({"method": method, "params": params})

    def _next(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("timed out waiting for the server; stderr:\n" + "".join(self.stderr[-30:]))
        try:
            msg = self.inbox.get(timeout=remaining)
        except queue.Empty:
            raise AssertionError("timed out waiting for the server; stderr:\n" + "".join(self.stderr[-30:]))
        if msg is None:
            raise AssertionError("the server closed its output; stderr:\n" + "".join(self.stderr[-30:]))
        if "method" in msg and "id" in msg:          # a request from the server: answer it
            self.send({"id": msg["id"], "result": None})
        elif "method" in msg:
            self.notifications.append(msg)
        return msg

    def request(self, method, params, timeout=TIMEOUT):
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline)
            if msg.get("id") == rid and "method" not in msg:
                assert "error" not in msg, msg
                return msg.get("result")

    def diagnostics(self, uri, version=None, timeout=TIMEOUT):
        """The next publishDiagnostics for ``uri`` (of ``version`` when given)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, n in enumerate(self.notifications):
                p = n.get("params", {})
                if n["method"] == "textDocument/publishDiagnostics" and p.get("uri") == uri \
                        and (version is None or p.get("version") == version):
                    del self.notifications[: i + 1]
                    return p["diagnostics"]
            self._next(deadline)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def utf16_offset(text, line, character):
    """Character offset into ``text`` of an LSP position given in UTF-16 units."""
    lines = text.splitlines(keepends=True)
    offset = sum(len(ln) for ln in lines[:line])
    units = 0
    current = lines[line] if line < len(lines) else ""
    for i, c in enumerate(current):
        if units >= character:
            return offset + i
        units += 2 if ord(c) > 0xFFFF else 1
    return offset + len(current.rstrip("\r\n")) if units >= character else offset + len(current)


def apply(text, edits):
    spans = sorted(((utf16_offset(text, e["range"]["start"]["line"], e["range"]["start"]["character"]),
                     utf16_offset(text, e["range"]["end"]["line"], e["range"]["end"]["character"]),
                     e["newText"]) for e in edits), reverse=True)
    for a, b, new in spans:
        text = text[:a] + new + text[b:]
    return text


def only_edits(action, uri, version):
    if version is None:          # a client without versioned document changes
        assert list(action["edit"]["changes"]) == [uri] and "documentChanges" not in action["edit"]
        return action["edit"]["changes"][uri]
    changes = action["edit"]["documentChanges"]
    assert len(changes) == 1
    assert changes[0]["textDocument"] == {"uri": uri, "version": version}
    return changes[0]["edits"]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.jaxlint]\nper-file-ignores = { "legacy/*" = ["JAX101"] }\n')
    (tmp_path / "legacy").mkdir()
    return tmp_path


@pytest.fixture(params=[CLI_SERVER, MODULE_SERVER], ids=["jaxlint-server", "server-main"])
def client(project, request):
    c = LspClient(request.param, project)
    yield c
    c.close()


@pytest.fixture
def cli_client(project):
    c = LspClient(CLI_SERVER, project)
    yield c
    c.close()


def initialize(client, project, document_changes=True, hover_formats=("markdown", "plaintext")):
    result = client.request("initialize", {
        "processId": os.getpid(),
        "rootUri": project.as_uri(),
        "capabilities": {
            "general": {"positionEncodings": ["utf-16"]},
            "workspace": {"workspaceEdit": {"documentChanges": document_changes}},
            "textDocument": {"hover": {"contentFormat": list(hover_formats)},
                             "codeAction": {"codeActionLiteralSupport": {
                                 "codeActionKind": {"valueSet": ["quickfix"]}}},
                             "publishDiagnostics": {"versionSupport": True}},
        },
    })
    client.notify("initialized", {})
    return result


def open_doc(client, uri, text, version=1):
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": version, "text": text}})


def change_doc(client, uri, text, version):
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"text": text}]})


def test_lsp_session_diagnostics_fixes_noqa_hover(client, project):
    caps = initialize(client, project)["capabilities"]
    assert caps["hoverProvider"]
    assert caps["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.jaxlint"]
    sync = caps["textDocumentSync"]
    assert sync["openClose"] and sync["change"] == 1 and sync["save"] == {"includeText": False}

    path = project / "train.py"
    path.write_text(TRAIN)
    uri = path.as_uri()
    open_doc(client, uri, TRAIN)
    diags = client.diagnostics(uri, version=1)
    by_code = {d["code"]: d for d in diags}
    assert sorted(by_code) == ["JAX101", "JAX401"]
    d = by_code["JAX101"]
    # `print` follows an emoji (two UTF-16 units): character 14, not the code point column 13
    assert d["range"] == {"start": {"line": 6, "character": 14}, "end": {"line": 6, "character": 22}}
    assert d["source"] == "jaxlint" and d["severity"] == 2
    assert d["codeDescription"]["href"].endswith("/docs/rules/JAX101.md")
    assert "print" in d["message"]

    # quick fixes: the safe JAX101 fix is preferred; the unsafe JAX401 fix is not
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d]}})
    titles = [a["title"] for a in actions]
    fix = next(a for a in actions if a["title"].startswith("JAX101: Use"))
    assert fix["kind"] == "quickfix" and fix["isPreferred"] is True
    assert fix["diagnostics"][0]["code"] == "JAX101"
    assert "JAX101: suppress with `# noqa: JAX101`" in titles
    assert not any(t.startswith("JAX401") for t in titles)     # not on the requested range

    key_diag = by_code["JAX401"]
    key_actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": key_diag["range"], "context": {"diagnostics": [key_diag]}})
    unsafe = [a for a in key_actions if a["title"].startswith("JAX401") and "noqa" not in a["title"]]
    assert unsafe and all(a["isPreferred"] is False and a["title"].endswith("(unsafe)") for a in unsafe)

    # hover on the diagnostic: summary, why, link; nothing on a clean line
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                              "position": {"line": 6, "character": 16}})
    assert h["contents"]["kind"] == "markdown"
    assert "**JAX101**" in h["contents"]["value"] and "/docs/rules/JAX101.md)" in h["contents"]["value"]
    assert "Why is this bad?" in h["contents"]["value"]
    assert h["range"] == d["range"]
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                 "position": {"line": 0, "character": 3}}) is None

    # fix on save: `source.fixAll` applies the safe fix only (the unsafe JAX401 one stays)
    fix_all = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": ["source.fixAll"]}})
    assert [a["kind"] for a in fix_all] == ["source.fixAll.jaxlint"]
    assert fix_all[0]["title"] == "jaxlint: apply 1 safe fix"
    assert apply(TRAIN, only_edits(fix_all[0], uri, 1)) == TRAIN.replace("print(x)", "jax.debug.print('{x}', x=x)")
    assert all(a["kind"] == "quickfix" for a in actions)

    # apply the preferred fix as an editor would, send the change, the finding is gone
    fixed = apply(TRAIN, only_edits(fix, uri, 1))
    assert "jax.debug.print('{x}', x=x)" in fixed and "\U0001F600" in fixed
    change_doc(client, uri, fixed, 2)
    assert [x["code"] for x in client.diagnostics(uri, version=2)] == ["JAX401"]

    # a burst of keystrokes: linted once it pauses, the last version wins
    for v in range(10, 15):
        change_doc(client, uri, fixed + "#" * v + "\n", v)
    assert [x["code"] for x in client.diagnostics(uri, version=14)] == ["JAX401"]

    # suppress the JAX401 finding with the noqa action
    noqa = next(a for a in key_actions if "noqa" in a["title"])
    assert noqa["isPreferred"] is False
    suppressed = apply(fixed, only_edits(noqa, uri, 1))
    assert "b = jax.random.normal(key, (3,))  # noqa: JAX401\n" in suppressed
    change_doc(client, uri, suppressed, 15)
    assert client.diagnostics(uri, version=15) == []

    # save re-lints (and re-reads the configuration)
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []

    # shutdown and exit end the process with code 0
    assert client.request("shutdown", None) is None
    client.notify("exit", None)
    assert client.proc.wait(timeout=TIMEOUT) == 0


def test_noqa_appends_to_an_existing_list_and_avoids_strings(cli_client, project):
    client = cli_client
    initialize(client, project, document_changes=False, hover_formats=["plaintext"])
    text = ('import jax\n\n\n@jax.jit\ndef f(x):\n    print(x)  # noqa: E501\n'
            '    print(f"""{x}\n    """)\n    return x\n')
    uri = (project / "noqa_case.py").as_uri()
    open_doc(client, uri, text)
    diags = client.diagnostics(uri, version=1)
    assert [(d["code"], d["range"]["start"]["line"]) for d in diags] == [("JAX101", 5), ("JAX101", 6)]
    first = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diags[0]["range"], "context": {"diagnostics": diags[:1]}})
    noqa = next(a for a in first if "noqa" in a["title"])
    after = apply(text, only_edits(noqa, uri, None))
    assert "    print(x)  # noqa: E501,JAX101\n" in after
    # this client asked for plain-text hovers
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": diags[0]["range"]["start"]})
    assert h["contents"]["kind"] == "plaintext" and "**" not in h["contents"]["value"]
    assert "JAX101 documentation: https://" in h["contents"]["value"]
    # the second print's line ends inside a triple-quoted string: a comment there would change it
    second = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diags[1]["range"], "context": {"diagnostics": diags[1:]}})
    assert not any("noqa" in a["title"] for a in second)
    assert any(a["isPreferred"] for a in second)
    change_doc(client, uri, after, 2)
    assert [d["range"]["start"]["line"] for d in client.diagnostics(uri, version=2)] == [6]


def test_project_config_syntax_errors_and_close(cli_client, project):
    client = cli_client
    initialize(client, project)
    legacy = (project / "legacy" / "old.py").as_uri()
    open_doc(client, legacy, TRAIN)
    # per-file-ignores from the project's pyproject.toml: JAX101 is off under legacy/
    assert [d["code"] for d in client.diagnostics(legacy, version=1)] == ["JAX401"]

    broken = (project / "broken.py").as_uri()
    open_doc(client, broken, "import jax\n\ndef f(:\n    pass\n")
    diags = client.diagnostics(broken, version=1)
    assert len(diags) == 1 and diags[0]["message"].startswith("jaxlint could not check this file: syntax error")
    assert diags[0]["range"]["start"]["line"] == 2 and diags[0]["severity"] == 3
    assert client.request("textDocument/codeAction", {
        "textDocument": {"uri": broken}, "range": diags[0]["range"], "context": {"diagnostics": diags}}) == []

    # a broken [tool.jaxlint] is reported, not silently treated as clean
    (project / "pyproject.toml").write_text('[tool.jaxlint]\nselect = ["NOPE"]\n')
    change_doc(client, legacy, TRAIN + "\n", 2)
    diags = client.diagnostics(legacy, version=2)
    assert len(diags) == 1 and "configuration error" in diags[0]["message"] and diags[0]["severity"] == 1

    client.notify("textDocument/didClose", {"textDocument": {"uri": legacy}})
    assert client.diagnostics(legacy) == []
    assert client.request("shutdown", None) is None
    client.notify("exit", None)
    assert client.proc.wait(timeout=TIMEOUT) == 0


def test_project_index_brings_cross_module_findings(cli_client, tmp_path):
    """A helper in utils.py called from a jitted step in train.py: its `print` runs at trace
    time. Only the project index knows; it is built in the background and refreshed on save."""
    client = cli_client
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (root / "pkg" / "__init__.py").write_text("")
    train = root / "pkg" / "train.py"
    jitted = "import jax\n\nfrom pkg.utils import log_value\n\n\n@jax.jit\ndef step(x):\n    log_value(x)\n    return x * 2\n"
    train.write_text(jitted)
    utils = root / "pkg" / "utils.py"
    utils_text = "def log_value(v):\n    print(v)\n    return v\n"
    utils.write_text(utils_text)
    initialize(client, root)
    uri = utils.as_uri()
    open_doc(client, uri, utils_text)
    deadline = time.monotonic() + TIMEOUT
    diags = client.diagnostics(uri, version=1)
    while not diags:                       # the first answer may come before the index is ready
        diags = client.diagnostics(uri, version=1, timeout=max(1, deadline - time.monotonic()))
    [d] = diags
    assert d["code"] == "JAX101" and d["range"]["start"] == {"line": 1, "character": 4}
    assert "called from `step` in pkg/train.py:8" in d["message"] and d["severity"] == 3   # inferred

    # train.py no longer jits the step: after its save the index is rebuilt and the finding goes
    train.write_text(jitted.replace("@jax.jit\n", ""))
    client.notify("textDocument/didSave", {"textDocument": {"uri": train.as_uri()}})
    deadline = time.monotonic() + TIMEOUT
    while True:
        diags = client.diagnostics(uri, timeout=max(1, deadline - time.monotonic()))
        if not diags:
            break
    assert client.request("shutdown", None) is None


EGLOT_SESSION = r'''
(dolist (d (append (ignore-errors (directory-files "/usr/share/emacs/site-lisp/elpa" t "^[a-z]"))
                   (ignore-errors (directory-files (locate-user-emacs-file "elpa") t "^[a-z]"))))
  (add-to-list 'load-path d))
(require 'eglot)
(require 'flymake)
;; the set-up docs/integrations.md shows
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               '((python-mode python-ts-mode) . ("jaxlint" "server"))))
(setq eglot-sync-connect t)
(find-file (getenv "JAXLINT_FILE"))
(python-mode)
(apply #'eglot (eglot--guess-contact))
(defun wait-for (pred)
  (let ((tries 0))
    (while (and (not (funcall pred)) (< tries 240))
      (accept-process-output nil 0.25)
      (setq tries (1+ tries)))))
(wait-for (lambda () (flymake-diagnostics)))
(dolist (d (flymake-diagnostics))
  (princ (format "DIAG %d %s\n" (line-number-at-pos (flymake-diagnostic-beg d)) (flymake-diagnostic-text d))))
(let* ((d (car (flymake-diagnostics)))
       (actions (eglot-code-actions (flymake-diagnostic-beg d) (flymake-diagnostic-end d) nil nil)))
  (dolist (a actions) (princ (format "ACTION %s\n" (plist-get a :title))))
  (eglot--apply-workspace-edit (plist-get (car actions) :edit))
  (eglot--signal-textDocument/didChange)
  (wait-for (lambda () (null (flymake-diagnostics))))
  (princ (format "FIXED %s\n" (save-excursion (goto-char (point-min)) (forward-line 5)
                                              (string-trim (thing-at-point 'line t)))))
  (princ (format "LEFT %d\n" (length (flymake-diagnostics)))))
'''


def test_eglot_session_with_the_documented_setup(tmp_path):
    """A real editor client: Emacs' eglot with the docs' `eglot-server-programs` entry."""
    import shutil
    emacs = shutil.which("emacs")
    if emacs is None:
        pytest.skip("emacs is not installed")
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    path = tmp_path / "train.py"
    path.write_text("import jax\n\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x * 2\n")
    script = tmp_path / "session.el"
    script.write_text(EGLOT_SESSION)
    probe = subprocess.run([emacs, "--batch", "-Q", "--eval",
                            "(progn (dolist (d (ignore-errors (directory-files \"/usr/share/emacs/site-lisp/elpa\" t "
                            "\"^[a-z]\"))) (add-to-list 'load-path d)) (require 'eglot))"],
                           capture_output=True, text=True, timeout=TIMEOUT)
    if probe.returncode != 0:
        pytest.skip("eglot is not available to emacs")
    env = dict(os.environ, JAXLINT_FILE=str(path),
               PATH=os.path.dirname(CLI_SERVER[0]) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([emacs, "--batch", "-Q", "-l", str(script)], capture_output=True, text=True,
                       timeout=120, env=env, cwd=str(tmp_path))
    out = r.stdout + r.stderr
    assert "DIAG 6 jaxlint [JAX101]: `print` of traced value `x`" in out, out
    assert "ACTION JAX101: Use `jax.debug.print`" in out and "ACTION JAX101: suppress with `# noqa: JAX101`" in out
    assert "FIXED jax.debug.print('{x}', x=x)" in out and "LEFT 0" in out, out


# ------------------------------------------------------------------ robustness (issue 20 item 11, issue 21 item 8)
def _answer(client, rid, timeout=TIMEOUT):
    """The response to request ``rid``, error or result."""
    deadline = time.monotonic() + timeout
    while True:
        msg = client._next(deadline)
        if msg.get("id") == rid and "method" not in msg:
            return msg


def _raw_request(client, rid, method, params):
    client.send({"id": rid, "method": method, "params": params})
    return _answer(client, rid)


def test_every_request_is_answered_without_a_traceback(cli_client, project):
    client = cli_client
    initialize(client, project)
    path = project / "train.py"
    path.write_text(TRAIN)
    uri = path.as_uri()
    open_doc(client, uri, TRAIN)
    client.diagnostics(uri, version=1)

    # invalid params: no position, a negative line, a range that is not one
    for rid, params in ((101, {"textDocument": {"uri": uri}}),
                        (102, {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}}),
                        (103, {"textDocument": {"uri": uri}, "position": "here"})):
        answer = _raw_request(client, rid, "textDocument/hover", params)
        assert answer["error"]["code"] == -32602, answer
    answer = _raw_request(client, 104, "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": None,
                                                                   "context": {"diagnostics": []}})
    assert answer["error"]["code"] == -32602
    # positions past the end of the document are answered, not an error
    assert _raw_request(client, 105, "textDocument/hover", {
        "textDocument": {"uri": uri}, "position": {"line": 10 ** 6, "character": 10 ** 6}})["result"] is None

    # a document the client never opened (missing on disk, or present): empty answers, no traceback
    for rid, name in ((106, "never_written.py"), (107, "pyproject.toml")):
        other = (project / name).as_uri()
        answer = _raw_request(client, rid, "textDocument/hover", {
            "textDocument": {"uri": other}, "position": {"line": 0, "character": 0}})
        assert answer == {"id": rid, "jsonrpc": "2.0", "result": None}, answer
        answer = _raw_request(client, rid + 100, "textDocument/codeAction", {
            "textDocument": {"uri": other}, "context": {"diagnostics": []},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}})
        assert answer["result"] == [], answer

    # the server still works, then shuts down; requests after shutdown get InvalidRequest
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                 "position": {"line": 6, "character": 16}})
    assert client.request("shutdown", None) is None
    answer = _raw_request(client, 110, "textDocument/hover", {
        "textDocument": {"uri": uri}, "position": {"line": 6, "character": 16}})
    assert answer["error"]["code"] == -32600 and "shutting down" in answer["error"]["message"]
    client.notify("exit", None)
    assert client.proc.wait(timeout=TIMEOUT) == 0
    assert "traceback" not in json.dumps(answer).lower()


def test_an_absurd_content_length_is_skipped_and_the_server_goes_on(cli_client, project):
    client = cli_client
    initialize(client, project)
    for length in (b"99999999999999999999999999", b"%d" % (10 ** 11)):
        client.proc.stdin.write(b"Content-Length: " + length + b"\r\n\r\n" + b'{"jsonrpc": "2.0"}\r\n')
        client.proc.stdin.flush()
        assert client.request("textDocument/hover", {
            "textDocument": {"uri": (project / "x.py").as_uri()}, "position": {"line": 0, "character": 0}}) is None
    assert client.proc.poll() is None
    assert any("skipped" in line for line in client.stderr), client.stderr


# the project index takes long to build (a huge project, a FIFO named *.py): patched in to take 600 s
SLOW_INDEX_SERVER = [sys.executable, "-c", "import time, jaxlint.server as s\n"
                     "s.Linter.build_project = lambda self, root: time.sleep(600)\n"
                     "s.main()"]


def test_exit_does_not_wait_for_the_project_index(project):
    client = LspClient(SLOW_INDEX_SERVER, project)
    try:
        initialize(client, project)
        path = project / "train.py"
        path.write_text(TRAIN)
        open_doc(client, path.as_uri(), TRAIN)
        assert [d["code"] for d in client.diagnostics(path.as_uri(), version=1)] == ["JAX101", "JAX401"]
        assert client.request("shutdown", None) is None
        started = time.monotonic()
        client.notify("exit", None)
        assert client.proc.wait(timeout=20) == 0
        assert time.monotonic() - started < 10
    finally:
        client.close()


def test_exit_without_shutdown_exits_1_even_while_indexing(project):
    client = LspClient(SLOW_INDEX_SERVER, project)
    try:
        initialize(client, project)
        open_doc(client, (project / "train.py").as_uri(), TRAIN)
        client.diagnostics((project / "train.py").as_uri(), version=1)
        client.notify("exit", None)
        assert client.proc.wait(timeout=20) == 1
    finally:
        client.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_exit_with_a_fifo_in_the_project(project):
    """A FIFO named like a module may block the index build; exit still ends the server."""
    os.mkfifo(project / "pipe.py")
    client = LspClient(CLI_SERVER, project)
    try:
        initialize(client, project)
        open_doc(client, (project / "train.py").as_uri(), TRAIN)
        client.diagnostics((project / "train.py").as_uri(), version=1)
        assert client.request("shutdown", None) is None
        client.notify("exit", None)
        assert client.proc.wait(timeout=20) == 0
    finally:
        client.close()


# the index takes a moment (as on a real project) and then is what it is
LATE_INDEX_SERVER = [sys.executable, "-c", "import time, jaxlint.server as s\n"
                     "build = s.Linter.build_project\n"
                     "def late(self, root):\n"
                     "    time.sleep(1.0)\n"
                     "    return build(self, root)\n"
                     "s.Linter.build_project = late\n"
                     "s.main()"]


def _published(client, uri, seconds):
    """Every publishDiagnostics for ``uri`` in the next ``seconds``: [(version, codes)]."""
    out = []
    deadline = time.monotonic() + seconds
    while True:
        try:
            client._next(deadline)
        except AssertionError:
            break
    for n in client.notifications:
        p = n.get("params", {})
        if n["method"] == "textDocument/publishDiagnostics" and p.get("uri") == uri:
            out.append((p.get("version"), sorted(d["code"] for d in p["diagnostics"])))
    client.notifications.clear()
    return out


def test_diagnostics_are_published_once_per_version_and_never_stale(project):
    """The project index finishing after didOpen re-lints the document: it publishes again only
    when that changes the diagnostics, and only for the document's current version."""
    client = LspClient(LATE_INDEX_SERVER, project)
    try:
        initialize(client, project)
        path = project / "train.py"
        path.write_text(TRAIN)
        uri = path.as_uri()
        open_doc(client, uri, TRAIN)
        assert _published(client, uri, 3.0) == [(1, ["JAX101", "JAX401"])]

        # a second document opened and edited while the (now stale) index is rebuilt after a save
        other = project / "other.py"
        other.write_text(TRAIN)
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        open_doc(client, other.as_uri(), TRAIN)
        change_doc(client, other.as_uri(), TRAIN.replace("print(x)", "x = x"), 2)
        got = _published(client, other.as_uri(), 3.0)
        assert got[-1] == (2, ["JAX401"]), got
        versions = [v for v, _ in got]
        assert versions == sorted(versions) and len(set(versions)) == len(versions), got
        assert _published(client, uri, 0.5) == []    # the save changed nothing in train.py's findings
    finally:
        client.close()
