"""The real round trip, for every lesson: plain `nbgrader autograde` and `python -m autograder grade`.

One scratch course holds every lesson, each with the submissions that prove the plumbing:
- the untouched release (zero);
- a wrong one: the first listed pitfall of one exercise (it fails a visible check) and a
  HIDDEN_ONLY wrong answer of another (it passes every visible check and fails a hidden
  one). It loses exactly those two exercises' points;
- for the grading command only, a forger: in up to two exercises, a wrong answer that also forges its
  evidence (tests/course/pitfalls FORGERIES: `checks` patched so booleans come out True, lying
  attributes, rewritten instrument records). Those exercises earn nothing.

No student hands in the solution itself: the wrong submission keeps its answers in every exercise but
two, and the solution's own hidden checks pass against the stored reference in nbval's run of
solutions/ (on this CPU, on the emulated one, under the rounding jitter), the same in-kernel
comparison plain nbgrader scores.

Plain nbgrader grades both (two nbgrader starts, each for half of the lessons, side by
side, with warm kernels: the ``pte-warm`` kernelspec); at the same time the grading command grades the
wrong one and the forger in a copy of the course (the battery in test_grading.py grades untouched
releases with it).

The release was recorded on this CPU; both graders run with the vector code of an older one
(test_cross_cpu.EMULATED_CPU), as an instructor who releases on a laptop and grades on a server
would. Plain nbgrader compares with the stored reference, so it proves that reference stable; the
grading command judges with the host's own run of the solution and reports every observation
where that run and the stored reference disagree (there must be none). Its run of the solution is also
judged both ways, as a student's observations are: a release recorded on either CPU grades the other's
solution with full marks.
Every other wrong answer is checked, faster, in test_pitfalls.py.
"""
from __future__ import annotations

import csv
import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_cross_cpu import EMULATED_CPU

from autograder import course, warm
from autograder.grading.judging import judge
from autograder.grading.plan.planning import GRADING_DIR
from autograder.grading.run.reference import CACHE_DIR
from autograder.kernel.vocabulary import messages, protocol

import coursekit as kit

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


def forgeries(lesson: str) -> dict[str, str]:
    """exercise -> a wrong answer that also forges its evidence (the first FORGERIES entry of each of up to two
    exercises): patched checks, lying attributes, rewritten instrument records."""
    table = getattr(kit.load_pitfall_module(lesson), "FORGERIES", {}) or {}
    return {name: next(iter(answers.values())).strip("\n") for name, answers in list(table.items())[:2]}


def max_points(lesson: str) -> dict[str, float]:
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    return {name: entry["points"] for name, entry in kit.exercises(nb).items()}


def expected_scores(lesson: str) -> dict[str, dict[str, float]]:
    full = max_points(lesson)
    return {"untouched": {name: 0 for name in full}, "wrong": dict(full, **{name: 0 for name in wrong_answers(lesson)})}


