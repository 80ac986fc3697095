"""``grades.csv`` written by more than one process (the instructor's grading command and the feedback service):
each update holds an ``fcntl`` lock of ``grades.csv.lock``, reads what is there, and writes the whole file to a
temporary file that is renamed into place, so no writer loses another's rows and no reader sees half a file."""
from __future__ import annotations

import csv
import fcntl
import os
import tempfile
from pathlib import Path

Key = tuple[str, str]


def update_rows(target: Path, rows: dict[Key, dict], fields: list[str], *, keep_others: bool = True) -> None:
    """Put ``rows`` (keyed by student and assignment) into the CSV at ``target``; the rows already there for
    other keys are kept when ``keep_others``, else the file holds ``rows`` alone."""
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged: dict[Key, dict] = {}
        if keep_others and target.is_file():
            with open(target, newline="") as handle:
                merged = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
        merged.update(rows)
        fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
        try:
            with os.fdopen(fd, "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
                writer.writeheader()
                for key in sorted(merged):
                    writer.writerow(merged[key])
            os.chmod(partial, target.stat().st_mode & 0o777 if target.exists() else 0o600)   # the class's grades
            os.replace(partial, target)
        except BaseException:
            os.unlink(partial)
            raise
