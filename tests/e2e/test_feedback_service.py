"""Feedback on submit through nbgrader's real exchange (autograder/service): a student submits with
``nbgrader submit`` and reads what ``nbgrader fetch_feedback`` brings back; no hub in between (the hub, its
proxy and the browser are tests/e2e/test_hub.py). Her classmates' submissions are copies of one nbgrader wrote
(their own names and secrets), their pages read where fetch_feedback finds them (the page of the submission's
secret in the exchange's feedback/): one nbgrader start a step, not one a student (fetch_assignment and the
whole plain cycle are tests/e2e/test_exchange.py's).

One student submits a wrong answer and fetches feedback that names the failed hidden check's hint and none of
its values, and no points (the course hides the score of this lesson: ``c.PTEFeedback.hide_score``); resubmits
inside the cooldown and at once gets a page saying when it will be graded. In the same batch as the first
answer, a classmate's notebook is a symbolic link to the solutions (refused), another's notebook is missing (told
it could not be graded, and why) and another's floods its output (``output-limit``): nothing changes for the
first. The service grades in a course folder of its own: the course's gradebook and grades.csv are untouched.

Then the service runs as a process, as on a hub, with the latest feedback grade counting
(``c.PTEFeedback.latest_grade_counts``, which needs an identity the service trusts: here ``hub``, the inbound
entries owned by the service's user, as the hub's exchange writes them) and the score shown: it is killed
(SIGKILL) while it grades one submission and another waits, and started again (two a batch now: one run): what
was left of the killed run is ended, both submissions are graded and released once, with full marks and the
score on the page, and their grades are the course's official ones (its gradebook, grades.csv, submitted/ and
autograded/).
"""
from __future__ import annotations

import csv
import html as htmllib
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from autograder import course
from autograder.kernel.vocabulary import protocol
from autograder.service.service import GRADING_PID, STATE_DIR, Service
from autograder.service.settings import PTEFeedback

import coursekit as kit
from servicekit import read_pid, running_in_group
from test_grading import LESSON, ensure_bubblewrap

COURSE_ID = "pte"
FULL_MARKS = 10.0
FLOOD = ("def linear_forward(x, weight, bias):\n    import sys\n    chunk = 'x' * 5_000_000\n"
         "    while True:\n        sys.stdout.write(chunk)\n")
GRADE_TIMEOUT_S = 300
AS_A_PROCESS = """
c.CourseDirectory.course_id = {course_id!r}
c.PTEFeedback.assignments = [{lesson!r}]
c.PTEFeedback.cooldown_s = 60.0
c.PTEFeedback.poll_s = 0.2
c.PTEFeedback.settle_s = 0.0
c.PTEFeedback.batch = 1
c.PTEFeedback.latest_grade_counts = True
c.PTEFeedback.identity = "hub"
c.PTEFeedback.grade_args = ["--jobs", "1"]
"""


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


def page_of(exchange: Path, inbound: Path) -> str:
    """The text of the feedback page of the submission in ``inbound`` (the exchange's inbound entry), where the
    student's fetch_feedback finds it: the page named by the submission's secret (nbgrader's notebook_hash)."""
    from nbgrader.utils import notebook_hash

    secret = (inbound / "submission_secret.txt").read_text().strip()
    page = exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=LESSON)}.html"
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", page.read_text())) if page.is_file() else ""


def classmate(model: Path, user: str, notebook: nbformat.NotebookNode | None = None) -> Path:
    """A submission of ``user`` in inbound/, as ``nbgrader submit`` leaves one: a copy of ``model`` (one it
    wrote) in the classmate's name, with a secret of their own and ``notebook`` in place of the model's."""
    target = model.parent / "+".join([user, *model.name.split("+")[1:]])
    shutil.copytree(model, target)
    (target / "submission_secret.txt").write_text(secrets.token_hex(16))
    if notebook is not None:
        nbformat.write(notebook, target / f"{LESSON}.ipynb")
    return target


