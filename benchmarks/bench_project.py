"""Project-mode speed, whole command-line runs: lint the installed jax, flax and optax trees as one
project, cold (one process and ``--jobs N``), warm (the results cache filled, nothing changed),
with one file edited, and the start-up (``import jaxlint.cli``, ``jaxlint --version``).

    python benchmarks/bench_project.py [--packages jax flax optax] [--jobs N] [--repeat R]
                                       [--compare OTHER_CHECKOUT]

Fetches nothing: it copies the installed packages' sources into a temporary folder with a
``pyproject.toml`` (one project) and runs ``jaxlint check .`` there in fresh interpreters, as a
user does (text output into a pipe), against reading and ``ast.parse``-ing the same files in
one process (a fresh interpreter too).  Each measured run is a whole process: interpreter
start, imports, discovery, analysis, output.  The jaxlint measured is this checkout's (put on
``PYTHONPATH``), byte-compiled beforehand into a private ``PYTHONPYCACHEPREFIX`` as an installed
package is (this checkout has no ``__pycache__``: without it every run compiles jaxlint's
sources again).

Every line of issue 23's table is printed as measured in this one run, ``R`` times back to back
(the best run and the range: the machine is shared; the load average and the cores other
processes used meanwhile, from ``/proc/stat``, are printed with each round).  ``--compare`` runs
another checkout (e.g. ``git worktree add /tmp/base <commit>``) the same way, alternating with
this one in every round, so that both see the same conditions.  The outputs of the cold, the
``--jobs`` and the warm runs must be identical (the script stops otherwise).

Targets (issue 23): cold <= 1.5x ``ast.parse``, cold ``--jobs 2`` <= 1.0x, warm ``--jobs 2`` <=
0.10x, ``import jaxlint.cli`` <= 0.15 s, ``jaxlint --version`` <= 0.2 s; one edited file <= 0.5 s
(issue 9).
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# what the `jaxlint` console script runs
ENTRY = "import sys; from jaxlint.cli import main; sys.exit(main())"


def copy_packages(names, dest):
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            sys.exit(f"package {name!r} is not installed (pip install -e '.[test]')")
        src = os.path.dirname(spec.origin)
        shutil.copytree(src, os.path.join(dest, name),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    with open(os.path.join(dest, "pyproject.toml"), "w") as f:
        f.write("[project]\nname = 'bench'\n")


def python_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".jaxlint_cache")
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return out


def _busy_s():
    """Seconds of CPU time all processes of the machine have used so far (None: not Linux)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")    # minus idle and iowait


def _children_s():
    t = os.times()
    return t.children_user + t.children_system


def parse_child(root):
    """In a fresh interpreter: read and ``ast.parse`` every file of ``root``; prints seconds."""
    from bench_lint import run_parse
    files = python_files(root)
    gc.collect()
    wall, lines = run_parse(files)
    print(json.dumps({"wall": wall, "lines": lines, "files": len(files)}))


