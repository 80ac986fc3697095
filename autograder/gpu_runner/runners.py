"""The notebook runners, both maintained tools run as they are: ``nbval`` (pytest compares the stored
outputs) and ``nbclient`` (a Jupyter kernel runs every cell), the choice between them, and lesson 08's CUDA
assertions. Each returns a row of the summary table (``report.row``). Standard library only at the top:
nbclient and nbformat are imported by the runner that uses them."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from autograder.kernel.vocabulary import protocol  # standard library only: the tags this runner acts on

from .machine import have
from .report import judge_cells, junit_counts, result_line_counts, row, tags
from .settings import CELL_TIMEOUT_S, ROOT, RUNNERS, Run

# what each runner imports, in this process or in the pytest it starts
NEEDS = {"nbval": ("pytest", "nbval", "nbformat", "ipykernel"), "nbclient": ("nbclient", "nbformat", "ipykernel")}
CUDA_ASSERTIONS = "08 CUDA assertions (unit/test_amp.py)"


def choose_runner(forced: str = "auto", available=have) -> str | None:
    """``forced``, or on ``auto`` the best runner whose modules import; ``None`` when that runner (or, on
    ``auto``, every runner) cannot run here."""
    for name in RUNNERS if forced == "auto" else (forced,):
        if available(*NEEDS[name]):
            return name
    return None


def no_runner(forced: str = "auto", available=have) -> str:
    """Why no runner can run here and what to install: for ``forced``, or on ``auto`` for the runner that
    needs the least (nbclient)."""
    names = RUNNERS if forced == "auto" else (forced,)
    missing = {name: [m for m in NEEDS[name] if not available(m)] for name in names}
    lacks = "; ".join(f"{name} lacks {', '.join(modules)}" for name, modules in missing.items())
    least = names[-1]
    return (f"no notebook runner can run in {sys.executable} ({lacks}). Install what {least} lacks there "
            f"(pip install {' '.join(missing[least])}), or, on a machine without network, put the wheels of "
            "those packages and of their dependencies in .whl/: the runner installs them offline for the run.")


def run_bounded(command: list[str], timeout: float, **kwargs) -> int | str:
    """Run ``command`` in its own process group; on timeout kill the whole group (kernels included).

    Returns the exit code, or ``"timeout"``.
    """
    process = subprocess.Popen(command, start_new_session=True, **kwargs)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return "timeout"


def run_pytest(run: Run, name: str, args: list[str]) -> dict:
    xml = run.work / f"{name}.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-ra",
               "--junitxml", str(xml), *args]
    code = run_bounded(command, run.budget.timeout(), cwd=ROOT)
    counts = junit_counts(xml)
    status = "ok" if code == 0 else ("TIMEOUT" if code == "timeout" else f"FAIL (pytest exit {code})")
    return row(name, counts["passed"] + counts["failed"], counts["skipped"], counts["passed"], counts["failed"],
               status, counts["notes"])


def run_nbval(run: Run, name: str, path: Path) -> dict:
    return run_pytest(run, name, ["-p", "conftest", "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
                                  "tests/support/nbval_sanitize.cfg", "--nbval-cell-timeout", str(CELL_TIMEOUT_S),
                                  str(path)])


def run_nbclient(run: Run, name: str, path: Path) -> dict:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    skip = set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and protocol.REQUIRES_CUDA in tags(cell) and not run.cuda:
            skip.add(index)
            cell.source = "pass  # requires CUDA: skipped on this machine"
    client = NotebookClient(nb, timeout=int(run.budget.timeout(CELL_TIMEOUT_S)), kernel_name="python3",
                            allow_errors=True, resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except Exception as exc:  # a dead kernel or a timeout: report it, keep the other lessons going
        return row(name, status="FAIL", notes=[f"{type(exc).__name__}: {exc}"[:400]])
    cells = [(cell, None if i in skip else cell.get("outputs", []))
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    return judge_cells(name, cells)


RUN = {"nbval": run_nbval, "nbclient": run_nbclient}


def run_cuda_assertions(run: Run) -> dict | None:
    """Lesson 08's ``test_cuda_*`` (tests/unit/test_amp.py): with pytest, else as a script."""
    if not (ROOT / "tests" / "unit" / "test_amp.py").is_file():
        return None
    if have("pytest"):
        result = run_pytest(run, "cuda-assertions", ["--noconftest", "tests/unit/test_amp.py", "-k", "test_cuda_"])
        result["lesson"] = CUDA_ASSERTIONS
        return result
    try:
        done = subprocess.run([sys.executable, "tests/unit/test_amp.py"], capture_output=True, text=True, cwd=ROOT,
                              timeout=run.budget.timeout())
    except subprocess.TimeoutExpired:
        return row(CUDA_ASSERTIONS, status="TIMEOUT")
    print(done.stdout, done.stderr, sep="")
    counts = result_line_counts(done.stdout)
    passed, failed, skipped = (counts.get(k, 0) for k in ("passed", "failed", "skipped"))
    status = "ok" if done.returncode == 0 and counts else f"FAIL (exit {done.returncode})"
    return row(CUDA_ASSERTIONS, passed + failed, skipped, passed, failed, status)
