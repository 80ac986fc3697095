"""The class report's figures, counted from its inputs (:mod:`.data`): per lesson and exercise, per check,
per prediction, and per student's attempts. Pure: no files, no pictures; student ids stay in the
per-student rows (:attr:`Tally.students`), which only the instructor's CSV shows."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from autograder.grading.messages import CheckResult, NotebookResult
from autograder.kernel import predictions as reveal

FAILING = ("failed", "error", "timeout")
TOLERANCE = 1e-9


@dataclass
class CheckTally:
    """One check of a graded cell, over the class (final results) and over attempts."""
    grade_id: str
    part: str
    index: int
    of: int
    hint: str = ""
    seen: int = 0                                       # students whose result has this check
    failed: int = 0                                     # failed, error or timeout
    not_run: int = 0
    kinds: Counter = field(default_factory=Counter)     # "dtype", "values", "exception: KeyError", "timeout", ...
    hints: Counter = field(default_factory=Counter)     # the visible part: which of the course's hints it named
    first_failed: int = 0                               # students with attempts who failed it on the first
    last_failed: int = 0                                # ... and on their last attempt

    @property
    def key(self) -> tuple[str, str, int]:
        return self.grade_id, self.part, self.index

    @property
    def share(self) -> float:
        return self.failed / self.seen if self.seen else 0.0

    @property
    def name(self) -> str:
        return (f"{self.grade_id}, visible checks" if self.part == "visible"
                else f"{self.grade_id}, hidden check {self.index} of {self.of}")

    @property
    def short_name(self) -> str:
        """The name on a picture: ``flatten_features 3/7`` (hidden check 3 of 7), ``flatten_features visible``."""
        exercise = self.grade_id.removeprefix("test_")
        return f"{exercise} visible" if self.part == "visible" else f"{exercise} {self.index}/{self.of}"

    @property
    def label(self) -> str:
        """The check's hint as the course defines it (the visible part: the one it named most often)."""
        if self.part == "visible":
            named = self.hints.most_common(1)
            return named[0][0] if named else ""
        return self.hint


@dataclass
class ExerciseTally:
    exercise: str
    grade_ids: list[str]
    max_points: float
    students: int = 0
    full: int = 0
    partial: int = 0
    none: int = 0
    points: float = 0.0
    with_attempts: int = 0
    to_pass: Counter = field(default_factory=Counter)   # attempts until it passed -> students; 0: never passed

    @property
    def mean(self) -> float:
        return self.points / self.students if self.students else 0.0


@dataclass
class PredictionTally:
    id: str
    form: str
    answer: object
    answered: int = 0
    right: int = 0
    not_answered: int = 0
    unreadable: int = 0
    spread: Counter = field(default_factory=Counter)    # the answer as the reveal writes it -> students


@dataclass
class LessonTally:
    id: str
    students: int = 0
    statuses: Counter = field(default_factory=Counter)
    exercises: dict[str, ExerciseTally] = field(default_factory=dict)
    checks: dict[tuple[str, str, int], CheckTally] = field(default_factory=dict)
    predictions: dict[str, PredictionTally] = field(default_factory=dict)


@dataclass
class Tally:
    lessons: dict[str, LessonTally]
    students: list[dict]        # one row per student, assignment and exercise: the instructor's CSV alone


def kind_of(check: CheckResult) -> str:
    if check.failure == "exception":
        return f"exception: {check.exception or 'other'}"
    if check.failure == "check" and check.exception not in ("", "CheckFailed", "AssertionError"):
        return f"check: {check.exception}"
    return check.failure or check.status


def _check(lesson: LessonTally, check: CheckResult) -> CheckTally:
    key = (check.grade_id, check.part, check.index)
    if key not in lesson.checks:
        lesson.checks[key] = CheckTally(check.grade_id, check.part, check.index, check.of, check.hint)
    return lesson.checks[key]


