"""Jupyter notebooks: real notebooks written with nbformat.v4, linted, fixed and re-read."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell

from jaxlint.analysis import SourceError
from jaxlint.engine import lint_source
from jaxlint.engine import lint_source as _lint_source
from jaxlint.fixes.applier import fix_text, write_atomic
from jaxlint.notebook import NotebookSource, NotPythonNotebook, is_notebook, load_source, source_from_bytes

KERNEL = {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
          "language_info": {"name": "python", "version": "3.11.7"}}

PRINT_CELL = "@jax.jit\ndef f(x):\n    print(x)\n    return x * 2"


def write_nb(path, cells, metadata=None, **kw):
    nb = new_notebook(cells=cells, metadata=dict(KERNEL if metadata is None else metadata))
    text = nbformat.writes(nb, **kw)
    path.write_text(text, encoding="utf-8")
    return str(path)


def lint(nb):
    return lint_source(nb)


def positions(nb):
    return [(f.code, nb.cell_position(f.line), f.col) for f in lint(nb)]


# ------------------------------------------------------------------ reading
def test_code_cells_joined_in_order_and_positions_are_cell_relative(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [
        new_markdown_cell("# A notebook\nwith `print(x)` in markdown"),
        new_code_cell("import jax\nimport jax.numpy as jnp"),
        new_raw_cell("print(x)"),
        new_code_cell("x = jnp.ones(3)\n" + PRINT_CELL),
    ])
    nb = load_source(path)
    assert isinstance(nb, NotebookSource) and is_notebook(path)
    assert nb.cell_count == 4
    assert [i for i, _ in nb.cells] == [1, 3]
    assert "with `print(x)`" not in nb.text and "import jax" in nb.text
    # cell 4 (1-based, all cells counted), line 4 of that cell, column 4
    assert positions(nb) == [("JAX101", (4, 4), 4)]
    f = lint(nb)[0]
    assert nb.cell_index(f.line) == 3
    assert nb.line_text(f.line) == "    print(x)"


MAGIC_CELL = """%load_ext autoreload
%autoreload 2
!pip install -q optax
files = !ls
out, err = %sx ls
jnp.ones?
??jax.jit
%%time
for i in range(2):
    %time g(i)
    !echo $i \\
       more
total = (1
         % 2)
