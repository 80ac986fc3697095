"""What the class report reads: the grading command's reports (through ``GradingReport.read`` only) and, from
the course's solutions, each graded cell's points and each prediction's right answer.

- the class's results: ``<course>/grading-report.json`` (a grading run, or ``finish`` of a sharded one);
- each student's attempts: the feedback service grades each submission in a run of its own in its course
  folder (``.grading/feedback-service/course``), and every run keeps its report in ``.grading/runs/``
  (``reporting.keep_run``), named so that the names sort in time;
- per lesson, from ``solutions/<id>/<notebook>.ipynb``: the test cells' points (``exercise_of`` their grade id
  groups them into exercises) and the prediction cells' metadata with their answers.

Nothing here runs or imports anything of a student's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.grading.intake import predictions
from autograder.grading.messages import GradingReport, MessageError, NotebookResult
from autograder.grading.report.reporting import RUNS
from autograder.kernel.vocabulary import protocol

REPORT = "grading-report.json"
FEEDBACK_COURSE = Path(".grading/feedback-service/course")   # the service's STATE_DIR + "/course"
FEEDBACK_RUNS = FEEDBACK_COURSE / RUNS
NOTEBOOK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}")


class ReportMissing(Exception):
    """Nothing to report on: no grading report and no feedback run in the course folder."""


@dataclass
class Lesson:
    """One assignment as its solutions define it."""
    id: str
    points: dict[str, float] = field(default_factory=dict)        # test grade id -> points, in notebook order
    answers: dict[str, dict] = field(default_factory=dict)        # prediction id -> its metadata (answer included)

    def exercises(self) -> dict[str, list[str]]:
        """exercise -> its test cells' grade ids, in notebook order."""
        found: dict[str, list[str]] = {}
        for grade_id in self.points:
            found.setdefault(protocol.exercise_of(grade_id), []).append(grade_id)
        return found


@dataclass
class Inputs:
    """Everything one report is made from."""
    final: list[NotebookResult]                                    # one per student and notebook
    attempts: dict[tuple[str, str, str], list[NotebookResult]]      # (student, assignment, notebook) -> in order
    lessons: dict[str, Lesson]
    sources: list[str]                                             # which files, for the page's footer


def read_lesson(course: Path, assignment: str, notebooks: set[str]) -> Lesson:
    """An assignment's points and prediction answers from its solution notebooks (missing ones: none)."""
    lesson = Lesson(assignment)
    if not protocol.LESSON_ID.match(assignment):
        return lesson
    for name in sorted(notebooks):
        path = course / "solutions" / assignment / f"{name}.ipynb"
        if not NOTEBOOK_NAME.fullmatch(name) or not path.is_file():
            continue
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if protocol.is_test_cell(cell):
                meta = protocol.nbgrader_meta(cell)
                lesson.points[str(meta.get("grade_id"))] = float(meta.get("points") or 0)
        lesson.answers.update(predictions.answers(nb.cells))
    return lesson


def read_runs(folder: Path) -> tuple[dict[tuple[str, str, str], list[NotebookResult]], list[str]]:
    """Each student's notebooks' results, run by run in time order, from the feedback service's run reports;
    and the names of the reports that could not be read (another version: skipped, said on the page)."""
    attempts: dict[tuple[str, str, str], list[NotebookResult]] = {}
    skipped = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            report = GradingReport.read(path)
        except (OSError, MessageError):
            skipped.append(path.name)
            continue
        for result in report.submissions:
            attempts.setdefault((result.student, result.assignment, result.notebook), []).append(result)
    return attempts, skipped


def load(course: Path, assignment: str | None = None) -> Inputs:
    """The report's inputs for ``course`` (one assignment, or all the reports hold)."""
    course = Path(course)
    final: list[NotebookResult] = []
    sources = []
    if (course / REPORT).is_file():
        try:
            final = list(GradingReport.read(course / REPORT).submissions)
        except MessageError as exc:
            raise ReportMissing(f"{course / REPORT} is not a grading report this version reads ({exc}): "
                                "grade again (or run finish) with this version") from None
        sources.append(REPORT)
    attempts, skipped = read_runs(course / FEEDBACK_RUNS)
    if attempts:
        sources.append(f"{FEEDBACK_RUNS}/ ({len({p for p in attempts})} student notebooks' attempts)")
    sources += [f"skipped {name}: not this version's report" for name in skipped]
    graded = {(r.student, r.assignment, r.notebook) for r in final}
    final += [runs[-1] for key, runs in sorted(attempts.items()) if key not in graded]   # the feedback's last
    if assignment is not None:
        final = [r for r in final if r.assignment == assignment]
        attempts = {k: v for k, v in attempts.items() if k[1] == assignment}
    if not final:
        raise ReportMissing(f"nothing graded{f' for {assignment}' if assignment else ''} in {course}: no "
                            f"{REPORT} and no feedback service run ({FEEDBACK_RUNS})")
    notebooks: dict[str, set[str]] = {}
    for r in final:
        notebooks.setdefault(r.assignment, set()).add(r.notebook)
    lessons = {a: read_lesson(course, a, names) for a, names in sorted(notebooks.items())}
    return Inputs(final, attempts, lessons, sources)
