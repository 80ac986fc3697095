"""Several graders, one PostgreSQL gradebook: students split by --shard, graded concurrently, then
`python -m autograder finish` writes the class's grades.csv from the database and both shards' reports.

The fixture starts Debian's PostgreSQL on loopback in a scratch folder (tests/support/pgkit.py;
tools/system-deps.sh installs it before `make test`). Two copies of the course
stand for two grading machines that share nothing but the database.
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder import course

import coursekit as kit
import pgkit

LESSON = "01_tensors_and_views"


@pytest.fixture(scope="module")
def postgres_url():
    try:
        with pgkit.postgres_server() as url:
            yield url
    except pgkit.Unavailable as exc:
        pytest.skip(str(exc))


def test_two_graders_share_one_postgres_gradebook(tmp_path, postgres_url):
    machine_a = kit.make_scratch_course(tmp_path / "a", [])
    with open(machine_a / "nbgrader_config.py", "a") as handle:
        handle.write(f"\nc.CourseDirectory.db_url = {postgres_url!r}\n")
    shutil.copytree(course.REPO_ROOT / "solutions" / LESSON, machine_a / "solutions" / LESSON)
    subprocess.run(course.nbgrader_cmd("generate_assignment", LESSON, "--force", "--log-level=ERROR"),
                   cwd=machine_a, check=True)
    release_nb = kit.release_notebook(machine_a, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    # s0 (correct) hashes to shard 1 of 2, s1 (the untouched release) to shard 0: one each, full marks and none
    students = {f"s{i}": (kit.fill_answers(release_nb, solution_nb) if i % 2 == 0 else release_nb) for i in range(2)}
    for student, nb in students.items():
        kit.submit(machine_a, student, LESSON, nb)
    machine_b = tmp_path / "b"
    shutil.copytree(machine_a, machine_b)

    graders = [
        subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs", "1",
                          "--shard", f"{i}/2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, root in enumerate((machine_a, machine_b))
    ]
    outputs = [g.communicate(timeout=900) for g in graders]
    for grader, (_out, err) in zip(graders, outputs):
        assert grader.returncode == 0, err

    graded_by = {}
    for i, root in enumerate((machine_a, machine_b)):
        assert not (root / "grades.csv").exists(), "a shard writes its own files, never the class's"
        for line in (root / f"grades.shard-{i}-of-2.csv").read_text().splitlines()[1:]:
            student = line.split(",")[0]
            assert student not in graded_by, f"{student} graded twice"
            graded_by[student] = root
    assert set(graded_by) == set(students)
    assert len({graded_by[s] for s in students}) == 2, "both graders should have had work"

    # the finishing step, on one machine once the other's report is there: the whole class, from the database
    shutil.copy(machine_b / "grading-report.shard-1-of-2.json", machine_a)
    done = subprocess.run([sys.executable, "-m", "autograder", "finish", "--course", str(machine_a)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(machine_a / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert {s: float(row["score"]) for s, row in rows.items()} == {
        s: (10.0 if int(s[1:]) % 2 == 0 else 0.0) for s in students}

    from nbgrader.api import Gradebook

    with Gradebook(postgres_url) as gb:
        for student in students:
            expected = 10.0 if int(student[1:]) % 2 == 0 else 0.0
            assert gb.find_submission(LESSON, student).score == expected, student
