"""What the HTTP exchange's server keeps (``autograder.service.http``), as root, in folders only it can read.

``<exchange>/<course_id>/`` (the feedback service's ``--exchange``, mode 0700):

- ``inbound/<student>+<assignment>+<timestamp>+<random>/``: each submission, laid out as nbgrader's exchange
  inbound (the notebooks, ``timestamp.txt``, ``submission_secret.txt``), written into a hidden folder and renamed
  into place whole, so the feedback service never sees half of one. The student is who the hub said sent it;
  the timestamp is the server's clock at arrival;
- ``feedback/<hash>.html``: the pages the feedback service releases there (nbgrader's ReleaseFeedback, named by
  the submission's secret), served only to the submission's owner;
- ``released/<assignment>``: the assignments students may fetch, served from the course's release folder.
"""
from __future__ import annotations

import base64
import datetime
import fnmatch
import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from .ids import BadId, check_id, is_id

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"   # nbgrader's Exchange.timestamp_format
SECRET = "submission_secret.txt"
MAX_SECRET_BYTES = 1024
MAX_RELEASE_BYTES = 200 * 2**20


class Refused(Exception):
    """A request the server refuses; ``status`` is its HTTP status, the message is for the student."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def private_dir(path: Path) -> Path:
    """``path`` made (parents too) as a folder only its owner may enter."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def read_small(path: Path, limit: int) -> bytes:
    """A regular file's bytes, opened without following a link, at most ``limit``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(f"{path.name} is over {limit} bytes")
    return data


def check_notebook(name: str, data: bytes) -> None:
    """A submitted notebook must be nbformat 4 JSON; Refused (400) otherwise, with the reason."""
    try:
        notebook = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(400, f"{name} is not a notebook (not JSON: {str(exc)[:80]})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list) \
            or notebook.get("nbformat") != 4:
        raise Refused(400, f"{name} is not a notebook (nbformat 4 JSON with a list of cells)")


@dataclass
class Store:
    course: Path            # the nbgrader course folder (its release folder is served)
    release_dir: str        # CourseDirectory.release_directory
    ignore: list[str]       # CourseDirectory.ignore: left out of a fetch
    exchange: Path          # the service's private exchange root
    course_id: str
    max_upload_bytes: int = 20 * 2**20
    max_per_hour: int = 30      # submissions kept per student and assignment in any hour (a script's flood)

    def __post_init__(self):
        self.root = private_dir(Path(self.exchange)) / self.course_id
        for name in ("", "inbound", "feedback", "released"):
            private_dir(self.root / name)

    @property
    def inbound(self) -> Path:
        return self.root / "inbound"

    # ------------------------------------------------------------ released assignments

    def release_folder(self, assignment: str) -> Path:
        return self.course / self.release_dir / check_id(assignment, "assignment")

    def mark_released(self, assignment: str) -> None:
        if not self.release_folder(assignment).is_dir():
            raise Refused(404, f"{assignment} has no release folder: run nbgrader generate_assignment first")
        (self.root / "released" / assignment).touch()

    def released(self) -> list[str]:
        names = [name for name in sorted(os.listdir(self.root / "released"))
                 if is_id(name) and self.release_folder(name).is_dir()]
        return names

    def notebooks(self, assignment: str) -> list[str]:
        return sorted(p.name for p in self.release_folder(assignment).glob("*.ipynb") if p.is_file()
                      and not p.is_symlink())

    def check_released(self, assignment: str) -> None:
        try:
            check_id(assignment, "assignment")
        except BadId as exc:
            raise Refused(400, str(exc)) from None
        if assignment not in self.released():
            raise Refused(404, f"no assignment {assignment} is released")

    def release_files(self, assignment: str) -> dict[str, str]:
        """The release's regular files (no link followed, ``ignore`` left out): relative path -> base64."""
        self.check_released(assignment)
        top, files, total = self.release_folder(assignment), {}, 0
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not self._ignored(d) and not os.path.islink(os.path.join(folder, d))]
            for name in names:
                path = Path(folder) / name
                if self._ignored(name) or path.is_symlink() or not path.is_file():
                    continue
                data = read_small(path, MAX_RELEASE_BYTES)
                total += len(data)
                if total > MAX_RELEASE_BYTES:
                    raise Refused(500, f"the release of {assignment} is over {MAX_RELEASE_BYTES} bytes")
                files[path.relative_to(top).as_posix()] = base64.b64encode(data).decode("ascii")
        return files

    def _ignored(self, name: str) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in self.ignore)

    # ------------------------------------------------------------ submissions

    def submit(self, student: str, assignment: str, notebooks: dict[str, bytes]) -> str:
        """Keep ``student``'s submission in ``inbound/`` as nbgrader's exchange would; its timestamp."""
        check_id(student)
        self.check_released(assignment)
        expected = set(self.notebooks(assignment))
        unknown = sorted(set(notebooks) - expected)
        if unknown:
            raise Refused(400, f"{ascii(unknown[0])} is not a notebook of {assignment} (its notebooks: "
                               f"{', '.join(sorted(expected))})")
        if not notebooks:
            raise Refused(400, f"no notebook of {assignment} was sent")
        hour_ago = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).strftime(
            TIMESTAMP_FORMAT)
        recent = [s for s in self.submissions(student, assignment) if s["timestamp"] > hour_ago]
        if len(recent) >= self.max_per_hour:
            raise Refused(429, f"{len(recent)} submissions of {assignment} in the last hour: the limit is "
                               f"{self.max_per_hour}; submit again later")
        total = sum(len(data) for data in notebooks.values())
        if total > self.max_upload_bytes:
            raise Refused(413, f"the submission is {total} bytes, over the limit of {self.max_upload_bytes}")
        for name, data in notebooks.items():
            check_notebook(name, data)
        timestamp = datetime.datetime.now(datetime.timezone.utc).strftime(TIMESTAMP_FORMAT)
        random = secrets.token_urlsafe(9)
        partial = private_dir(self.inbound / f".partial-{random}")
        files = {**notebooks, "timestamp.txt": timestamp.encode(), SECRET: secrets.token_hex(64).encode()}
        for name, data in files.items():
            fd = os.open(partial / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        os.rename(partial, self.inbound / f"{student}+{assignment}+{timestamp}+{random}")
        return timestamp

    def submissions(self, student: str, assignment: str | None = None) -> list[dict]:
        """``student``'s own submissions (of ``assignment``), oldest first, each with its notebooks and, for each,
        the checksum of its feedback page when there is one."""
        check_id(student)
        found = []
        for name in os.listdir(self.inbound):
            parts = name.split("+")
            if len(parts) != 4 or parts[0] != student or (assignment and parts[1] != assignment):
                continue
            folder = self.inbound / name
            try:
                secret = read_small(folder / SECRET, MAX_SECRET_BYTES).decode("ascii")
            except (OSError, UnicodeDecodeError):
                continue
            notebooks = []
            for notebook in sorted(p.name for p in folder.glob("*.ipynb")):
                page = self.feedback_page(secret, notebook[:-len(".ipynb")])
                digest = hashlib.md5(page.read_bytes()).hexdigest() if page.is_file() else None
                notebooks.append({"notebook_id": notebook[:-len(".ipynb")], "feedback_checksum": digest})
            found.append({"assignment_id": parts[1], "timestamp": parts[2], "notebooks": notebooks,
                          "folder": name})
        return sorted(found, key=lambda s: s["timestamp"])

    def feedback_page(self, secret: str, notebook_id: str) -> Path:
        from nbgrader.utils import notebook_hash

        return self.root / "feedback" / f"{notebook_hash(secret=secret, notebook_id=notebook_id)}.html"

    def feedback(self, student: str, assignment: str) -> list[dict]:
        """The feedback pages of ``student``'s own submissions of ``assignment``: timestamp, notebook id, html."""
        pages = []
        for submission in self.submissions(student, assignment):
            secret = read_small(self.inbound / submission["folder"] / SECRET, MAX_SECRET_BYTES).decode("ascii")
            for notebook in submission["notebooks"]:
                if notebook["feedback_checksum"]:
                    page = self.feedback_page(secret, notebook["notebook_id"]).read_text()
                    pages.append({"timestamp": submission["timestamp"], "notebook_id": notebook["notebook_id"],
                                  "html": page})
        return pages

    def release_feedback(self, assignment: str, pages: dict[str, str]) -> int:
        """The instructor's feedback pages, each named as nbgrader names it (the hash of a submission's secret
        and notebook): only names of submissions of ``assignment`` are taken; how many were written."""
        self.check_released(assignment)
        known = set()
        for name in os.listdir(self.inbound):
            parts = name.split("+")
            if len(parts) == 4 and parts[1] == assignment and is_id(parts[0]):
                try:
                    secret = read_small(self.inbound / name / SECRET, MAX_SECRET_BYTES).decode("ascii")
                except (OSError, UnicodeDecodeError):
                    continue
                known |= {self.feedback_page(secret, p.name[:-len(".ipynb")]).name[:-len(".html")]
                          for p in (self.inbound / name).glob("*.ipynb")}
        unknown = sorted(set(pages) - known)
        if unknown:
            raise Refused(400, f"no submission of {assignment} has the feedback name {ascii(unknown[0][:140])}")
        for name, text in pages.items():
            partial = self.root / "feedback" / f".{name}.partial"
            partial.write_text(text, encoding="utf-8")
            partial.replace(self.root / "feedback" / f"{name}.html")
        return len(pages)

    def collect(self, assignment: str) -> list[dict]:
        """Each student's latest submission of ``assignment`` (by arrival), its files in base64, for the
        instructor's collect."""
        self.check_released(assignment)
        latest: dict[str, str] = {}
        for name in os.listdir(self.inbound):
            parts = name.split("+")
            if len(parts) == 4 and parts[1] == assignment and is_id(parts[0]):
                if parts[0] not in latest or parts[2] > latest[parts[0]].split("+")[2]:
                    latest[parts[0]] = name
        found = []
        for student, name in sorted(latest.items()):
            folder = self.inbound / name
            files = {p.name: base64.b64encode(read_small(p, self.max_upload_bytes)).decode("ascii")
                     for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}
            found.append({"student_id": student, "timestamp": name.split("+")[2], "files": files})
        return found
