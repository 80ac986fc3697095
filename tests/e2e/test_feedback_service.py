"""Feedback on submit through nbgrader's real exchange (autograder/service): students submit with
``nbgrader submit`` and read what ``nbgrader fetch_feedback`` brings back; no hub in between (the hub, its
proxy and the browser are not part of this test).

One student submits a wrong answer and fetches feedback that names the failed hidden check's hint and none of
its values; resubmits inside the cooldown and at once gets a page saying when it will be graded; is graded then,
with full marks. Another student's submission that is a symbolic link to the solutions is refused, and
changes nothing for the first; a third's submission without its notebook is told it could not be graded, and
why. The service stopped while grading and started again loses nothing.
"""
from __future__ import annotations

import html as htmllib
import os
import re
import subprocess
import time
from pathlib import Path

import nbformat

from autograder import course
from autograder.kernel import protocol
from autograder.service.service import PTEFeedback, Service

import coursekit as kit
from test_grading import LESSON, ensure_bubblewrap

COURSE_ID = "pte"


def nbgrader(cwd: Path, exchange: Path, *args: str, user: str | None = None) -> None:
    """An nbgrader command; a student's as that student, with a home (and nbgrader's submission cache) of their
    own, as on a hub."""
    env, who = None, []
    if user:
        env, who = dict(os.environ, HOME=str(cwd), JUPYTERHUB_USER=user), [f"--student={user}"]
    done = subprocess.run(course.nbgrader_cmd(*args, *who, f"--Exchange.root={exchange}",
                                              f"--CourseDirectory.course_id={COURSE_ID}", "--log-level=ERROR"),
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout}{done.stderr}"


def feedback_of(home: Path, exchange: Path, user: str) -> list[str]:
    """The text of every feedback page the student has fetched, newest submission last."""
    nbgrader(home, exchange, "fetch_feedback", LESSON, user=user)
    pages = sorted((home / LESSON / "feedback").glob(f"*/{LESSON}.html"))
    return [htmllib.unescape(re.sub(r"<[^>]+>", " ", page.read_text())) for page in pages]


def test_feedback_on_submit(tmp_path):
    ensure_bubblewrap()
    root = kit.make_scratch_course(tmp_path / "course", [LESSON])
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    nbgrader(root, exchange, "release_assignment", LESSON)
    homes = {user: tmp_path / user for user in ("ann", "bob", "cat")}
    for user, home in homes.items():
        home.mkdir()
        nbgrader(home, exchange, "fetch_assignment", LESSON, user=user)
    solution = nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    release = kit.release_notebook(root, LESSON)
    wrong = next(iter(kit.load_pitfall_module(LESSON).HIDDEN_ONLY["independent_copy"].values()))
    settings = PTEFeedback(assignments=[LESSON], cooldown_s=60.0, max_per_assignment=5, max_per_day=10,
                           grade_args=["--jobs", "2"])
    service = Service(root, exchange, COURSE_ID, settings)

    # ann: a wrong answer that passes the visible checks
    ann_nb = homes["ann"] / LESSON / f"{LESSON}.ipynb"
    nbformat.write(kit.fill_answers(release, solution, {"independent_copy": wrong}), ann_nb)
    nbgrader(homes["ann"], exchange, "submit", LESSON, user="ann")
    # bob: his notebook is a link to the instructor's solution
    bob_nb = homes["bob"] / LESSON / f"{LESSON}.ipynb"
    nbgrader(homes["bob"], exchange, "submit", LESSON, user="bob")
    bob_inbound = next(p for p in (exchange / COURSE_ID / "inbound").iterdir() if p.name.startswith("bob+"))
    (bob_inbound / bob_nb.name).unlink()
    (bob_inbound / bob_nb.name).symlink_to(root / "solutions" / LESSON / f"{LESSON}.ipynb")
    # cat: the notebook is gone from the submission (the grading command reports it missing, with no feedback)
    nbgrader(homes["cat"], exchange, "submit", LESSON, user="cat")
    cat_inbound = next(p for p in (exchange / COURSE_ID / "inbound").iterdir() if p.name.startswith("cat+"))
    (cat_inbound / bob_nb.name).unlink()

    start = time.time()
    assert len(service.notice(start)) == 3
    served = service.serve_one(start)     # one batch: both students, one grading run
    assert sorted(e.student for e in served) == ["ann", "bob", "cat"]
    by_student = {e.student: service.queue.get(e.inbound) for e in served}
    assert by_student["bob"].status == "refused" and "symbolic link" in by_student["bob"].reason
    assert by_student["ann"].status == "graded", by_student["ann"]

    text = feedback_of(homes["ann"], exchange, "ann")[-1]
    assert "HiddenTestFailed" in text and "Hint:" in text, text[-3000:]
    assert "symbolic link" in feedback_of(homes["bob"], exchange, "bob")[-1]
    assert by_student["cat"].status == "missing", by_student["cat"]
    assert "could not be graded (missing" in feedback_of(homes["cat"], exchange, "cat")[-1]
    labels = [entry["label"] for entry in protocol.Reference.read(
        root / "solutions" / LESSON / protocol.REFERENCE_FILE).cells["test_independent_copy"]]
    assert not [label for label in labels if label in text], "a hidden check's label (its inputs) is in the feedback"

    # ann fixes it and resubmits inside the cooldown: told when, graded then
    nbformat.write(kit.fill_answers(release, solution), ann_nb)
    time.sleep(1.1)   # nbgrader's timestamp has seconds: a new inbound folder
    nbgrader(homes["ann"], exchange, "submit", LESSON, user="ann")
    later = start + 5
    [fixed] = service.notice(later)
    assert fixed.not_before == by_student["ann"].started + 60.0
    assert "will be graded at" in feedback_of(homes["ann"], exchange, "ann")[-1]
    assert service.serve_one(later) == []

    # the service stops while grading it and starts again: nothing lost, graded once more in full
    taken = service.queue.take(fixed.not_before)
    service.queue.close()
    restarted = Service(root, exchange, COURSE_ID, settings)
    assert restarted.queue.get(taken.inbound).state == "waiting"
    [again] = restarted.serve_one(fixed.not_before + 1)
    assert again.inbound == fixed.inbound
    assert restarted.queue.get(fixed.inbound).status == "graded"
    text = feedback_of(homes["ann"], exchange, "ann")[-1]
    assert "HiddenTestFailed" not in text and "will be graded" not in text, text[-2000:]
    # the official gradebook is untouched: the service grades in a course folder of its own
    assert not (root / "gradebook.db").exists() or "ann" not in kit.scores(root, LESSON)
