"""The feedback service's queue (autograder/service/queue.py): on disk, once per submission, latest only,
cooldown, caps, round-robin, and nothing lost when the service stops mid-grading."""
from __future__ import annotations

from autograder.service.queue import Limits, Queue, parse_inbound

T0 = 1_800_000_000.0 - 1_800_000_000.0 % 86400 + 3600   # 01:00 UTC on some day


def name(student: str, stamp: str, assignment: str = "01_x") -> str:
    return f"{student}+{assignment}+2026-12-05 10:00:{stamp}.000000 UTC+abcdef"


def make(tmp_path, **limits) -> Queue:
    return Queue(tmp_path / "queue.sqlite", Limits(**{"cooldown_s": 60.0, "max_per_assignment": 5,
                                                      "max_per_day": 20, **limits}))


def test_a_submission_is_queued_once_and_only_by_its_name(tmp_path):
    queue = make(tmp_path)
    assert queue.add(name("ann", "01"), T0).state == "waiting"
    assert queue.add(name("ann", "01"), T0 + 1) is None
    assert queue.add("not-a-submission", T0) is None
    assert parse_inbound("ann+01_x+stamp") == ("ann", "01_x", "stamp")
    assert len(queue.entries()) == 1


def test_a_later_submission_supersedes_the_waiting_one(tmp_path):
    queue = make(tmp_path)
    queue.add(name("ann", "01"), T0)
    queue.add(name("ann", "02"), T0 + 1)
    states = [(e.timestamp[17:19], e.state) for e in queue.entries()]
    assert states == [("01", "superseded"), ("02", "waiting")], states
    taken = queue.take(T0 + 2)
    assert taken.inbound == name("ann", "02") and queue.take(T0 + 2) is None


def test_the_cooldown_delays_the_next_grading_and_says_when(tmp_path):
    queue = make(tmp_path)
    queue.add(name("ann", "01"), T0)
    first = queue.take(T0)
    queue.finish(first.inbound, "graded", now=T0 + 5)
    second = queue.add(name("ann", "02"), T0 + 10)
    assert second.not_before == T0 + 60
    assert queue.take(T0 + 59) is None
    assert queue.next_ready() == T0 + 60
    assert queue.take(T0 + 60).inbound == second.inbound


def test_caps_per_assignment_and_per_day(tmp_path):
    queue = make(tmp_path, cooldown_s=0.0, max_per_assignment=2, max_per_day=3)
    for stamp in ("01", "02"):
        queue.add(name("ann", stamp), T0)
        queue.finish(queue.take(T0).inbound, "graded", now=T0)
    capped = queue.add(name("ann", "03"), T0)
    assert capped.state == "capped" and "limit of 2 graded submissions of 01_x" in capped.reason
    queue.add(name("ann", "04", "02_y"), T0)
    queue.finish(queue.take(T0).inbound, "graded", now=T0)
    daily = queue.add(name("ann", "05", "03_z"), T0)
    assert daily.state == "capped" and "a day" in daily.reason
    assert queue.add(name("ann", "06", "03_z"), T0 + 86400).state == "waiting"   # the next day


def test_round_robin_serves_the_student_served_longest_ago(tmp_path):
    queue = make(tmp_path, cooldown_s=0.0)
    queue.add(name("ann", "01"), T0)
    queue.finish(queue.take(T0).inbound, "graded", now=T0)
    queue.add(name("ann", "02"), T0 + 1)            # ann again, first in line
    queue.add(name("bob", "03"), T0 + 2)
    queue.add(name("cat", "04"), T0 + 3)
    order = []
    while (entry := queue.take(T0 + 10)) is not None:
        order.append(entry.student)
        queue.finish(entry.inbound, "graded", now=T0 + 10)
    assert order == ["bob", "cat", "ann"], order


def test_a_restart_loses_nothing_and_grades_the_interrupted_one_again(tmp_path):
    queue = make(tmp_path)
    queue.add(name("ann", "01"), T0)
    queue.add(name("bob", "02"), T0)
    taken = queue.take(T0)
    queue.close()                                   # the service died while grading `taken`
    again = make(tmp_path)
    assert again.recover() == 1
    assert {e.state for e in again.entries()} == {"waiting"}
    assert again.take(T0 + 1).inbound == taken.inbound


def test_a_batch_is_one_assignment_each_student_once_in_round_robin_order(tmp_path):
    queue = make(tmp_path, cooldown_s=0.0)
    queue.add(name("ann", "01"), T0)
    queue.finish(queue.take(T0).inbound, "graded", now=T0)
    queue.add(name("ann", "02"), T0 + 1)
    queue.add(name("bob", "03"), T0 + 2)
    queue.add(name("cat", "04", "02_y"), T0 + 3)
    queue.add(name("dan", "05"), T0 + 4)
    batch = queue.take_batch(10, T0 + 10)
    assert [(e.student, e.assignment) for e in batch] == [("bob", "01_x"), ("dan", "01_x"), ("ann", "01_x")]
    assert [(e.student, e.assignment) for e in queue.take_batch(10, T0 + 10)] == [("cat", "02_y")]
    assert queue.take_batch(10, T0 + 10) == []


