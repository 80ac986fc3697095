"""The one status every graded notebook ends with (``grades.csv``, ``grading-report.json``)."""
from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """Why a notebook got the score it got. Only ``ERROR`` is the grader's or the course's fault; every other
    status is the submission's own doing, and costs nobody else anything."""

    GRADED = "graded"               # ran to the end (or to its first hung cell) and was scored
    TIMEOUT = "timeout"             # passed the notebook's wall-clock cap
    KERNEL_DIED = "kernel-died"     # the kernel exited or crashed
    MEMORY_LIMIT = "memory-limit"   # passed its memory cap
    OUTPUT_LIMIT = "output-limit"   # flooded its output past the cap and kept going
    CORRUPT = "corrupt"             # not a notebook nbformat can read
    MISSING = "missing"             # not submitted
    REFUSED = "refused"             # not a regular file inside its folder, or over a size or cell cap
    TAMPERED = "tampered"           # locked cells changed or graded cells forged
    WORKER_DIED = "worker-died"     # killed its grading process twice, the second time graded alone
    ERROR = "error"                 # a fault of the grader or the course

    @property
    def scored_by_nbgrader(self) -> bool:
        """Did the notebook reach nbgrader (a submission that was never read has nothing to record)?"""
        return self not in (Status.CORRUPT, Status.MISSING, Status.REFUSED)


class SubmissionError(Exception):
    """The submission cannot be graded; ``status`` says why (``corrupt``, ``missing`` or ``refused``)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = Status(status), reason