def _count_checks(lesson: LessonTally, result: NotebookResult) -> None:
    for check in result.checks:
        tally = _check(lesson, check)
        tally.seen += 1
        if check.status in FAILING:
            tally.failed += 1
            tally.kinds[kind_of(check)] += 1
            if check.part == "visible" and check.hint:
                tally.hints[check.hint] += 1
        elif check.status == "not-run":
            tally.not_run += 1


def earned(result: NotebookResult, grade_ids: list[str]) -> float:
    return sum(float(result.verdicts.get(g, 0.0)) for g in grade_ids)


def _count_exercises(lesson: LessonTally, result: NotebookResult, points: dict[str, float], rows: list) -> None:
    for tally in lesson.exercises.values():
        ids = [g for g in tally.grade_ids if g in points]
        got = earned(result, ids)
        tally.students += 1
        tally.points += got
        level = ("full" if got >= tally.max_points - TOLERANCE and tally.max_points > 0
                 else "none" if got <= TOLERANCE else "partial")
        setattr(tally, level, getattr(tally, level) + 1)
        failing = sorted({c.grade_id if c.part == "visible" else f"{c.grade_id}#{c.index}"
                          for c in result.checks if c.grade_id in ids and c.status in FAILING})
        rows.append({"student_id": result.student, "assignment": result.assignment, "notebook": result.notebook,
                     "exercise": tally.exercise, "points": round(got, 4), "max_points": tally.max_points,
                     "status": str(result.status), "failed_checks": " ".join(failing)})


def _count_predictions(lesson: LessonTally, result: NotebookResult, answers: dict[str, dict]) -> None:
    for read in result.predictions:
        spec = answers.get(read.id)
        if spec is None:        # not a prediction of the course's solutions
            continue
        tally = lesson.predictions.setdefault(read.id, PredictionTally(read.id, str(spec.get("kind", read.form)),
                                                                       spec.get("answer")))
        if read.state == "not_answered":
            tally.not_answered += 1
        elif read.state == "unreadable":
            tally.unreadable += 1
        else:
            tally.answered += 1
            tally.right += reveal.matches(read.value, tally.answer)
            tally.spread[reveal.shown(read.value)] += 1


def _count_attempts(lesson: LessonTally, runs: list[NotebookResult]) -> None:
    for tally in lesson.exercises.values():
        tally.with_attempts += 1
        passed = next((n for n, r in enumerate(runs, 1)
                       if tally.max_points > 0 and earned(r, tally.grade_ids) >= tally.max_points - TOLERANCE), 0)
        tally.to_pass[passed] += 1
    for position, result in (("first", runs[0]), ("last", runs[-1])):
        for check in result.checks:
            if check.status in FAILING:
                tally = _check(lesson, check)
                setattr(tally, f"{position}_failed", getattr(tally, f"{position}_failed") + 1)


def tally(inputs) -> Tally:
    """Every figure of the report from :class:`.data.Inputs`."""
    lessons: dict[str, LessonTally] = {}
    rows: list[dict] = []
    for assignment, lesson in inputs.lessons.items():
        found = lessons[assignment] = LessonTally(assignment)
        for exercise, ids in lesson.exercises().items():
            found.exercises[exercise] = ExerciseTally(exercise, ids, sum(lesson.points[g] for g in ids))
        for pid, spec in lesson.answers.items():   # every prediction shows, answered or not
            found.predictions[pid] = PredictionTally(pid, str(spec.get("kind", "number")), spec.get("answer"))
    students: dict[str, set[str]] = {}
    for result in sorted(inputs.final, key=lambda r: (r.assignment, r.student, r.notebook)):
        lesson = lessons[result.assignment]
        students.setdefault(result.assignment, set()).add(result.student)
        lesson.statuses[str(result.status)] += 1
        _count_checks(lesson, result)
        _count_exercises(lesson, result, inputs.lessons[result.assignment].points, rows)
        _count_predictions(lesson, result, inputs.lessons[result.assignment].answers)
    for (_, assignment, _), runs in sorted(inputs.attempts.items()):
        if assignment in lessons and runs:
            _count_attempts(lessons[assignment], runs)
    for assignment, names in students.items():
        lessons[assignment].students = len(names)
    return Tally(lessons, rows)