def test_a_name_that_would_leave_the_service_folders_is_not_a_submission(tmp_path):
    queue = make(tmp_path)
    assert parse_inbound("..+01_x+stamp") is None and parse_inbound("ann+..+stamp") is None
    assert queue.add("..+01_x+2026-12-05 10:00:01 UTC+abc", T0) is None


def test_a_folder_made_in_a_classmates_name_is_spoofed(tmp_path):
    """Where students are Unix users, the owner of the inbound folder (read on its descriptor) must be the student
    it names; with the hub's exchange, the service's own user (made here as root for the user nobody, then given
    to nobody)."""
    import os

    import pytest

    from autograder.service.intake import open_entry, owner_problem

    if os.geteuid() != 0:
        pytest.fail("this test gives a folder to another user, as root (`make test` runs as root on CI and here)")
    folder = tmp_path / "nobody+01_x+stamp+abc"
    folder.mkdir()
    inbound = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    uid = lambda: (lambda o: (os.close(o.fd), o.uid)[1])(open_entry(inbound, folder.name))  # noqa: E731
    assert owner_problem(uid(), "nobody", "owner").startswith("made by uid 0, not by nobody")
    assert owner_problem(uid(), "nobody", "hub") == "" and owner_problem(uid(), "nobody", "folder-name") == ""
    os.chown(folder, 65534, 65534)
    assert owner_problem(uid(), "nobody", "owner") == ""
    assert owner_problem(uid(), "nobody", "hub").startswith("made by uid 65534")
    assert owner_problem(uid(), "pte-no-such-user", "owner") == "no Unix user is named 'pte-no-such-user'"
    os.close(inbound)


def test_a_burst_settles_into_one_batch(tmp_path):
    """While submissions keep arriving, the next batch waits for a quiet second, at most 20 s after the first;
    one submission alone waits a second; a full batch does not wait."""
    queue = make(tmp_path, cooldown_s=0.0)
    assert not queue.settling(T0, 1.0, 20.0, 30)                    # nothing waits
    queue.add(name("ann", "01"), T0)
    assert queue.settling(T0 + 0.5, 1.0, 20.0, 30)
    assert not queue.settling(T0 + 1.0, 1.0, 20.0, 30)             # a quiet second: grade
    for i, student in enumerate(["bob", "cat", "dan"], start=1):    # a class arriving every 0.8 s
        queue.add(name(student, f"0{i + 1}"), T0 + 0.8 * i)
        assert queue.settling(T0 + 0.8 * i + 0.1, 1.0, 20.0, 30)
    assert not queue.settling(T0 + 2.4 + 1.0, 1.0, 20.0, 30)
    assert queue.settling(T0 + 2.45, 1.0, 3.0, 30) and not queue.settling(T0 + 2.45, 1.0, 2.0, 30)   # at most
    assert not queue.settling(T0 + 2.5, 1.0, 20.0, 4)              # a full batch
    assert len(queue.take_batch(30, T0 + 3.4)) == 4


def test_the_caps_hold_when_taken_across_assignments(tmp_path):
    """Three assignments waiting at once, none graded yet when they were noticed: the daily cap of 2 lets two be
    graded; the third is capped when taken (and listed for the service to tell its student)."""
    queue = make(tmp_path, cooldown_s=0.0, max_per_day=2)
    for stamp, assignment in (("01", "01_x"), ("02", "02_y"), ("03", "03_z")):
        assert queue.add(name("ann", stamp, assignment), T0).state == "waiting"
    taken = []
    while batch := queue.take_batch(10, T0 + 1):
        taken += batch
        for entry in batch:
            queue.finish(entry.inbound, "graded", now=T0 + 1)
    assert len(taken) == 2, taken
    [capped] = queue.capped
    assert capped.state == "capped" and "a day" in capped.reason


def test_a_refused_copy_is_not_counted_but_a_grading_is(tmp_path):
    queue = make(tmp_path, cooldown_s=0.0, max_per_assignment=1)
    queue.add(name("ann", "01"), T0)
    queue.finish(queue.take(T0).inbound, "refused", "a symbolic link", now=T0)
    queue.add(name("ann", "02"), T0)
    queue.finish(queue.take(T0).inbound, "error", "the grading command failed", now=T0)
    assert queue.add(name("ann", "03"), T0).state == "capped"
