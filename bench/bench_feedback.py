"""Feedback on submit: from ``nbgrader submit`` to feedback a student can fetch, and a burst of a class.

    python -m bench.bench_feedback [--lesson 01_tensors_and_views] [--single 5] [--burst 30] [--jobs 2]
                                   [--burst-submits tab cli]

A scratch course and exchange; the feedback service (autograder/service) runs in its own process, as on a hub,
polling the exchange with the course's settings (``c.PTEFeedback``: no cooldown, 0.2 s between looks, the
default settling of 1 s). The reference is made first (one grading), as a running service has it cached.

- **single**: one student runs ``nbgrader submit`` on a correct notebook, --single times one after another:
  the time from its start until the page ``nbgrader fetch_feedback`` looks for is in the exchange, median and
  range, and where it goes (the submit command until the service noticed the submission, the queue's settling
  wait, copying in, the grading command, releasing the feedback, the rest).
- **burst**: --burst students submit at the same moment, a thread each: ``tab`` as the Assignments tab's
  Submit button does in each student's running server (nbgrader's ExchangeSubmit), ``cli`` as ``nbgrader
  submit`` processes started together (a Python start and nbgrader's imports each, on the same two cores as
  the grading); each a burst of its own. The time from the first submit until the last student's feedback is
  fetchable, and from the last submit until then, and the service's runs of the grading command; against
  ``python -m autograder grade`` of the same notebooks in one run, in the same run of this script.

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
from concurrent.futures import ThreadPoolExecutor
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
SUBMITS = {"tab": "the Assignments tab's Submit, nbgrader's ExchangeSubmit in each student's server",
           "cli": "nbgrader submit, a process each"}
RUN = re.compile(r"(\d+) submission\(s\) of \S+ served in ([\d.]+) s \(copying in ([\d.]+) s, the grading command "
                 r"([\d.]+) s, releasing the feedback ([\d.]+) s\)")


def nbgrader(cwd: Path, exchange: Path, *args: str, user: str | None = None, check: bool = True):
    env, who = None, []
    if user:
        env, who = dict(os.environ, HOME=str(cwd), JUPYTERHUB_USER=user), [f"--student={user}"]
    return subprocess.run(course.nbgrader_cmd(*args, *who, f"--Exchange.root={exchange}",
                                              f"--CourseDirectory.course_id={COURSE_ID}", "--log-level=ERROR"),
                          cwd=cwd, env=env, capture_output=True, text=True, check=check)


def submissions_of(exchange: Path, user: str) -> set[Path]:
    inbound = exchange / COURSE_ID / "inbound"
    return {p for p in inbound.iterdir() if p.name.startswith(f"{user}+")} if inbound.is_dir() else set()


def submit_in_process(home: Path, exchange: Path, user: str, lesson: str) -> None:
    """What the Assignments tab's Submit does in the student's running server (nbgrader's assignment_list
    server extension): nbgrader's ExchangeSubmit, configured for the student, in this process."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeSubmit
    from traitlets.config import Config

    config = Config({"Exchange": {"root": str(exchange), "assignment_dir": str(home),
                                  "cache": str(home / ".local" / "share" / "jupyter" / "nbgrader_cache")},
                     "CourseDirectory": {"course_id": COURSE_ID, "assignment_id": lesson, "student_id": user}})
    ExchangeSubmit(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config),
                   config=config).start()


def submit(home: Path, exchange: Path, user: str, lesson: str, how: str = "cli") -> tuple[Path, str, float, float]:
    """The student submits (``cli``: ``nbgrader submit`` as a process; ``tab``: as the Assignments tab's Submit
    button, :func:`submit_in_process`): the exchange page its feedback will have (what fetch_feedback looks for:
    the notebook's hash with the submission's secret), the inbound folder's name, and when the submit started
    and ended (monotonic)."""
    from nbgrader.utils import notebook_hash

    before = submissions_of(exchange, user)
    began = time.monotonic()
    if how == "cli":
        nbgrader(home, exchange, "submit", lesson, user=user)
    else:
        submit_in_process(home, exchange, user, lesson)
    ended = time.monotonic()
    [newest] = submissions_of(exchange, user) - before
    secret = (newest / "submission_secret.txt").read_text()
    page = exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=lesson)}.html"
    return page, newest.name, began, ended


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


def student(tmp: Path, lesson: str, user: str, nb) -> Path:
    """The student's home with their copy of the lesson (what Fetch would have left there)."""
    home = tmp / "homes" / user
    (home / lesson).mkdir(parents=True)
    nbformat.write(nb, home / lesson / f"{lesson}.ipynb")
    return home


def runs_of(log: Path) -> list[tuple[float, ...]]:
    """(submissions, seconds in all, copying in, the grading command, releasing) of each run the service logged."""
    return [tuple(float(x) for x in match) for match in RUN.findall(log.read_text())]


