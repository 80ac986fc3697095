"""The plan's product: one student's assignment to grade (:class:`Job`) and the run's folders (:class:`Paths`).

A job is plain data that crosses into a grading worker (pickled); every stage that grades it reads it from
here. While an assignment's reference still runs, a job names the file the engine writes it to, and the worker
waits for it on that assignment's ``multiprocessing`` Event (given to each worker by :func:`expect_references`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading.messages import NotebookResult
from autograder.grading.plan.settings import REFERENCE_GRACE_S, Limits
from autograder.grading.status import Status
from autograder.kernel.vocabulary import protocol

# assignment -> the multiprocessing Event the engine sets once it has written that assignment's reference to
# the job's reference_file (given to each worker by its initializer: an Event is shared by inheritance only)
_reference_ready: dict = {}


@dataclass(frozen=True)
class Paths:
    """The folders a grading run reads and writes (strings: a Job crosses into worker processes)."""
    submitted: str
    release: str
    source: str
    grading: str      # .grading/: the reference cache, matplotlib's font cache
    staged: str       # executed notebooks waiting for nbgrader's recording step
    scratch: str      # per-kernel work folders


@dataclass(frozen=True)
class Job:
    """One student's assignment, with everything needed to grade it in a worker process."""
    student: str
    assignment: str
    notebooks: dict[str, float]            # notebook name -> max score
    tests: dict[str, dict[str, str]]       # notebook name -> grade id -> the instructor's test source
    paths: Paths
    limits: Limits
    reference: dict[str, list[dict]] = field(default_factory=dict)   # grade id -> observations to judge with
    # or, while the reference still runs: the file the engine writes it to when it is ready (a protocol.Reference),
    # announced by the worker's Event for the assignment; the worker executes first and waits only to judge
    reference_file: str = ""

    def judged_with(self) -> dict[str, list[dict]]:
        """The observations to judge with: ``reference``, or what the engine wrote to ``reference_file`` once it
        says so. The wait blocks on the assignment's Event (no polling) and is bounded by a reference run's
        clocks, twice with a second try; {} when nothing comes."""
        if self.reference or not self.reference_file:
            return self.reference
        ready = _reference_ready.get(self.assignment)
        if ready is None or not ready.wait(self.reference_wait_s()):
            return {}
        return protocol.Reference.read(Path(self.reference_file)).cells

    def reference_wait_s(self) -> float:
        """The longest wait for the reference: its run's clocks, three times (a second try after its worker died)."""
        return 3 * self.limits.timeout_s * max(1, len(self.notebooks)) + REFERENCE_GRACE_S

    def results(self, status: Status, reason: str) -> list[NotebookResult]:
        """The same status for every notebook of this job."""
        return [NotebookResult(self.student, self.assignment, name, status=status, max_score=max_score,
                               reason=reason[:300]) for name, max_score in self.notebooks.items()]


def expect_references(events: dict) -> None:
    """This process's Events, one per assignment, each set by the engine once that reference is written."""
    _reference_ready.clear()
    _reference_ready.update(events)
