"""Where the course lives and how the student release is made from it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

EXECUTION_TIMEOUT_S = 600

# nbgrader shells out to `alembic` (and the tools to `jupyter`): make this environment's
# scripts reachable even when the venv was not activated (`.venv/bin/python -m ...`).
_SCRIPTS = str(Path(sys.executable).parent)
if _SCRIPTS not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _SCRIPTS + os.pathsep + os.environ.get("PATH", "")


from autograder.grading.intake import predictions  # noqa: E402

# one definition of each, shared with the kernels and the grader (the tests and the tools name them here)
from autograder.kernel.paths import PACKAGE_ROOT as REPO_ROOT  # noqa: E402
from autograder.kernel.paths import data_dir  # noqa: E402,F401
from autograder.kernel.vocabulary import protocol  # noqa: E402
from autograder.kernel.vocabulary.protocol import REFERENCE_FILE  # noqa: E402,F401


def lessons(course_root: Path = REPO_ROOT, narrowed: bool = True) -> list[str]:
    """Assignment ids: the ``NN_topic`` folders under ``solutions/`` holding ``NN_topic.ipynb``.

    ``$PTE_LESSONS`` (comma-separated ids) narrows the list, e.g. while writing one lesson.
    """
    source = Path(course_root) / "solutions"
    found = sorted(
        p.name for p in source.iterdir()
        if p.is_dir() and protocol.LESSON_ID.match(p.name) and (p / f"{p.name}.ipynb").is_file()
    )
    wanted = [w for w in os.environ.get("PTE_LESSONS", "").split(",") if w] if narrowed else []
    return [lesson for lesson in found if not wanted or lesson in wanted]


def solution_path(lesson: str, course_root: Path = REPO_ROOT) -> Path:
    return Path(course_root) / "solutions" / lesson / f"{lesson}.ipynb"


def nbgrader_cmd(*args: str) -> list[str]:
    """The nbgrader command line of this Python environment."""
    return [sys.executable, "-m", "nbgrader", *args]


def execute_in_place(path: Path, timeout: int = EXECUTION_TIMEOUT_S, lesson: str | None = None,
                     env: dict[str, str] | None = None) -> None:
    """Run a solution notebook top to bottom in its folder, store fresh outputs and its reference observations.

    The kernel runs in recording mode (``PTE_OBSERVE=record``): each hidden check publishes
    what the solution produced. Those observations, per test cell, become the reference file
    that graders compare students' observations with; they are removed from the stored outputs.
    ``env`` adds to (or overrides) the kernel's environment, e.g. an emulated CPU's settings.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # timestamps would churn every diff and reach the student release
        cell.metadata.pop("execution", None)
    # Cells tagged requires-cuda run as they are: each checks for CUDA itself (a test insists on
    # it), so on a CPU the stored output is what the cell prints there, as a student will see it.
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute(env=dict(os.environ, **(env or {}), PTE_OBSERVE="record"))
    reference = protocol.Reference(lesson or path.stem)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        observed = protocol.observations_in(cell.get("outputs", []))
        cell["outputs"] = protocol.without_observations(cell.get("outputs", []))
        if protocol.is_test_cell(cell):
            grade_id = protocol.nbgrader_meta(cell)["grade_id"]
            if not observed:
                raise RuntimeError(f"{path.name}: test cell '{grade_id}' made no hidden observation; every graded "
                                   "test needs at least one (HiddenTests(...).observe(...))")
            reference.cells[grade_id] = protocol.Reference.entries(observed)
    nbformat.write(nb, path)
    reference.write(path.parent / protocol.REFERENCE_FILE)


def generate_release(course_root: Path = REPO_ROOT, lesson_ids: list[str] | None = None) -> None:
    """Regenerate ``notebooks/<id>/`` from ``solutions/<id>/`` with nbgrader (no gradebook needed).

    Every lesson at once is one nbgrader start (the assignment id is a glob over ``solutions/``)."""
    wanted = lessons(course_root) if lesson_ids is None else list(lesson_ids)
    every = set(wanted) == set(lessons(course_root, narrowed=False))
    for target in (["*"] if every else wanted):
        subprocess.run(
            nbgrader_cmd("generate_assignment", target, "--force", "--no-db", "--log-level=WARN"),
            cwd=course_root, check=True,
        )
    for lesson in wanted:
        _finish_release(Path(course_root) / "notebooks" / lesson / f"{lesson}.ipynb")


def _finish_release(path: Path) -> None:
    """What nbgrader's copy still needs before a student opens it.

    - The widget state of the solution's run (pictures the solution drew, fresh model ids on every
      release) has no place in the student's copy.
    - Every test cell is tagged ``raises-exception``. An unsolved exercise fails its test, and
      JupyterLab's Run All would otherwise stop there (the kernel aborts the queued cells): with the
      tag, JupyterLab asks the kernel not to stop, so every demo below still runs and every test
      shows its failure. The tag changes nothing about grading: a test that raises still scores 0 in
      nbgrader and in ``python -m autograder grade``, and the solutions, which nbval runs, have no tag.
    - The right answer of every prediction cell (``pte.prediction.answer``) stays in the solution:
      the student's copy would otherwise hold it in its metadata.
    """
    if not path.is_file():
        return
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)
    predictions.strip_answers(nb.cells)
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        if protocol.is_test_cell(cell):
            tags = meta.setdefault("tags", [])
            if protocol.RAISES_EXCEPTION not in tags:
                tags.append(protocol.RAISES_EXCEPTION)
    nbformat.write(nb, path)


def release(course_root: Path = REPO_ROOT, lesson_ids: list[str] | None = None, execute: bool = True) -> None:
    """``make release``: re-execute each solution so its outputs are current, then regenerate."""
    for lesson in lesson_ids or lessons(course_root):
        if execute:
            print(f"executing {lesson} ...", flush=True)
            execute_in_place(solution_path(lesson, course_root))
        generate_release(course_root, [lesson])
        print(f"released {lesson}", flush=True)