class Tree:
    """A jaxlint checkout to measure: its environment for child processes."""

    def __init__(self, name, path, tmp):
        self.name, self.path = name, os.path.abspath(path)
        self.env = dict(os.environ, PYTHONPATH=self.path, PYTHONPYCACHEPREFIX=os.path.join(tmp, "pyc-" + name))
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def run(self, args, cwd):
        """``(wall seconds, CPU seconds of the process and its children, other processes' cores
        meanwhile, exit code, stdout)`` of one whole process."""
        busy, own = _busy_s(), _children_s()
        t = time.perf_counter()
        r = subprocess.run([sys.executable] + args, cwd=cwd, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t
        cpu = _children_s() - own
        others = None if busy is None else max(0.0, (_busy_s() - busy) - cpu) / wall
        if r.returncode not in (0, 1):
            sys.exit(f"{self.name}: {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
        return wall, cpu, others, r.returncode, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", nargs="+", default=["jax", "flax", "optax"])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the --jobs runs (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every measurement (default 3)")
    ap.add_argument("--warm-repeat", type=int, default=5, help="warm and start-up runs per round (default 5)")
    ap.add_argument("--compare", metavar="CHECKOUT", help="another jaxlint checkout, measured alternately")
    ap.add_argument("--parse-child", metavar="ROOT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.parse_child:
        parse_child(args.parse_child)
        return
    tmp = tempfile.mkdtemp(prefix="jaxlint-bench-")
    try:
        measure(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(args, tmp):
    project = os.path.join(tmp, "project")
    os.mkdir(project)
    copy_packages(args.packages, project)
    trees = [Tree("this", REPO, tmp)] + ([Tree("compare", args.compare, tmp)] if args.compare else [])
    n = str(args.jobs)
    check = ["-c", ENTRY, "check", ".", "--exit-zero"]
    cmds = {
        "cold": check + ["--no-cache", "--jobs", "1"],
        "cold_jobs": check + ["--no-cache", "--jobs", n],
        "warm_jobs": check + ["--jobs", n],
        "import": ["-c", "import jaxlint.cli"],
        "version": ["-c", ENTRY, "--version"],
    }
    print(f"packages        {' '.join(args.packages)}: {len(python_files(project))} files, one project")
    for t in trees:     # untimed: byte-compiles everything the runs import into the tree's prefix
        for kind in ("cold", "warm_jobs", "warm_jobs", "import", "version"):
            t.run(cmds[kind], project)
        shutil.rmtree(os.path.join(project, ".jaxlint_cache"), ignore_errors=True)
        print(f"{t.name:<15} {t.path} (git {_git_head(t.path)})")
    results = {t.name: {k: [] for k in list(cmds) + ["parse", "fill", "edited"]} for t in trees}
    outputs = {}
    for i in range(args.repeat):
        parse = json.loads(subprocess.run([sys.executable, __file__, "--parse-child", project],
                                          capture_output=True, text=True, check=True).stdout)
        note = [f"round {i + 1}: ast.parse {parse['wall']:.3f} s ({parse['lines']} lines)"]
        for t in trees:
            got = results[t.name]
            got["parse"].append(parse["wall"])
            for kind in ("cold", "cold_jobs"):
                wall, cpu, others, rc, out = t.run(cmds[kind], project)
                got[kind].append((wall, cpu, others))
                outputs.setdefault(t.name, out)
                if out != outputs[t.name]:
                    sys.exit(f"{t.name}: {kind} reported something else than the first cold run")
            shutil.rmtree(os.path.join(project, ".jaxlint_cache"), ignore_errors=True)
            wall, cpu, others, rc, out = t.run(cmds["warm_jobs"], project)     # fills the cache
            got["fill"].append((wall, cpu, others))
            for _ in range(args.warm_repeat):
                for kind in ("warm_jobs", "import", "version"):
                    wall, cpu, others, rc, out = t.run(cmds[kind], project)
                    got[kind].append((wall, cpu, others))
                    if kind == "warm_jobs" and out != outputs[t.name]:
                        sys.exit(f"{t.name}: the warm run reported something else than the cold one")
            shutil.rmtree(os.path.join(project, ".jaxlint_cache"), ignore_errors=True)
            note.append(f"{t.name}: cold {got['cold'][-1][0]:.2f} s, --jobs {n} {got['cold_jobs'][-1][0]:.2f} s, "
                        f"warm {min(w for w, _, _ in got['warm_jobs'][-args.warm_repeat:]):.3f} s")
        note.append(f"load {os.getloadavg()[0]:.2f}")
        print(" | ".join(note), flush=True)
    if len(trees) > 1 and outputs[trees[0].name] != outputs[trees[1].name]:
        print("note: the two checkouts report different findings (not an error: their rules may differ)")
    # one file edited after a warm run (a comment appended), this checkout only
    t = trees[0]
    t.run(cmds["warm_jobs"], project)
    touched = python_files(project)[len(python_files(project)) // 2]
    with open(touched, "a", encoding="utf-8") as f:
        f.write("\n# touched by bench_project.py\n")
    edited = t.run(cmds["warm_jobs"], project)
    warm_again = t.run(cmds["warm_jobs"], project)
    report(args, trees, results, edited, warm_again, touched, project)


def _git_head(path):
    r = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", path, "status", "--porcelain", "--untracked-files=no", "jaxlint"],
                           capture_output=True, text=True).stdout.strip()
    return (r.stdout.strip() or "?") + (" + uncommitted changes" if dirty else "")


def _cores(x):
    return "?" if x is None else f"{x:.2f}"


ROWS = [("cold", "cold, one process", "ratio", 1.5), ("cold_jobs", "cold, --jobs {n}", "ratio", 1.0),
        ("warm_jobs", "warm (nothing changed), --jobs {n}", "ratio", 0.10),
        ("import", "python -c 'import jaxlint.cli'", "seconds", 0.15),
        ("version", "jaxlint --version", "seconds", 0.2)]


def report(args, trees, results, edited, warm_again, touched, project):
    print()
    print(f"load average    {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"each line: the best run (ratio to that round's ast.parse, wall time, CPU time), the range over "
          f"{args.repeat} rounds, and the most cores other processes used during a run of that line")
    for t in trees:
        got = results[t.name]
        parse = min(got["parse"])
        print(f"\n{t.name} ({t.path})")
        print(f"  ast.parse (read + parse, in one process)   {parse:.3f} s (best of {len(got['parse'])})")
        for kind, label, unit, target in ROWS:
            runs = got[kind]
            per_round = len(runs) // args.repeat
            ratios = [w / got["parse"][j // per_round] for j, (w, _, _) in enumerate(runs)]
            best = min(range(len(runs)), key=lambda j: runs[j][0])
            wall, cpu, _ = runs[best]
            busiest = max((o for _, _, o in runs if o is not None), default=None)
            if unit == "ratio":
                met = "met" if ratios[best] <= target else "NOT met"
                print(f"  {label.format(n=args.jobs):<42} {ratios[best]:.3f}x  ({wall:.3f} s wall, {cpu:.3f} s CPU; "
                      f"{min(ratios):.3f}-{max(ratios):.3f}x)  target <= {target}x: {met}  "
                      f"[others <= {_cores(busiest)} cores]")
            else:
                met = "met" if wall <= target else "NOT met"
                print(f"  {label:<42} {wall:.3f} s  ({cpu:.3f} s CPU; {min(w for w, _, _ in runs):.3f}-"
                      f"{max(w for w, _, _ in runs):.3f} s, {wall / parse:.3f}x)  target <= {target} s: {met}  "
                      f"[others <= {_cores(busiest)} cores]")
        fill = got["fill"]
        print(f"  {'cache fill, --jobs ' + str(args.jobs):<42} {min(w for w, _, _ in fill) / parse:.3f}x  "
              f"({min(w for w, _, _ in fill):.3f} s)")
    print(f"\none file edited ({os.path.relpath(touched, project)}), then warm again ({trees[0].name}): "
          f"{edited[0]:.3f} s (target <= 0.5 s), then {warm_again[0]:.3f} s")
    # the same as a table (best run, and the range over the rounds)
    print("\n| run | " + " | ".join(t.name for t in trees) + " | target |")
    print("|---|" + "---|" * len(trees) + "---|")
    for kind, label, unit, target in ROWS:
        cells = []
        for t in trees:
            got = results[t.name]
            runs = got[kind]
            per_round = len(runs) // args.repeat
            if unit == "ratio":
                ratios = [w / got["parse"][j // per_round] for j, (w, _, _) in enumerate(runs)]
                cells.append(f"{min(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if kind != "warm_jobs"
                             else f"{min(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})")
            else:
                walls = [w for w, _, _ in runs]
                cells.append(f"{min(walls):.3f} s ({min(walls):.3f}-{max(walls):.3f})")
        bound = f"<= {target}x" if unit == "ratio" else f"<= {target} s"
        print(f"| {label.format(n=args.jobs)} | " + " | ".join(cells) + f" | {bound} |")


if __name__ == "__main__":
    main()
