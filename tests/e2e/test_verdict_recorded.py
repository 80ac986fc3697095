"""The judge's verdict is the recorded score.

The grader decides each test cell (``judge.settle``) and nbgrader, in the recording process, turns the cells
into scores in the gradebook. A course's ``nbgrader_config.py`` may add preprocessors to that step; one that
changes what nbgrader reads (here: it drops the error outputs that carry the judge's failures) would change
grades unseen. Each notebook's result carries the judge's points per grade id, and after recording each
``auto_score`` is checked against them: a difference makes the notebook ``error`` with a reason naming the
grades, never a silent change of grade.

One score everywhere: that notebook's grades are then the judge's in the gradebook too (the grading command writes
its points into each grade's ``auto_score``), so the formgrader, nbgrader's own export, ``grades.csv`` and the LMS
exports all show the judge's verdict; an LMS export refuses a row in ``error`` unless told otherwise.
"""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import nbformat
from nbgrader.api import Gradebook

from autograder.grading.report.reporting import verdict_mismatches

import coursekit as kit
from test_grading import LESSON, ensure_bubblewrap

GENEROUS = '''

# A course preprocessor that changes what nbgrader reads: every error output is dropped, so every test cell
# looks passed to nbgrader whatever the judge decided.
from nbgrader.converters import Autograde as _Autograde
from nbgrader.preprocessors import NbGraderPreprocessor as _Base


class Generous(_Base):
    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if o.get("output_type") != "error"]
        return nb, resources


_steps = list(_Autograde.class_traits()["autograde_preprocessors"].default())
_at = next(i for i, step in enumerate(_steps) if step.__name__ == "Execute") + 1
c.Autograde.autograde_preprocessors = _steps[:_at] + [Generous] + _steps[_at:]
'''


def test_a_score_nbgrader_changed_is_a_grader_fault(tmp_path):
    ensure_bubblewrap()
    root = kit.make_scratch_course(tmp_path / "course", [LESSON])
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(GENEROUS)
    release = kit.release_notebook(root, LESSON)
    solution = nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    kit.submit(root, "honest", LESSON, kit.fill_answers(release, solution))
    kit.submit(root, "untouched", LESSON, release)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2",
                           "--assignment", LESSON], capture_output=True, text=True, timeout=900)
    report = json.loads((root / "grading-report.json").read_text())
    by_student = {item["student"]: item for item in report["submissions"]}
    honest, untouched = by_student["honest"], by_student["untouched"]
    assert honest["status"] == "graded" and honest["score"] == honest["max_score"], honest
    assert untouched["status"] == "error", (untouched, done.stderr[-2000:])
    assert untouched["reason"].startswith("grader fault: the recorded grades differ from the judge's verdict"), (
        untouched["reason"])
    assert "the judge gave 0, nbgrader recorded" in untouched["reason"]
    assert done.returncode == 3
    assert_one_score(root, {"honest": honest["max_score"], "untouched": 0.0})


def assert_one_score(root, judged: dict[str, float]) -> None:
    """The gradebook (what the formgrader shows), nbgrader's CSV export, grades.csv and the LMS export agree
    with the judge; the LMS export refuses the row in error unless allow_errors."""
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        recorded = {student: gb.find_submission(LESSON, student).score for student in judged}
    assert recorded == judged, recorded
    with open(root / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert {student: float(rows[student]["score"]) for student in judged} == judged, rows
    export = [sys.executable, "-m", "nbgrader", "export", "--log-level=ERROR"]
    subprocess.run(export + ["--to=nbgrader-grades.csv"], cwd=root, check=True, capture_output=True, timeout=300)
    with open(root / "nbgrader-grades.csv", newline="") as handle:
        theirs = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}
    assert theirs == judged, theirs
    (root / "lms-ids.csv").write_text("student_id,email\nhonest,h@x\nuntouched,u@x\n")
    lms = export + ["--exporter=autograder.lms.MoodleExport", "--to=moodle.csv"]
    refused = subprocess.run(lms, cwd=root, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and "untouched/" in refused.stderr and not (root / "moodle.csv").exists()
    subprocess.run(lms + ["--MoodleExport.allow_errors=True"], cwd=root, check=True, capture_output=True,
                   timeout=300)
    with open(root / "moodle.csv", newline="") as handle:
        written = {row["Email address"]: float(row[LESSON]) for row in csv.DictReader(handle)}
    assert written == {"h@x": judged["honest"], "u@x": judged["untouched"]}, written
    for student, points in judged.items():   # the feedback page, made again from the corrected gradebook
        page = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
        total = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", page)
        assert total and float(total.group(1)) == points, (student, total and total.group(0))


def test_mismatches_name_each_grade():
    assert verdict_mismatches({"test_a": 2.0, "test_b": 0.0}, {"test_a": 2.0, "test_b": 0.0}) == []
    assert verdict_mismatches({"test_a": 2.0, "test_b": 0.0}, {"test_a": 2.0, "test_b": 3.0}) == [
        "test_b: the judge gave 0, nbgrader recorded 3"]
    assert verdict_mismatches({"test_a": 2.0}, {}) == ["test_a: the judge gave 2, nbgrader recorded nothing"]
