"""Reading what students submitted, as root, without following anything a student controls.

A submission is a folder ``submitted/<student>/<assignment>/`` of regular files. The grader
runs as root outside the sandbox, so a symbolic link there (to the solutions, to a
classmate's folder, to a file elsewhere on the host), a FIFO or a device, or a file the size
of the disk, would make root read what the student chose. Everything here refuses such an
entry with the status ``refused`` and a reason, and reads files relative to a descriptor of their folder
(opened once, ``O_DIRECTORY|O_NOFOLLOW``) through descriptors opened with ``O_NOFOLLOW`` whose type and size
are checked after opening: never by a path a student can swap between a check and a read.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from autograder.grading.status import Status, SubmissionError


def refused(reason: str) -> SubmissionError:
    return SubmissionError(Status.REFUSED, reason)


def check_folder(folder: Path, root: Path) -> None:
    """``folder`` must be a real directory below ``root`` with no symbolic link on the way."""
    root = Path(os.path.abspath(root))
    folder = Path(os.path.abspath(folder))
    try:
        relative = folder.relative_to(root)
    except ValueError:
        raise refused(f"{folder} is not inside {root}") from None
    current = root
    for part in relative.parts:
        current = current / part
        try:
            info = os.lstat(current)
        except OSError as exc:
            raise refused(f"{current.relative_to(root)} cannot be read ({exc.strerror})") from None
        if stat.S_ISLNK(info.st_mode):
            raise refused(f"{current.relative_to(root)} is a symbolic link: a submission must be a folder of "
                          "regular files")
        if not stat.S_ISDIR(info.st_mode):
            raise refused(f"{current.relative_to(root)} is not a folder")
    if os.path.realpath(folder) != str(folder):
        raise refused(f"{relative} resolves outside its own folder")


def open_folder(name: str | Path, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``name`` (relative to ``dir_fd`` if given), opened without following a link
    in its last component: everything read through it stays in the folder that was opened, whatever is
    renamed or linked in its place afterwards."""
    label = Path(name).name
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise SubmissionError(Status.MISSING, f"{label} was not found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(f"{label} is a symbolic link: a submission must be a folder of regular files") from None
        if exc.errno == errno.ENOTDIR:
            raise refused(f"{label} is not a folder") from None
        raise refused(f"{label} cannot be opened ({exc.strerror})") from None


def read_at(dir_fd: int, name: str, limit: int) -> bytes:
    """The bytes of ``name``, a regular file directly in the folder open as ``dir_fd``: opened relative to it
    without following a link, its type and size checked on the descriptor, at most ``limit`` bytes read."""
    if "/" in name or name in ("", ".", ".."):
        raise refused(f"{name!r} is not a file name")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise SubmissionError(Status.MISSING, f"{name} was not submitted") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(f"{name} is a symbolic link: submit the notebook itself") from None
        raise refused(f"{name} cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode):
            raise refused(f"{name} is not a regular file")
        if opened.st_size > limit:
            raise refused(f"{name} is {opened.st_size / 2**20:.1f} MB; the limit is {limit / 2**20:g} MB")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise refused(f"{name} is larger than the limit of {limit / 2**20:g} MB")
    return data


def read_regular(path: Path, folder: Path, limit: int) -> bytes:
    """The bytes of ``path``, a regular file directly inside ``folder`` (checked with :func:`check_folder`):
    the folder opened once (:func:`open_folder`), the file read relative to it (:func:`read_at`)."""
    if Path(os.path.abspath(path)).parent != Path(os.path.abspath(folder)):
        raise refused(f"{Path(path).name} is not inside the submission folder")
    folder_fd = open_folder(folder)
    try:
        return read_at(folder_fd, Path(path).name, limit)
    finally:
        os.close(folder_fd)


def regular_notebooks(folder: Path) -> list[str]:
    """Names of the ``*.ipynb`` entries of ``folder`` (any type: the reader refuses what is not regular)."""
    with os.scandir(folder) as entries:
        return sorted(entry.name for entry in entries if entry.name.endswith(".ipynb"))