doc = '''
!not a magic, a string
%neither
'''
@jax.jit
def g(x):
    y = "é ü"; print(x)
    return x"""


def test_magics_masked_line_and_column_exact(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax\nimport jax.numpy as jnp"),
                                            new_code_cell(MAGIC_CELL)])
    nb = load_source(path)
    nb.parse()   # parses although the cell is full of IPython syntax
    lines = MAGIC_CELL.splitlines()
    masked = [i for i in range(len(lines)) if "IPython" in nb.line_text(_line_of(nb, 2, i + 1))]
    # every magic/shell/help line and the backslash continuation are masked, nothing else
    assert [lines[i] for i in masked] == [
        "%load_ext autoreload", "%autoreload 2", "!pip install -q optax", "files = !ls",
        "out, err = %sx ls", "jnp.ones?", "??jax.jit", "%%time", "    %time g(i)", "    !echo $i \\",
    ]
    assert nb.line_text(_line_of(nb, 2, 12)) == "#"          # continuation of the shell escape
    assert nb.line_text(_line_of(nb, 2, 13)) == "total = (1"
    assert nb.line_text(_line_of(nb, 2, 14)) == "         % 2)"   # modulo on a continuation line
    assert nb.line_text(_line_of(nb, 2, 16)) == "!not a magic, a string"
    # the finding after the masked lines: cell 2, line 21, character column 15 (after "é ü")
    assert positions(nb) == [("JAX101", (2, 21), 15)]
    assert lines[20][15:23] == "print(x)"


def _line_of(nb, cell, line_in_cell):
    for ln in range(1, nb.line_count + 1):
        if nb.cell_position(ln) == (cell, line_in_cell):
            return ln
    raise AssertionError((cell, line_in_cell))


def test_cell_magic_with_foreign_body_is_masked_whole(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [
        new_code_cell("%%bash\nfor f in *; do\n  echo $f\ndone"),
        new_code_cell("%%writefile helper.py\nimport jax\n@jax.jit\ndef h(x):\n    print(x)"),
        new_code_cell("import jax\n%%capture\n"),   # %% not on the first line: a line magic
        new_code_cell("%%capture cap\nimport jax\n" + PRINT_CELL),
    ])
    nb = load_source(path)
    nb.parse()
    assert positions(nb) == [("JAX101", (4, 5), 4)]


def test_noqa_works_in_cells(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [
        new_code_cell("import jax"),
        new_code_cell("@jax.jit\ndef f(x):\n    print(x)  # noqa: JAX101\n    return x"),
        new_code_cell("@jax.jit\ndef g(x):\n    print(x)  # noqa: JAX999, JAX101\n    print(x, 1)  # noqa\n"
                      "    print(x, 2)  # noqa: JAX999\n    return x"),
    ])
    nb = load_source(path)
    assert positions(nb) == [("JAX101", (3, 5), 4)]


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not a notebook: invalid JSON at line 1 column 2"),
    (b"[1, 2]", "not a notebook: the JSON document is not an object"),
    (b'{"cells": []}', "not a notebook: no 'nbformat' version key"),
    (b'{"nbformat": 9, "nbformat_minor": 0, "cells": []}', "not a notebook: unsupported nbformat version 9"),
    (b"\xff\xfe{}", "not a notebook: cannot decode as utf-8"),
])
def test_not_a_notebook_is_a_one_line_source_error(tmp_path, content, message):
    p = tmp_path / "bad.ipynb"
    p.write_bytes(content)
    with pytest.raises(SourceError) as exc:
        load_source(str(p))
    assert str(exc.value).startswith(message)
    assert "\n" not in str(exc.value)


def test_invalid_nbformat_structure_is_a_one_line_source_error(tmp_path):
    nb = json.loads(nbformat.writes(new_notebook(cells=[new_code_cell("x = 1")], metadata=KERNEL)))
    del nb["cells"][0]["outputs"]
    nb["cells"][0]["cell_type"] = "banana"
    p = tmp_path / "bad.ipynb"
    p.write_text(json.dumps(nb))
    with pytest.raises(SourceError) as exc:
        load_source(str(p))
    msg = str(exc.value)
    assert msg.startswith("not a valid nbformat 4 notebook:") and "\n" not in msg and len(msg) < 300


def test_extra_output_properties_are_read_like_jupyter_does(tmp_path):
    """Jupyter opens a notebook whose output carries a property the schema lacks (seen in
    google-research/vision_transformer): its code is checked, and a fix writes it back
    with only the fixed cell changed."""
    nb = json.loads(nbformat.writes(new_notebook(
        cells=[new_code_cell("import jax\n\n@jax.jit\ndef f(x):\n    print(x)\n    return x\n")],
        metadata=KERNEL)))
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi\n", "metadata": {}}]
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(nbformat.from_dict(nb))
    p = tmp_path / "extra.ipynb"
    p.write_text(json.dumps(nb))
    src = load_source(str(p))
    assert "print(x)" in src.text
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--isolated", "--no-cache", "--fix", str(p)],
                          capture_output=True, text=True)
    fixed = json.loads(p.read_text())
    assert "jax.debug.print" in "".join(fixed["cells"][0]["source"]), proc.stdout + proc.stderr
    assert fixed["cells"][0]["outputs"] == nb["cells"][0]["outputs"]


def test_missing_file_and_non_python_notebook(tmp_path):
    with pytest.raises(SourceError, match="no such file or directory"):
        load_source(str(tmp_path / "missing.ipynb"))
    path = write_nb(tmp_path / "r.ipynb", [new_code_cell("x <- c(1, 2)\nprint(x)")],
                    metadata={"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}})
    with pytest.raises(NotPythonNotebook, match="not a Python notebook"):
        load_source(path)


def test_syntax_error_names_the_cell_and_the_other_cells_are_checked(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax"), new_markdown_cell("x"),
                                            new_code_cell("x = 1\ndef broken(:\n    pass"),
                                            new_code_cell(PRINT_CELL)])
    nb = load_source(path)
    assert nb.partial_error == ("syntax error in cell 3 at line 2:12: invalid syntax "
                                "(that cell was not checked; the other cells were)")
    assert positions(nb) == [("JAX101", (4, 3), 4)]    # the cell after the broken one, same numbering
    # every code cell broken: nothing to check, one error
    path = write_nb(tmp_path / "all.ipynb", [new_code_cell("def broken(:"), new_code_cell("  x = 1")])
    with pytest.raises(SourceError, match=r"^syntax error in cell 1 at line 1:"):
        load_source(path).parse()


def test_nbformat_3_notebooks_are_read():
    from nbformat import v3
    nb = v3.new_notebook(worksheets=[v3.new_worksheet(cells=[
        v3.new_code_cell(input="import jax"), v3.new_text_cell("markdown", source="hi"),
        v3.new_code_cell(input=PRINT_CELL)])], metadata={"name": "old"})
    src = source_from_bytes("old.ipynb", nbformat.writes(nb, version=3).encode())
    assert positions(src) == [("JAX101", (3, 3), 4)]
    with pytest.raises(SourceError, match="only to nbformat 4 notebooks"):
        src.encode(src.text.replace("print(x)", "pass"))


# ------------------------------------------------------------------ fixing
def _fixed(path, unsafe=False, strict=False):
    nb = load_source(path)
    if strict:   # (key findings in notebooks, teaching material, are the strict profile's)
        from jaxlint.checkers import Settings
        report = fix_text(nb, lambda src: lint_source(src, None, Settings(strict=True)), unsafe=unsafe)
    else:
        report = fix_text(nb, lint_source, unsafe=unsafe)
    nb.write_fixed(report.text)
    return nb, report


def test_fix_rewrites_only_the_edited_cell_and_keeps_everything_else(tmp_path):
    outputs = [new_output("stream", name="stdout", text="traced\n"),
               new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
                          metadata={"width": 300})]
    cells = [new_markdown_cell("# Training\nSome *notes*.", metadata={"tags": ["intro"]}),
             new_code_cell("import jax\n%matplotlib inline", execution_count=1),
             new_code_cell(PRINT_CELL, outputs=outputs, execution_count=2, metadata={"collapsed": True}),
             new_code_cell("!nvidia-smi\ny = f(1.0)", outputs=[new_output("execute_result", data={"text/plain": "2.0"},
                                                                         execution_count=3)], execution_count=3)]
    path = write_nb(tmp_path / "nb.ipynb", cells)
    os.chmod(path, 0o640)
    before = open(path, "rb").read()
    nb, report = _fixed(path)
    assert report.applied == {"JAX101": 1}
    after = open(path, "rb").read()
    old, new = nbformat.reads(before.decode(), 4), nbformat.reads(after.decode(), 4)
    nbformat.validate(new)
    assert new.cells[2].source == "@jax.jit\ndef f(x):\n    jax.debug.print('{x}', x=x)\n    return x * 2"
    for i in (0, 1, 3):
        assert new.cells[i] == old.cells[i]
    assert new.cells[2].outputs == old.cells[2].outputs and new.cells[2].metadata == old.cells[2].metadata
    assert new.cells[2].execution_count == 2 and new.metadata == old.metadata
    # byte-for-byte: only the one source line differs
    changed = [(a, b) for a, b in zip(before.decode().splitlines(), after.decode().splitlines()) if a != b]
    assert changed == [('    "    print(x)\\n",', '''    "    jax.debug.print('{x}', x=x)\\n",''')]
    assert len(before.splitlines()) == len(after.splitlines())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    # nothing left to fix; the magics survived
    again = load_source(path)
    assert lint_source(again) == [] and "%matplotlib inline" in again.cells[0][1]


def test_fix_keeps_foreign_json_formatting(tmp_path):
    """Another writer's layout (indent 2, sources as one string, unsorted keys, escaped unicode)."""
    nb = json.loads(nbformat.writes(new_notebook(cells=[
        new_code_cell("import jax  # ünïcode"), new_code_cell(PRINT_CELL)], metadata=KERNEL)))
    for c in nb["cells"]:
        c["source"] = "".join(c["source"])
    nb = {"nbformat": nb["nbformat"], "nbformat_minor": nb["nbformat_minor"],
          "metadata": nb["metadata"], "cells": nb["cells"]}
    p = tmp_path / "colab.ipynb"
    before = json.dumps(nb, indent=2, ensure_ascii=True)
    p.write_text(before)
    _fixed(str(p))
    after = p.read_text()
    assert json.loads(after)["cells"][1]["source"] == PRINT_CELL.replace(
        "print(x)", "jax.debug.print('{x}', x=x)")
    assert after == before.replace('print(x)', "jax.debug.print('{x}', x=x)")
    assert "\\u00fc" in after


