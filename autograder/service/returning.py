"""Returning feedback to the exchange: nbgrader's ReleaseFeedback step for a graded submission, a short page
for one that is not graded now (why, or when), and, when the latest feedback grade counts, the official grade
in the course folder. A part of :class:`.service.Service` (its attributes: ``work``, ``course``, ``exchange``,
``course_id``, ``settings``)."""
from __future__ import annotations

import html
import logging
import os
import shutil
from pathlib import Path

from autograder.grading.plan.planning import load_coursedir

from ..grading.status import SubmissionError
from . import intake
from .intake import SECRET, NotYet
from .names import id_problem, shown
from .queue import Entry
from .workfolder import merge_csv_row

log = logging.getLogger("pte-feedback")


class Returning:
    """What :class:`.service.Service` does to hand feedback back (mixed into it)."""

    work: Path
    course: Path
    exchange: Path
    course_id: str

    def feedback_dir(self, entry: Entry) -> Path:
        return self.work / "feedback" / entry.student / entry.assignment

    def notebooks(self, assignment: str) -> list[str]:
        release = self.work / "notebooks" / assignment
        return sorted(p.name for p in release.glob("*.ipynb"))

    def release(self, entry: Entry) -> None:
        """Hand ``feedback/<student>/<assignment>/`` to the exchange with nbgrader's own ReleaseFeedback step,
        in this process (it names each page by the submission's secret, as the student's fetch_feedback looks
        it up). The ids were checked (:mod:`.names`): nbgrader's glob of the folder sees no glob character."""
        from nbgrader.auth import Authenticator
        from nbgrader.exchange import ExchangeError
        from nbgrader.exchange.default import ExchangeReleaseFeedback
        from traitlets.config import Config

        if id_problem(entry.student) or id_problem(entry.assignment):
            raise OSError(f"the ids {entry.student!r}, {entry.assignment!r} are refused")
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
        except Exception as exc:   # no secret to name the page by (NotYet, an error): log it only
            log.warning("%s: no feedback page: %s", shown(entry.inbound), shown(str(exc)))
            return
        folder = self.feedback_dir(entry)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name in self.notebooks(entry.assignment):
            (folder / name.replace(".ipynb", ".html")).write_text(feedback_page(entry.assignment, entry.timestamp,
                                                                                message))
        try:
            self.release(entry)
        except Exception as exc:
            log.warning("%s: feedback not released: %s", shown(entry.inbound), shown(repr(exc)))

    def page_by_secret(self, entry_fd: int, name: str, reason: str) -> None:
        """A page for an entry whose name is refused, put in the exchange under the name the student's
        fetch_feedback looks for (the submission's secret and the notebook's name), with no id of theirs in a
        path, a glob or nbgrader's steps; none when the entry has no readable secret."""
        from nbgrader.utils import notebook_hash

        try:
            secret = intake.small_text(entry_fd, SECRET, intake.MAX_SECRET_BYTES)
        except (NotYet, SubmissionError):
            return
        _, assignment, timestamp = name.split("+")[:3]
        page = feedback_page(assignment, timestamp, f"this submission cannot be graded: {reason}")
        outbound = self.exchange / self.course_id / "feedback"
        for notebook in self.notebooks(assignment):
            target = outbound / f"{notebook_hash(secret=secret, notebook_id=notebook[:-len('.ipynb')])}.html"
            if outbound.is_dir():
                partial = target.with_name(target.name + ".partial")
                partial.write_text(page)
                os.chmod(partial, 0o644)
                partial.replace(target)


def feedback_page(assignment: str, timestamp: str, message: str) -> str:
    """A short page for a submission that is not graded now."""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(assignment)}</title>"
            f"<style>p {{ white-space: pre-wrap; overflow-wrap: anywhere; }}</style></head><body>"
            f"<h1>{html.escape(assignment)}</h1><p>Submitted {html.escape(timestamp)}: {html.escape(message)}.</p>"
            "</body></html>\n")
