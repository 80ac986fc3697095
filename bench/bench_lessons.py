"""Per lesson: seconds to execute the solution notebook, against the course's budget, and as a plain script.

    python -m bench.bench_lessons [LESSON ...] [--budget 10] [--no-script]        (make bench)

The notebook runs through nbclient in a fresh kernel: "run s" counts from starting the kernel
to the last cell's reply, "exit s" the kernel's shutdown after it (not part of the budget). The script
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

from autograder import course


def notebook_seconds(path: Path) -> tuple[float, float]:
    """(run, shutdown): seconds from starting a fresh kernel to the last cell's reply, then to the kernel's exit.

    A student's "Restart Kernel and Run All" waits for the first; the second (the interpreter
    tearing torch down, 1.5-3 s) happens when they close the notebook, so it is shown apart.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        ran = time.perf_counter()
    return ran - start, time.perf_counter() - ran


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


FLOOR = """
import time
start = time.perf_counter()
import torch
torched = time.perf_counter()
import matplotlib.pyplot
plotted = time.perf_counter()
torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)  # the first optimizer imports torch._dynamo
print(f"{torched - start:.2f} {plotted - torched:.2f} {time.perf_counter() - plotted:.2f}")
"""


def floor() -> str:
    """What every lesson pays before its own work: importing torch and matplotlib, and the first optimizer."""
    out = subprocess.run([sys.executable, "-c", FLOOR], check=True, capture_output=True, text=True).stdout.split()
    return f"import torch {out[0]} s, matplotlib.pyplot {out[1]} s, first torch.optim optimizer {out[2]} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*")
    parser.add_argument("--budget", type=float, default=10.0, help="seconds each lesson may take (default 10)")
    parser.add_argument("--no-script", action="store_true", help="skip the plain-script timing")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average {load()} before the first lesson")
    print(f"fixed costs in a fresh interpreter: {floor()}")
    header = f"{'lesson':<26} {'run s':>7} {'exit s':>7} {'script s':>9} {'ratio':>6}  {'load':>5}"
    print(f"{header}  budget {args.budget:g} s (run s)")
    over, total, total_exit = [], 0.0, 0.0
    for lesson in args.lessons or course.lessons():
        path = course.solution_path(lesson)
        run_s, exit_s = notebook_seconds(path)
        total += run_s
        total_exit += exit_s
        py_s = None if args.no_script else script_seconds(path)
        verdict = "ok" if run_s <= args.budget else f"OVER by {run_s - args.budget:.1f} s"
        if run_s > args.budget:
            over.append(lesson)
        script = f"{py_s:>9.2f} {run_s / py_s:>6.2f}" if py_s else f"{'-':>9} {'-':>6}"
        print(f"{lesson:<26} {run_s:>7.2f} {exit_s:>7.2f} {script}  {load():>5}  {verdict}", flush=True)
    print(f"{'all lessons':<26} {total:>7.2f} {total_exit:>7.2f}")
    print(f"{len(over)} lesson(s) over the {args.budget:g} s budget" + (f": {', '.join(over)}" if over else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
