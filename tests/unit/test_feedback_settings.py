"""The feedback service's course settings (autograder/service/workfolder.py): the page without points for an
assignment in ``c.PTEFeedback.hide_score``, rendered by nbgrader's feedback converter with the configuration the
service writes; and the student's row of ``grades.csv`` that reaches the course folder when the latest feedback
grade counts."""
from __future__ import annotations

import csv
import re
import shutil

import nbformat
from traitlets.config.loader import PyFileConfigLoader

from autograder import course
from autograder.service.workfolder import merge_csv_row, service_config

HINT = "HiddenTestFailed: the copy still shares storage with its source. Hint: what does .view() return?"


def graded_notebook() -> nbformat.NotebookNode:
    """An autograded notebook as nbgrader's GetGrades leaves it for the feedback page: an answer, a test cell
    that scored 0.5 of 2 points with its hint in the output, a written answer with a comment."""
    nb = nbformat.v4.new_notebook()
    meta = {"schema_version": 3, "locked": False}
    nb.cells = [
        nbformat.v4.new_markdown_cell("## Part A"),
        nbformat.v4.new_code_cell("def copy(t):\n    return t.view(-1)", metadata={"nbgrader": dict(
            meta, solution=True, grade=False, grade_id="copy")}),
        nbformat.v4.new_code_cell("check_copy(copy)", metadata={"nbgrader": dict(
            meta, solution=False, grade=True, grade_id="test_copy", points=2, score=0.5, locked=True)},
            outputs=[nbformat.v4.new_output("error", ename="HiddenTestFailed", evalue=HINT, traceback=[HINT])]),
        nbformat.v4.new_markdown_cell("Views share storage.", metadata={"nbgrader": dict(
            meta, solution=True, grade=True, grade_id="why", points=1, score=0.75,
            comment="Say which call copies.")}),
    ]
    return nb


def feedback_page(tmp_path, hide_score: bool) -> str:
    """The feedback page nbgrader's GenerateFeedback makes of :func:`graded_notebook` in the service's course
    folder, configured by the file the service writes (the course's config loaded first)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    course_dir, work = tmp_path / "course", tmp_path / "service"
    course_dir.mkdir(parents=True)
    work.mkdir()
    shutil.copy(course.REPO_ROOT / "nbgrader_config.py", course_dir / "nbgrader_config.py")
    (work / "nbgrader_config.py").write_text(service_config(course_dir / "nbgrader_config.py", work,
                                                            f"sqlite:///{work / 'gradebook.db'}", hide_score))
    config = PyFileConfigLoader("nbgrader_config.py", path=str(work)).load_config()
    assert config.CourseDirectory.root == str(work) and config.ClearSolutions.code_stub   # the course's, then ours
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    exporter = HTMLExporter(parent=converter, config=converter.config)   # as nbgrader's BaseConverter.start
    resources = {"nbgrader": {"notebook": "lesson", "score": 1.25, "max_score": 3.0, "late_penalty": 0.5}}
    page, _ = exporter.from_notebook_node(graded_notebook(), resources=resources)
    return page


def visible_text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)))


def test_the_page_of_an_assignment_whose_score_is_hidden_has_no_points(tmp_path):
    pages = {hide: feedback_page(tmp_path / str(hide), hide_score=hide) for hide in (False, True)}
    shown, hidden = visible_text(pages[False]), visible_text(pages[True])
    # nbgrader's own page: the total, each graded cell's score (heading and contents) and the late penalty
    assert "lesson (Score: 1.25 / 3.0)" in shown and shown.count("Score: 0.5 / 2.0") == 2, shown
    assert shown.count("Score: 0.75 / 1.0") == 2 and "Late submission penalty (Score: -0.5)" in shown
    for page, text in zip(pages.values(), (shown, hidden)):   # what teaches stays on both, and the answer
        assert HINT in text and "Say which call copies." in text and "test_copy" in text, text
        assert "return t.view(-1)" in re.sub(r"<[^>]+>", "", page)
    assert not re.search(r"Score|penalty|\b(1\.25|0\.5|0\.75|3\.0|2\.0)\b", hidden), hidden
    for page in pages.values():   # a long hint wraps instead of running off the right edge
        head = page[:page.index("</head>")]
        assert re.search(r"white-space:\s*pre-wrap;\s*overflow-wrap:\s*anywhere", head), head[-800:]


def test_the_students_row_replaces_theirs_in_the_courses_grades(tmp_path):
    fields = ["student_id", "assignment", "score", "max_score", "status", "reason"]

    def write(path, rows):
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(dict(zip(fields, row)) for row in rows)

    def read(path):
        with open(path, newline="") as handle:
            return [tuple(r.values()) for r in csv.DictReader(handle)]

    service, official = tmp_path / "service.csv", tmp_path / "grades.csv"
    write(service, [("ann", "01", "10.0", "10.0", "graded", ""), ("bob", "01", "2.0", "10.0", "graded", "")])
    assert merge_csv_row(service, official, "ann", "01")             # a course with no grades.csv yet
    assert read(official) == [("ann", "01", "10.0", "10.0", "graded", "")]
    write(official, [("ann", "01", "4.0", "10.0", "graded", ""), ("cat", "02", "8.0", "10.0", "graded", "")])
    assert merge_csv_row(service, official, "ann", "01")
    assert read(official) == [("ann", "01", "10.0", "10.0", "graded", ""), ("cat", "02", "8.0", "10.0", "graded", "")]
    assert not merge_csv_row(service, official, "dan", "01")          # not graded by the service: nothing changes
    assert len(read(official)) == 2