# plain nbgrader grades the course in two halves at once (lessons with odd and even numbers)
HALVES = ("[0-9][13579]_*", "[0-9][02468]_*")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One scratch course with every lesson, graded by both graders at once.

    After one ``generate_assignment`` for all lessons and the submissions, the course is copied
    twice, so that three graders run side by side, each with its own gradebook file: plain
    ``nbgrader autograde`` on the odd lessons (in the course itself) and on the even ones (in a
    copy), and the grading command on the "wrong" submissions of every lesson (in the other copy).
    Returns (lesson -> its course folder as plain nbgrader graded it, lesson -> nbgrader scores,
    lesson -> autograded notebooks, lesson -> grader scores).
    """
    root = kit.make_scratch_course(tmp_path_factory.mktemp("roundtrip") / "course", LESSONS)
    for lesson in LESSONS:
        release_nb = kit.release_notebook(root, lesson)
        solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
        kit.submit(root, "untouched", lesson, release_nb)
        kit.submit(root, "wrong", lesson, kit.fill_answers(release_nb, solution_nb, wrong_answers(lesson)))
    even, twin = root.parent / "course-even", root.parent / "course-grading-command"
    shutil.copytree(root, even)
    shutil.copytree(root, twin)
    for lesson in LESSONS:   # only the grading command is meant to see through forged evidence
        release_nb = kit.release_notebook(twin, lesson)
        solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
        if forgeries(lesson):   # a lesson without FORGERIES would hand in the solution: nothing new to prove
            kit.submit(twin, "forger", lesson, kit.fill_answers(release_nb, solution_nb, forgeries(lesson)))
    other_cpu = dict(os.environ, **EMULATED_CPU)
    # plain nbgrader's kernels fork from a warm template (the course's pte-warm kernelspec, named on the command
    # line): the round trip checks scores and outputs, not how a kernel starts, and test_warm_kernels.py proves
    # a warm kernel's outputs and observations identical to a cold one's
    plain = {folder: subprocess.Popen(course.nbgrader_cmd("autograde", pattern, "--force", "--create",
                                                          f"--Execute.kernel_name={warm.KERNEL_NAME}",
                                                          "--log-level=ERROR"), env=other_cpu,
                                      cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for folder, pattern in zip((root, even), HALVES)
             if any(fnmatch.fnmatch(lesson, pattern) for lesson in LESSONS)}   # PTE_LESSONS may empty a half
    # "wrong" keeps the solution's answers in every exercise but two, so it also shows the
    # grading command giving full marks to correct answers; untouched releases are the battery's
    ours = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--course", str(twin), "--jobs", "2",
                             "--timeout-s", "300", "--student", "wrong", "--student", "forger"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=other_cpu)
    for folder, proc in plain.items():
        out, _ = proc.communicate(timeout=1800)
        assert proc.returncode == 0, f"nbgrader autograde in {folder.name} failed:\n{out}"
    out, err = ours.communicate(timeout=1800)
    assert ours.returncode == 0, f"python -m autograder grade failed:\n{out}{err}"

    def graded_in(lesson: str) -> Path:
        return root if fnmatch.fnmatch(lesson, HALVES[0]) else even

    assert all(fnmatch.fnmatch(lesson, HALVES[graded_in(lesson) is even]) for lesson in LESSONS)
    by_nbgrader = {lesson: kit.scores(graded_in(lesson), lesson) for lesson in LESSONS}
    autograded = {lesson: {s: nbformat.read(graded_in(lesson) / "autograded" / s / lesson / f"{lesson}.ipynb",
                                            as_version=4)
                           for s in ("untouched", "wrong")} for lesson in LESSONS}
    by_grader = {lesson: kit.scores(twin, lesson) for lesson in LESSONS}
    report = json.loads((twin / "grading-report.json").read_text())
    return {lesson: graded_in(lesson) for lesson in LESSONS}, by_nbgrader, autograded, by_grader, report, twin


@pytest.mark.parametrize("lesson", LESSONS)
def test_plain_nbgrader_autograde(graded, lesson):
    by_nbgrader = graded[1]
    assert by_nbgrader[lesson] == expected_scores(lesson)   # the forger is only the grading command's


@pytest.mark.parametrize("lesson", LESSONS)
def test_grading_command(graded, lesson):
    by_grader = graded[3]
    expected = expected_scores(lesson)
    forger = by_grader[lesson].pop("forger", None)
    assert by_grader[lesson] == {"wrong": expected["wrong"]}
    assert (forger is not None) == bool(forgeries(lesson)), f"{lesson}: a forger graded or missing: {forger}"
    if forger is None:
        return   # the lesson has no FORGERIES, so no forger handed anything in
    # the forged exercises earn nothing; a patch of the checks may cost the forger other exercises too
    # (it forces booleans there as well), never more than their points
    forged = forgeries(lesson)
    assert {name: forger[name] for name in forged} == {name: 0 for name in forged}, forger
    assert all(0 <= forger[name] <= points for name, points in max_points(lesson).items()), forger


@pytest.mark.parametrize("lesson", LESSONS)
def test_host_reference_agrees_with_the_stored_one(graded, lesson):
    """The grading command judged with its own run of the solution, which matches the stored record."""
    used = graded[4]["references"][lesson]
    assert used["source"] == "host" and not used["problem"], used
    assert used["differences"] == [], f"{lesson}: platform-sensitive observations: {used['differences']}"


def judge_all(reference: dict[str, list[dict]], observed: dict[str, list[dict]]) -> dict[str, str]:
    """test cell -> why the judge rejects ``observed`` against ``reference`` (empty when it accepts all)."""
    rejected = {}
    for test, entries in reference.items():
        payloads = [messages.Observation(test, index, entry["label"], entry["value"], entry["atol"], entry["rtol"],
                                         entry.get("hint")) for index, entry in enumerate(observed.get(test, []))]
        verdict = judge.judge_cell(entries, payloads, finished=True)
        if not verdict.passed:
            rejected[test] = verdict.reason
    return rejected


@pytest.mark.parametrize("lesson", LESSONS)
def test_judge_accepts_the_other_cpus_observations(graded, lesson):
    """The grading command's run of the solution, under the emulated CPU (its reference cache), judged as a
    student's observations against the stored reference, and the stored ones against it."""
    used, twin = graded[4]["references"][lesson], graded[5]
    emulated = protocol.Reference.read(twin / GRADING_DIR / CACHE_DIR / f"{lesson}-{used['key']}.json").cells
    stored = judge.load_reference(course.REPO_ROOT / "solutions", lesson)
    assert set(emulated) == set(stored)
    assert judge_all(stored, emulated) == {}, "released here, graded on the other CPU"
    assert judge_all(emulated, stored) == {}, "released on the other CPU, graded here"


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_release_fails_only_in_exercise_cells(graded, lesson):
    """Never stuck: in the untouched release, run top to bottom, only test cells show errors, and the self-check at
    the end reports every exercise unsolved (test_browser.py runs the release in JupyterLab for the first lesson
    only; this is the same run's verdict for every lesson)."""
    nb = graded[2][lesson]["untouched"]
    broken = [cell.get("id") for cell in nb.cells if cell.cell_type == "code"
              and any(o.output_type == "error" for o in cell.get("outputs", []))
              and not kit.nbgrader_meta(cell).get("grade_id", "").startswith("test_")
              and "raises-exception" not in cell.metadata.get("tags", [])]
    assert not broken, f"{lesson}: cells outside the exercises' tests fail in the untouched release: {broken}"
    last = [cell for cell in nb.cells if cell.cell_type == "code"][-1]
    printed = "".join(o.get("text", "") for o in last.get("outputs", []) if o.output_type == "stream")
    tests = len(kit.exercises(nb))
    assert f"Passed the visible checks of 0 of {tests} exercises" in printed, (
        f"{lesson}: the self-check at the end of the untouched release should report 0 of {tests} exercises "
        f"passed; it printed {printed[:600]!r}")


