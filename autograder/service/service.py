"""Feedback on submit: grade each new submission in nbgrader's exchange and hand its feedback back there.

One loop, one batch at a time (the grading command inside uses every core it is given):

1. **notice**: list ``<exchange>/<course_id>/inbound/`` (what nbgrader's Submit button and ``nbgrader submit``
   write) and queue each new folder of an assignment the course turned on (:mod:`.queue`);
2. **settle**: while submissions are still arriving (a burst: a class submitting at the end of a lab), wait
   until ``settle_s`` pass without a new one (at most ``settle_max_s`` after the first), so that one run of the
   grading command takes them all (:meth:`.queue.Queue.settling`);
3. **take** the next ready submissions (a batch of one assignment: round-robin, cooldown, caps) and copy each
   into ``submitted/<student>/<assignment>/``: only the release's notebooks, ``timestamp.txt`` and
   ``submission_secret.txt``, each read through a descriptor that follows no link (the service runs as root;
   the inbound folder is the student's);
4. **grade** them with the grading command (``python -m autograder grade --student S ... --assignment A``: the
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

The grading command runs in a process group of its own that dies with the service (``PR_SET_PDEATHSIG``,
:mod:`.processes`); a service that was killed leaves the group's id in ``grading.pid``, and the next start ends
what is left of that run before it grades the interrupted batch again, so two runs never write the same folder.
"""
from __future__ import annotations

import html
import json
import logging
import os
import pwd
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading.intake import collect
from autograder.grading.judging.reference import CACHE_DIR
from autograder.grading.plan.planning import GRADING_DIR, load_coursedir
from autograder.grading.plan.settings import MAX_NOTEBOOK_BYTES, MAX_TIMESTAMP_BYTES

from ..course import nbgrader_cmd
from ..grading.status import SubmissionError
from .processes import die_with_parent, end_group
from .queue import Entry, Limits, Queue
from .settings import PTEFeedback
from .workfolder import merge_csv_row, service_config

log = logging.getLogger("pte-feedback")
STATE_DIR = ".grading/feedback-service"
SECRET = "submission_secret.txt"
MAX_SECRET_BYTES = 1024
GRADING_PID = "grading.pid"


def spoofed(folder: Path, student: str) -> str:
    """Why ``folder`` in the inbound exchange is not ``student``'s own ("" when it is): where each student is a
    Unix user, the folder nbgrader's submit made belongs to them. The inbound folder is writable by every
    student, so without this anyone could submit in a classmate's name (and spend the classmate's cooldown)."""
    try:
        owner = os.lstat(folder).st_uid
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    try:
        expected = pwd.getpwnam(student).pw_uid
    except KeyError:
        return f"no Unix user is named {student!r}"
    return "" if owner == expected else f"made by uid {owner}, not by {student} (uid {expected})"


