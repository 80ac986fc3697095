"""Grades into the LMS: nbgrader export plugins for a Canvas gradebook import and a Moodle grade import.

    nbgrader export --exporter autograder.lms.CanvasExport --CanvasExport.mapping=lms-ids.csv --to canvas.csv
    nbgrader export --exporter autograder.lms.MoodleExport --MoodleExport.mapping=lms-ids.csv --to moodle.csv
    # one assignment (or a few): --assignment "['01_tensors_and_views']"; default: the whole course

The mapping file is a CSV whose ``student_id`` column holds nbgrader's student ids; the other columns say who
the student is in the LMS (any may be absent or blank):

    student_id,name,canvas_id,sis_user_id,sis_login_id,section,email,idnumber

Canvas's gradebook import identifies a student by the columns ``Student`` (the name, "Last, First"),
``ID``, ``SIS User ID``, ``SIS Login ID`` and ``Section``, followed by one column per assignment, the way its
gradebook export lays them out. Moodle's CSV grade import lets the instructor map a column of the file to a
user field ("Email address" to useremail, "ID number" to useridnumber) and each other column to a grade item,
in the import's preview. Both read UTF-8, quoted as RFC 4180 CSV (what Python's csv module writes).

A student of the gradebook without an LMS id in the mapping is never dropped: the row is written with blank
LMS ids, each such student is named in nbgrader's log, and the export exits 1 once the file is written, so a
script that uploads on success stops there. ``--<Exporter>.allow_unmapped=True`` exits 0 instead (students
who left the course, say). A student the LMS does not know then shows up in its import preview as unmatched.

A submission the grading command marked ``error`` in ``grades.csv`` (``--<Exporter>.grades_csv``, default the
course's own; a grader fault, such as a recorded score that differed from the judge's verdict) is refused: the
export names each such row, writes nothing and exits 1. ``--<Exporter>.allow_errors=True`` writes them anyway
(with the judge's points, which the grading command wrote into the gradebook), each named in the log.

The score is nbgrader's, less the late penalty, never below 0; a student who submitted nothing gets 0, as in
nbgrader's own CSV export. Assignment columns are named after the nbgrader assignment unless
``assignment_columns`` maps it to the LMS's column (Canvas: "Lesson 1 (1234)", with the LMS's assignment id).
"""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Bool, Dict, Unicode

CANVAS_IDS = ("canvas_id", "sis_user_id", "sis_login_id")
MOODLE_IDS = ("email", "idnumber")


class UnmappedStudents(Exception):
    """Students of the gradebook the mapping file gives no LMS id."""


