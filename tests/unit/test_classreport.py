"""The class report from hand-made grading reports (autograder/classreport/): its counts, its thresholds, what it
refuses to read, and what never reaches its page. tests/e2e/test_classreport.py proves it on a graded class."""
from __future__ import annotations

import csv
import json

import nbformat
import pytest

from autograder import classreport
from autograder.__main__ import main
from autograder.classreport import data
from autograder.grading.messages import CheckResult, GradingReport, NotebookResult, PredictionRead
from autograder.grading.report import reporting

LESSON = "01_demo"
HINT = "the batch dimension stays <b>even</b> for one"
PID = f"{LESSON}:shape"


def solution(root):
    nb = nbformat.v4.new_notebook()
    for grade_id in ("test_alpha", "test_beta"):
        cell = nbformat.v4.new_code_cell("check()")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": grade_id, "points": 2}
        nb.cells.append(cell)
    guess = nbformat.v4.new_code_cell("prediction_shape = (2, 3)")
    guess.metadata["pte"] = {"prediction": {"id": PID, "kind": "shape", "answer": [2, 3]}}
    nb.cells.append(guess)
    (root / "solutions" / LESSON).mkdir(parents=True)
    nbformat.write(nb, root / "solutions" / LESSON / f"{LESSON}.ipynb")


def result(student, alpha=True, beta=True, guess=None, state="answered"):
    checks = [CheckResult("test_alpha", "visible", 0, 0, "passed" if alpha else "failed",
                          "" if alpha else "check", "" if alpha else "CheckFailed"),
              CheckResult("test_alpha", "hidden", 1, 1, "passed" if alpha else "not-run",
                          "" if alpha else "not-run", "", HINT),
              CheckResult("test_beta", "visible", 0, 0, "passed"),
              CheckResult("test_beta", "hidden", 1, 1, "passed" if beta else "failed", "" if beta else "dtype", "",
                          HINT)]
    predictions = [] if state is None else [PredictionRead(PID, "shape", state, guess)]
    return NotebookResult(student, LESSON, LESSON, verdicts={"test_alpha": 2.0 * alpha, "test_beta": 2.0 * beta},
                          checks=checks, predictions=predictions)


def course_with(tmp_path, final, runs=()):
    solution(tmp_path)
    if final is not None:
        GradingReport(str(tmp_path), False, final).write(tmp_path / data.REPORT)
    for results in runs:
        reporting.keep_run(tmp_path / data.FEEDBACK_COURSE, GradingReport("service", True, results))
    return tmp_path


CLASS = ([result(f"ok-{i}", guess=[2, 3]) for i in range(4)] + [result(f"alpha-{i}", alpha=False, guess=[3, 2])
                                                                 for i in range(3)]
         + [result("beta-0", beta=False, guess=[9, 9]), result("none-0", state="not_answered"),
            result("odd-0", state="unreadable")])


def test_counts_per_exercise_check_and_prediction(tmp_path):
    root = course_with(tmp_path, CLASS)
    written = classreport.write(root, min_group=3)
    with open(written["exercises"], newline="") as handle:
        exercises = {r["exercise"]: r for r in csv.DictReader(handle)}
    assert {k: (r["students"], r["full"], r["partial"], r["none"]) for k, r in exercises.items()} == {
        "alpha": ("10", "7", "0", "3"), "beta": ("10", "9", "0", "1")}
    with open(written["checks"], newline="") as handle:
        checks = {(r["grade_id"], r["part"], r["index"]): r for r in csv.DictReader(handle)}
    assert {k: (r["failed"], r["not_run"], r["kinds"]) for k, r in checks.items()} == {
        ("test_alpha", "visible", "0"): ("3", "0", "check 3"), ("test_alpha", "hidden", "1"): ("0", "3", ""),
        ("test_beta", "visible", "0"): ("0", "0", ""), ("test_beta", "hidden", "1"): ("1", "0", "dtype 1")}
    page = written["page"].read_text()
    assert "(2, 3) (right): 4; (3, 2): 3; other answers: 1" in page, "answers fewer than 3 gave are counted only"
    assert "the batch dimension stays &lt;b&gt;even&lt;/b&gt; for one" in page and "<b>even" not in page
    assert not [r.student for r in CLASS if r.student in page]


