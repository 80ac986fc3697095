"""The end of a run: each notebook's score from the gradebook nbgrader wrote, ``grades.csv`` and
``grading-report.json`` (or a shard's own pair), and the progress a person watches meanwhile.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import fields
from pathlib import Path

from autograder.grading.isolate import sandbox
from autograder.grading.messages import GradingReport, NotebookResult
from autograder.grading.plan import shards
from autograder.grading.plan.planning import GRADING_DIR
from autograder.grading.report import csvfile
from autograder.grading.status import Status


class Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.tty = stream.isatty()

    def update(self, result: NotebookResult) -> None:
        self.done += 1
        if self.tty:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                              f"{result.student}/{result.assignment}: {result.status:<12}")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"graded {self.done}/{self.total} {result.student} {result.assignment}/"
                              f"{result.notebook}: {result.status} ({result.seconds:.1f} s)"
                              f"{' - ' + result.reason if result.reason else ''}\n")
        self.stream.flush()

    def log(self, text: str) -> None:
        if self.tty:
            self.stream.write("\n")
        self.stream.write(text + "\n")
        self.stream.flush()


def report_references(references: dict, progress) -> None:
    """Warn about each assignment's reference (a :class:`reference.HostReference`): why the host's could not be
    used, and every observation where the host disagrees with the stored record."""
    for assignment, ref in sorted(references.items()):
        if ref.problem:
            progress.log(f"warning: {assignment}: {ref.problem}"
                         + ("; judging with the stored reference observations" if ref.source == "stored" else ""))
        for diff in ref.differences:
            where = f"observation {diff['index']} ('{diff['label']}')" if diff["index"] else "its observations"
            progress.log(f"warning: {assignment}/{diff['test']}: {where} differ(s) on this host from the stored "
                         f"reference: {diff['problem']}. The host's reference is used, so no student loses points; "
                         "a check that depends on the machine is a course bug to fix.")


# a recorded auto_score and the judge's points agree to this much (nbgrader stores floats)
VERDICT_TOLERANCE = 1e-6


def read_scores(coursedir, pairs: list[tuple[str, str, str]]) -> tuple[dict, dict]:
    """Each notebook's score, and each of its grades' ``auto_score`` (grade id -> score or None), from the
    gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    scores, autos = {}, {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for student, assignment, notebook in pairs:
            try:
                found = gb.find_submission_notebook(notebook, assignment, student)
            except MissingEntry:
                scores[(student, assignment, notebook)] = 0.0
                autos[(student, assignment, notebook)] = {}
                continue
            scores[(student, assignment, notebook)] = found.score
            autos[(student, assignment, notebook)] = {grade.name: grade.auto_score for grade in found.grades}
    return scores, autos


def verdict_mismatches(verdicts: dict[str, float], recorded: dict[str, float | None]) -> list[str]:
    """Where the gradebook's auto_score differs from the points the judge's verdict gives (a grade the judge
    decided and nbgrader did not record counts as a difference). Late penalties and manual grades live apart
    from auto_score in nbgrader's gradebook, so they never show up here."""
    found = []
    for grade_id, points in sorted(verdicts.items()):
        auto = recorded.get(grade_id)
        if auto is None or abs(float(auto) - points) > VERDICT_TOLERANCE:
            found.append(f"{grade_id}: the judge gave {points:g}, nbgrader recorded "
                         f"{'nothing' if auto is None else format(float(auto), 'g')}")
    return found


def check_verdicts(results: list[NotebookResult], autos: dict, log) -> None:
    """The judge's verdict is the recorded score: a notebook whose gradebook differs from it (a preprocessor of
    the course's nbgrader config that changed a score, a recording fault) becomes ``error``, with the grades."""
    for r in results:
        if not (r.status.scored_by_nbgrader and r.verdicts):
            continue
        mismatches = verdict_mismatches(r.verdicts, autos.get((r.student, r.assignment, r.notebook), {}))
        if mismatches:
            r.status = Status.ERROR
            r.reason = ("grader fault: the recorded grades differ from the judge's verdict ("
                        + "; ".join(mismatches) + ")")[:300]
            log(f"{r.student}/{r.assignment}/{r.notebook}: {r.reason}")


def score(run, results: list[NotebookResult], failed: set[tuple[str, str]], progress: Progress) -> None:
    """Each notebook's score, from the gradebook nbgrader wrote."""
    from autograder.grading.record import recording  # nbgrader's: imported once a verb runs

    for student, assignment in sorted(failed):
        progress.log(f"nbgrader could not record {student}/{assignment}")
        for r in results:
            if (r.student, r.assignment) == (student, assignment) and r.status.scored_by_nbgrader:
                r.status, r.reason = Status.ERROR, "nbgrader failed to record this submission's grades"
    scores, autos = read_scores(run.coursedir, [(r.student, r.assignment, r.notebook) for r in results])
    for r in results:
        r.score = float(scores.get((r.student, r.assignment, r.notebook)) or 0.0)
    check_verdicts(results, autos, progress.log)
    recording.record_verdicts(run.coursedir, results)   # the judge's points in the gradebook too (one score)


CSV_FIELDS = ["student_id", "assignment", "score", "max_score", "status", "reason"]


def write_outputs(course: Path, results: list[NotebookResult], meta: dict, shard=None) -> None:
    """grades.csv and grading-report.json, or a shard's own pair (shards.output_names)."""
    csv_name, report_name = shards.output_names(shard)
    per_submission: dict[tuple[str, str], list[NotebookResult]] = {}
    for r in results:
        per_submission.setdefault((r.student, r.assignment), []).append(r)
    rows = []
    for (student, assignment), items in sorted(per_submission.items()):
        worst = next((r.status for r in items if r.status != Status.GRADED), Status.GRADED)
        rows.append({"student_id": student, "assignment": assignment,
                     "score": round(sum(r.score for r in items), 4),
                     "max_score": round(sum(r.max_score for r in items), 4), "status": worst,
                     "reason": " | ".join(f"{r.notebook}: {r.reason}" for r in items if r.reason)})
    csvfile.update_rows(course / csv_name, {(r["student_id"], r["assignment"]): r for r in rows}, CSV_FIELDS,
                        keep_others=bool(meta.get("partial")))
    ordered = sorted(results, key=lambda r: (r.student, r.assignment, r.notebook))
    report = GradingReport(submissions=ordered, **meta)
    report.write(course / report_name)
    keep_run(course, report)


RUNS = Path(GRADING_DIR) / "runs"   # every run's report, oldest first by name: the attempts the class report counts


def keep_run(course: Path, report: GradingReport) -> Path:
    """A copy of this run's report in ``.grading/runs/`` (the instructor's alone: 0700, each 0600), named by the time it
    was written: the feedback service grades each submission in a run of its own, so its course folder's runs
    are each student's attempts in order."""
    folder = course / RUNS
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / f"{time.time_ns():020d}-{os.getpid()}.json"
    report.write(path)
    os.chmod(path, 0o600)
    return path


def _fields(settings) -> dict:
    """A settings dataclass's fields, as the report records them."""
    return {field.name: getattr(settings, field.name) for field in fields(settings)}


def report(run, results: list[NotebookResult], references: dict, seconds: float, progress: Progress) -> int:
    """grades.csv and grading-report.json; returns the exit code (3 when a notebook needs attention)."""
    settings = run.settings
    meta = {"course": str(settings.course), "jobs": settings.jobs,
            "sandbox": "bwrap" if run.limits.sandbox else "none", "cgroups": run.cgroups,
            "kernel_package": str(sandbox.kernel_package()),   # the autograder.kernel every kernel imported
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in _fields(settings).items()},
            "limits": _fields(run.limits), "gradebook_backup": run.backup,
            "references": {assignment: ref.summary() for assignment, ref in sorted(references.items())},
            "partial": bool(settings.students or settings.assignments or settings.shard),
            "seconds": round(seconds, 2)}
    write_outputs(settings.course, results, meta, settings.shard)
    bad = [r for r in results if r.status != Status.GRADED]
    progress.log(f"{len(results) - len(bad)} of {len(results)} notebooks graded"
                 + (f"; {len(bad)} need attention (see grading-report.json)" if bad else ""))
    return 3 if bad else 0
