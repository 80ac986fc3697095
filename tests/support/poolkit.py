"""Tasks for the grading pool's tests (tests/unit/test_grading_units.py), importable in its workers: each is
called as the engine calls its tasks, ``fn(job, slot)``; here ``job`` is a dict of what to do."""
from __future__ import annotations

import os
import time
from pathlib import Path


def ended(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def run(job: dict, slot: str | None) -> dict:
    """Write this worker's pid to ``job["pid_file"]`` (if given); wait until the process whose pid is in the file
    ``job["outlive"]`` has ended (if given); sleep ``job["sleep"]`` seconds; then die with ``job["exit"]`` (if
    given) or return the pid and the slot."""
    if job.get("pid_file"):
        Path(job["pid_file"]).write_text(str(os.getpid()))
    if job.get("outlive"):
        other = Path(job["outlive"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (other.is_file() and other.read_text() and
                                                   ended(int(other.read_text()))):
            time.sleep(0.05)
    time.sleep(job.get("sleep", 0))
    if "exit" in job:
        os._exit(job["exit"])
    return {"pid": os.getpid(), "slot": slot}
