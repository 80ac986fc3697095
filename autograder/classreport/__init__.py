"""The class report: what the class got wrong, per lesson, exercise, check, prediction and attempt.

``python -m autograder report --course DIR [--assignment ID] [--min-group N]`` reads what the grading
command recorded (``grading-report.json``, and the feedback service's runs: :mod:`.data`), counts
(:mod:`.tally`) and writes, beside ``grades.csv``:

- ``class-report.html``: a static page, counts only, pictures inlined (:mod:`.render`, :mod:`.figures`);
- ``class-report.csv``: per exercise (full, partial and no points; attempts), for keeping with the LMS
  exports; ``class-report-checks.csv``: per check (failures by kind, the check's hint);
- ``class-report-students.csv``: who failed which check, the instructor's alone (mode 0600).

:func:`page` is the page alone, for a server's instructor-only route. ``min_group`` (default
``c.PTEReport.min_group`` of the course's ``nbgrader_config.py``, else 5): a lesson graded for fewer students
shows no figures on the page, and a prediction's answer shows only when at least that many gave it.
"""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from . import data, render
from .tally import tally

DEFAULT_MIN_GROUP = 5
OUTPUTS = {"page": "class-report.html", "exercises": "class-report.csv", "checks": "class-report-checks.csv",
           "students": "class-report-students.csv"}


def course_min_group(course: Path) -> int:
    """``c.PTEReport.min_group`` of the course's config (read as text: no config code runs here), else 5."""
    config = Path(course) / "nbgrader_config.py"
    text = config.read_text() if config.is_file() else ""
    found = re.search(r"^c\.PTEReport\.min_group\s*=\s*(\d+)\s*$", text, re.M)
    return int(found.group(1)) if found else DEFAULT_MIN_GROUP


def _title(course: Path, assignment: str | None) -> str:
    return f"Class report: {Path(course).resolve().name}" + (f", {assignment}" if assignment else "")


def page(course: Path, assignment: str | None = None, min_group: int | None = None) -> str:
    """The report's HTML page for ``course`` (one assignment, or every one graded). Raises
    :class:`data.ReportMissing` when nothing was graded."""
    course = Path(course)
    min_group = course_min_group(course) if min_group is None else min_group
    inputs = data.load(course, assignment)
    return render.html_page(tally(inputs), _title(course, assignment), inputs.sources, min_group)


def cell(value: object) -> object:
    """A CSV cell a spreadsheet will not read as a formula."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def write_csv(path: Path, rows: list[dict], header: list[str], private: bool = False) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                         0o600 if private else 0o644)
    with os.fdopen(descriptor, "w", newline="", encoding="utf-8") as handle:
        if private:
            os.fchmod(handle.fileno(), 0o600)
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows({k: cell(v) for k, v in row.items()} for row in rows)
    temporary.replace(path)


def write(course: Path, assignment: str | None = None, min_group: int | None = None) -> dict[str, Path]:
    """Write the page and the CSV files in ``course``; what was written where."""
    course = Path(course)
    min_group = course_min_group(course) if min_group is None else min_group
    inputs = data.load(course, assignment)
    counted = tally(inputs)
    paths = {key: course / name for key, name in OUTPUTS.items()}
    text = render.html_page(counted, _title(course, assignment), inputs.sources, min_group)
    temporary = paths["page"].with_name(f".{paths['page'].name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(paths["page"])
    exercises = render.exercise_csv_rows(counted)
    write_csv(paths["exercises"], exercises, list(exercises[0]) if exercises else ["assignment"])
    checks = render.check_csv_rows(counted)
    write_csv(paths["checks"], checks, list(checks[0]) if checks else ["assignment"])
    write_csv(paths["students"], counted.students, ["student_id", "assignment", "notebook", "exercise", "points",
                                                    "max_points", "status", "failed_checks"], private=True)
    return paths


def add_parser(commands) -> None:
    report = commands.add_parser(
        "report", help="the class report: what the class got wrong, per exercise, check, prediction and attempt",
        description="Read DIR/grading-report.json and the feedback service's runs; write DIR/class-report.html "
                    "(counts only), DIR/class-report.csv (per exercise), DIR/class-report-checks.csv (per check) "
                    "and DIR/class-report-students.csv (per student, mode 0600).")
    report.add_argument("--course", required=True, type=Path, help="the nbgrader course folder")
    report.add_argument("--assignment", default=None, metavar="ID", help="only this assignment")
    report.add_argument("--min-group", type=int, default=None, metavar="N",
                        help="no figures for a lesson with fewer students, no answer fewer gave "
                             "(default: c.PTEReport.min_group, else 5)")


def run(args, parser) -> int:
    if args.min_group is not None and args.min_group < 1:
        parser.error("--min-group must be at least 1")
    if not args.course.is_dir():
        parser.error(f"course folder {args.course} does not exist")
    try:
        written = write(args.course, args.assignment, args.min_group)
    except data.ReportMissing as exc:
        parser.exit(2, f"python -m autograder report: {exc}\n")
    for key, path in written.items():
        print(f"{key}: {path}")
    return 0