def single(homes: dict, exchange: Path, lesson: str, root: Path, log: Path, times: int) -> None:
    totals, parts = [], []
    for _ in range(times):
        time.sleep(1.1)   # nbgrader's timestamps have seconds
        began_epoch = time.time()
        page, inbound, began, ended = submit(homes["single"], exchange, "single", lesson)
        reached = wait_for({"single": page})["single"]
        totals.append(reached - began)
        queue = Queue(root / STATE_DIR / "queue.sqlite", None)
        entry = queue.get(inbound)
        finished = queue.db.execute("SELECT finished FROM submissions WHERE inbound = ?", (inbound,)).fetchone()[0]
        queue.close()
        _, _, copying, command, releasing = runs_of(log)[-1]
        parts.append({"submit started -> the service noticed it (nbgrader submit: its start, the copy)":
                      entry.noticed - began_epoch,
                      "in the queue (settling: no more submissions coming?)": entry.started - entry.noticed,
                      "copying in": copying, "the grading command": command, "releasing the feedback": releasing,
                      "the rest (the service's bookkeeping, this script's look at the exchange)":
                      reached - began - (finished - began_epoch)})
    print(f"single submission -> feedback fetchable: median {statistics.median(totals):.1f} s "
          f"(min {min(totals):.1f}, max {max(totals):.1f}) over {len(totals)}; where it goes (medians):")
    for name in parts[0]:
        print(f"  {statistics.median(p[name] for p in parts):6.2f} s  {name}")
    got = len(list((homes["single"] / lesson / "feedback").glob(f"*/{lesson}.html"))) if nbgrader(
        homes["single"], exchange, "fetch_feedback", lesson, user="single", check=False).returncode == 0 else 0
    print(f"  nbgrader fetch_feedback then brought {got} pages")


def burst(homes: dict, exchange: Path, lesson: str, log: Path, users: list[str], how: str) -> float:
    """The burst: every student submits at once (a thread each); the time from the first submit until the last
    feedback was fetchable."""
    time.sleep(1.1)
    before = len(runs_of(log))
    with ThreadPoolExecutor(max_workers=len(users)) as pool:
        submitted = dict(zip(users, pool.map(lambda user: submit(homes[user], exchange, user, lesson, how), users)))
    first = min(s[2] for s in submitted.values())
    last = max(s[3] for s in submitted.values())
    reached = wait_for({user: s[0] for user, s in submitted.items()})
    done = max(reached.values())
    print(f"burst ({SUBMITS[how]}): {len(users)} students submitted at once, all done {last - first:.1f} s after "
          f"the first began; {len(reached)} of {len(users)} got feedback, the last {done - first:.1f} s after the "
          f"first submit began, {done - last:.1f} s after the last ended")
    runs = runs_of(log)[before:]
    print(f"  graded in {len(runs)} runs of the grading command: "
          + ", ".join(f"{n:g} in {command:.1f} s" for n, _, _, command, _ in runs))
    return done - first


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lesson", default="01_tensors_and_views")
    parser.add_argument("--single", type=int, default=5, help="single submissions timed")
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--burst-submits", nargs="+", choices=sorted(SUBMITS), default=["tab", "cli"],
                        help="how the burst's students submit: tab (nbgrader's ExchangeSubmit, as the Assignments "
                             "tab's Submit runs it in the student's server), cli (nbgrader submit); each a burst")
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
    users = {how: [f"{how}{i:02d}" for i in range(args.burst)] for how in args.burst_submits}
    homes = {user: student(tmp, lesson, user, honest)
             for user in ["single", *(u for group in users.values() for u in group)]}

    log = tmp / "service.log"
    service = subprocess.Popen([sys.executable, "-m", "autograder.service", "--course", str(root), "--exchange",
                                str(exchange)], stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    try:
        print(f"lesson {lesson}, jobs {args.jobs}, {os.cpu_count()} CPUs; service log {log}")
        began = time.monotonic()   # the first grading makes the reference, as a running service has it already
        wait_for({"single": submit(homes["single"], exchange, "single", lesson)[0]})
        print(f"warm-up (reference made): {time.monotonic() - began:.1f} s")
        if args.single:
            single(homes, exchange, lesson, root, log, args.single)
        took = {how: burst(homes, exchange, lesson, log, users[how], how) for how in args.burst_submits
                if users[how]}   # --burst 0: no burst
    finally:
        service.terminate()
        service.wait(timeout=60)
    if not took:
        return

    # the grading command on the same notebooks, in one run
    twin = kit.make_scratch_course(tmp / "twin", [lesson])
    for user in range(args.burst):
        kit.submit(twin, f"s{user:02d}", lesson, honest)
    grade = [sys.executable, "-m", "autograder", "grade", "--course", str(twin), "--jobs", str(args.jobs)]
    subprocess.run(grade, capture_output=True, text=True)   # the reference, as in the service's warm-up
    started = time.monotonic()
    subprocess.run(grade, capture_output=True, text=True, check=False)
    command = time.monotonic() - started
    print(f"grading command, the same {args.burst} notebooks in one run: {command:.1f} s")
    for how, seconds in took.items():
        print(f"  burst ({how}): last feedback {seconds:.1f} s after the first submit = {seconds / command:.2f} x the "
              f"grading command (the issue's target: at most 1.3)")


if __name__ == "__main__":
    main()
