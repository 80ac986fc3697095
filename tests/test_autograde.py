"""Autograde round trip with real nbgrader commands in a scratch copy of the course.

For every lesson: the solution gets full marks, the untouched release gets zero, and
every pitfall listed in tests/pitfalls/<lesson>.py loses exactly its exercise's points.
"""
from __future__ import annotations

import csv
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

import coursekit as kit
from autograder import course

LESSONS = course.lessons()
PITFALL_CASES = [
    (lesson, exercise, description)
    for lesson in LESSONS
    for exercise, wrong in kit.load_pitfalls(lesson).items()
    for description in wrong
]


def pitfall_student(lesson: str, exercise: str, description: str) -> str:
    index = list(kit.load_pitfalls(lesson)[exercise]).index(description)
    return f"pitfall-{exercise}-{index}".replace("_", "-")


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """Build, submit and autograde every case once; return (course root per lesson, scores per lesson).

    Each lesson gets its own scratch course (and gradebook), so the lessons are graded
    by parallel `nbgrader autograde` processes, one per core.
    """
    def run_lesson(lesson):
        root = kit.make_scratch_course(tmp_path_factory.mktemp(f"course-{lesson}"), [lesson])
        release_nb = kit.release_notebook(root, lesson)
        solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
        kit.submit(root, "solution", lesson, kit.fill_answers(release_nb, solution_nb))
        kit.submit(root, "untouched", lesson, release_nb)
        for exercise, wrong in kit.load_pitfalls(lesson).items():
            for description, answer in wrong.items():
                nb = kit.fill_answers(release_nb, solution_nb, {exercise: answer.strip("\n")})
                kit.submit(root, pitfall_student(lesson, exercise, description), lesson, nb)
        proc = kit.autograde(root, lesson)
        assert proc.returncode == 0, f"nbgrader autograde {lesson} failed:\n{proc.stdout}{proc.stderr}"
        return root, kit.scores(root, lesson)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        done = dict(zip(LESSONS, pool.map(run_lesson, LESSONS)))
    return {lesson: root for lesson, (root, _) in done.items()}, {lesson: sc for lesson, (_, sc) in done.items()}


def max_points(lesson: str) -> dict[str, float]:
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    return {name: entry["points"] for name, entry in kit.exercises(nb).items()}


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_gets_full_marks(graded, lesson):
    _, results = graded
    assert results[lesson]["solution"] == max_points(lesson)


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_release_scores_zero(graded, lesson):
    _, results = graded
    scored = results[lesson]["untouched"]
    assert set(scored) == set(max_points(lesson))
    assert all(points == 0 for points in scored.values()), scored


@pytest.mark.parametrize("lesson,exercise,description", PITFALL_CASES)
def test_pitfall_loses_exactly_its_exercise(graded, lesson, exercise, description):
    _, results = graded
    full = max_points(lesson)
    scored = results[lesson][pitfall_student(lesson, exercise, description)]
    expected = dict(full, **{exercise: 0})
    assert scored == expected, f"pitfall '{description}' in {exercise}: scored {scored}, expected {expected}"


@pytest.mark.parametrize("lesson,exercise,description", PITFALL_CASES)
def test_pitfall_failure_explains_itself(graded, lesson, exercise, description):
    """The failing test cell reports a CheckFailed with a reason, not a bare AssertionError."""
    roots, _ = graded
    root = roots[lesson]
    student = pitfall_student(lesson, exercise, description)
    nb = nbformat.read(root / "autograded" / student / lesson / f"{lesson}.ipynb", as_version=4)
    text = kit.output_text(nb, f"test_{exercise}")
    assert "CheckFailed" in text and len(text.split("CheckFailed:", 1)[1].strip()) > 20, text


def test_feedback_and_export(graded):
    """The instructor's next steps work on the graded class: feedback HTML and a grades CSV."""
    roots, _ = graded
    lesson = LESSONS[0]
    root = roots[lesson]
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
