"""The service's own course folder: its ``nbgrader_config.py`` (the course's, then the service's settings:
its gradebook, the feedback page), its release of each assignment (made again when the course's source
changes), its gradebook backups (pruned), and the official grade it hands to the course's folder when the
latest feedback grade counts (the student's row of ``grades.csv``)."""
from __future__ import annotations

import csv
import hashlib
import json
import logging
import subprocess
from pathlib import Path

from autograder.grading.plan.planning import load_coursedir
from autograder.grading.report import csvfile

from ..course import nbgrader_cmd
from .settings import PTEFeedback

log = logging.getLogger("pte-feedback")

TEMPLATES = Path(__file__).resolve().parent / "templates"
CONFIG_HEADER = ("# Written by the feedback service (autograder/service/service.py) before each grading run, and\n"
                 "# written again at the next: the course's own settings, then the service's.\n")


def template_dirs() -> list[str]:
    """nbconvert's template folders for the feedback page: nbgrader's (its ``feedback`` template) and the
    service's (``pte_feedback``, which extends it)."""
    import nbgrader

    return [str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"), str(TEMPLATES)]


def service_config(course_config: Path, work: Path, db_url: str, hide_score: bool) -> str:
    """The text of the service's own ``nbgrader_config.py``: the course's, then its folder, its gradebook and
    its feedback page (``templates/pte_feedback``: nbgrader's, with long lines wrapped, and without points
    when the score is hidden)."""
    lines = [CONFIG_HEADER + "c = get_config()  # noqa: F821",
             f"load_subconfig({str(course_config)!r})  # noqa: F821",
             f"c.CourseDirectory.root = {str(work)!r}",
             f"c.CourseDirectory.db_url = {db_url!r}"]
    page = "no_score.html.j2" if hide_score else "page.html.j2"   # both wrap long lines (page.html.j2)
    lines += ["c.HTMLExporter.template_name = 'pte_feedback'", f"c.HTMLExporter.template_file = {page!r}",
              f"c.HTMLExporter.extra_template_basedirs = {template_dirs()!r}"]
    return "\n".join(lines) + "\n"


def merge_csv_row(source: Path, target: Path, student: str, assignment: str) -> bool:
    """Put ``student``'s row for ``assignment`` from the grading command's ``grades.csv`` at ``source`` into the
    one at ``target`` (replacing theirs, keeping every other row), under an ``fcntl`` lock of
    ``grades.csv.lock`` so a run writing at the same time loses nothing, written whole to a temporary file and
    renamed into place; whether there was such a row."""
    with open(source, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        row = next((r for r in reader if (r["student_id"], r["assignment"]) == (student, assignment)), None)
    if row is None:
        return False
    csvfile.update_rows(target, {(student, assignment): row}, fields)
    return True


def prune_backups(folder: Path, keep: int) -> list[Path]:
    """Keep the ``keep`` newest gradebook backups the grading runs left in ``folder``; the ones removed."""
    backups = sorted(folder.glob("gradebook-*.db")) if folder.is_dir() else []   # named by their UTC time
    gone = backups[:max(len(backups) - max(keep, 0), 0)]
    for path in gone:
        path.unlink(missing_ok=True)
    return gone


def tree_digest(*folders: Path) -> str:
    """A digest of every file's name and bytes under ``folders`` (what a release is made from): another
    digest means the instructor changed the lesson."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file() and ".ipynb_checkpoints" not in path.parts:
                digest.update(f"{path.relative_to(folder)}\0{path.stat().st_size}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


class CourseFolder:
    """The service's course folder, as :class:`.service.Service` keeps it (mixed into it)."""

    course: Path
    work: Path
    settings: PTEFeedback

    def db_url(self) -> str:
        """The gradebook the service's grading writes: the course's when the latest feedback grade counts, else
        its own (``gradebook.db`` in its folder)."""
        if self.settings.latest_grade_counts:
            return load_coursedir(self.course).db_url
        return f"sqlite:///{self.work / 'gradebook.db'}"

    def write_config(self, assignment: str | None = None) -> None:
        """The service's ``nbgrader_config.py`` for a run of ``assignment`` (once a symbolic link to the course's:
        replaced)."""
        path = self.work / "nbgrader_config.py"
        text = service_config(self.course / "nbgrader_config.py", self.work, self.db_url(),
                              assignment in self.settings.hide_score)
        if path.is_symlink() or not path.is_file() or path.read_text() != text:
            path.unlink(missing_ok=True)
            path.write_text(text)

    def gradebook_has(self, assignment: str) -> bool:
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.db_url(), load_coursedir(self.work).course_id) as gb:   # the id nbgrader records
            try:
                gb.find_assignment(assignment)
            except MissingEntry:
                return False
        return True

    def sync_release(self, assignment: str) -> bool:
        """The service's release of ``assignment`` made again (nbgrader's generate_assignment) when the course's
        source of it (its solutions, their reference observations) or its release changed since it was made, or
        the gradebook has no record of it; whether it was made."""
        digests_file = self.work.parent / "releases.json"
        try:
            digests = json.loads(digests_file.read_text())
        except (OSError, ValueError):
            digests = {}
        digest = tree_digest(self.course / "solutions" / assignment, self.course / "notebooks" / assignment)
        if (digests.get(assignment) == digest and (self.work / "notebooks" / assignment).is_dir()
                and self.gradebook_has(assignment)):
            return False
        subprocess.run(nbgrader_cmd("generate_assignment", assignment, "--force", "--log-level=ERROR"),
                       cwd=self.work, check=True, capture_output=True, text=True)
        digests[assignment] = digest
        digests_file.write_text(json.dumps(digests, indent=1))
        log.info("%s: release made from the course's source", assignment)
        return True
