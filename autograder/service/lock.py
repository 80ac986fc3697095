"""One service at a time, and a grading run left by a killed one ended only when it is provably ours.

The lock file (``grading.pid`` in the service's folder) is held with ``fcntl.flock`` for the whole life of the
service: a second instance fails to take it and stops with a clear message. While a grading run goes on, the
file holds the run's process-group id and the leader's start time (``/proc/<pid>/stat``, field 22, in clock
ticks since boot). A service that was killed leaves them there; the next one kills that group only when the
leader still runs with the recorded start time (a process id reused by anything else has another), or, the
leader gone, the processes of that group that started after it (Linux keeps a process-group id from reuse while
a member lives).
"""
from __future__ import annotations

import fcntl
import os

from .processes import end_group, running_in_group


class AlreadyRunning(RuntimeError):
    pass


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None when it does not run."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    return int(text[text.rindex(b")") + 2:].split()[19])   # after the command's name: field 22


class ServiceLock:
    def __init__(self, path: os.PathLike):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise AlreadyRunning(f"another feedback service holds {path}: one instance at a time") from None

    def recorded(self) -> tuple[int, int] | None:
        """(pgid, start time) of the run the file records, or None."""
        text = os.pread(self.fd, 100, 0).split()
        try:
            return int(text[0]), int(text[1])
        except (IndexError, ValueError):
            return None

    def write(self, text: str) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text.encode(), 0)
        os.fsync(self.fd)

    def record_run(self, pgid: int) -> None:
        self.write(f"{pgid} {start_time(pgid) or 0}\n")

    def clear_run(self) -> None:
        self.write("")

    def end_leftover(self) -> str:
        """End the run a killed service recorded, when it is ours; what was done, for the log ("" for none)."""
        found = self.recorded()
        if found is None:
            return ""
        pgid, started = found
        self.clear_run()
        leader = start_time(pgid)
        if leader is not None and leader != started:
            return f"process {pgid} is not the recorded grading run (it started later): left alone"
        if leader is not None:
            end_group(pgid)
            return f"ended what was left of the grading run (process group {pgid}) of a service that stopped"
        ours = [pid for pid in running_in_group(pgid) if (start_time(pid) or 0) >= started]
        for pid in ours:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        return f"ended {len(ours)} process(es) left of the grading run (process group {pgid})" if ours else ""

    def close(self) -> None:
        os.close(self.fd)