def load_mapping(path: str | Path) -> dict[str, dict[str, str]]:
    """nbgrader student id -> that student's row of the mapping file (values stripped)."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "student_id" not in reader.fieldnames:
            raise ValueError(f"{path}: the mapping file needs a student_id column (it has "
                             f"{', '.join(reader.fieldnames or []) or 'no header'})")
        mapping = {}
        for line, row in enumerate(reader, start=2):
            student = (row.get("student_id") or "").strip()
            if not student:
                continue
            if student in mapping:
                raise ValueError(f"{path}, line {line}: student {student!r} is mapped twice")
            mapping[student] = {k: (v or "").strip() for k, v in row.items() if k}
    return mapping


def format_score(value: float) -> str:
    """``10`` for 10.0, ``7.5`` for 7.5: what a person would type into the LMS."""
    return f"{round(float(value), 4):g}"


def class_scores(gradebook: Gradebook, assignments: list[str], students: list[str]) -> tuple[list, list[str]]:
    """([(student record, {assignment: score})], assignment names) of the gradebook, narrowed to the given
    assignments and students when those lists are not empty."""
    chosen = [a.name for a in gradebook.assignments if not assignments or a.name in assignments]
    table = []
    for student in gradebook.students:
        if students and student.id not in students:
            continue
        scores = {}
        for name in chosen:
            try:
                submission = gradebook.find_submission(name, student.id)
            except MissingEntry:
                scores[name] = 0.0
                continue
            scores[name] = max(0.0, (submission.score or 0.0) - (submission.late_submission_penalty or 0.0))
        table.append((student, scores))
    return table, chosen


class LmsExport(ExportPlugin):
    """What the Canvas and Moodle exporters share: the mapping, the columns, the unmapped students."""

    mapping = Unicode("lms-ids.csv", help="CSV mapping nbgrader student ids (column student_id) to the LMS's "
                                          "ids; relative paths are read from the working folder").tag(config=True)
    assignment_columns = Dict({}, help="nbgrader assignment -> the LMS's column header for it (default: the "
                                       "assignment's name)").tag(config=True)
    grades_csv = Unicode("grades.csv", help="the grading command's grades.csv, whose status column says which "
                                            "submissions ended in error (relative to the working folder)"
                         ).tag(config=True)
    allow_errors = Bool(False, help="export submissions grades.csv marks 'error' (each is named in the log) "
                                    "instead of refusing the export").tag(config=True)
    allow_unmapped = Bool(False, help="exit 0 even when some students have no LMS id (they are still written, "
                                      "with blank ids, and named in the log)").tag(config=True)

    default_to = "lms-grades.csv"
    id_columns: tuple[str, ...] = ()

    def identity(self, student, ids: dict[str, str]) -> list[str]:
        """The LMS's identifying columns of one student's row."""
        raise NotImplementedError

    def identity_header(self) -> list[str]:
        raise NotImplementedError

    def table(self, gradebook: Gradebook) -> tuple[list[list[str]], list[str]]:
        """(every row, header first; the students without an LMS id)."""
        mapping = load_mapping(self.mapping)
        scores, assignments = class_scores(gradebook, [str(a) for a in self.assignment],
                                           [str(s) for s in self.student])
        rows = [self.identity_header() + [self.assignment_columns.get(a, a) for a in assignments]]
        unmapped = []
        for student, per_assignment in sorted(scores, key=lambda item: item[0].id):
            ids = mapping.get(student.id, {})
            if not any(ids.get(column) for column in self.id_columns):
                unmapped.append(student.id)
            rows.append(self.identity(student, ids) + [format_score(per_assignment[a]) for a in assignments])
        return rows, unmapped

    def errors(self, gradebook: Gradebook) -> list[str]:
        """``student/assignment`` of each exported submission grades.csv marks ``error``."""
        path = Path(self.grades_csv)
        if not path.is_file():
            self.log.warning("%s not found: no grading command's statuses to check", path)
            return []
        chosen = {a.name for a in gradebook.assignments if not self.assignment or a.name in self.assignment}
        with open(path, newline="", encoding="utf-8") as handle:
            return [f"{row['student_id']}/{row['assignment']}" for row in csv.DictReader(handle)
                    if row.get("status") == "error" and row.get("assignment") in chosen
                    and (not self.student or row.get("student_id") in self.student)]

    def export(self, gradebook: Gradebook) -> None:
        destination = self.to or self.default_to
        errors = self.errors(gradebook)
        for item in errors:
            self.log.warning("%s ended in error in %s (its reason is there)", item, self.grades_csv)
        if errors and not self.allow_errors:
            self.log.error("%d submission(s) in error: %s. Nothing written; grade them again, or pass "
                           "--%s.allow_errors=True", len(errors), ", ".join(errors), type(self).__name__)
            raise SystemExit(1)
        rows, unmapped = self.table(gradebook)
        with open(destination, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)
        self.log.info("Wrote %d students' grades to %s", len(rows) - 1, destination)
        for student in unmapped:
            self.log.warning("student %s has no LMS id in %s (%s): written with blank ids; the LMS will not "
                             "match the row", student, self.mapping, " or ".join(self.id_columns))
        if unmapped and not self.allow_unmapped:
            self.log.error("%d student(s) without an LMS id: %s. Add them to %s, or pass "
                           "--%s.allow_unmapped=True", len(unmapped), ", ".join(unmapped), self.mapping,
                           type(self).__name__)
            raise SystemExit(1)


def display_name(student) -> tuple[str, str]:
    """(first, last) as the gradebook has them."""
    return (student.first_name or "").strip(), (student.last_name or "").strip()


class CanvasExport(LmsExport):
    """A Canvas gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then one column an
    assignment."""

    default_to = "canvas-grades.csv"
    id_columns = CANVAS_IDS

    def identity_header(self) -> list[str]:
        return ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]

    def identity(self, student, ids: dict[str, str]) -> list[str]:
        first, last = display_name(student)
        name = ids.get("name") or (", ".join(part for part in (last, first) if part)) or student.id
        return [name, ids.get("canvas_id", ""), ids.get("sis_user_id", ""), ids.get("sis_login_id", ""),
                ids.get("section", "")]


class MoodleExport(LmsExport):
    """A Moodle CSV grade import: First name, Last name, ID number, Email address, then one column an
    assignment (map "Email address" or "ID number" to the user in the import's preview)."""

    default_to = "moodle-grades.csv"
    id_columns = MOODLE_IDS

    def identity_header(self) -> list[str]:
        return ["First name", "Last name", "ID number", "Email address"]

    def identity(self, student, ids: dict[str, str]) -> list[str]:
        first, last = display_name(student)
        return [first, last, ids.get("idnumber", ""), ids.get("email", "")]
