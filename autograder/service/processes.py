"""The grading command's processes, seen from the service: a process group of their own that dies with the
service, and ended whole (a zombie left for init to reap counts as ended: it runs nothing)."""
from __future__ import annotations

import ctypes
import os
import signal
import time

import psutil

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the grading command's process, before it runs: SIGKILL when the service dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def running_in_group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (a zombie waits only for its reaper: init here, since the
    grading command that started it is gone)."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == pgid:
                found.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def end_group(pgid: int, wait_s: float = 30.0) -> bool:
    """SIGKILL process group ``pgid`` and wait until none of it runs; whether any process of it was left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + wait_s
    while running_in_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True
