"""The README's JupyterHub-style cycle works with real nbgrader commands on a scratch exchange.

release_assignment -> fetch_assignment (student) -> submit -> collect -> autograde ->
generate_feedback -> release_feedback -> fetch_feedback (student).
"""
from __future__ import annotations

import getpass
import subprocess

from autograder import course

import coursekit as kit


def test_exchange_round_trip(tmp_path):
    lesson = course.lessons()[0]
    root = kit.make_scratch_course(tmp_path / "course", [lesson])
    student_home = tmp_path / "student"
    student_home.mkdir()
    common = [f"--Exchange.root={tmp_path / 'exchange'}", "--CourseDirectory.course_id=pte", "--log-level=ERROR"]

    def nbgrader(cwd, *args):
        proc = subprocess.run(course.nbgrader_cmd(*args, *common), cwd=cwd, capture_output=True, text=True)
        assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"

    nbgrader(root, "release_assignment", lesson)
    nbgrader(student_home, "fetch_assignment", lesson)
    fetched = student_home / lesson / f"{lesson}.ipynb"
    assert fetched.exists()
    nbgrader(student_home, "submit", lesson)
    nbgrader(root, "collect", lesson)
    student = getpass.getuser()
    assert (root / "submitted" / student / lesson / f"{lesson}.ipynb").exists()
    nbgrader(root, "autograde", lesson)
    nbgrader(root, "generate_feedback", lesson)
    nbgrader(root, "release_feedback", lesson)
    nbgrader(student_home, "fetch_feedback", lesson)
    feedback = list((student_home / lesson / "feedback").glob(f"*/{lesson}.html"))
    assert feedback, "the student received no feedback"
    html = feedback[0].read_text()
    assert "NotImplementedError" in html  # the untouched stub's failures are what the student sees
