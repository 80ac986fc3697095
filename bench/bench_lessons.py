"""Per lesson: seconds to execute the solution notebook, seconds for the same code as a plain script.

    python bench/bench_lessons.py [LESSON ...]        (make bench)

The notebook runs through nbclient in a fresh kernel (kernel start included), the script
with the same interpreter in the notebook's folder (matplotlib on the Agg backend).
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*")
    args = parser.parse_args()
    print(f"{'lesson':<26} {'notebook s':>10} {'script s':>9} {'ratio':>6}")
    for lesson in args.lessons or course.lessons():
        path = course.solution_path(lesson)
        nb_s, py_s = notebook_seconds(path), script_seconds(path)
        print(f"{lesson:<26} {nb_s:>10.2f} {py_s:>9.2f} {nb_s / py_s:>6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