def inbound_of(exchange: Path, user: str) -> list[Path]:
    return sorted(p for p in (exchange / COURSE_ID / "inbound").iterdir() if p.name.startswith(f"{user}+"))


def queue_states(root: Path) -> dict[str, tuple[str, str]]:
    """inbound folder -> (state, status), read from the service's queue as another process."""
    con = sqlite3.connect(f"file:{root / STATE_DIR / 'queue.sqlite'}?mode=ro", uri=True, timeout=10)
    try:
        return {row[0]: (row[1], row[2]) for row in con.execute("SELECT inbound, state, status FROM submissions")}
    finally:
        con.close()


def start_service(root: Path, exchange: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder.service", "--course", str(root), "--exchange",
                             str(exchange)], cwd=root, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                            env=dict(os.environ, OMP_NUM_THREADS="1"))


def wait_until(condition, what: str, log: Path) -> None:
    deadline = time.monotonic() + GRADE_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {GRADE_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def test_feedback_on_submit(tmp_path):
    ensure_bubblewrap()
    root = kit.make_scratch_course(tmp_path / "course", [LESSON])
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    nbgrader(root, exchange, "release_assignment", LESSON)
    ann = tmp_path / "ann"
    # what fetch_assignment writes (a copy of the exchange's outbound release): fetching is test_exchange.py's
    shutil.copytree(exchange / COURSE_ID / "outbound" / LESSON, ann / LESSON)
    solution = nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    release = kit.release_notebook(root, LESSON)
    notebook = f"{LESSON}.ipynb"
    wrong = next(iter(kit.load_pitfall_module(LESSON).HIDDEN_ONLY["independent_copy"].values()))
    settings = PTEFeedback(assignments=[LESSON], cooldown_s=60.0, max_per_assignment=5, max_per_day=10,
                           hide_score=[LESSON], grade_args=["--jobs", "1"])
    service = Service(root, exchange, COURSE_ID, settings)

    # ann: a wrong answer that passes the visible checks
    nbformat.write(kit.fill_answers(release, solution, {"independent_copy": wrong}), ann / LESSON / notebook)
    nbgrader(ann, exchange, "submit", LESSON, user="ann")
    [ann_inbound] = inbound_of(exchange, "ann")
    # bob: his notebook is a link to the instructor's solution
    bob_inbound = classmate(ann_inbound, "bob")
    (bob_inbound / notebook).unlink()
    (bob_inbound / notebook).symlink_to(root / "solutions" / LESSON / notebook)
    # cat: the notebook is gone from the submission (the grading command reports it missing, with no feedback)
    cat_inbound = classmate(ann_inbound, "cat")
    (cat_inbound / notebook).unlink()
    # dan: a cell that floods its output
    dan_inbound = classmate(ann_inbound, "dan", kit.fill_answers(release, solution, {"linear_forward": FLOOD}))

    start = time.time() - 600   # as if ten minutes ago: the cooldown of ann's next submission is over at the end
    assert len(service.notice(start)) == 4
    served = service.serve_one(start)     # one batch: every student, one grading run
    assert sorted(e.student for e in served) == ["ann", "bob", "cat", "dan"]
    by_student = {e.student: service.queue.get(e.inbound) for e in served}
    assert by_student["bob"].status == "refused" and "symbolic link" in by_student["bob"].reason
    assert by_student["ann"].status == "graded", by_student["ann"]
    assert by_student["dan"].status == "output-limit", by_student["dan"]

    text = feedback_of(ann, exchange, "ann")[-1]
    assert "HiddenTestFailed" in text and "Hint:" in text, text[-3000:]
    assert not re.search(r"Score|\d+\.\d+ / \d+\.\d+", text), text[:3000]   # nor points
    assert "symbolic link" in page_of(exchange, bob_inbound)
    assert by_student["cat"].status == "missing", by_student["cat"]
    assert "could not be graded (missing" in page_of(exchange, cat_inbound)
    assert page_of(exchange, dan_inbound)
    labels = [entry["label"] for entry in protocol.Reference.read(
        root / "solutions" / LESSON / protocol.REFERENCE_FILE).cells["test_independent_copy"]]
    assert not [label for label in labels if label in text], "a hidden check's label (its inputs) is in the feedback"
    # the latest feedback grade does not count: the course's gradebook and grades.csv are untouched
    assert "ann" not in kit.scores(root, LESSON) and not (root / "grades.csv").exists()

    # ann fixes it and resubmits inside the cooldown: told when, graded then
    nbformat.write(kit.fill_answers(release, solution), ann / LESSON / notebook)
    time.sleep(1.1)   # nbgrader's timestamp has seconds: a new inbound folder
    nbgrader(ann, exchange, "submit", LESSON, user="ann")
    later = start + 5
    [fixed] = service.notice(later)
    assert fixed.not_before == by_student["ann"].started + 60.0
    fixed_inbound = exchange / COURSE_ID / "inbound" / fixed.inbound
    assert "will be graded at" in page_of(exchange, fixed_inbound)
    assert service.serve_one(later) == []
    service.close()

    # as a process (one submission a run): eve submits too; killed while it grades one, the other waiting
    eve_inbound = classmate(fixed_inbound, "eve")
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(AS_A_PROCESS.format(course_id=COURSE_ID, lesson=LESSON))
    queued = [fixed.inbound, eve_inbound.name]
    logs = [tmp_path / "service-killed.log", tmp_path / "service-restarted.log"]
    proc = start_service(root, exchange, logs[0])
    try:
        wait_until(lambda: sorted(queue_states(root).get(i, ("",))[0] for i in queued) == ["grading", "waiting"],
                   "one submission grading, one waiting", logs[0])
        pid_file = root / STATE_DIR / GRADING_PID
        wait_until(lambda: len(running_in_group(read_pid(pid_file))) >= 3,
                   "the grading command and its worker processes", logs[0])
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    pgid = read_pid(pid_file)   # the killed run's, left for the next start
    with open(root / "nbgrader_config.py", "a") as config:   # both in the restarted service's one run
        config.write("c.PTEFeedback.batch = 2\n")
    proc = start_service(root, exchange, logs[1])
    try:
        wait_until(lambda: read_pid(pid_file) not in (None, pgid), "a new run", logs[1])
        assert not running_in_group(pgid), "a process of the killed service's grading run is alive beside the new run"
        wait_until(lambda: all(queue_states(root)[i][0] == "done" for i in queued), "both graded", logs[1])
    finally:
        proc.send_signal(signal.SIGINT)   # as the hub stops it
        proc.wait(timeout=60)
    assert {i: queue_states(root)[i] for i in queued} == {i: ("done", "graded") for i in queued}
    killed, restarted = (log.read_text() for log in logs)
    for inbound in queued:   # released once: by the restarted service, not by the killed one
        released = "{}/{} ({}): ".format(*inbound.split("+")[:3])
        assert (killed.count(released), restarted.count(released)) == (0, 1), restarted

    # full marks, and the score is on the page (this lesson's score is no longer hidden)
    for text in (feedback_of(ann, exchange, "ann")[-1], page_of(exchange, eve_inbound)):
        assert "HiddenTestFailed" not in text and "will be graded" not in text, text[-2000:]
        assert re.search(rf"\(Score: {FULL_MARKS} / {FULL_MARKS}\)", text), text[:2000]
    # the latest feedback grade counts: the course's own gradebook, grades.csv, submitted/ and autograded/
    official = kit.scores(root, LESSON)
    assert sum(official["ann"].values()) == FULL_MARKS and sum(official["eve"].values()) == FULL_MARKS, official
    with open(root / "grades.csv", newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert sorted(rows) == ["ann", "eve"] and float(rows["ann"]["score"]) == FULL_MARKS, rows
    assert (root / "autograded" / "ann" / LESSON / notebook).is_file()
    assert (root / "submitted" / "ann" / LESSON / "timestamp.txt").read_text() == fixed.timestamp
