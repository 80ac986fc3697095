"""What the feedback service's end-to-end tests share: the pid file its grading run leaves, and the processes of
that run's process group that still run."""
from __future__ import annotations

import os
from pathlib import Path

import psutil


def read_pid(path: Path) -> int | None:
    """The grading run's process-group id in ``path`` (the service's lock file ``grading.pid``: the id, then the
    run's start time), or None when no run is recorded."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def running_in_group(pgid: int | None) -> list[psutil.Process]:
    """The processes of process group ``pgid`` that run (not zombies, which wait only for init to reap them)."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == pgid:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            pass
    return found