def test_the_instructor_s_csv_names_students_and_no_one_else_reads_it(tmp_path):
    root = course_with(tmp_path, CLASS + [result("=HYPERLINK(1)", alpha=False)])
    written = classreport.write(root, min_group=3)
    assert written["students"].stat().st_mode & 0o777 == 0o600
    with open(written["students"], newline="") as handle:
        found = list(csv.DictReader(handle))
    assert {r["student_id"] for r in found} == {r.student for r in CLASS} | {"'=HYPERLINK(1)"}
    assert {r["failed_checks"] for r in found if r["student_id"] == "alpha-0"} == {"test_alpha", ""}


def test_a_lesson_graded_for_fewer_students_than_the_threshold_shows_no_figures(tmp_path):
    root = course_with(tmp_path, CLASS[3:7])
    page = classreport.page(root, min_group=5)
    assert "Fewer than 5 students" in page and "<img" not in page and "(2, 3)" not in page
    assert "<img" in classreport.page(root, min_group=4)
    (root / "nbgrader_config.py").write_text("c = get_config()\nc.PTEReport.min_group = 4\n")
    assert "<img" in classreport.page(root)


def test_attempts_per_student_until_each_exercise_passed(tmp_path):
    first = [result("a", alpha=False), result("b", alpha=False, beta=False)]
    second = [result("a"), result("b", alpha=False)]
    root = course_with(tmp_path, None, [first, second, [result("b", alpha=False)]])
    runs = sorted((root / data.FEEDBACK_RUNS).iterdir())
    assert len(runs) == 3 and (root / data.FEEDBACK_RUNS).stat().st_mode & 0o777 == 0o700
    assert {path.stat().st_mode & 0o777 for path in runs} == {0o600}, "the runs are the instructor's alone"
    written = classreport.write(root, min_group=1)
    with open(written["exercises"], newline="") as handle:
        exercises = {r["exercise"]: r for r in csv.DictReader(handle)}
    assert {k: (r["students"], r["none"], r["students_with_attempts"], r["passed_first_attempt"],
                r["median_attempts_to_pass"], r["never_passed"]) for k, r in exercises.items()} == {
        "alpha": ("2", "1", "2", "0", "2", "1"), "beta": ("2", "0", "2", "1", "1.5", "0")}
    with open(written["checks"], newline="") as handle:
        checks = {(r["grade_id"], r["part"]): r for r in csv.DictReader(handle)}
    assert (checks[("test_alpha", "visible")]["failed_first_attempt"],
            checks[("test_alpha", "visible")]["failed_last_attempt"]) == ("2", "1")
    assert "feedback attempts until each exercise" in written["page"].read_text()


def test_a_report_of_another_version_is_refused_or_skipped_by_name(tmp_path, capsys):
    root = course_with(tmp_path, CLASS, [[result("a")]])
    (root / data.FEEDBACK_RUNS / "00000000000000000001-1.json").write_text(json.dumps({"submissions": []}))
    assert "skipped 00000000000000000001-1.json" in classreport.page(root, min_group=1)
    report = json.loads((root / data.REPORT).read_text())
    (root / data.REPORT).write_text(json.dumps(dict(report, version=99)))
    with pytest.raises(SystemExit) as ended:
        main(["report", "--course", str(root)])
    assert ended.value.code == 2 and "version 99" in capsys.readouterr().err


def test_the_command_writes_beside_the_grades_and_says_what(tmp_path, capsys):
    root = course_with(tmp_path, CLASS)
    assert main(["report", "--course", str(root), "--assignment", LESSON, "--min-group", "3"]) == 0
    out = capsys.readouterr().out
    assert all(str(root / name) in out for name in classreport.OUTPUTS.values())
    with pytest.raises(SystemExit):
        main(["report", "--course", str(root), "--assignment", "02_other"])
    assert "nothing graded for 02_other" in capsys.readouterr().err


def test_the_feedback_service_s_runs_are_where_the_service_grades():
    from autograder.grading.plan.planning import GRADING_DIR
    from autograder.service.service import STATE_DIR

    assert data.FEEDBACK_COURSE.as_posix() == f"{STATE_DIR}/course"
    assert data.FEEDBACK_RUNS.as_posix() == f"{STATE_DIR}/course/{GRADING_DIR}/runs"
