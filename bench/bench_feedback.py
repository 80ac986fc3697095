"""Feedback on submit: from ``nbgrader submit`` to feedback a student can fetch, and a burst of a class.

    python -m bench.bench_feedback [--lesson 01_tensors_and_views] [--single 5] [--burst 30] [--jobs 2]

A scratch course and exchange; the feedback service (autograder/service) runs in its own process, as on a hub,
polling the exchange. The reference is made first (one grading), as a running service has it cached.

- **single**: one student submits a correct notebook, --single times one after another (cooldown 0): the time
  until ``nbgrader fetch_feedback`` finds the page, median and range, split into noticing (submit -> queued),
  waiting in the queue, grading (the grading command) and returning the feedback, from the service's queue.
- **burst**: --burst students submit within a few seconds; the time from the first submit until the last
  student's feedback is fetchable, against ``python -m autograder grade`` of the same notebooks in one run
  (side by side, same machine, same minute), and the ratio.

Figures are printed, never asserted.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import course
from autograder.service.queue import Queue
from autograder.service.service import STATE_DIR
from tests.support import coursekit as kit

COURSE_ID = "pte"
CONFIG = """
c.CourseDirectory.course_id = "pte"
c.PTEFeedback.assignments = [{lesson!r}]
c.PTEFeedback.cooldown_s = 0.0
c.PTEFeedback.max_per_assignment = 1000
c.PTEFeedback.max_per_day = 1000
c.PTEFeedback.poll_s = 0.2
c.PTEFeedback.grade_args = ["--jobs", "{jobs}"]
"""


def nbgrader(cwd: Path, exchange: Path, *args: str, user: str | None = None, check: bool = True):
    env, who = None, []
    if user:
        env, who = dict(os.environ, HOME=str(cwd), JUPYTERHUB_USER=user), [f"--student={user}"]
    return subprocess.run(course.nbgrader_cmd(*args, *who, f"--Exchange.root={exchange}",
                                              f"--CourseDirectory.course_id={COURSE_ID}", "--log-level=ERROR"),
                          cwd=cwd, env=env, capture_output=True, text=True, check=check)


def submit(home: Path, exchange: Path, user: str, lesson: str) -> Path:
    """``nbgrader submit`` as the student; the exchange page its feedback will have (what fetch_feedback looks
    for: the notebook's hash with the submission's secret)."""
    from nbgrader.utils import notebook_hash

    inbound = exchange / COURSE_ID / "inbound"
    before = set(inbound.iterdir()) if inbound.is_dir() else set()
    nbgrader(home, exchange, "submit", lesson, user=user)
    [new] = [p for p in inbound.iterdir() if p not in before and p.name.startswith(f"{user}+")]
    secret = (new / "submission_secret.txt").read_text()
    return exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=lesson)}.html"


def wait_for(pages: dict[str, Path], timeout: float = 1800, not_this: str = "will be graded") -> dict[str, float]:
    """user -> when (monotonic) their page held graded feedback (an early page says when it will be graded)."""
    done: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(pages) and time.monotonic() < deadline:
        for user, page in pages.items():
            if user not in done and page.is_file() and not_this not in page.read_text(errors="replace"):
                done[user] = time.monotonic()
        time.sleep(0.05)
    return done


def student(tmp: Path, exchange: Path, user: str, lesson: str, nb) -> Path:
    home = tmp / "homes" / user
    home.mkdir(parents=True)
    nbgrader(home, exchange, "fetch_assignment", lesson, user=user)
    nbformat.write(nb, home / lesson / f"{lesson}.ipynb")
    return home


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lesson", default="01_tensors_and_views")
    parser.add_argument("--single", type=int, default=5)
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    lesson = args.lesson
    tmp = Path(tempfile.mkdtemp(prefix="bench-feedback-"))
    root = kit.make_scratch_course(tmp / "course", [lesson])
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(CONFIG.format(lesson=lesson, jobs=args.jobs))
    exchange = tmp / "exchange"
    exchange.mkdir()
    nbgrader(root, exchange, "release_assignment", lesson)
    release = kit.release_notebook(root, lesson)
    solution = nbformat.read(root / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    honest = kit.fill_answers(release, solution)
    users = [f"s{i:02d}" for i in range(args.burst)]
    homes = {user: student(tmp, exchange, user, lesson, honest) for user in ["single", *users]}

    service = subprocess.Popen([sys.executable, "-m", "autograder.service", "--course", str(root), "--exchange",
                                str(exchange)], stdout=subprocess.DEVNULL, stderr=open(tmp / "service.log", "w"))
    try:
        print(f"lesson {lesson}, jobs {args.jobs}, {os.cpu_count()} CPUs; service log {tmp / 'service.log'}")
        # the first grading makes the reference, as a running service has it already
        began = time.monotonic()
        wait_for({"single": submit(homes["single"], exchange, "single", lesson)})
        print(f"warm-up (reference made): {time.monotonic() - began:.1f} s")

        totals = []
        for _ in range(args.single):
            time.sleep(1.1)   # nbgrader's timestamps have seconds
            submitted = time.monotonic()
            page = submit(homes["single"], exchange, "single", lesson)
            totals.append(wait_for({"single": page})["single"] - submitted)
        fetched = nbgrader(homes["single"], exchange, "fetch_feedback", lesson, user="single", check=False)
        got = len(list((homes["single"] / lesson / "feedback").glob(f"*/{lesson}.html")))
        print(f"single submission -> feedback fetchable: median {statistics.median(totals):.1f} s "
              f"(min {min(totals):.1f}, max {max(totals):.1f}) over {len(totals)}; nbgrader fetch_feedback then "
              f"brought {got} pages (exit {fetched.returncode})")
        queue = Queue(root / STATE_DIR / "queue.sqlite", None)
        rows = [e for e in queue.entries() if e.student == "single"][1:]
        finished = dict(queue.db.execute("SELECT inbound, finished FROM submissions").fetchall())
        for entry in rows:
            print(f"  noticed -> taken {entry.started - entry.noticed:5.2f} s, "
                  f"taken -> graded and returned {finished[entry.inbound] - entry.started:5.2f} s")
        print("  (noticing: within one poll, 0.2 s, of the submit; the rest of each total is the submit itself)")

        time.sleep(1.1)
        first = time.monotonic()
        pages = {user: submit(homes[user], exchange, user, lesson) for user in users}
        submitted_in = time.monotonic() - first
        last_submit = time.monotonic()
        reached = wait_for(pages)
        burst = max(reached.values()) - first
        print(f"burst: {len(users)} submissions in {submitted_in:.1f} s; last feedback fetchable {burst:.1f} s after "
              f"the first submit, {max(reached.values()) - last_submit:.1f} s after the last "
              f"({len(reached)} of {len(users)} got it)")
        runs = re.findall(r"(\d+) submission\(s\) of \S+ served in ([\d.]+) s", (tmp / "service.log").read_text())
        burst_runs = runs[1 + args.single:]
        print(f"  graded in {len(burst_runs)} runs of the grading command: "
              + ", ".join(f"{n} in {t} s" for n, t in burst_runs))
    finally:
        service.terminate()
        service.wait(timeout=60)

    # the grading command on the same notebooks, in one run
    twin = kit.make_scratch_course(tmp / "twin", [lesson])
    for user in users:
        kit.submit(twin, user, lesson, honest)
    subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(twin), "--jobs", str(args.jobs)],
                   capture_output=True, text=True)   # the reference, as in the service's warm-up
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(twin), "--jobs", str(args.jobs)],
                   capture_output=True, text=True, check=False)
    command = time.monotonic() - started
    print(f"grading command, the same {len(users)} notebooks in one run: {command:.1f} s; "
          f"burst (from the first submit) / command = {burst / command:.2f} (target at most 1.3)")


if __name__ == "__main__":
    main()
