"""The real round trip, for every lesson: plain `nbgrader autograde` and `python -m autograder grade`.

One scratch course holds every lesson, each with the submissions that prove the plumbing:
- the untouched release (zero);
- a wrong one: the first listed pitfall of one exercise (it fails a visible check) and a
  HIDDEN_ONLY wrong answer of another (it passes every visible check and fails a hidden
  one). It loses exactly those two exercises' points;
- for the grading command only, a forger: in up to two exercises, a wrong answer that also forges its
  evidence (tests/course/pitfalls FORGERIES: `checks` patched so booleans come out True, lying
  attributes, rewritten instrument records). Those exercises earn nothing. Only the lessons whose first
  forgeries bring a trick of their own hand one in (``FORGER_LESSONS``): 03's and 07's are the patched
  observe of 01 and a wrong return value (what "wrong" is), and test_pitfalls.py::test_forgery_is_rejected
  has the judge reject every FORGERIES entry of every lesson.

No student hands in the solution itself: the wrong submission keeps its answers in every exercise but
two, and the solution's own hidden checks pass against the stored reference in nbval's runs of
solutions/ (on this CPU, and under the rounding jitter: the same in-kernel comparison plain nbgrader
scores) and on the emulated CPU, where test_warm_kernels.py has the judge decide them.

Plain nbgrader grades both (one nbgrader start for every lesson, with warm kernels: the ``pte-warm``
kernelspec; a second start would pay nbgrader's start and the warm template again, and the suite is
CPU-bound); at the same time the grading command grades the
wrong one and the forger in a copy of the course (the battery in test_grading.py grades untouched
releases with it).

The release was recorded on this CPU; both graders run with the vector code of an older one
(test_cross_cpu.EMULATED_CPU), as an instructor who releases on a laptop and grades on a server
would. Plain nbgrader compares with the stored reference, so it proves that reference stable; the
grading command judges with the host's own run of the solution and reports every observation
where that run and the stored reference disagree (there must be none). Its run of the solution is also
judged both ways, as a student's observations are: a release recorded on either CPU grades the other's
solution with full marks.
Every other wrong answer is checked, faster, in test_pitfalls.py. The instructor's next steps on a class
plain nbgrader graded are test_exchange.py's (generate_feedback) and test_verdict_recorded.py's (nbgrader export,
its scores the gradebook's).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

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


# The lessons whose forger goes through the grading command: each brings a trick the others do not (01: observe
# patched, a lying instance attribute; 04: rewritten hook records; 05: a cleared tripwire log; 08: a spy's record
# written, a helper rebound; 09: an instrument function patched). 03's and 07's first forgeries are 01's patched
# observe and a wrong return value ("wrong" carries one in every lesson).
FORGER_LESSONS = {"01_tensors_and_views", "04_training_loop", "05_checkpointing", "08_mixed_precision",
                  "09_debugging_training"}


def forgeries(lesson: str) -> dict[str, str]:
    """exercise -> a wrong answer that also forges its evidence (the first FORGERIES entry of each of up to two
    exercises): patched checks, lying attributes, rewritten instrument records. Empty outside FORGER_LESSONS."""
    if lesson not in FORGER_LESSONS:
        return {}
    table = getattr(kit.load_pitfall_module(lesson), "FORGERIES", {}) or {}
    return {name: next(iter(answers.values())).strip("\n") for name, answers in list(table.items())[:2]}


def max_points(lesson: str) -> dict[str, float]:
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    return {name: entry["points"] for name, entry in kit.exercises(nb).items()}


def expected_scores(lesson: str) -> dict[str, dict[str, float]]:
    full = max_points(lesson)
    return {"untouched": {name: 0 for name in full}, "wrong": dict(full, **{name: 0 for name in wrong_answers(lesson)})}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One scratch course with every lesson, graded by both graders at once.

    After one ``generate_assignment`` for all lessons and the submissions, the course is copied
    once, so that two graders run side by side, each with its own gradebook file: plain
    ``nbgrader autograde`` of every lesson (in the course itself), and the grading command on the "wrong"
    and forger submissions of every lesson (in the copy).
    Returns (lesson -> its course folder as plain nbgrader graded it, lesson -> nbgrader scores,
    lesson -> autograded notebooks, lesson -> grader scores).
    """
    root = kit.make_scratch_course(tmp_path_factory.mktemp("roundtrip") / "course", LESSONS)
    for lesson in LESSONS:
        release_nb = kit.release_notebook(root, lesson)
        solution_nb = nbformat.read(course.solution_path(lesson), as_version=4)
        kit.submit(root, "untouched", lesson, release_nb)
        kit.submit(root, "wrong", lesson, kit.fill_answers(release_nb, solution_nb, wrong_answers(lesson)))
    twin = root.parent / "course-grading-command"
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
    plain = subprocess.Popen(course.nbgrader_cmd("autograde", "*", "--force", "--create",
                                                 f"--Execute.kernel_name={warm.KERNEL_NAME}", "--log-level=ERROR"),
                             env=other_cpu, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # "wrong" keeps the solution's answers in every exercise but two, so it also shows the
    # grading command giving full marks to correct answers; untouched releases are the battery's
    ours = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--course", str(twin), "--jobs", "2",
                             "--timeout-s", "300", "--student", "wrong", "--student", "forger"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=other_cpu)
    out, _ = plain.communicate(timeout=1800)
    assert plain.returncode == 0, f"nbgrader autograde failed:\n{out}"
    out, err = ours.communicate(timeout=1800)
    assert ours.returncode == 0, f"python -m autograder grade failed:\n{out}{err}"

    by_nbgrader = {lesson: kit.scores(root, lesson) for lesson in LESSONS}
    autograded = {lesson: {s: nbformat.read(root / "autograded" / s / lesson / f"{lesson}.ipynb", as_version=4)
                           for s in ("untouched", "wrong")} for lesson in LESSONS}
    by_grader = {lesson: kit.scores(twin, lesson) for lesson in LESSONS}
    report = json.loads((twin / "grading-report.json").read_text())
    return {lesson: root for lesson in LESSONS}, by_nbgrader, autograded, by_grader, report, twin


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
