"""The feedback service's own robustness (autograder/service): one instance at a time, a stale process group
ended only when the lock proves it is the service's run, ``grades.csv`` updated under a lock and atomically while
another writer writes, gradebook backups pruned, and its state unreadable to another user (a student)."""
from __future__ import annotations

import csv
import multiprocessing
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.grading.messages import NotebookResult
from autograder.grading.report.reporting import write_outputs
from autograder.service.lock import AlreadyRunning, ServiceLock, start_time
from autograder.service.workfolder import merge_csv_row, prune_backups

FIELDS = ["student_id", "assignment", "score", "max_score", "status", "reason"]


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_one_instance_holds_the_lock_for_its_life(tmp_path):
    first = ServiceLock(tmp_path / "grading.pid")
    with pytest.raises(AlreadyRunning):
        ServiceLock(tmp_path / "grading.pid")
    first.close()
    ServiceLock(tmp_path / "grading.pid").close()   # the lock goes with the service


def test_a_stale_group_is_killed_only_when_the_lock_proves_it_ours(tmp_path):
    lock = ServiceLock(tmp_path / "grading.pid")
    stranger = sleeper()   # a process that took the recorded id's place: another start time
    try:
        lock.write(f"{stranger.pid} {start_time(stranger.pid) - 1}\n")
        assert "left alone" in lock.end_leftover()
        assert stranger.poll() is None, "a process the lock does not prove ours was killed"
        ours = sleeper()
        lock.record_run(ours.pid)
        assert "ended" in lock.end_leftover()
        assert ours.wait(timeout=30) == -signal.SIGKILL
        assert lock.recorded() is None
    finally:
        stranger.kill()
        stranger.wait()
        lock.close()


def write_rows(path: Path, rows) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(dict(zip(FIELDS, row)) for row in rows)


def merge_many(folder: Path, student: str, times: int) -> None:
    source = folder / f"{student}.csv"
    write_rows(source, [(student, "01", "1.0", "10.0", "graded", "")])
    for _ in range(times):
        merge_csv_row(source, folder / "grades.csv", student, "01")


def rows_after_writers(folder: Path, writers: list) -> list[str]:
    """Run each ``(function, student, times)`` writer in a forked process at once; the students of the
    grades.csv they leave, sorted."""
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=function, args=(folder, student, times)) for function, student, times in writers]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0, "a writer failed"
    with open(folder / "grades.csv", newline="") as handle:
        return sorted(r["student_id"] for r in csv.DictReader(handle))


def test_grades_csv_loses_no_update_when_two_writers_write_at_once(tmp_path):
    """Four processes each merge their own student's row 150 times into one grades.csv: every row is there at
    the end, and no reader ever saw a half-written file."""
    students = ["ann", "bob", "cat", "dan"]
    assert rows_after_writers(tmp_path, [(merge_many, s, 150) for s in students]) == students
    assert not list(tmp_path.glob("*.partial")), "a temporary file was left"


def grade_many(folder: Path, student: str, times: int) -> None:
    """The instructor's grading command writing its outputs for ``student`` (a partial run keeps the others)."""
    result = NotebookResult(student, "01", "01", score=2.0, max_score=10.0)
    for _ in range(times):
        write_outputs(folder, [result], {"course": str(folder), "partial": True})


def test_the_instructors_run_and_the_service_lose_no_row_of_each_other(tmp_path):
    """The grading command's own grades.csv and the service's merges write at once: both take the lock, so each
    writer's rows are all there at the end (before the grading command took the lock, it wrote in place and
    lost the service's rows or read a half-written file)."""
    writers = [(grade_many, "ann", 60), (merge_many, "bob", 60), (merge_many, "cat", 60)]
    assert rows_after_writers(tmp_path, writers) == ["ann", "bob", "cat"]


def test_backups_are_pruned_to_the_number_the_course_sets(tmp_path):
    for day in range(1, 9):
        (tmp_path / f"gradebook-202612{day:02d}T000000000000Z.db").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("kept")
    gone = prune_backups(tmp_path, 3)
    assert len(gone) == 5
    assert sorted(p.name[10:18] for p in tmp_path.glob("gradebook-*")) == ["20261206", "20261207", "20261208"]
    assert (tmp_path / "notes.txt").exists()


def test_the_services_state_is_unreadable_to_a_student(tmp_path):
    """The service started as on a hub (python -m autograder.service) in a course folder other users can enter, and
    stopped by SIGINT as the hub stops it (also when it started with SIGINT ignored): its folder is 0700, what it
    wrote is not readable by others, and the user nobody (uid 65534) fails to read its queue."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.fail("this test reads as the user nobody (setpriv, as root: `make test` runs as root)")
    root = Path(os.environ.get("PTE_WORLD_TMP", "/tmp")) / f"pte-private-{os.getpid()}"
    shutil.rmtree(root, ignore_errors=True)
    (root / "course").mkdir(parents=True)
    try:
        os.chmod(root, 0o755)
        os.chmod(root / "course", 0o755)
        (root / "course" / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'pte'\n")
        # started with SIGINT ignored, as a shell without job control starts a background command (`cmd &` in a
        # script): the hub's SIGINT must stop it all the same
        proc = subprocess.Popen([sys.executable, "-m", "autograder.service", "--course", str(root / "course"),
                                 "--exchange", str(root / "exchange")], stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        state = root / "course" / ".grading" / "feedback-service"
        deadline = time.monotonic() + 120
        while not (state / "queue.sqlite").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert (state / "queue.sqlite").exists(), proc.stderr.read()
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(root / "course" / ".grading").st_mode) == 0o700
        for path in [p for p in state.rglob("*") if not p.is_symlink()]:
            assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, f"{path} is readable by others"
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat",
                               str(state / "queue.sqlite")], capture_output=True, text=True)
        assert done.returncode != 0 and "Permission denied" in done.stderr, done
    finally:
        shutil.rmtree(root, ignore_errors=True)