def test_fix_in_a_notebook_full_of_json_escapes(tmp_path):
    """Strings ending in backslashes, escaped quotes and unicode around the edited cell."""
    tricky = 'path = "C:\\\\data\\\\"\nquote = "say \\"hi\\""\nemoji = "\U0001F600 ü"\n'
    cells = [new_markdown_cell('ends with a backslash \\\\'),
             new_code_cell("import jax\n" + tricky, outputs=[new_output("stream", name="stdout", text='\\"\\\\')]),
             new_code_cell(tricky + PRINT_CELL, metadata={"note": "a \\ b \" c"}),
             new_raw_cell('{"json": "\\""}')]
    path = write_nb(tmp_path / "nb.ipynb", cells)
    before = open(path, encoding="utf-8").read()
    _fixed(path)
    after = open(path, encoding="utf-8").read()
    diff = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert diff == [('    "    print(x)\\n",', '''    "    jax.debug.print('{x}', x=x)\\n",''')]
    new = nbformat.read(path, 4)
    nbformat.validate(new)
    assert new.cells[2].source.startswith(tricky)


def test_inserted_lines_stay_in_their_cells(tmp_path):
    """An import added after the last import stays in the import cell; a line inserted
    before a cell's first statement goes into that cell, not the end of the previous one."""
    path = write_nb(tmp_path / "nb.ipynb", [
        new_code_cell("from jax import jit\nimport jax.random"),
        new_code_cell("key = jax.random.PRNGKey(0)"),
        new_code_cell("a = jax.random.normal(key, (3,))"),
        new_code_cell("b = jax.random.normal(key, (3,))"),
        new_markdown_cell("---"),
        new_code_cell("@jit\ndef f(x):\n    print(x)\n    return x"),
    ])
    nb, report = _fixed(path, unsafe=True, strict=True)
    assert report.applied["JAX401"] >= 1 and report.applied["JAX101"] == 1
    new = nbformat.read(path, 4)
    nbformat.validate(new)
    srcs = [c.source for c in new.cells]
    assert srcs[0] == "from jax import jit\nimport jax.random"   # jax is reachable: no import added
    assert srcs[2].startswith("key, subkey = jax.random.split(key)\n")
    assert srcs[3].startswith("key, subkey = jax.random.split(key)\n")
    assert srcs[1] == "key = jax.random.PRNGKey(0)"
    assert srcs[5] == "@jit\ndef f(x):\n    jax.debug.print('{x}', x=x)\n    return x"


