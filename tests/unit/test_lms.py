"""The LMS exporters (autograder/lms.py) against the import formats: Canvas's gradebook columns (Student, ID,
SIS User ID, SIS Login ID, Section, then the assignments) and a Moodle grade import (First name, Last name,
ID number, Email address, then the assignments). Names with commas, quotes and non-ASCII letters survive
the round trip through the csv module; a student without an LMS id is written, named, and fails the export.
"""
from __future__ import annotations

import csv
import logging
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from autograder import lms

STUDENTS = {   # nbgrader id -> (first, last, score on a1, score on a2 or None: not submitted)
    "ada": ("Ada", "Lovelace, Countess", 7.5, 10.0),
    "zoe": ("Zoë", "Ðorđević", 10.0, None),
    "quote": ('Dwayne "The Rock"', "Johnson", 0.0, 2.0),
    "nomap": ("No", "Mapping", 5.0, 5.0),
}
MAPPING = [
    ["student_id", "canvas_id", "sis_user_id", "sis_login_id", "section", "email", "idnumber"],
    ["ada", "101", "S-1", "ada@uni.example", "Lab A, Monday", "ada@uni.example", "2024001"],
    ["zoe", "102", "", "zoe", "Lab B", "zoë@uni.example", ""],
    ["quote", "", "S-3", "", "", "", "2024003"],
]


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lms")
    url = f"sqlite:///{folder / 'gradebook.db'}"
    with Gradebook(url) as gb:
        for assignment in ("a1", "a2"):
            gb.add_assignment(assignment)
            gb.update_or_create_notebook("nb", assignment)
            gb.add_grade_cell("test_x", "nb", assignment, max_score=10.0, cell_type="code")
        for student, (first, last, *scores) in STUDENTS.items():
            gb.add_student(student, first_name=first, last_name=last)
            for assignment, score in zip(("a1", "a2"), scores):
                if score is None:
                    continue
                gb.add_submission(assignment, student)
                grade = gb.find_grade("test_x", "nb", assignment, student)
                grade.auto_score = score
                gb.db.commit()
        mapping = folder / "lms-ids.csv"
        with open(mapping, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(MAPPING)
        yield gb, mapping, url


def export(plugin_class, gb, mapping, tmp_path, **traits):
    out = tmp_path / "out.csv"
    plugin = plugin_class(mapping=str(mapping), to=str(out), **traits)
    plugin.export(gb)
    with open(out, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle)), out.read_bytes()


