"""Copy-in: a submission's files from the inbound folder into the service's own ``submitted/``, race-free.

The service runs as root and the inbound entry may be a student's (nbgrader's filesystem exchange). The entry is
opened once, as a folder, without following a link (``O_DIRECTORY|O_NOFOLLOW``); who made it is read from that
descriptor (``fstat``); every file is then opened relative to it (``dir_fd``) without following a link, its type
and size checked on its own descriptor. Whatever the student renames or links in place of the entry or a file
meanwhile, root reads only what was in the folder it opened, never by a path.

The small files are checked too: an empty secret (nbgrader writes it after the folder) is :class:`NotYet`, to
be tried again; an undecodable or malformed one, or timestamp, is refused with a reason.
"""
from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.grading.intake import collect
from autograder.grading.plan.settings import MAX_NOTEBOOK_BYTES, MAX_TIMESTAMP_BYTES
from autograder.grading.status import Status, SubmissionError

SECRET = "submission_secret.txt"
TIMESTAMP = "timestamp.txt"
MAX_SECRET_BYTES = 1024


refused = collect.refused


class NotYet(Exception):
    """The entry is not complete yet (no secret written): try again later."""


@dataclass(frozen=True)
class Opened:
    fd: int
    uid: int
    arrived: float   # the entry's ctime as the service saw it: a student cannot set it


def owner_problem(uid: int, student: str, identity: str) -> str:
    """Why an entry owned by ``uid`` is not ``student``'s ("" when it is): ``owner``, each student a Unix user
    who made their own folder; ``hub``, the hub-authenticated exchange wrote it as the service's own user;
    ``folder-name``, no check (the name is trusted)."""
    if identity == "hub":
        return "" if uid == os.geteuid() else f"made by uid {uid}, not by the service's exchange"
    if identity != "owner":
        return ""
    try:
        expected = pwd.getpwnam(student).pw_uid
    except KeyError:
        return f"no Unix user is named {student!r}"
    return "" if uid == expected else f"made by uid {uid}, not by {student} (uid {expected})"


def open_entry(inbound_fd: int, name: str) -> Opened:
    """The inbound entry ``name``, opened once as a folder without following a link."""
    fd = collect.open_folder(name, dir_fd=inbound_fd)
    info = os.fstat(fd)
    return Opened(fd, info.st_uid, info.st_ctime)


def small_text(fd: int, name: str, limit: int) -> str:
    """A small file of the submission (its secret or timestamp) as text: missing or empty is :class:`NotYet`;
    undecodable, or anything but printable ASCII, is refused."""
    try:
        data = collect.read_at(fd, name, limit)
    except SubmissionError as exc:
        if exc.status == Status.MISSING:
            raise NotYet(f"{name} is not written yet") from None
        raise
    if not data.strip():
        raise NotYet(f"{name} is empty")
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise SubmissionError(Status.REFUSED, f"{name} is not text (ASCII)") from None
    if not text.isprintable():
        raise SubmissionError(Status.REFUSED, f"{name} holds characters that are not printable")
    return text


def check_timestamp(text: str) -> None:
    from nbgrader.utils import parse_utc

    try:
        parse_utc(text)
    except Exception:   # dateutil raises several kinds for what is not a date
        raise SubmissionError(Status.REFUSED, f"{TIMESTAMP} does not hold a date") from None


def copy_entry(entry_fd: int, notebooks: list[str], target: Path) -> None:
    """The submission open as ``entry_fd`` copied into ``target`` (made anew): its timestamp and secret first
    (checked), then each of the release's ``notebooks`` present (a missing one is the grading command's to
    report); raises SubmissionError for what is refused, NotYet for what is not written yet."""
    timestamp = small_text(entry_fd, TIMESTAMP, MAX_TIMESTAMP_BYTES)
    check_timestamp(timestamp)
    secret = small_text(entry_fd, SECRET, MAX_SECRET_BYTES)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    # the small files first: with them, feedback reaches the student even when a notebook is refused
    (target / TIMESTAMP).write_text(timestamp)
    (target / SECRET).write_text(secret)
    for name in notebooks:
        try:
            data = collect.read_at(entry_fd, name, MAX_NOTEBOOK_BYTES)
        except SubmissionError as exc:
            if exc.status != Status.MISSING:
                raise
            continue
        (target / name).write_bytes(data)
