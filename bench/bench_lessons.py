"""Per lesson: seconds to execute the solution notebook, against the course's budget, and as a plain script.

    python bench/bench_lessons.py [LESSON ...] [--budget 10] [--no-script]        (make bench)

The notebook runs through nbclient in a fresh kernel (kernel start included), the script
with the same interpreter in the notebook's folder (matplotlib on the Agg backend). Every
lesson must execute fresh in at most ``--budget`` seconds (10) on a quiet 2-core machine;
the last column says whether it did. Figures taken while other processes keep the cores
busy mean little, so the load average is printed first, and again with each lesson.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autograder import course  # noqa: E402


def notebook_seconds(path: Path) -> float:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def as_script(path: Path) -> str:
    """The notebook's code cells as one Python program (IPython display made available)."""
    nb = nbformat.read(path, as_version=4)
    parts = ["from IPython.display import display"]
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines = [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            if "raises-exception" in cell.metadata.get("tags", []):
                # a cell meant to raise (lesson 06 shows real error messages): the script goes on past it
                lines = ["try:"] + ["    " + line for line in lines] + ["    pass", "except Exception:", "    pass"]
            parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def script_seconds(path: Path) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(as_script(path))
    try:
        start = time.perf_counter()
        subprocess.run([sys.executable, handle.name], cwd=path.parent, check=True, capture_output=True,
                       env=dict(os.environ, MPLBACKEND="Agg"))
        return time.perf_counter() - start
    finally:
        os.unlink(handle.name)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*")
    parser.add_argument("--budget", type=float, default=10.0, help="seconds each lesson may take (default 10)")
    parser.add_argument("--no-script", action="store_true", help="skip the plain-script timing")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average {load()} before the first lesson")
    print(f"{'lesson':<26} {'notebook s':>10} {'script s':>9} {'ratio':>6}  {'load':>5}  budget {args.budget:g} s")
    over, total = [], 0.0
    for lesson in args.lessons or course.lessons():
        path = course.solution_path(lesson)
        nb_s = notebook_seconds(path)
        total += nb_s
        py_s = None if args.no_script else script_seconds(path)
        verdict = "ok" if nb_s <= args.budget else f"OVER by {nb_s - args.budget:.1f} s"
        if nb_s > args.budget:
            over.append(lesson)
        script = f"{py_s:>9.2f} {nb_s / py_s:>6.2f}" if py_s else f"{'-':>9} {'-':>6}"
        print(f"{lesson:<26} {nb_s:>10.2f} {script}  {load():>5}  {verdict}", flush=True)
    print(f"{'all lessons':<26} {total:>10.2f}")
    print(f"{len(over)} lesson(s) over the {args.budget:g} s budget" + (f": {', '.join(over)}" if over else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