def test_added_import_lands_in_the_import_cell(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [
        new_code_cell("from jax import jit"),
        new_code_cell("@jit\ndef f(x):\n    print(x)\n    return x"),
    ])
    _fixed(path)
    srcs = [c.source for c in nbformat.read(path, 4).cells]
    assert srcs[0] == "from jax import jit\nimport jax"
    assert srcs[1] == "@jit\ndef f(x):\n    jax.debug.print('{x}', x=x)\n    return x"


def test_edit_touching_a_magic_line_is_refused(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax\n%time f(1)\ny = 2")])
    nb = load_source(path)
    before = open(path, "rb").read()
    text = nb.text.replace("pass  # IPython magic", "pass  # IPython magic edited")
    with pytest.raises(SourceError, match=r"a fix would change IPython syntax in cell 1 \(line 2\)"):
        nb.write_fixed(text)
    with pytest.raises(SourceError, match="cell separator"):
        two = write_nb(tmp_path / "two.ipynb", [new_code_cell("x = 1"), new_code_cell("y = 2")])
        nb2 = load_source(two)
        nb2.write_fixed(nb2.text.replace("# %% [jaxlint cell 2]\n", ""))
    assert open(path, "rb").read() == before
    # an edit elsewhere in the same cell keeps the magic
    nb.write_fixed(nb.text.replace("y = 2", "y = 3"))
    assert nbformat.read(path, 4).cells[0].source == "import jax\n%time f(1)\ny = 3"


def test_changed_on_disk_is_refused_and_write_atomic_writes_json(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("x = 1")])
    nb = load_source(path)
    with open(path, "a") as fh:
        fh.write("\n")
    with pytest.raises(SourceError, match="changed on disk"):
        nb.write_fixed("x = 2\n")
    nb = load_source(path)
    write_atomic(path, nb, "x = 3\n")   # the generic writer gets notebook JSON from encode()
    assert nbformat.read(path, 4).cells[0].source == "x = 3"