@dataclass
class Service:
    course: Path
    exchange: Path
    course_id: str
    settings: PTEFeedback
    queue: Queue = field(init=False)
    work: Path = field(init=False)
    ignored: set[str] = field(init=False, default_factory=set)   # inbound folders not their student's

    def __post_init__(self):
        self.course = Path(self.course).resolve()
        state = self.course / STATE_DIR
        self.work = state / "course"
        self.work.mkdir(parents=True, exist_ok=True)
        self.end_leftover_run()
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
            if not (self.work / "notebooks" / assignment).is_dir() or not self.gradebook_has(assignment):
                subprocess.run(nbgrader_cmd("generate_assignment", assignment, "--force", "--log-level=ERROR"),
                               cwd=self.work, check=True, capture_output=True, text=True)
        limits = Limits(self.settings.cooldown_s, self.settings.max_per_assignment, self.settings.max_per_day)
        self.queue = Queue(state / "queue.sqlite", limits)
        recovered = self.queue.recover()
        if recovered:
            log.info("%d submission(s) were being graded when the service stopped: queued again", recovered)

    @property
    def inbound(self) -> Path:
        return self.exchange / self.course_id / "inbound"

    # ------------------------------------------------------------ the service's course folder

    def db_url(self) -> str:
        """The gradebook the service's grading writes: the course's when the latest feedback grade counts, else
        its own (``gradebook.db`` in its folder)."""
        if self.settings.latest_grade_counts:
            return load_coursedir(self.course).db_url
        return f"sqlite:///{self.work / 'gradebook.db'}"

    def write_config(self, assignment: str | None = None) -> None:
        """The service's ``nbgrader_config.py`` for a run of ``assignment`` (once a symbolic link to the course's:
        replaced)."""
        path = self.work / "nbgrader_config.py"
        text = service_config(self.course / "nbgrader_config.py", self.work, self.db_url(),
                              assignment in self.settings.hide_score)
        if path.is_symlink() or not path.is_file() or path.read_text() != text:
            path.unlink(missing_ok=True)
            path.write_text(text)

    def gradebook_has(self, assignment: str) -> bool:
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.db_url(), load_coursedir(self.work).course_id) as gb:   # the id nbgrader records
            try:
                gb.find_assignment(assignment)
            except MissingEntry:
                return False
        return True

    def end_leftover_run(self) -> None:
        """What is left of a grading run of a service that was killed (``grading.pid``): ended before this
        service grades in the same folder."""
        pid_file = self.work.parent / GRADING_PID
        try:
            pgid = int(pid_file.read_text())
        except (OSError, ValueError):
            return
        if end_group(pgid):
            log.info("ended what was left of the grading run (process group %d) of a service that stopped", pgid)
        pid_file.unlink(missing_ok=True)

    # ------------------------------------------------------------ notice

    def notice(self, now: float | None = None) -> list[Entry]:
        """Queue every new submission of a turned-on assignment; the new entries (their early feedback
        written: when they will be graded, or why not)."""
        if not self.inbound.is_dir():
            return []
        added = []
        for name in sorted(os.listdir(self.inbound)):
            parts = name.split("+")
            if len(parts) < 3 or parts[1] not in self.settings.assignments or name in self.ignored:
                continue
            why = spoofed(self.inbound / name, parts[0]) if self.settings.check_owner else ""
            if why:
                self.ignored.add(name)
                log.warning("%s: ignored, not the student's own submission: %s", name, why)
                continue
            entry = self.queue.add(name, now)
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

    # ------------------------------------------------------------ copy, grade, return

    def notebooks(self, assignment: str) -> list[str]:
        release = self.work / "notebooks" / assignment
        return sorted(p.name for p in release.glob("*.ipynb"))

    def copy_in(self, entry: Entry) -> Path:
        """The submission's files, copied from its inbound folder into ``submitted/`` without following any
        link; raises SubmissionError (``refused``) for what is not a regular file."""
        source = self.inbound / entry.inbound
        collect.check_folder(source, self.inbound)
        target = self.work / "submitted" / entry.student / entry.assignment
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        # the small files first: with them, feedback can reach the student even when a notebook is refused
        wanted = [("timestamp.txt", MAX_TIMESTAMP_BYTES), (SECRET, MAX_SECRET_BYTES)]
        wanted += [(name, MAX_NOTEBOOK_BYTES) for name in self.notebooks(entry.assignment)]
        for name, limit in wanted:
            try:
                data = collect.read_regular(source / name, source, limit)
            except SubmissionError as exc:
                if exc.status == "missing" and name.endswith(".ipynb"):
                    continue   # the grading command reports the missing notebook
                raise
            (target / name).write_bytes(data)
        return target

    def run_grading(self, cmd: list[str]) -> subprocess.CompletedProcess:
        """The grading command in a process group of its own that dies with this service; its id is in
        ``grading.pid`` while it runs (:meth:`end_leftover_run`)."""
        pid_file = self.work.parent / GRADING_PID
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, preexec_fn=die_with_parent)
        partial = pid_file.with_name(pid_file.name + ".partial")
        partial.write_text(str(proc.pid))
        partial.replace(pid_file)
        try:
            stdout, stderr = proc.communicate()
        finally:   # this service stopped (SIGINT from the hub): so does the run
            end_group(proc.pid)
            proc.wait()
            pid_file.unlink(missing_ok=True)
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)

    def grade(self, entries: list[Entry]) -> dict[str, tuple[str, str]]:
        """Run the grading command once for these students' submissions of one assignment; student ->
        (status, reason) from its report."""
        assignment = entries[0].assignment
        (self.work / "grading-report.json").unlink(missing_ok=True)   # a run that fails must not read the last one's
        for entry in entries:   # nor release the feedback of a student's earlier submission for this one
            shutil.rmtree(self.feedback_dir(entry), ignore_errors=True)
        self.write_config(assignment)
        cmd = [sys.executable, "-m", "autograder", "grade", "--course", str(self.work), "--assignment", assignment,
               *[arg for e in entries for arg in ("--student", e.student)], *self.settings.grade_args]
        done = self.run_grading(cmd)
        found = {}
        try:
            report = json.loads((self.work / "grading-report.json").read_text())
            items = [s for s in report["submissions"] if s["assignment"] == assignment]
        except (OSError, ValueError, KeyError):
            items = []
        for entry in entries:
            mine = [s for s in items if s["student"] == entry.student]
            if not mine:
                found[entry.student] = ("error", f"the grading command ended with {done.returncode} and did not "
                                                 f"report it: {done.stderr[-300:]}")
                continue
            status = next((s["status"] for s in mine if s["status"] != "graded"), "graded")
            found[entry.student] = (status, " | ".join(s["reason"] for s in mine if s["reason"]))
        return found

    def feedback_dir(self, entry: Entry) -> Path:
        return self.work / "feedback" / entry.student / entry.assignment

    def release(self, entry: Entry) -> None:
        """Hand ``feedback/<student>/<assignment>/`` to the exchange with nbgrader's own ReleaseFeedback step,
        in this process (it names each page by the submission's secret, as the student's fetch_feedback looks
        it up)."""
        from nbgrader.auth import Authenticator
        from nbgrader.exchange import ExchangeError
        from nbgrader.exchange.default import ExchangeReleaseFeedback
        from traitlets.config import Config

        folder = self.feedback_dir(entry)
        submitted = self.work / "submitted" / entry.student / entry.assignment
        for name in ("timestamp.txt", SECRET):   # the submission's own, as nbgrader's collect would leave them
            if (submitted / name).is_file():
                shutil.copyfile(submitted / name, folder / name)
        coursedir = load_coursedir(self.work)
        config = Config(coursedir.config)
        config.merge(Config({"Exchange": {"root": str(self.exchange)}}))
        coursedir.course_id, coursedir.assignment_id, coursedir.student_id = (self.course_id, entry.assignment,
                                                                              entry.student)
        step = ExchangeReleaseFeedback(coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
        try:
            step.start()
        except ExchangeError as exc:
            raise OSError(f"nbgrader's release_feedback failed: {exc}") from None

    def make_official(self, entry: Entry) -> None:
        """The latest feedback grade counts: the grading command has written the student's grades into the
        course's gradebook (:meth:`db_url`); the student's row of ``grades.csv``, the submission and its
        autograded copy go to the course folder too, where the instructor's grading command leaves them (so the
        formgrader opens the graded notebook), owned as the course folder is."""
        if not merge_csv_row(self.work / "grades.csv", self.course / "grades.csv", entry.student, entry.assignment):
            return
        changed = [self.course / "grades.csv"]
        for kind in ("submitted", "autograded"):
            source = self.work / kind / entry.student / entry.assignment
            target = self.course / kind / entry.student / entry.assignment
            shutil.rmtree(target, ignore_errors=True)
            if source.is_dir():
                shutil.copytree(source, target)
                changed += [target.parent.parent, target.parent, target, *target.rglob("*")]
        owner = os.stat(self.course)
        if os.geteuid() == 0 and owner.st_uid != 0:
            for path in changed:
                os.lchown(path, owner.st_uid, owner.st_gid)

    def early_feedback(self, entry: Entry, message: str) -> None:
        """A page for a submission that is not graded now, returned at once through the exchange."""
        try:
            self.copy_in(entry)
        except SubmissionError as exc:
            message = f"this submission cannot be graded: {exc.reason}"
        folder = self.feedback_dir(entry)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(entry.assignment)}</title>"
                f"</head><body><h1>{html.escape(entry.assignment)}</h1><p>Submitted {html.escape(entry.timestamp)}: "
                f"{html.escape(message)}.</p></body></html>\n")
        for name in self.notebooks(entry.assignment):
            (folder / name.replace(".ipynb", ".html")).write_text(page)
        try:
            self.release(entry)
        except OSError as exc:   # no secret to name the page by: log it only
            log.warning("%s: feedback not released: %s", entry.inbound, exc)

    def serve_one(self, now: float | None = None) -> list[Entry]:
        """Grade the next ready submissions (a batch of one assignment, see Queue.take_batch) and return their
        feedback; the entries served."""
        batch = self.queue.take_batch(self.settings.batch, now)
        started = time.monotonic()
        ready = []
        for entry in batch:
            try:
                self.copy_in(entry)
                ready.append(entry)
            except SubmissionError as exc:
                self.queue.finish(entry.inbound, str(exc.status), exc.reason)
                self.early_feedback(entry, f"this submission cannot be graded: {exc.reason}")
            except OSError as exc:   # the service's own fault: this submission's, and the others go on
                self.queue.finish(entry.inbound, "error", f"not copied: {exc}"[:300])
        copied = time.monotonic()
        verdicts = self.grade(ready) if ready else {}
        graded = time.monotonic()
        for entry in ready:
            status, reason = verdicts[entry.student]
            if not any(self.feedback_dir(entry).glob("*.html")):   # the grading command wrote none: say so
                self.early_feedback(entry, f"this submission could not be graded ({status}: {reason[:200]}); "
                                           "your instructor's grading will grade it")
                self.queue.finish(entry.inbound, status, reason)
                continue
            try:
                self.release(entry)
            except OSError as exc:
                status, reason = "error", f"feedback not released: {exc}"[:300]
            if self.settings.latest_grade_counts:
                try:
                    self.make_official(entry)
                except OSError as exc:   # the feedback is out; the instructor's grading still grades it
                    log.warning("%s: not recorded in the course folder: %s", entry.inbound, exc)
            self.queue.finish(entry.inbound, status, reason)
            log.info("%s/%s (%s): %s", entry.student, entry.assignment, entry.timestamp, status)
        if batch:
            log.info("%d submission(s) of %s served in %.1f s (copying in %.2f s, the grading command %.1f s, "
                     "releasing the feedback %.2f s)", len(batch), batch[0].assignment, time.monotonic() - started,
                     copied - started, graded - copied, time.monotonic() - graded)
        return batch

    def run(self, stop=lambda: False) -> None:
        while not stop():
            self.notice()
            settings = self.settings
            if self.queue.settling(time.time(), settings.settle_s, settings.settle_max_s, settings.batch):
                time.sleep(settings.poll_s)
            elif not self.serve_one():
                time.sleep(settings.poll_s)
