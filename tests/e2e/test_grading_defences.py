"""Two submissions that once made the grader report its own fault, each beside an honest student.

- ``deep-json``: an ordinary cell displays a JSON array nested 5000 levels deep. Python's JSON decoder
  gives up on it (``RecursionError``) wherever the grader or nbgrader reads it back; the notebook is the
  student's, so it is graded like any other, with every point its answers earn.
- ``forged-graded-cell``: the student adds a code cell of their own whose nbgrader metadata claims 50
  points (``grade``, ``locked``, no ``grade_id``). It earns nothing and is reported as tampering; the
  honest answers beside it keep their points, and the notebook's maximum stays the release's.
"""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from autograder import course

import coursekit as kit
from test_grading import FULL, LESSON, ensure_bubblewrap

DEEP_JSON = ("import sys\n"
             "from IPython.display import display\n"
             "sys.setrecursionlimit(100_000)   # the kernel's own encoder then writes it whole\n"
             "deep = []\n"
             "for _ in range(5000):\n"
             "    deep = [deep]\n"
             "display({'application/json': deep, 'text/plain': 'deep'}, raw=True)\n")
FORGED_META = {"grade": True, "solution": False, "locked": True, "points": 50}


def student_cell(source: str, cell_id: str, nbgrader: dict | None = None):
    cell = nbformat.v4.new_code_cell(source)
    cell["id"] = cell_id
    if nbgrader is not None:
        cell.metadata["nbgrader"] = dict(nbgrader)
    return cell


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    assert ensure_bubblewrap(), "bubblewrap must work here"
    root = kit.make_scratch_course(tmp_path_factory.mktemp("defences"), [LESSON])
    release_nb = kit.release_notebook(root, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    kit.submit(root, "honest", LESSON, kit.fill_answers(release_nb, solution_nb))
    for student, cell in (("deep-json", student_cell(DEEP_JSON, "student-deep")),
                          ("forged-graded-cell", student_cell("print('worth 50 points')", "student-forged",
                                                              FORGED_META))):
        nb = kit.fill_answers(release_nb, solution_nb)
        setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(setup + 1, cell)
        kit.submit(root, student, LESSON, nb)
    cmd = [sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2", "--timeout-s", "120",
           "--cell-timeout-s", "30", "--memory-mb", "1500"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    report = json.loads((root / "grading-report.json").read_text())
    return root, proc, {s["student"]: s for s in report["submissions"]}


def test_deep_json_output_is_graded(graded):
    root, proc, results = graded
    entry = results["deep-json"]
    assert entry["status"] == "graded", (entry, proc.stderr)
    assert entry["score"] == 10.0 and entry["max_score"] == 10.0, entry
    assert kit.scores(root, LESSON)["deep-json"] == FULL


def test_an_added_graded_cell_is_tampering_and_earns_nothing(graded):
    root, proc, results = graded
    entry = results["forged-graded-cell"]
    assert entry["status"] in ("tampered", "graded"), (entry, proc.stderr)
    if entry["status"] == "tampered":
        assert "graded" in entry["reason"], entry
    assert entry["score"] == 10.0 and entry["max_score"] == 10.0, entry
    assert kit.scores(root, LESSON)["forged-graded-cell"] == FULL


def test_the_honest_neighbour_is_untouched(graded):
    root, proc, results = graded
    assert results["honest"]["status"] == "graded" and results["honest"]["score"] == 10.0, proc.stderr
    assert kit.scores(root, LESSON)["honest"] == FULL
