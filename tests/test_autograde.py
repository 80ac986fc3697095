"""The real round trip, for every lesson: plain `nbgrader autograde` and `python -m autograder grade`.

Each lesson gets a scratch course with three submissions that prove the plumbing:
- the solution (full marks);
- the untouched release (zero);
- a wrong one: the first listed pitfall of one exercise (it fails a visible check) and a
  HIDDEN_ONLY wrong answer of another (it passes every visible check and fails a hidden
  one). It loses exactly those two exercises' points.

Plain nbgrader grades all three; then the grading command regrades the solution and the
wrong one in the same gradebook (the battery in test_grading.py grades untouched releases).
Every other wrong answer is checked, faster, in test_pitfalls.py.
"""
from __future__ import annotations

import csv
import subprocess
import sys
from functools import lru_cache

import nbformat
import pytest

import coursekit as kit
from autograder import course

LESSONS = course.lessons()


def wrong_answers(lesson: str) -> dict[str, str]:
    """exercise -> wrong answer: one visible pitfall and one hidden-only mistake, in two exercises."""
    module = kit.load_pitfall_module(lesson)
    hidden_only = getattr(module, "HIDDEN_ONLY", {}) or {}
    pitfalls = getattr(module, "PITFALLS", {}) or {}
    chosen = {}
    if hidden_only:
        exercise, answers = next(iter(hidden_only.items()))
        chosen[exercise] = next(iter(answers.values()))
    for exercise, answers in pitfalls.items():
        if exercise not in chosen:
            chosen[exercise] = next(iter(answers.values()))
            break
    return {name: answer.strip("\n") for name, answer in chosen.items()}


def max_points(lesson: str) -> dict[str, float]:
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    return {name: entry["points"] for name, entry in kit.exercises(nb).items()}


def expected_scores(lesson: str) -> dict[str, dict[str, float]]:
    full = max_points(lesson)
    return {"solution": full, "untouched": {name: 0 for name in full},
            "wrong": dict(full, **{name: 0 for name in wrong_answers(lesson)})}


@lru_cache(maxsize=None)
def roundtrip(lesson: str, root_parent: str):
    """Build the scratch course, grade it with both graders, return (root, nbgrader scores, grader scores, report)."""
    from pathlib import Path

    root = kit.make_scratch_course(Path(root_parent) / f"course-{lesson}", [lesson])
    release_nb = kit.release_notebook(root, lesson)
    solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
    kit.submit(root, "solution", lesson, kit.fill_answers(release_nb, solution_nb))
    kit.submit(root, "untouched", lesson, release_nb)
    kit.submit(root, "wrong", lesson, kit.fill_answers(release_nb, solution_nb, wrong_answers(lesson)))
    plain = kit.autograde(root, lesson)
    assert plain.returncode == 0, f"nbgrader autograde {lesson} failed:\n{plain.stdout}{plain.stderr}"
    by_nbgrader = kit.scores(root, lesson)
    autograded = {s: nbformat.read(root / "autograded" / s / lesson / f"{lesson}.ipynb", as_version=4)
                  for s in ("solution", "untouched", "wrong")}
    # the untouched release under the grading command is the battery's business (test_grading.py)
    ours = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "2",
                           "--timeout-s", "300", "--student", "solution", "--student", "wrong"],
                          capture_output=True, text=True, timeout=900)
    assert ours.returncode == 0, f"python -m autograder grade {lesson} failed:\n{ours.stdout}{ours.stderr}"
    return root, by_nbgrader, autograded, kit.scores(root, lesson)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("roundtrip"))


@pytest.mark.parametrize("lesson", LESSONS)
def test_plain_nbgrader_autograde(scratch, lesson):
    _, by_nbgrader, _, _ = roundtrip(lesson, scratch)
    assert by_nbgrader == expected_scores(lesson)


@pytest.mark.parametrize("lesson", LESSONS)
def test_grading_command(scratch, lesson):
    _, _, _, by_grader = roundtrip(lesson, scratch)
    expected = expected_scores(lesson)
    assert {s: by_grader[s] for s in ("solution", "wrong")} == {s: expected[s] for s in ("solution", "wrong")}


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_release_fails_only_in_exercise_cells(scratch, lesson):
    """Never stuck: in the untouched release, run top to bottom, only test cells show errors."""
    _, _, autograded, _ = roundtrip(lesson, scratch)
    broken = [cell.get("id") for cell in autograded["untouched"].cells if cell.cell_type == "code"
              and any(o.output_type == "error" for o in cell.get("outputs", []))
              and not kit.nbgrader_meta(cell).get("grade_id", "").startswith("test_")
              and "raises-exception" not in cell.metadata.get("tags", [])]
    assert not broken, f"{lesson}: cells outside the exercises' tests fail in the untouched release: {broken}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_visible_pitfall_explains_itself(scratch, lesson):
    """The failing test cell reports a CheckFailed with a reason, not a bare AssertionError."""
    _, _, autograded, _ = roundtrip(lesson, scratch)
    module = kit.load_pitfall_module(lesson)
    visible_wrong = [name for name in wrong_answers(lesson) if name in (getattr(module, "PITFALLS", {}) or {})
                     and name not in (getattr(module, "HIDDEN_ONLY", {}) or {})]
    for exercise in visible_wrong:
        text = kit.output_text(autograded["wrong"], f"test_{exercise}")
        assert "CheckFailed" in text and len(text.split("CheckFailed:", 1)[1].strip()) > 20, text


def test_feedback_and_export(scratch):
    """The instructor's next steps work on the graded class: feedback HTML and a grades CSV."""
    lesson = LESSONS[0]
    root, _, _, _ = roundtrip(lesson, scratch)
    subprocess.run(course.nbgrader_cmd("generate_feedback", lesson, "--student", "solution", "--force",
                                       "--log-level=ERROR"), cwd=root, check=True)
    html = (root / "feedback" / "solution" / lesson / f"{lesson}.html").read_text()
    first_test = next(iter(kit.exercises(kit.release_notebook(root, lesson))))
    assert first_test in html
    subprocess.run(course.nbgrader_cmd("export", "--log-level=ERROR"), cwd=root, check=True)
    with open(root / "grades.csv") as handle:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(handle)}
    solution_row = rows[(lesson, "solution")]
    assert float(solution_row["score"]) == float(solution_row["max_score"]) == sum(max_points(lesson).values())
    assert float(rows[(lesson, "untouched")]["score"]) == 0.0