def test_canvas_columns_and_rows(gradebook, tmp_path, caplog):
    gb, mapping, _ = gradebook
    with caplog.at_level(logging.WARNING), pytest.raises(SystemExit) as stopped:
        export(lms.CanvasExport, gb, mapping, tmp_path)
    assert stopped.value.code == 1   # the file is written all the same, unmapped student included
    rows = list(csv.reader((tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "a1", "a2"]
    by_id = {row[1] or row[2] or row[0]: row for row in rows[1:]}
    assert by_id["101"] == ["Lovelace, Countess, Ada", "101", "S-1", "ada@uni.example", "Lab A, Monday", "7.5", "10"]
    assert by_id["102"] == ["Ðorđević, Zoë", "102", "", "zoe", "Lab B", "10", "0"]   # not submitted: 0
    assert by_id["S-3"] == ['Johnson, Dwayne "The Rock"', "", "S-3", "", "", "0", "2"]
    assert by_id["Mapping, No"] == ["Mapping, No", "", "", "", "", "5", "5"]   # written, never dropped
    assert len(rows) == 1 + len(STUDENTS)
    assert "nomap" in caplog.text and "no LMS id" in caplog.text


def test_csv_quoting_is_rfc4180(gradebook, tmp_path):
    """Commas and quotes are quoted, inner quotes doubled; UTF-8 without a byte-order mark."""
    gb, mapping, _ = gradebook
    _, raw = export(lms.CanvasExport, gb, mapping, tmp_path, allow_unmapped=True)
    text = raw.decode("utf-8")
    assert not raw.startswith(b"\xef\xbb\xbf")
    assert '"Lovelace, Countess, Ada",101,S-1,ada@uni.example,"Lab A, Monday",7.5,10\r\n' in text
    assert '"Johnson, Dwayne ""The Rock""",,S-3,,,0,2\r\n' in text
    assert "Ðorđević, Zoë" in text


def test_moodle_columns_and_one_assignment(gradebook, tmp_path):
    gb, mapping, _ = gradebook
    rows, _ = export(lms.MoodleExport, gb, mapping, tmp_path, allow_unmapped=True, assignment=["a2"],
                     assignment_columns={"a2": "Lesson 2: tensors"})
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "Lesson 2: tensors"]
    assert sorted(rows[1:]) == sorted([
        ["Ada", "Lovelace, Countess", "2024001", "ada@uni.example", "10"],
        ["Zoë", "Ðorđević", "", "zoë@uni.example", "0"],
        ['Dwayne "The Rock"', "Johnson", "2024003", "", "2"],
        ["No", "Mapping", "", "", "5"],
    ])


def test_every_student_mapped_exits_cleanly(gradebook, tmp_path):
    gb, mapping, _ = gradebook
    rows, _ = export(lms.MoodleExport, gb, mapping, tmp_path, student=["ada", "quote"])
    assert [row[0] for row in rows[1:]] == ["Ada", 'Dwayne "The Rock"']


def test_mapping_file_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,email\nada,a@x\n")
    with pytest.raises(ValueError, match="student_id column"):
        lms.load_mapping(bad)
    bad.write_text("student_id,email\nada,a@x\nada,b@x\n")
    with pytest.raises(ValueError, match="mapped twice"):
        lms.load_mapping(bad)
    bad.write_bytes("\ufeffstudent_id,email\nada,a@x\n".encode())   # as a spreadsheet saves it
    assert lms.load_mapping(bad) == {"ada": {"student_id": "ada", "email": "a@x"}}


def test_through_nbgrader_export(gradebook, tmp_path):
    """The plugin as an instructor runs it: `nbgrader export --exporter autograder.lms.CanvasExport`."""
    _, mapping, url = gradebook
    out = tmp_path / "canvas.csv"
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export", f"--CourseDirectory.db_url={url}",
                           "--exporter=autograder.lms.CanvasExport", f"--CanvasExport.mapping={mapping}",
                           f"--to={out}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr   # nomap has no LMS id
    assert "nomap" in done.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1 + len(STUDENTS)


def _grades_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student_id", "assignment", "score", "max_score", "status", "reason"])
        writer.writerows(rows)
    return str(path)


def test_an_export_refuses_submissions_in_error_unless_told(gradebook, tmp_path, caplog):
    """grades.csv marks ada's a1 ``error`` (a grader fault): the export names it, writes nothing, exits 1; with
    allow_errors it writes every row (the gradebook's score, which the grading command made the judge's)."""
    gb, mapping, _ = gradebook
    grades = _grades_csv(tmp_path / "grades.csv", [
        ["ada", "a1", "7.5", "10", "error", "nb: grader fault: the recorded grades differ from the judge's verdict"],
        ["zoe", "a1", "10", "10", "graded", ""]])
    with caplog.at_level(logging.WARNING), pytest.raises(SystemExit) as stopped:
        export(lms.MoodleExport, gb, mapping, tmp_path, allow_unmapped=True, grades_csv=grades)
    assert stopped.value.code == 1 and not (tmp_path / "out.csv").exists()
    assert "ada/a1" in caplog.text and "allow_errors" in caplog.text
    rows, _ = export(lms.MoodleExport, gb, mapping, tmp_path, allow_unmapped=True, grades_csv=grades,
                     assignment=["a2"])   # nothing of a2 is in error
    assert len(rows) == 1 + len(STUDENTS)
    rows, _ = export(lms.CanvasExport, gb, mapping, tmp_path, allow_unmapped=True, grades_csv=grades,
                     allow_errors=True)
    assert ["Lovelace, Countess, Ada", "101", "S-1", "ada@uni.example", "Lab A, Monday", "7.5", "10"] in rows
