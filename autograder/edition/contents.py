"""What of the course the student edition ships: the release notebooks (checked first: nothing of the source
and no output may be in them), the kernel package's files, the data without its rebuilding scripts, and the
course's licences. Which kernel modules stay is the import graph's call (``imports``)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ..kernel.vocabulary import protocol
from .errors import EditionError

HIDDEN_FILES = {protocol.REFERENCE_FILE}
SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
SKIP_SUFFIXES = {".pyc", ".pyo"}
# the licences, shipped as they are; the student README (edition/README.md) says which covers what
LICENCE_FILES = ("LICENSE", "LICENSE-CONTENT")


def _skipped(path: Path) -> bool:
    return (bool(SKIP_PARTS & set(path.parts)) or path.suffix in SKIP_SUFFIXES
            or path.name in HIDDEN_FILES or path.name == ".DS_Store")


def course_files(root: Path, folder: str) -> list[Path]:
    """Files under ``root/folder`` worth shipping: git's view (tracked or new, not ignored), else the disk's."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder],
                             cwd=root, capture_output=True, check=True).stdout.decode()
        rel = [Path(p) for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: walk the folder
        rel = [p.relative_to(root) for p in (root / folder).rglob("*")]
    return sorted(p for p in rel if (root / p).is_file() and not _skipped(p))


# the hidden-observation client (autograder/kernel/hidden.py) in a test cell: imported, built or called
HIDDEN_CLIENT = r"autograder\.kernel\.hidden\b|\bHiddenTests\(|\bhidden\.observe\("


def check_release(lesson: str, nb) -> None:
    """Stop the build if the released notebook carries anything of the source or any output."""
    where = f"notebooks/{lesson}/{lesson}.ipynb"
    for cell in nb.cells:
        for marker in protocol.MARKERS:
            if marker in cell.source:
                raise EditionError(f"{where} holds '{marker}': regenerate it with `make release`")
        if cell.cell_type == "code" and cell.get("outputs"):
            raise EditionError(f"{where}: cell {cell.get('id')} has outputs; the release ships without them "
                               "(regenerate it with `make release`)")
        if protocol.is_test_cell(cell) and re.search(HIDDEN_CLIENT, cell.source):
            raise EditionError(f"{where}: a test cell still holds hidden checks: regenerate it with `make release`")


def read_release(root: Path, lesson_ids: list[str]) -> dict:
    """Lesson id -> its release notebook, each checked (:func:`check_release`)."""
    import nbformat

    release = {}
    for lesson in lesson_ids:
        path = root / "notebooks" / lesson / f"{lesson}.ipynb"
        if not path.is_file():
            raise EditionError(f"notebooks/{lesson}/{lesson}.ipynb is missing: run `make release`")
        release[lesson] = nbformat.read(path, as_version=4)
        check_release(lesson, release[lesson])
    return release


def course_copies(root: Path, lesson_ids: list[str]) -> dict[Path, Path]:
    """What goes where: relative path in the edition -> source file in the course."""
    copies: dict[Path, Path] = {}
    for lesson in lesson_ids:
        for rel in course_files(root, f"notebooks/{lesson}"):
            copies[rel] = root / rel
    for rel in course_files(root, "autograder/kernel"):
        copies[rel] = root / rel
    for rel in course_files(root, "data"):
        if rel.suffix != ".py":                     # rebuild scripts need the instructor's tools
            copies[rel] = root / rel
    for name in LICENCE_FILES:
        if not (root / name).is_file():
            raise EditionError(f"{name} is missing from the course: the edition ships the course's licences "
                               f"({', '.join(LICENCE_FILES)}) and its README names them")
        copies[Path(name)] = root / name
    return copies
