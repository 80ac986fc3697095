"""``make check``: run every lesson's *visible* checks on your notebooks and show a table.

    python -m autograder.kernel.selfcheck [NOTEBOOKS ...] [--jobs N] [--timeout S] [--json FILE]

Each notebook runs top to bottom in a fresh kernel, in its own folder, the way the
**Validate** button and the grader run it; errors do not stop the run. The notebooks on
disk are only read: save your work first, nothing is written back. For every graded test
cell (grade id ``test_<exercise>``) the table says whether its checks passed or shows
the first failing message. Other cells that raised an error are listed too, since a
test cell below them may fail for that reason (cells tagged ``raises-exception`` raise
on purpose and are not listed).

Only the visible checks run here: a student's notebook holds no hidden tests, and if a
test cell still has a hidden part (an instructor's source notebook) it is cut off
before running. Grading runs the hidden tests as well, so passing every visible check
is necessary for full points, not a promise of them.

NOTEBOOKS are ``.ipynb`` files, folders (searched for ``<id>/<id>.ipynb``) or lesson ids
(``notebooks/<id>/<id>.ipynb``); the default is ``notebooks``. Exit status: 0 when every
visible check passed, 1 when one failed or a notebook could not run, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from autograder.kernel.paths import PACKAGE_ROOT
from autograder.kernel.vocabulary import protocol

# the per-cell cap where no course config is found (a student edition ships none); nbgrader_config.py's
# c.Execute.timeout, the grader's own cap, wins where there is one
DEFAULT_CELL_TIMEOUT_S = 120

NOTE = ("Only the visible checks ran. Hidden tests run when your work is graded: passing every visible "
        "check is needed for full points but does not guarantee them.")


def visible_part(source: str) -> str:
    """A test cell's source up to its hidden tests (all of it in a student's notebook)."""
    return protocol.split_hidden(source)[0].rstrip() + "\n"


def course_cell_timeout(start: Path | None = None) -> int:
    """The course's cap per cell: ``c.Execute.timeout`` of the nearest ``nbgrader_config.py`` at or above
    ``start`` (the working folder), else the repository's, else :data:`DEFAULT_CELL_TIMEOUT_S`."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents, PACKAGE_ROOT):
        config_file = folder / "nbgrader_config.py"
        if config_file.is_file():
            break
    else:
        return DEFAULT_CELL_TIMEOUT_S
    try:
        from traitlets.config.loader import PyFileConfigLoader
    except ImportError:
        return DEFAULT_CELL_TIMEOUT_S
    saved = dict(os.environ)   # the config may set variables for nbgrader's kernels; ours choose their own
    try:
        config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
        timeout = config.get("Execute", {}).get("timeout")
    except Exception:  # a config that does not load here: the checks still run, under the default cap
        timeout = None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return int(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else DEFAULT_CELL_TIMEOUT_S


def find_notebooks(targets: list[str]) -> list[Path]:
    """The notebooks that ``targets`` (files, folders, lesson ids) name, in order, without repeats."""
    found: list[Path] = []
    for target in targets:
        path = Path(target)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            lesson_nbs = sorted(p / f"{p.name}.ipynb" for p in path.iterdir() if p.is_dir()
                                and protocol.LESSON_ID.match(p.name) and (p / f"{p.name}.ipynb").is_file())
            if not lesson_nbs and (path / f"{path.name}.ipynb").is_file():
                lesson_nbs = [path / f"{path.name}.ipynb"]
            if not lesson_nbs:
                raise FileNotFoundError(f"{target}: no lesson notebooks (<id>/<id>.ipynb) in this folder")
            found.extend(lesson_nbs)
        elif protocol.LESSON_ID.match(target) and (Path("notebooks") / target / f"{target}.ipynb").is_file():
            found.append(Path("notebooks") / target / f"{target}.ipynb")
        else:
            raise FileNotFoundError(f"{target}: no such notebook, folder or lesson")
    unique: list[Path] = []
    for path in found:
        if path.resolve() not in {p.resolve() for p in unique}:
            unique.append(path)
    return unique


def _first_error(cell) -> dict | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return {"ename": out.get("ename", ""), "evalue": out.get("evalue", "")}
    return None


def _message(error: dict) -> str:
    if error["ename"] == "CheckFailed":
        return error["evalue"]
    return f"{error['ename']}: {error['evalue']}".rstrip(": ")


def _kernel_env(jobs: int) -> dict:
    env = dict(os.environ)
    # the kernel spec runs `python`: make it this environment's Python even if it was not activated
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    if jobs > 1:   # kernels running side by side should not each claim every core
        threads = str(max(1, (os.cpu_count() or 1) // jobs))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, threads)
    return env


def check_notebook(path: str, timeout: int | None = None, jobs: int = 1) -> dict:
    """Run one notebook in a fresh kernel; the result of each test cell and the other cells' errors."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    nb_path = Path(path)
    timeout = timeout or course_cell_timeout()
    started = time.monotonic()
    report = {"notebook": str(nb_path), "lesson": nb_path.stem, "status": "ran", "problem": None,
              "checks": [], "other_errors": [], "seconds": None}
    try:
        nb = nbformat.read(nb_path, as_version=4)
    except Exception as exc:  # a broken file is a finding to report, not a crash
        report.update(status="unreadable", problem=f"cannot read the notebook: {type(exc).__name__}: {exc}")
        return report
    for cell in nb.cells:
        cell.setdefault("metadata", {}).pop("execution", None)
        if protocol.is_test_cell(cell):
            cell.source = visible_part(cell.source)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, record_timing=False,
                            resources={"metadata": {"path": str(nb_path.parent.resolve())}})
    try:
        # the kernel's own log lines (e.g. ipykernel's transport warning) would only clutter the table
        client.execute(env=_kernel_env(jobs), stderr=subprocess.DEVNULL)
    except DeadKernelError as exc:
        report.update(status="kernel-died", problem=f"the kernel died ({exc}); the cells after it did not run")
    except Exception as exc:  # e.g. the kernel did not start
        report.update(status="error", problem=f"the notebook could not run: {type(exc).__name__}: {exc}")
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        error = _first_error(cell)
        if protocol.is_test_cell(cell):
            meta = protocol.nbgrader_meta(cell)
            grade_id = str(meta.get("grade_id", ""))
            ran = cell.get("execution_count") is not None
            report["checks"].append({
                "exercise": protocol.exercise_of(grade_id), "grade_id": grade_id,
                "points": meta.get("points", 0), "cell": index,
                "passed": ran and error is None,
                "message": _message(error) if error else (None if ran else "did not run"),
            })
        elif error and protocol.RAISES_EXCEPTION not in protocol.tags(cell):
            first_line = next((line for line in cell.source.splitlines() if line.strip()), "")
            report["other_errors"].append({"cell": index, "id": cell.get("id"),
                                           "grade_id": protocol.nbgrader_meta(cell).get("grade_id"),
                                           "first_line": first_line, "message": _message(error)})
    report["seconds"] = round(time.monotonic() - started, 1)
    return report


def run(paths: list[Path], jobs: int, timeout: int | None = None) -> list[dict]:
    """Reports for ``paths`` in their order, ``jobs`` notebooks at a time (each in its own process)."""
    timeout = timeout or course_cell_timeout()
    if jobs <= 1 or len(paths) <= 1:
        return [check_notebook(str(p), timeout, 1) for p in paths]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(check_notebook, str(p), timeout, jobs) for p in paths]
        return [f.result() for f in futures]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def format_table(reports: list[dict]) -> str:
    rows = [("lesson", "exercise", "points", "visible checks")]
    for rep in reports:
        if rep["status"] == "unreadable" and not rep["checks"]:
            rows.append((rep["lesson"], "-", "-", "NOT RUN: " + rep["problem"]))
        for chk in rep["checks"]:
            rows.append((rep["lesson"], chk["exercise"], str(chk["points"]), "passed" if chk["passed"]
                         else "FAILED: " + (chk["message"] or "failed")))
    lesson_w = max(len(r[0]) for r in rows)
    ex_w = max(len(r[1]) for r in rows)
    lines = []
    for i, (lesson, exercise, points, result) in enumerate(rows):
        lines.append(f"{lesson:<{lesson_w}}  {exercise:<{ex_w}}  {points:>6}  {_first_line(result)}")
        if i == 0:
            lines.append("-" * (len(lines[0]) + 20))
    return "\n".join(lines)


def format_report(reports: list[dict]) -> str:
    checks = [(rep, chk) for rep in reports for chk in rep["checks"]]
    passed = [chk for _, chk in checks if chk["passed"]]
    out = [f"Visible checks of {len(reports)} notebook(s), each run top to bottom in a fresh kernel.",
           "", format_table(reports), "",
           f"Passed the visible checks of {len(passed)} of {len(checks)} exercises "
           f"({sum(c['points'] for c in passed)} of {sum(c['points'] for _, c in checks)} points' worth).",
           NOTE]
    details = []
    for rep in reports:
        if rep["problem"]:
            details.append(f"{rep['notebook']}: {rep['problem']}")
        for err in rep["other_errors"]:
            where = f"cell {err['cell']}" + (f" ({err['grade_id']})" if err["grade_id"] else "")
            details.append(f"{rep['notebook']}, {where}, not a test cell, raised an error (tests below it may "
                           f"fail because of it):\n    {err['first_line']}\n    {err['message']}")
        for chk in rep["checks"]:
            if not chk["passed"] and chk["message"] and "\n" in chk["message"].strip():
                body = "\n".join("    " + line for line in chk["message"].strip().splitlines())
                details.append(f"{rep['lesson']} / {chk['exercise']}:\n{body}")
    if details:
        out += ["", "Details:", *details]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.kernel.selfcheck",
        description="Run the visible checks of your notebooks (hidden tests run at grading).")
    parser.add_argument("notebooks", nargs="*", default=["notebooks"],
                        help="notebooks, folders or lesson ids (default: notebooks)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks run side by side (default: half the cores, at most 4)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="seconds per cell (default: the course's c.Execute.timeout, else "
                             f"{DEFAULT_CELL_TIMEOUT_S})")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    try:
        paths = find_notebooks(args.notebooks)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    jobs = args.jobs or max(1, min(4, (os.cpu_count() or 2) // 2))
    jobs = max(1, min(jobs, len(paths)))
    print(f"Running {len(paths)} notebook(s), {jobs} at a time; your files are not changed ...", flush=True)
    reports = run(paths, jobs, args.timeout)
    print(format_report(reports))
    if args.json:
        Path(args.json).write_text(json.dumps({"note": NOTE, "notebooks": reports}, indent=1) + "\n")
    ok = all(rep["status"] == "ran" and all(chk["passed"] for chk in rep["checks"]) for rep in reports)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
