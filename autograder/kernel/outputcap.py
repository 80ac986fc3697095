"""A per-cell output cap inside a grading kernel (an IPython extension the grading command loads).

A cell that prints without end fills the kernel's unsent output faster than the grader reads
it. Left to the grader alone, whether such a cell ends at the output cap or at the memory cap
depends on how busy the machine is. Here the kernel itself counts what each cell writes to
``stdout`` and ``stderr`` and publishes as display data. Past ``$PTE_CELL_OUTPUT_CAP``
characters, nothing more is sent, and the cell stops with :class:`OutputFlood`. The grader
then reports ``output-limit``, whatever the load beside it, and the next cell runs as usual.

This code runs in the student's kernel, so a student can undo it. Doing so only costs that
student: the grader's own caps (output, memory, wall clock) still hold.
"""
from __future__ import annotations

import os
import sys
import threading

ENV = "PTE_CELL_OUTPUT_CAP"


class OutputFlood(KeyboardInterrupt):
    """The cell sent more output than the grader accepts from one cell (a KeyboardInterrupt, so that
    ``except Exception`` in the flooding loop does not swallow it)."""


class _Budget:
    def __init__(self, limit: int):
        self.limit, self.used, self.tripped = limit, 0, False

    def reset(self, *_args, **_kwargs) -> None:
        self.used, self.tripped = 0, False

    def spend(self, amount: int) -> bool:
        """Count ``amount`` characters; False once the cell is past its cap (raises, once, on the main thread)."""
        self.used += amount
        if self.used <= self.limit:
            return True
        if not self.tripped and threading.current_thread() is threading.main_thread():
            self.tripped = True
            raise OutputFlood(f"this cell sent more than {self.limit / 1e6:g} MB of output and was stopped "
                              "(the grader keeps at most that much from one cell)")
        return False


def _cap_stream(stream, budget: _Budget) -> None:
    write = stream.write

    def capped_write(text):
        if not budget.spend(len(text) if isinstance(text, str) else 0):
            return len(text)
        return write(text)

    stream.write = capped_write


def _cap_display(publisher, budget: _Budget) -> None:
    publish = publisher.publish

    def capped_publish(data, *args, **kwargs):
        if not budget.spend(len(str(data))):
            return None
        return publish(data, *args, **kwargs)

    publisher.publish = capped_publish


def load_ipython_extension(ip) -> None:
    try:
        limit = int(os.environ.get(ENV, ""))
    except ValueError:
        return
    budget = _Budget(limit)
    for stream in (sys.stdout, sys.stderr):
        _cap_stream(stream, budget)
    _cap_display(ip.display_pub, budget)
    ip.events.register("pre_run_cell", budget.reset)
