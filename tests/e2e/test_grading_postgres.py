"""Several graders, one PostgreSQL gradebook: students split by --shard, graded concurrently.

The fixture starts Debian's PostgreSQL on loopback in a scratch folder (tools/system-deps.sh
installs it before `make test`). Two copies of the course
stand for two grading machines that share nothing but the database.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

import coursekit as kit
from autograder import course

LESSON = "01_tensors_and_views"


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def ensure_postgres() -> Path:
    """Debian's PostgreSQL binaries. Tests install nothing: `make test` runs tools/system-deps.sh first."""
    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed: run `bash tools/system-deps.sh` as root (make test does)")
    return pg_bin()


@pytest.fixture(scope="module")
def postgres_url():
    bindir = ensure_postgres()
    base = Path(tempfile.mkdtemp(prefix="pte-pg-"))  # pytest's tmp is private to root; postgres must enter
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(as_user + [str(bindir / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres"],
                   check=True, capture_output=True)
    subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                              f"-p {port} -k {sock} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "gradebook"],
                       check=True, capture_output=True)
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_two_graders_share_one_postgres_gradebook(tmp_path, postgres_url):
    machine_a = kit.make_scratch_course(tmp_path / "a", [])
    with open(machine_a / "nbgrader_config.py", "a") as handle:
        handle.write(f"\nc.CourseDirectory.db_url = {postgres_url!r}\n")
    shutil.copytree(course.REPO_ROOT / "solutions" / LESSON, machine_a / "solutions" / LESSON)
    subprocess.run(course.nbgrader_cmd("generate_assignment", LESSON, "--force", "--log-level=ERROR"),
                   cwd=machine_a, check=True)
    release_nb = kit.release_notebook(machine_a, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    students = {f"s{i}": (kit.fill_answers(release_nb, solution_nb) if i % 2 == 0 else release_nb) for i in range(4)}
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
    for grader, (out, err) in zip(graders, outputs):
        assert grader.returncode == 0, err

    graded_by = {}
    for root in (machine_a, machine_b):
        for line in (root / "grades.csv").read_text().splitlines()[1:]:
            student = line.split(",")[0]
            assert student not in graded_by, f"{student} graded twice"
            graded_by[student] = root
    assert set(graded_by) == set(students)
    assert len({graded_by[s] for s in students}) == 2, "both graders should have had work"

    from nbgrader.api import Gradebook

    with Gradebook(postgres_url) as gb:
        for student in students:
            expected = 10.0 if int(student[1:]) % 2 == 0 else 0.0
            assert gb.find_submission(LESSON, student).score == expected, student
