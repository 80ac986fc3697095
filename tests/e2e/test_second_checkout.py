"""The kernel imports what the sandbox shows: a second checkout of the course, graded with the first one's venv.

An instructor copies the course to a grading folder and runs ``python -m autograder grade --course .`` there with
the venv of the checkout they work in. The grader then imports ``autograder`` from the folder it runs in and binds
that copy's ``autograder/kernel/`` into the sandbox, while the venv's editable install names the other checkout:
before, every kernel died before replying to kernel_info and each submission got ``error``. Now every kernel
imports the bound copy (``PYTHONPATH``, ahead of the editable finder), the report says which one
(``kernel_package``), and a kernel that would import anything else stops the run before it grades anyone.

The one grading run here reaches the copy through a symbolic link and names the venv's Python through another:
both paths the sandbox must resolve (one run, each case planted alone makes it fail).
"""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.grading.isolate import sandbox
from autograder.grading.plan import planning

import coursekit as kit

LESSON = "01_tensors_and_views"

pytestmark = pytest.mark.skipif(not sandbox.sandbox_available(), reason="grading kernels run in bubblewrap")


@pytest.fixture(scope="module")
def second_checkout(tmp_path_factory) -> Path:
    """A copy of the course's code, data, config and lesson 01 with one correct submission; this venv is not its."""
    copy = tmp_path_factory.mktemp("grading") / "second-checkout"
    for name in ("autograder", "data"):
        shutil.copytree(kit.REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    kit.make_scratch_course(copy, [LESSON])
    solution = nbformat.read(copy / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    kit.submit(copy, "alice", LESSON, kit.fill_answers(kit.release_notebook(copy, LESSON), solution))
    return copy


def test_a_second_checkout_grades_with_another_checkouts_venv_reached_through_links(second_checkout, tmp_path):
    """One run proves two things: the course is reached through a symbolic link (as a course on another mount may
    be), and the grader's Python is named through a link to its venv (``sys.prefix`` is then the link's path): the
    sandbox binds what the kernel's Python looks for, and the submission is graded as through the venv's own path."""
    link = tmp_path / "grading-link"
    link.symlink_to(second_checkout, target_is_directory=True)
    assert Path(sys.prefix).resolve() not in second_checkout.resolve().parents
    venv = tmp_path / "venv-link"
    venv.symlink_to(Path(sys.prefix), target_is_directory=True)
    python = venv / "bin" / Path(sys.executable).name
    where = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    assert where.stdout.strip() == str(venv), where   # the case under test: a prefix that is a link
    done = subprocess.run([str(python), "-m", "autograder", "grade", "--course", ".", "--jobs", "1"],
                          cwd=link, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((second_checkout / "grading-report.json").read_text())
    results = [(r["student"], r["status"], r["reason"]) for r in report["submissions"]]
    assert results == [("alice", "graded", "")], (results, done.stderr[-3000:])
    assert report["kernel_package"] == str(second_checkout.resolve() / "autograder" / "kernel")
    with open(second_checkout / "grades.csv") as handle:
        assert [(row["status"], row["score"], row["max_score"]) for row in csv.DictReader(handle)] == [
            ("graded", "10.0", "10.0")]


def test_a_kernel_that_would_import_another_package_stops_the_run(second_checkout, monkeypatch, tmp_path):
    """The check names both folders; planning stops with it before any submission runs."""
    elsewhere = tmp_path / "autograder" / "kernel"
    monkeypatch.setattr(sandbox, "kernel_package", lambda: elsewhere)
    problem = sandbox.kernel_import_problem()
    assert problem and str(elsewhere) in problem and str(kit.REPO / "autograder" / "kernel") in problem, problem
    with pytest.raises(planning.UsageError, match="the grading kernels cannot start: .*" + str(elsewhere)):
        planning.plan(second_checkout)
