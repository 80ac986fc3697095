"""The grader's own processes run ahead of the kernels they grade.

A grading run ends with its own work: the recording of the last notebooks, and each cell's round trip
through a worker. Linux's autogroup scheduler shares the CPU between sessions before it shares it between
processes, and every kernel leads a session of its own (jupyter_client and the warm template start each in
one), while the grading command's workers and its recording process shared the command's session: beside
two kernels they got a third of the machine together. The recording then fell behind and ran alone after
the last kernel, on one core: lesson 01's class of 12 ended with 8 s of recording, a quarter of its time.

So the recording process and each worker lead a session of their own and raise that session's priority
(its autogroup's nice value, which needs root, as the sandbox does). The processes' own nice values stay
as they were: a kernel or template they start leads a new session at the default priority, never a raised
one. Where autogroup is off, the scheduler already shares by process and nothing is changed.
"""
from __future__ import annotations

from pathlib import Path

from .settings import GRADER_NICE


def ahead_of_kernels(nice: int = GRADER_NICE) -> str:
    """Raise the priority of this process's session (it should lead it); what was done, for the log."""
    try:
        Path("/proc/self/autogroup").write_text(f"{nice}\n")
    except OSError as error:   # not root, or a kernel built without autogroup
        return f"autogroup unchanged ({error.strerror})"
    return f"autogroup nice {nice}"
