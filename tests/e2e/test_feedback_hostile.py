"""The feedback service (autograder/service) against a hostile class, without running the grading command (its
run is replaced by one that records what it was asked): names a student chooses (a leading '-', glob characters,
a newline, look-alike Unicode, bytes that are not UTF-8), a burst whose name claims to be the latest, secrets and
timestamps that are not what they should be, a full disk, and an instructor who changes the lesson meanwhile.
Each ends as a page, a log line or a wait; none stops the service or fails a neighbour."""
from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from autograder.service import service as service_module
from autograder.service.queue import Entry
from autograder.service.service import Service
from autograder.service.settings import PTEFeedback

import coursekit as kit
from test_grading import LESSON

COURSE_ID = "pte"
NOTEBOOK = f"{LESSON}.ipynb"
STAMP = "2026-12-05 10:00:01.000000 UTC"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A scratch course whose service folder holds the release already (one nbgrader run for the module)."""
    root = kit.make_scratch_course(tmp_path_factory.mktemp("built") / "course", [LESSON])
    Service(root, root.parent / "exchange", COURSE_ID, PTEFeedback(assignments=[LESSON])).close()
    return root


@pytest.fixture
def course(built, tmp_path) -> Path:
    root = tmp_path / "course"
    shutil.copytree(built, root, symlinks=True)
    link = root / service_module.STATE_DIR / "course" / "solutions"
    link.unlink()
    link.symlink_to(root / "solutions")
    return root


def make_service(course: Path, **settings) -> Service:
    settings = {"assignments": [LESSON], "cooldown_s": 0.0, "settle_s": 0.0, **settings}
    service = Service(course, course.parent / "exchange", COURSE_ID, PTEFeedback(**settings))
    service.commands = []

    def run_grading(cmd):   # what the grading command was asked, and what it had to grade
        service.commands.append(cmd)
        service.at_run = (service.work / "notebooks" / LESSON / NOTEBOOK).read_text()
        return subprocess.CompletedProcess(cmd, 0, "", "")

    service.run_grading = run_grading
    (service.inbound).mkdir(parents=True, exist_ok=True)
    (course.parent / "exchange" / COURSE_ID / "feedback").mkdir(exist_ok=True)
    return service


def submit(service: Service, name: str | bytes, secret: bytes | None = b"s3cret", stamp: bytes = STAMP.encode()):
    folder = os.path.join(os.fsencode(service.inbound), os.fsencode(name))
    os.mkdir(folder)
    with open(os.path.join(folder, os.fsencode(NOTEBOOK)), "wb") as handle:
        handle.write((service.work / "notebooks" / LESSON / NOTEBOOK).read_bytes())
    with open(os.path.join(folder, b"timestamp.txt"), "wb") as handle:
        handle.write(stamp)
    if secret is not None:
        with open(os.path.join(folder, b"submission_secret.txt"), "wb") as handle:
            handle.write(secret)
    time.sleep(0.02)   # arrival order: the entries' ctimes differ
    return os.fsdecode(folder).rsplit("/", 1)[1]


def released_page(service: Service, secret: str) -> str:
    from nbgrader.utils import notebook_hash

    page = service.exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=LESSON)}.html"
    return page.read_text() if page.is_file() else ""


def test_names_a_student_chooses_never_reach_a_command_or_crash_the_service(course, caplog):
    service = make_service(course)
    caplog.set_level(logging.INFO, logger="pte-feedback")
    hostile = {"-h": b"s-h", "*": b"sstar", "ann\n2026-12-06 INFO forged line": b"snl", "\uff41nn": b"sfw",
               "a..b": b"sdots"}
    for i, (student, secret) in enumerate(hostile.items()):
        submit(service, f"{student}+{LESSON}+{STAMP}+{i}", secret)
    submit(service, b"\xff\xfe+" + LESSON.encode() + b"+" + STAMP.encode())   # not UTF-8
    submit(service, f"bob+{LESSON}+{STAMP}+ok")
    added = service.notice()   # neither a name that is not UTF-8 nor a newline stops it
    assert [e.student for e in added] == ["bob"]
    assert service.refused_names == len(hostile)
    for student, secret in hostile.items():   # each is told, by the page fetch_feedback looks for
        assert "cannot be graded: the student id" in released_page(service, secret.decode()), student
    served = service.serve_one()
    assert [e.student for e in served] == ["bob"]
    [cmd] = service.commands
    students = [arg for arg in cmd if arg.startswith("--student")]
    assert students == ["--student=bob"], cmd
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "\n" in m or "\r" in m], "a log line holds a newline a student chose"
    assert any("\\xff\\xfe" in m for m in messages), messages
    service.close()


def test_the_latest_by_arrival_is_graded_not_the_latest_by_name(course):
    service = make_service(course)
    first = submit(service, f"ann+{LESSON}+2999-12-31 23:59:59.000000 UTC+a")   # arrives first, claims the future
    last = submit(service, f"ann+{LESSON}+2026-12-05 10:00:02.000000 UTC+b")
    service.notice()
    assert service.queue.get(first).state == "superseded"
    assert [e.inbound for e in service.serve_one()] == [last]
    service.close()


def test_bad_secrets_and_timestamps_are_refused_or_retried_never_a_crash(course):
    service = make_service(course, retry_s=0.0, max_failures=3)
    cases = {"empty": (b"", STAMP.encode()), "binary": (b"\xff\x00\xfe", STAMP.encode()),
             "stamp": (b"ok1", b"\xff\xfe"), "nodate": (b"ok2", b"soon"), "absurd": (b"x" * 100_000, STAMP.encode()),
             "late": (None, STAMP.encode())}
    names = {who: submit(service, f"{who}+{LESSON}+{STAMP}+r", *case) for who, case in cases.items()}
    names["fine"] = submit(service, f"fine+{LESSON}+{STAMP}+r")
    service.notice()
    service.serve_one()
    state = {who: service.queue.get(name) for who, name in names.items()}
    for who in ("binary", "stamp", "nodate", "absurd"):
        assert (state[who].state, state[who].status) == ("done", "refused"), state[who]
    assert state["empty"].state == "waiting" and state["empty"].failures == 1   # not written yet: tried again
    assert state["late"].state == "waiting"
    assert [a for a in service.commands[0] if a.startswith("--student")] == ["--student=fine"]
    late = service.inbound / names["late"]
    (late / "submission_secret.txt").write_text("now-written")   # nbgrader wrote it after the folder
    for _ in range(3):
        service.serve_one(time.time() + 1)
    assert service.queue.get(names["late"]).started is not None
    empty = service.queue.get(names["empty"])
    assert (empty.state, empty.status, empty.failures) == ("done", "error", 3), empty
    service.close()


def test_a_full_disk_is_a_log_line_and_a_wait_not_an_exit(course, caplog, monkeypatch):
    service = make_service(course)
    calls = []

    def full(now=None):
        calls.append(now)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(service, "serve_one", full)
    monkeypatch.setattr(service_module.time, "sleep", lambda s: None)
    caplog.set_level(logging.INFO, logger="pte-feedback")
    service.run(stop=lambda: len(calls) >= 5)
    assert len(calls) == 5
    assert len([r for r in caplog.records if "disk" in r.getMessage() and "full" in r.getMessage()]) == 1
    service.close()


def test_the_release_follows_the_instructors_change_and_backups_are_pruned(course):
    service = make_service(course, keep_backups=2)
    backups = service.work / "backups"
    backups.mkdir(exist_ok=True)
    for i in range(6):
        (backups / f"gradebook-2026120{i}T000000000000Z.db").write_bytes(b"")
    solution = course / "solutions" / LESSON / NOTEBOOK
    nb = nbformat.read(solution, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("The instructor fixed this lesson."))
    nbformat.write(nb, solution)
    submit(service, f"ann+{LESSON}+{STAMP}+x")
    service.notice()
    service.serve_one()
    assert "The instructor fixed this lesson." in service.at_run, "graded with the old release"
    assert sorted(p.name[10:18] for p in backups.iterdir()) == ["20261204", "20261205"]
    service.close()


def test_one_service_at_a_time_and_a_trusted_identity_for_official_grades(course):
    from autograder.service.lock import AlreadyRunning

    service = make_service(course)
    with pytest.raises(AlreadyRunning):
        make_service(course)
    service.close()
    with pytest.raises(ValueError, match="identity"):
        make_service(course, latest_grade_counts=True)
    make_service(course, latest_grade_counts=True, identity="hub").close()


def test_a_page_says_when_it_is_capped_at_take_time(course):
    service = make_service(course, max_per_day=1, assignments=[LESSON])
    names = [submit(service, f"ann+{LESSON}+{STAMP}+{i}") for i in "ab"]
    service.notice()
    service.serve_one()
    later = names[1] + "c"
    submit(service, later)
    service.notice()
    entry: Entry = service.queue.get(later)
    assert entry.state == "capped", entry
    service.close()


def test_an_error_of_one_entry_is_counted_and_told_after_a_few_never_the_batchs(course, monkeypatch):
    service = make_service(course, retry_s=0.0, max_failures=2)
    names = {who: submit(service, f"{who}+{LESSON}+{STAMP}+e") for who in ("bad", "good")}
    release = service.release

    def fragile(entry):   # the fault of one entry's own (here: its release)
        if entry.student == "bad":
            raise RuntimeError("something of bad's own")
        release(entry)

    def grade(entries):   # the grading command's pages, as a run leaves them
        for entry in entries:
            service.feedback_dir(entry).mkdir(parents=True, exist_ok=True)
            (service.feedback_dir(entry) / f"{LESSON}.html").write_text("graded page")
        return {entry.student: ("graded", "") for entry in entries}

    monkeypatch.setattr(service, "release", fragile)
    monkeypatch.setattr(service, "grade", grade)
    service.notice()
    served = service.serve_one(time.time() + 1)
    assert sorted(e.student for e in served) == ["bad", "good"]
    assert service.queue.get(names["bad"]).state == "waiting"   # tried again
    assert [e.student for e in service.serve_one(time.time() + 2)] == ["bad"]
    good, bad = service.queue.get(names["good"]), service.queue.get(names["bad"])
    assert (good.state, good.status) == ("done", "graded"), good
    assert (bad.state, bad.status, bad.failures) == ("done", "error", 2), bad
    assert "something of bad" in bad.reason
    service.close()