def test_with_text_maps_findings_of_the_fixed_text(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax"), new_code_cell("%time 1\n" + PRINT_CELL)])
    nb = load_source(path)
    text = nb.text.replace("@jax.jit\n", "# a comment\n# another\n@jax.jit\n")
    fixed = nb.with_text(text)
    assert positions(fixed) == [("JAX101", (2, 6), 4)]
    assert fixed.encode(text) == nb.encode(text)
    assert json.loads(fixed.encode(text))["cells"][1]["source"][:3] == ["%time 1\n", "# a comment\n", "# another\n"]


def test_relabel_names_cells_in_messages(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("a = 1\nb = 2"), new_markdown_cell("m"),
                                            new_code_cell("c = 3\nd = 4\ne = 5")])
    nb = load_source(path)
    # joined text: 1 a, 2 b, 3 separator, 4 c, 5 d, 6 e
    assert nb.relabel("called from `f` (line 5)") == "called from `f` (cell 3, line 2)"
    assert nb.relabel("again on lines 1, 2, 6") == "again on cell 1, lines 1, 2; cell 3, line 3"
    assert nb.relabel("quoted `line 5` and train.py:line 5 stay") == "quoted `line 5` and train.py:line 5 stay"
    assert nb.line_label(4) == "cell 3, line 1"
    once = nb.relabel("again on lines 1, 2, 6 and at line 5")
    assert nb.relabel(once) == once     # idempotent: a cell position is never relabelled again


def test_cell_location_of_fix_offsets(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax\nimport os"), new_markdown_cell("m"),
                                            new_code_cell(""), new_code_cell("x = 1\ny = 2")])
    nb = load_source(path)
    text = nb.text      # 1 import jax, 2 import os, 3 separator, 4 separator (empty cell 3), 5 x, 6 y
    assert nb.cell_location(text.index("os")) == (1, 2, 7)
    assert nb.cell_location(text.index("y =")) == (4, 2, 0)
    # an import a fix appends after the last import of cell 1 is inserted where the separator starts
    first_sep = text.index("# %% [jaxlint cell 3]")
    assert nb.cell_location(first_sep) == (1, 3, 0)
    report_text = text[:first_sep] + "import numpy as np\n" + text[first_sep:]
    assert [s for _, s in nb.cell_sources(report_text)][0] == "import jax\nimport os\nimport numpy as np"
    # the separator before cell 4 closes the empty cell 3
    assert nb.cell_location(text.index("# %% [jaxlint cell 4]")) == (3, 1, 0)
    assert nb.cell_location(len(text)) == (4, 3, 0)


def test_empty_and_blank_cells(tmp_path):
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell(""), new_code_cell("import jax"), new_code_cell("\n\n"),
                                            new_code_cell(PRINT_CELL)])
    nb, report = _fixed(path)
    assert report.applied == {"JAX101": 1}
    srcs = [c.source for c in nbformat.read(path, 4).cells]
    assert srcs[:3] == ["", "import jax", "\n\n"]
    assert nb.cell_position(lint_source(nb)[0].line) == (4, 3)


