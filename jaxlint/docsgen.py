"""Generate ``docs/rules.md`` and ``docs/rules/<CODE>.md`` from the rule registry.

    python -m jaxlint.docsgen [DOCS_DIR]      # default: docs/ next to the package

The rule pages are the rules' own docstrings, so docs and code cannot drift;
``tests/test_docs.py`` fails when the generated files are out of date.
"""
from __future__ import annotations

import os
import sys
from typing import Dict

from .checkers import all_rules


def render() -> Dict[str, str]:
    rules = all_rules()
    pages: Dict[str, str] = {}
    lines = [
        "# Rules",
        "",
        "Generated from the rule registry by `python -m jaxlint.docsgen`; do not edit by hand.",
        "`jaxlint rule CODE` prints the same page in a terminal.",
        "",
        "| Code | Symbol | Fix | Default | Summary |",
        "|---|---|---|---|---|",
    ]
    for r in rules:
        summary = r.summary.replace("|", "\\|")
        lines.append(f"| [{r.code}](rules/{r.code}.md) | `{r.symbol}` | {r.fix_applicability or '-'} | "
                     f"{'on' if r.default_enabled else 'off'} | {summary} |")
        pages[os.path.join("rules", f"{r.code}.md")] = r.markdown()
    pages["rules.md"] = "\n".join(lines) + "\n"
    return pages


def write(docs_dir: str) -> None:
    os.makedirs(os.path.join(docs_dir, "rules"), exist_ok=True)
    wanted = render()
    for rel, text in wanted.items():
        with open(os.path.join(docs_dir, rel), "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    for name in os.listdir(os.path.join(docs_dir, "rules")):
        if os.path.join("rules", name) not in wanted:
            os.remove(os.path.join(docs_dir, "rules", name))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    docs_dir = argv[0] if argv else os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    write(docs_dir)
    print(f"wrote {len(render())} files under {docs_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
