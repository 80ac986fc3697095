"""The feedback service's copy-in (autograder/service/intake.py) against a racing student: while root copies a
submission thousands of times, another process swaps the entry, and the notebook inside it, for symbolic links
to a secret file (as the solutions are to a student) in a tight loop. No copy may ever hold the secret's bytes;
and the small files a student writes (empty, undecodable, absurd) are refused or waited for, never a crash."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from autograder.grading.status import SubmissionError
from autograder.service import intake

NOTEBOOK = "01_x.ipynb"
HONEST = b'{"cells": [], "honest": true}'
SECRET_BYTES = b'{"cells": [], "the solutions": true}'
STAMP = b"2026-12-05 10:00:01.000000 UTC"
COPIES = 3000


def make_entry(folder: Path) -> None:
    folder.mkdir()
    (folder / NOTEBOOK).write_bytes(HONEST)
    (folder / intake.TIMESTAMP).write_bytes(STAMP)
    (folder / intake.SECRET).write_bytes(b"abc123")


def swap_forever(entry: Path, secret_dir: Path) -> None:
    """The racing student: the entry becomes a link to the secret folder and back; the notebook inside the
    real entry becomes a link to the secret notebook and back; as fast as it can."""
    real = entry.with_name(entry.name + ".real")
    notebook = real / NOTEBOOK
    held = real / (NOTEBOOK + ".held")
    while True:
        try:
            os.rename(entry, real)
            os.symlink(secret_dir, entry)
            os.rename(notebook, held)
            os.symlink(secret_dir / NOTEBOOK, notebook)
            os.unlink(entry)
            os.rename(real, entry)
            os.unlink(entry / NOTEBOOK)
            os.rename(entry / (NOTEBOOK + ".held"), entry / NOTEBOOK)
        except OSError:
            pass


def copy_with_service(inbound: Path, name: str, target: Path) -> bytes:
    """One copy-in as the service makes it: the entry opened once, every file read relative to it."""
    inbound_fd = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY)
    try:
        opened = intake.open_entry(inbound_fd, name)
    finally:
        os.close(inbound_fd)
    try:
        intake.copy_entry(opened.fd, [NOTEBOOK], target)
    finally:
        os.close(opened.fd)
    return (target / NOTEBOOK).read_bytes() if (target / NOTEBOOK).exists() else b""


def race(tmp_path: Path, copy, copies: int = COPIES) -> dict[str, int]:
    """``copies`` copies by ``copy(inbound, name, target)`` while a process swaps the entry; how many copies held
    the honest notebook, the secret, or were refused."""
    secret_dir = tmp_path / "solutions"
    make_entry(secret_dir)
    (secret_dir / NOTEBOOK).write_bytes(SECRET_BYTES)
    inbound = tmp_path / "inbound"
    inbound.mkdir()
    name = "ann+01_x+stamp+abc"
    make_entry(inbound / name)
    racer = multiprocessing.get_context("fork").Process(
        target=swap_forever, args=(inbound / name, secret_dir), daemon=True)
    racer.start()
    counts = {"honest": 0, "secret": 0, "refused": 0}
    try:
        for i in range(copies):
            try:
                data = copy(inbound, name, tmp_path / "copies" / str(i % 4))
            except (SubmissionError, intake.NotYet):
                counts["refused"] += 1
                continue
            counts["secret" if SECRET_BYTES in data else "honest" if data == HONEST else "refused"] += 1
    finally:
        racer.kill()
        racer.join()
    real = inbound / (name + ".real")
    if real.is_dir():   # the racer was stopped with the entry swapped: put it back, as the student left it
        (inbound / name).unlink(missing_ok=True)
        real.rename(inbound / name)
    if (inbound / name / (NOTEBOOK + ".held")).exists():
        (inbound / name / NOTEBOOK).unlink(missing_ok=True)
        (inbound / name / (NOTEBOOK + ".held")).rename(inbound / name / NOTEBOOK)
    counts["after the race"] = copy(inbound, name, tmp_path / "copies" / "last") == HONEST
    return counts


def test_a_racing_student_never_gets_root_to_copy_a_link_target(tmp_path):
    counts = race(tmp_path, copy_with_service)
    assert counts["secret"] == 0, counts
    assert counts["refused"] > 0, f"the race did not run: {counts}"
    assert counts["after the race"], "the honest submission is not copied once the race is over"


def small_files(tmp_path: Path, secret: bytes | None, stamp: bytes = STAMP) -> Path:
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / NOTEBOOK).write_bytes(HONEST)
    (entry / intake.TIMESTAMP).write_bytes(stamp)
    if secret is not None:
        (entry / intake.SECRET).write_bytes(secret)
    return entry


@pytest.mark.parametrize("secret, stamp, outcome", [
    (None, STAMP, "not yet"),                         # nbgrader writes the secret after the folder
    (b"", STAMP, "not yet"),
    (b"\xff\xfe\x00", STAMP, "not text"),
    (b"abc\x1b[31m", STAMP, "not printable"),
    (b"a" * 5000, STAMP, "limit"),
    (b"abc123", b"", "not yet"),
    (b"abc123", b"\xff\xfe", "not text"),
    (b"abc123", b"next tuesday-ish", "does not hold a date"),
    (b"abc123", STAMP, "copied"),
])
def test_the_small_files_are_checked_never_a_crash(tmp_path, secret, stamp, outcome):
    entry = small_files(tmp_path, secret, stamp)
    fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
    try:
        intake.copy_entry(fd, [NOTEBOOK], tmp_path / "copy")
        got = "copied"
    except intake.NotYet:
        got = "not yet"
    except SubmissionError as exc:
        got = exc.reason
    finally:
        os.close(fd)
    assert outcome in got, got
    if outcome == "copied":
        assert (tmp_path / "copy" / NOTEBOOK).read_bytes() == HONEST
        assert (tmp_path / "copy" / intake.SECRET).read_text() == "abc123"