# ------------------------------------------------------------------ through the CLI
def jaxlint(*args, cwd):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "jaxlint", *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=300)


def _training_notebook(tmp_path):
    outputs = [new_output("stream", name="stdout", text="Traced<ShapedArray(float32[])>\n")]
    return write_nb(tmp_path / "train.ipynb", [
        new_markdown_cell("# Training"),
        new_code_cell("!pip install -q optax\nimport jax\nimport jax.numpy as jnp", execution_count=1),
        new_code_cell("%%time\n" + PRINT_CELL + "\nf(1.0)", outputs=outputs, execution_count=2),
        new_code_cell("@jax.jit\ndef g(x):\n    print(x)  # noqa: JAX101\n    return x", execution_count=3),
    ])


def test_cli_check_reports_cell_and_line(tmp_path):
    _training_notebook(tmp_path)
    r = jaxlint("check", "train.ipynb", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "train.ipynb:cell 3:line 4:5: JAX101 " in r.stdout
    r = jaxlint("check", "--format", "json", "train.ipynb", cwd=tmp_path)
    [f] = json.loads(r.stdout)
    assert (f["path"], f["cell"], f["line"], f["col"], f["code"]) == ("train.ipynb", 3, 4, 5, "JAX101")
    # a folder: the notebook is discovered next to Python files
    (tmp_path / "mod.py").write_text("x = 1\n")
    r = jaxlint("check", ".", cwd=tmp_path)
    assert "train.ipynb:cell 3:line 4:5: JAX101" in r.stdout and "2 files checked" in r.stdout


def test_cli_fix_writes_the_notebook_back(tmp_path):
    path = _training_notebook(tmp_path)
    before = nbformat.read(path, 4)
    r = jaxlint("check", "--fix", "train.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    after = nbformat.read(path, 4)
    nbformat.validate(after)
    assert after.cells[2].source == "%%time\n" + PRINT_CELL.replace("print(x)", "jax.debug.print('{x}', x=x)") \
        + "\nf(1.0)"
    for i in (0, 1, 3):
        assert after.cells[i] == before.cells[i]
    assert after.cells[2].outputs == before.cells[2].outputs
    assert after.cells[2].execution_count == 2 and after.metadata == before.metadata
    assert jaxlint("check", "train.ipynb", cwd=tmp_path).returncode == 0


def test_cli_bad_notebook_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    _training_notebook(tmp_path)
    r = jaxlint("check", "bad.ipynb", "train.ipynb", cwd=tmp_path)
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if "bad.ipynb" in ln]
    assert errors == ["bad.ipynb: error: not a notebook: invalid JSON at line 1 column 12: Expecting value"]
    assert "Traceback" not in r.stderr
    assert "train.ipynb:cell 3:line 4:5: JAX101" in r.stdout    # one bad file does not stop the others


def test_cli_notebook_with_a_broken_cell_is_checked_in_part_and_says_so(tmp_path):
    write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax"),
                                     new_code_cell(" https://example.com/licence\n# a stray line"),
                                     new_code_cell(PRINT_CELL)])
    r = jaxlint("check", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2                       # an error: one cell was not checked
    assert r.stderr.splitlines() == ["nb.ipynb: error: syntax error in cell 2 at line 1:1: unexpected indent "
                                     "(that cell was not checked; the other cells were)"]
    assert "nb.ipynb:cell 3:line 3:5: JAX101" in r.stdout
    write_nb(tmp_path / "nb.ipynb", [new_code_cell("import jax"), new_code_cell(" x = 1")])
    r = jaxlint("check", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and "All checks passed" not in r.stdout
    assert "checked only in part" in r.stdout


def test_cli_non_python_notebook_is_skipped_not_an_error(tmp_path):
    write_nb(tmp_path / "r.ipynb", [new_code_cell("x <- c(1, 2)\nprint(x)")],
             metadata={"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}})
    skip = "r.ipynb: skipped: not a Python notebook (kernel language 'R')"
    r = jaxlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr.splitlines()) == (0, [skip]), r.stdout + r.stderr
    assert "No files were checked." in r.stdout
    r = jaxlint("--format", "json", "r.ipynb", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout) == [] and skip in r.stderr.splitlines()
    assert jaxlint("-q", ".", cwd=tmp_path).stderr == ""
    _training_notebook(tmp_path)
    r = jaxlint(".", cwd=tmp_path)
    assert r.returncode == 1 and "error" not in r.stderr and skip in r.stderr.splitlines()
    assert "train.ipynb:cell 3:line 4:5: JAX101" in r.stdout and "(1 file checked)" in r.stdout
    r = jaxlint("--fix", ".", cwd=tmp_path)
    assert r.returncode == 0 and "error" not in r.stderr, r.stdout + r.stderr


def _key_reuse_notebook(tmp_path):
    # joined text: 1-2 cell 1, 3 separator, 4-6 cell 3: the first use is joined line 5 = cell 3, line 2
    return write_nb(tmp_path / "keys.ipynb", [
        new_code_cell("import jax\nimport jax.numpy as jnp"), new_markdown_cell("# keys"),
        new_code_cell("key = jax.random.PRNGKey(0)\na = jax.random.normal(key, (3,))\n"
                      "b = jax.random.normal(key, (3,))")])


def test_cli_messages_name_lines_by_cell_in_every_format(tmp_path):
    _key_reuse_notebook(tmp_path)
    outputs = {fmt: jaxlint("--format", fmt, "--strict", "keys.ipynb", cwd=tmp_path)
               for fmt in ("text", "json", "github", "sarif")}
    for fmt, r in outputs.items():
        assert r.returncode == 1, (fmt, r.stderr)
        assert "consumed by `jax.random.normal` on cell 3, line 2," in r.stdout, fmt
        assert "line 5" not in r.stdout, fmt
    [f] = json.loads(outputs["json"].stdout)
    assert (f["code"], f["cell"], f["line"]) == ("JAX401", 3, 3)
    [res] = json.loads(outputs["sarif"].stdout)["runs"][0]["results"]
    assert "on cell 3, line 2" in res["message"]["text"]


def test_cli_json_fix_edits_count_lines_within_the_cell(tmp_path):
    path = _key_reuse_notebook(tmp_path)
    r = jaxlint("--format", "json", "--strict", "keys.ipynb", cwd=tmp_path)
    [f] = json.loads(r.stdout)
    text = load_source(path).text
    edits = f["fix"]["edits"]
    assert [(e["start"], e["end"]) for e in edits] == [
        ({"cell": 3, "line": 2, "col": 1}, {"cell": 3, "line": 2, "col": 1}),
        ({"cell": 3, "line": 2, "col": 23}, {"cell": 3, "line": 2, "col": 26}),
        ({"cell": 3, "line": 3, "col": 1}, {"cell": 3, "line": 3, "col": 1}),
        ({"cell": 3, "line": 3, "col": 23}, {"cell": 3, "line": 3, "col": 26})]
    # the character offsets stay those of the joined text, which --fix applies
    assert [text[e["start_offset"]:e["end_offset"]] for e in edits] == ["", "key", "", "key"]
    cell = nbformat.read(path, 4).cells[2].source.splitlines()
    for e in edits:     # and the in-cell positions point at the same characters in the cell
        line = cell[e["start"]["line"] - 1]
        assert line[e["start"]["col"] - 1:e["end"]["col"] - 1] == text[e["start_offset"]:e["end_offset"]]


# ------------------------------------------------------------------ notebooks = modules
def _fixture_files():
    root = Path(__file__).parent / "fixtures"
    return sorted(p for p in root.glob("JAX*/**/*.py") if ".unsafe-fixed" not in p.name and ".fixed" not in p.name)


def _as_cells(text):
    """Cut a module into cells before every second top-level statement (decorators included)."""
    import ast
    lines = text.splitlines(keepends=True)
    starts = sorted({min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])])
                     for n in ast.parse(text).body})[1::2]
    cuts = [0] + [s - 1 for s in starts] + [len(lines)]
    cells = ["".join(lines[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
    return [c[:-1] if c.endswith("\n") else c for c in cells], cuts


@pytest.mark.parametrize("fixture", _fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_as_notebook_gives_the_same_findings_and_fixes(tmp_path, fixture):
    """Every lint fixture, cut into cells: nothing is masked, the findings are the module's
    (mapped back through cell_position), and --fix gives the module's fixed code.  (Both in the
    strict profile: a notebook is teaching material, where some findings are strict only.)"""
    from jaxlint.analysis import SourceFile
    from jaxlint.checkers import Settings

    def lint_source(src, strict=Settings(strict=True)):
        return _lint_source(src, settings=strict)
    text = fixture.read_text(encoding="utf-8")
    cells, cuts = _as_cells(text)
    code_starts = [a for a, b in zip(cuts, cuts[1:]) if b > a]
    path = write_nb(tmp_path / "nb.ipynb", [new_code_cell(c) for c in cells])
    nb = load_source(path)
    assert "IPython" not in nb.text or "IPython" in text
    module = lint_source(SourceFile(str(fixture), text))

    def label(m):      # module lines as the notebook names them
        groups = []
        for n in map(int, m.group(1).split(", ")):
            k = max(i for i, a in enumerate(code_starts) if a < n)
            if groups and groups[-1][0] == k + 1:
                groups[-1][1].append(n - code_starts[k])
            else:
                groups.append((k + 1, [n - code_starts[k]]))
        return "; ".join(f"cell {c}, line{'s' if len(ls) > 1 else ''} {', '.join(map(str, ls))}" for c, ls in groups)

    mapped = []
    for f in lint_source(nb):
        cell, line = nb.cell_position(f.line)
        mapped.append((f.code, code_starts[cell - 1] + line, f.col, f.message))    # lint_source relabels
    assert mapped == [(f.code, f.line, f.col, re.sub(r"(?<![\w:])lines? (\d+(?:, \d+)*)\b", label, f.message)) for f in module]

    fixed_module = fix_text(SourceFile(str(fixture), text), lint_source, unsafe=True).text
    report = fix_text(nb, lint_source, unsafe=True)
    nb.write_fixed(report.text)
    back = nbformat.read(path, 4)
    nbformat.validate(back)
    rebuilt = "\n".join(c.source for c in back.cells) + ("\n" if text.endswith("\n") else "")
    assert rebuilt == fixed_module


# ------------------------------------------------------------------ masking, property-based
PYTHON_BLOCKS = [
    ["x = 1"], ["y = (1", "     % 2)"], ["s = '''", "!not magic", "%not magic either", "'''"],
    ["t = 'a # not a comment ?'"], ["u = 1  # really?"],
    ["def f(a,", "      b):", "    return a % b"], ["z = [", "    1,", "    2,", "]"],
    ["w = 1 + \\", "    2"], ['q = "say \\"hi\\""'], ["if x:", "    pass"],
    ['r = f"{x!r} %d"'], ["class C:", "    '''doc?'''", "    v = 1"],
]
MAGIC_LINES = ["%time f(x)", "%matplotlib inline", "!pip install -q jax", "!!ls", "files = !ls",
               "out = %sx echo hi", "?jax.jit", "jax.jit?", "jnp.ones??", "%load_ext autoreload",
               "%config InlineBackend.figure_format = 'retina'"]


@st.composite
def cells(draw):
    lines, magic = [], []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["python", "magic", "nested"]))
        if kind == "python":
            lines.extend(draw(st.sampled_from(PYTHON_BLOCKS)))
        elif kind == "magic":
            magic.append(len(lines))
            lines.append(draw(st.sampled_from(MAGIC_LINES)))
        else:
            lines.append("for i in range(3):")
            magic.append(len(lines))
            lines.append("    " + draw(st.sampled_from(MAGIC_LINES)))
    return lines, magic


@settings(max_examples=200, deadline=None)
@given(cells())
def test_masking_hides_exactly_the_ipython_lines(cell):
    import ast

    from jaxlint.notebook import _mask_cell
    lines, magic = cell
    masked, hidden = _mask_cell("\n".join(lines))
    assert hidden == magic
    out = masked.split("\n")
    assert len(out) == len(lines)
    assert all(out[i] == lines[i] for i in range(len(lines)) if i not in magic)
    ast.parse(masked)
