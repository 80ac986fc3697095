"""Feedback on submit: grade each new submission in nbgrader's exchange and hand its feedback back there.

One loop, one batch at a time (the grading command inside uses every core it is given):

1. **notice**: list ``<exchange>/<course_id>/inbound/`` (what nbgrader's Submit button and ``nbgrader submit``
   write) and queue each new folder of an assignment the course turned on (:mod:`.queue`);
2. **settle**: while submissions are still arriving (a burst: a class submitting at the end of a lab), wait
   until ``settle_s`` pass without a new one (at most ``settle_max_s`` after the first), so that one run of the
   grading command takes them all (:meth:`.queue.Queue.settling`);
3. **take** the next ready submissions (a batch of one assignment: round-robin, cooldown, caps, checked when
   taken) and copy each into ``submitted/<student>/<assignment>/``: only the release's notebooks,
   ``timestamp.txt`` and ``submission_secret.txt``, read relative to the entry's folder opened once, never by
   path (:mod:`.intake`: the service runs as root; the inbound folder may be the student's);
4. **grade** them with the grading command (``python -m autograder grade --student=S ... --assignment=A``: the
   same sandbox, limits, warm kernels and cached reference as a class), in a course folder of the service's
   own (``.grading/feedback-service/course``: its ``nbgrader_config.py`` loads the course's and adds the
   service's settings, the course's solutions linked, its own release made from them by nbgrader, its own
   gradebook, ``submitted/`` and ``feedback/``), so the official grades stay the instructor's unless the course
   says the latest feedback grade counts (``latest_grade_counts``: the gradebook is then the course's, and the
   student's row of ``grades.csv``, the submission and its autograded copy go to the course folder);
5. **return** the feedback with nbgrader's ``release_feedback``, so the student's Fetch Feedback shows it; for
   an assignment in ``hide_score`` the page is nbgrader's without its points (``templates/pte_feedback``).

A submission inside its cooldown or past a cap gets a short feedback page at once that says when it will be
graded, or why it will not; it is replaced by the graded one when that comes.

The student and assignment ids are checked before they reach an argument list, a glob or a path
(:mod:`.names`); a refused name, a file that is not what it should be, a secret not written yet or an error of
one submission's own end as a page to that student (after ``max_failures`` tries), never a failed batch or a
stopped service; a full disk is a log line and a wait. The service's folder is its own (0700, written under
umask 077: :mod:`.__main__`).

The grading command runs in a process group of its own that dies with the service (``PR_SET_PDEATHSIG``,
:mod:`.processes`); one service runs at a time, holding ``grading.pid`` locked for its life (:mod:`.lock`),
which records the run's group and start time; the next start ends what is left of a killed service's run,
when the record proves it is that run, before it grades the interrupted batch again.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading.messages import GradingReport, MessageError
from autograder.grading.plan.planning import GRADING_DIR
from autograder.grading.run.reference import CACHE_DIR

from ..grading.status import SubmissionError
from . import intake
from .intake import NotYet
from .lock import ServiceLock
from .names import id_problem, shown
from .processes import die_with_parent, end_group
from .queue import Entry, Limits, Queue
from .returning import Returning
from .settings import PTEFeedback
from .workfolder import CourseFolder, prune_backups

log = logging.getLogger("pte-feedback")
STATE_DIR = ".grading/feedback-service"
GRADING_PID = "grading.pid"
DISK_WAIT_S = 30.0


def disk_full(exc: BaseException) -> bool:
    return (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or (
        isinstance(exc, sqlite3.OperationalError) and "full" in str(exc))


@dataclass
class Service(CourseFolder, Returning):
    course: Path
    exchange: Path
    course_id: str
    settings: PTEFeedback
    queue: Queue = field(init=False)
    work: Path = field(init=False)
    ignored: set[str] = field(init=False, default_factory=set)   # inbound entries never to be queued
    refused_names: int = field(init=False, default=0)

    def __post_init__(self):
        self.course = Path(self.course).resolve()
        self.identity = self.settings.trusted_identity()
        if self.settings.latest_grade_counts and self.identity not in ("owner", "hub"):
            raise ValueError("c.PTEFeedback.latest_grade_counts needs an identity the service can trust: "
                             "c.PTEFeedback.identity = 'hub' (the hub's exchange) or 'owner' (each student a Unix "
                             "user), not the folder's name a student chose")
        for folder in (self.course / GRADING_DIR, self.course / STATE_DIR):   # the reference cache, the state
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
        state = self.course / STATE_DIR
        self.lock = ServiceLock(state / GRADING_PID)
        if done := self.lock.end_leftover():
            log.info("%s", done)
        self.work = state / "course"
        self.work.mkdir(exist_ok=True)
        if not (self.work / "solutions").is_symlink():
            (self.work / "solutions").symlink_to(self.course / "solutions")
        # the course's reference cache, so a reference the instructor's grading made is not made again
        cache = self.course / GRADING_DIR / CACHE_DIR
        cache.mkdir(parents=True, exist_ok=True)
        (self.work / GRADING_DIR).mkdir(exist_ok=True)
        if not (self.work / GRADING_DIR / CACHE_DIR).is_symlink():
            (self.work / GRADING_DIR / CACHE_DIR).symlink_to(cache, target_is_directory=True)
        self.write_config()
        for assignment in self.settings.assignments:   # the release and the gradebook's record of it
            self.sync_release(assignment)
        limits = Limits(self.settings.cooldown_s, self.settings.max_per_assignment, self.settings.max_per_day)
        self.queue = Queue(state / "queue.sqlite", limits)
        recovered = self.queue.recover()
        if recovered:
            log.info("%d submission(s) were being graded when the service stopped: queued again", recovered)

    def close(self) -> None:
        self.queue.close()
        self.lock.close()

    @property
    def inbound(self) -> Path:
        return Path(self.settings.inbound) if self.settings.inbound else self.exchange / self.course_id / "inbound"

    # ------------------------------------------------------------ notice

    def consider(self, inbound_fd: int, name: str) -> tuple[float, str] | None:
        """(arrival, name) of an inbound entry to queue, or None: not a submission of a turned-on assignment,
        queued before, or refused (logged; a refused name gets its page)."""
        if name in self.ignored:
            return None
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            self.ignored.add(name)
            log.warning("%s: ignored, its name is not UTF-8", shown(name))
            return None
        parts = name.split("+")
        if len(parts) < 3 or parts[1] not in self.settings.assignments or self.queue.get(name) is not None:
            return None
        try:
            opened = intake.open_entry(inbound_fd, name)
        except SubmissionError as exc:
            self.ignored.add(name)
            log.warning("%s: ignored: %s", shown(name), shown(exc.reason))
            return None
        try:
            why = intake.owner_problem(opened.uid, parts[0], self.identity)
            if why:
                self.ignored.add(name)
                log.warning("%s: ignored, not the student's own submission: %s", shown(name), shown(why))
                return None
            problem = id_problem(parts[0])
            if problem or len(parts) > 4:
                self.refuse_name(opened.fd, name, f"the student id {parts[0]!r} is refused: {problem}"
                                 if problem else "the folder's name is not <student>+<assignment>+<timestamp>")
                return None
            return opened.arrived, name
        finally:
            os.close(opened.fd)

    def notice(self, now: float | None = None) -> list[Entry]:
        """Queue every new submission of a turned-on assignment, in the order they arrived (never by the
        timestamp in their name); the new entries (their early feedback written: when they will be graded, or
        why not)."""
        try:
            inbound_fd = os.open(self.inbound, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            found = [f for name in os.listdir(inbound_fd) if (f := self.consider(inbound_fd, name))]
        finally:
            os.close(inbound_fd)
        added = []
        for arrived, name in sorted(found):
            entry = self.queue.add(name, now, arrived)
            if entry is None:
                continue
            added.append(entry)
            when = time.time() if now is None else now
            if entry.state == "capped":
                self.early_feedback(entry, entry.reason)
            elif entry.not_before > when:
                at = time.strftime("%H:%M:%S UTC", time.gmtime(entry.not_before))
                self.early_feedback(entry, f"this submission will be graded at {at} (one grading every "
                                           f"{self.settings.cooldown_s:g} s); a later submission replaces it")
        return added

    def refuse_name(self, entry_fd: int, name: str, reason: str) -> None:
        """An entry whose name the service refuses: recorded, logged, counted, and a page to the student named by
        the submission's secret alone (no id of theirs reaches a path, a glob or nbgrader)."""

        self.queue.refuse(name, reason)
        self.refused_names += 1
        log.warning("%s: refused (%d refused names so far): %s", shown(name), self.refused_names, shown(reason))
        self.page_by_secret(entry_fd, name, reason)

    # ------------------------------------------------------------ copy, grade, return

    def copy_in(self, entry: Entry) -> Path:
        """The submission's files, copied from its inbound entry (opened once, its owner checked on that
        descriptor, every file read relative to it: :mod:`.intake`) into ``submitted/``; raises SubmissionError
        (``refused``) for what is not a regular file, NotYet for a secret not written yet."""
        target = self.work / "submitted" / entry.student / entry.assignment
        inbound_fd = os.open(self.inbound, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            opened = intake.open_entry(inbound_fd, entry.inbound)
        finally:
            os.close(inbound_fd)
        try:
            why = intake.owner_problem(opened.uid, entry.student, self.identity)
            if why:
                raise intake.refused(f"not the student's own submission: {why}")
            intake.copy_entry(opened.fd, self.notebooks(entry.assignment), target)
        finally:
            os.close(opened.fd)
        return target

    def run_grading(self, cmd: list[str]) -> subprocess.CompletedProcess:
        """The grading command in a process group of its own that dies with this service; its id and start time
        are in the lock file while it runs (:mod:`.lock`)."""
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, preexec_fn=die_with_parent)
        self.lock.record_run(proc.pid)
        try:
            stdout, stderr = proc.communicate()
        finally:   # this service stopped (SIGINT from the hub): so does the run
            end_group(proc.pid)
            proc.wait()
            self.lock.clear_run()
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)

    def grade(self, entries: list[Entry]) -> dict[str, tuple[str, str]]:
        """Run the grading command once for these students' submissions of one assignment; student ->
        (status, reason) from its report."""
        assignment = entries[0].assignment
        self.sync_release(assignment)   # the instructor changed the lesson: grade with the new release
        (self.work / "grading-report.json").unlink(missing_ok=True)   # a run that fails must not read the last one's
        for entry in entries:   # nor release the feedback of a student's earlier submission for this one
            shutil.rmtree(self.feedback_dir(entry), ignore_errors=True)
        self.write_config(assignment)
        cmd = [sys.executable, "-m", "autograder", "grade", f"--course={self.work}", f"--assignment={assignment}",
               *[f"--student={e.student}" for e in entries], *self.settings.grade_args]
        done = self.run_grading(cmd)
        prune_backups(self.work / "backups", self.settings.keep_backups)
        found = {}
        try:   # through the report's one definition: another version is refused, not misread
            report = GradingReport.read(self.work / "grading-report.json")
            items = [s for s in report.submissions if s.assignment == assignment]
        except (OSError, MessageError):
            items = []
        for entry in entries:
            mine = [s for s in items if s.student == entry.student]
            if not mine:
                found[entry.student] = ("error", f"the grading command ended with {done.returncode} and did not "
                                                 f"report it: {done.stderr[-300:]}")
                continue
            status = next((str(s.status) for s in mine if s.status != "graded"), "graded")
            found[entry.student] = (status, " | ".join(s.reason for s in mine if s.reason))
        return found

    def failed(self, entry: Entry, reason: str, page: bool = True) -> None:
        """A try of ``entry`` failed for a reason of its own: tried again later, or, after ``max_failures``
        tries, finished with a page that says so."""
        failures = self.queue.retry(entry.inbound, reason[:300], self.settings.retry_s)
        log.warning("%s: try %d of %d failed: %s", shown(entry.inbound), failures, self.settings.max_failures,
                    shown(reason))
        if failures >= self.settings.max_failures:
            self.queue.finish(entry.inbound, "error", reason[:300])
            if page:
                self.early_feedback(entry, f"this submission could not be graded after {failures} tries "
                                           f"({reason[:200]}); your instructor's grading will grade it")

    def copy_batch(self, batch: list[Entry]) -> list[Entry]:
        """Copy each entry in; the ones ready to grade (the others refused with a page, or put back)."""
        ready = []
        for entry in batch:
            try:
                self.copy_in(entry)
                ready.append(entry)
            except SubmissionError as exc:
                self.queue.finish(entry.inbound, str(exc.status), exc.reason)
                self.early_feedback(entry, f"this submission cannot be graded: {exc.reason}")
            except NotYet as exc:   # nbgrader writes the secret after the folder
                self.failed(entry, f"not complete: {exc}", page=False)
            except Exception as exc:
                if disk_full(exc):
                    self.queue.retry(entry.inbound, "the disk is full", DISK_WAIT_S, count=False)
                    raise
                self.failed(entry, f"not copied: {exc}")
        return ready

    def serve_one(self, now: float | None = None) -> list[Entry]:
        """Grade the next ready submissions (a batch of one assignment, see Queue.take_batch) and return their
        feedback; the entries served."""
        batch = self.queue.take_batch(self.settings.batch, now)
        while self.queue.capped:   # past a cap when taken
            entry = self.queue.capped.pop()
            self.early_feedback(entry, entry.reason)
        started = time.monotonic()
        ready = self.copy_batch(batch)
        copied = time.monotonic()
        try:
            verdicts = self.grade(ready) if ready else {}
        except BaseException as exc:   # put back, not counted: graded again when the fault is gone
            for entry in ready:
                self.queue.retry(entry.inbound, f"not graded: {exc!r}"[:300], DISK_WAIT_S, count=False)
            raise
        graded = time.monotonic()
        for entry in ready:   # an error of one entry's own is counted, and told after a few: never the batch's
            try:
                self.finish(entry, *verdicts[entry.student])
            except Exception as exc:
                if disk_full(exc):
                    self.queue.retry(entry.inbound, "the disk is full", DISK_WAIT_S, count=False)
                    raise
                self.failed(entry, f"feedback not returned: {exc!r}")
        if batch:
            log.info("%d submission(s) of %s served in %.1f s (copying in %.2f s, the grading command %.1f s, "
                     "releasing the feedback %.2f s)", len(batch), batch[0].assignment, time.monotonic() - started,
                     copied - started, graded - copied, time.monotonic() - graded)
        return batch

    def finish(self, entry: Entry, status: str, reason: str) -> None:
        """Return a graded entry's feedback (and, when the latest grade counts, make it official)."""
        if not any(self.feedback_dir(entry).glob("*.html")):   # the grading command wrote none: say so
            self.early_feedback(entry, f"this submission could not be graded ({status}: {reason[:200]}); "
                                       "your instructor's grading will grade it")
            self.queue.finish(entry.inbound, status, reason)
            return
        try:
            self.release(entry)
        except OSError as exc:
            status, reason = "error", f"feedback not released: {exc}"[:300]
        if self.settings.latest_grade_counts:
            try:
                self.make_official(entry)
            except OSError as exc:   # the feedback is out; the instructor's grading still grades it
                log.warning("%s: not recorded in the course folder: %s", shown(entry.inbound), shown(str(exc)))
        self.queue.finish(entry.inbound, status, reason)
        log.info("%s/%s (%s): %s", entry.student, entry.assignment, shown(entry.timestamp), status)

    def run(self, stop=lambda: False) -> None:
        full_since = None
        while not stop():
            try:
                self.notice()
                settings = self.settings
                if self.queue.settling(time.time(), settings.settle_s, settings.settle_max_s, settings.batch):
                    time.sleep(settings.poll_s)
                elif not self.serve_one():
                    time.sleep(settings.poll_s)
                full_since = None
            except (OSError, sqlite3.OperationalError) as exc:
                if not disk_full(exc):
                    raise
                if full_since is None:
                    full_since = time.time()
                    log.error("the disk of %s is full (%s): nothing is lost; waiting, and trying again every %g s",
                              self.course, exc, DISK_WAIT_S)
                time.sleep(DISK_WAIT_S)