@pytest.mark.parametrize("lesson", LESSONS)
def test_visible_pitfall_explains_itself(graded, lesson):
    """The failing test cell reports a CheckFailed with a reason, not a bare AssertionError."""
    autograded = graded[2][lesson]
    module = kit.load_pitfall_module(lesson)
    visible_wrong = [name for name in wrong_answers(lesson) if name in (getattr(module, "PITFALLS", {}) or {})
                     and name not in (getattr(module, "HIDDEN_ONLY", {}) or {})]
    for exercise in visible_wrong:
        text = kit.output_text(autograded["wrong"], f"test_{exercise}")
        assert "CheckFailed" in text and len(text.split("CheckFailed:", 1)[1].strip()) > 20, text


def test_feedback_and_export(graded):
    """The instructor's next steps work on the graded class: feedback HTML and a grades CSV."""
    lesson = LESSONS[0]
    root = graded[0][lesson]
    subprocess.run(course.nbgrader_cmd("generate_feedback", lesson, "--student", "wrong", "--force",
                                       "--log-level=ERROR"), cwd=root, check=True)
    html = (root / "feedback" / "wrong" / lesson / f"{lesson}.html").read_text()
    first_test = next(iter(kit.exercises(kit.release_notebook(root, lesson))))
    assert first_test in html
    subprocess.run(course.nbgrader_cmd("export", "--log-level=ERROR"), cwd=root, check=True)
    with open(root / "grades.csv") as handle:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(handle)}
    wrong_row, full = rows[(lesson, "wrong")], max_points(lesson)
    assert float(wrong_row["max_score"]) == sum(full.values())
    assert float(wrong_row["score"]) == sum(full.values()) - sum(full[name] for name in wrong_answers(lesson))
    assert float(rows[(lesson, "untouched")]["score"]) == 0.0
