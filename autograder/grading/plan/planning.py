"""What one grading run will do, decided before any submission runs: the course and its config, the
gradebook's layout, the submissions (discovered, sharded), the run's folders and a gradebook backup.

:func:`plan` returns a :class:`Plan`; nothing is executed here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autograder.grading.isolate import cgroups, sandbox
from autograder.grading.plan import shards
from autograder.grading.plan.job import Job, Paths
from autograder.grading.plan.settings import Limits, Settings

GRADING_DIR = ".grading"


class UsageError(Exception):
    """Bad arguments: exit code 2."""


def load_coursedir(course: Path):
    """nbgrader's CourseDirectory as the course's own nbgrader_config.py sets it."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config_file = course / "nbgrader_config.py"
    if not config_file.is_file():
        raise UsageError(f"{course} has no nbgrader_config.py: is it an nbgrader course?")
    config = PyFileConfigLoader(config_file.name, path=str(course)).load_config()
    coursedir = CourseDirectory(config=config)
    coursedir.root = str(course.resolve())
    return coursedir


def course_layout(coursedir) -> dict[str, dict]:
    """assignment -> {'notebooks': {name: max_score}, 'tests': {name: {grade id: source}}} from the gradebook.

    The test sources are the instructor's, as ``generate_assignment`` saved them: hidden tests included.
    """
    from nbgrader.api import Gradebook

    layout = {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for assignment in gb.assignments:
            layout[assignment.name] = {
                "notebooks": {nb.name: nb.max_score for nb in assignment.notebooks},
                "tests": {nb.name: {cell.name: cell.source for cell in nb.source_cells
                                    if cell.name in {g.name for g in nb.grade_cells} and cell.cell_type == "code"}
                          for nb in assignment.notebooks},
            }
    return layout


def backup_gradebook(coursedir, course: Path) -> str | None:
    url = coursedir.db_url
    if not url.startswith("sqlite:///"):
        return None  # a server database is backed up by its own tools (pg_dump)
    db = Path(url[len("sqlite:///"):])
    if not db.exists():
        return None
    folder = course / "backups"
    folder.mkdir(exist_ok=True)
    target = folder / f"gradebook-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%fZ')}.db"
    import sqlite3

    with sqlite3.connect(db) as source, sqlite3.connect(target) as dest:
        source.backup(dest)  # a consistent copy even if another process is reading
    return str(target)


def discover(coursedir, options: Settings, layout: dict) -> list[tuple[str, str]]:
    """(student, assignment) of every submission folder the settings select (this shard's students only)."""
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, ".", ".")).resolve()
    if not submitted.is_dir():
        raise UsageError(f"no submissions folder at {submitted}")
    assignments = options.assignments or sorted(layout)
    unknown = [a for a in assignments if a not in layout]
    if unknown:
        raise UsageError(f"unknown assignment(s) {', '.join(unknown)}; the gradebook has: {', '.join(sorted(layout))}"
                         " (run `nbgrader generate_assignment` first)")
    students = sorted(p.name for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))
    if options.students:
        missing = [s for s in options.students if s not in students]
        if missing:
            raise UsageError(f"no submissions folder for student(s): {', '.join(missing)}")
        students = [s for s in students if s in options.students]
    return [(student, assignment) for student in students if shards.in_shard(student, options.shard)
            for assignment in assignments if (submitted / student / assignment).is_dir()]


@dataclass
class Plan:
    """What one grading run will do, decided before any submission runs."""
    settings: Settings
    coursedir: object
    layout: dict[str, dict]
    tasks: list[tuple[str, str]]          # (student, assignment), in grading order
    paths: Paths
    limits: Limits
    cgroups: str                          # v2, v1 or none
    backup: str | None

    def job(self, student: str, assignment: str, reference_cells: dict | None = None) -> Job:
        layout = self.layout[assignment]
        return Job(student, assignment, layout["notebooks"], layout["tests"], self.paths, self.limits,
                   reference_cells or {})


def plan(course: Path, overrides: dict | None = None, progress=None) -> Plan:
    """Read the course and its config, check the host, find the submissions, prepare the folders
    (``progress``: where warnings go, a :class:`reporting.Progress`)."""
    course = Path(course).resolve()
    if not course.is_dir():
        raise UsageError(f"course folder {course} does not exist")
    fonts = matplotlib_cache(course / GRADING_DIR) if (course / "nbgrader_config.py").is_file() else None
    try:   # the font cache builds while nbgrader loads the course
        return checked_plan(course, overrides, progress)
    finally:
        if fonts is not None:
            fonts.wait()


def checked_plan(course: Path, overrides: dict | None, progress) -> Plan:
    coursedir = load_coursedir(course)
    try:
        settings = Settings.resolve(course, coursedir.config, overrides)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if settings.problems():
        raise UsageError("; ".join(settings.problems()))
    layout = course_layout(coursedir)
    tasks = sorted(discover(coursedir, settings, layout), key=lambda t: (t[1], t[0]))
    use_bwrap = settings.sandbox != "none"
    if use_bwrap and not sandbox.sandbox_available():
        raise UsageError("bubblewrap is missing or cannot create namespaces on this host, so submissions could "
                         "read the course (solutions, reference observations, the gradebook). Install it "
                         "(Debian: apt-get install bubblewrap), or pass --sandbox none to grade without "
                         "isolation, knowingly.")
    kind, why = cgroups.available() if use_bwrap else (None, "")
    log = progress.log if progress is not None else (lambda text: print(text, file=sys.stderr))
    if use_bwrap and kind is None:
        log(f"warning: no per-kernel cgroups ({why}); CPU, memory and process limits fall back to "
                     "taskset and prlimit, which a submission can widen or share")
    if not use_bwrap:
        log("warning: grading WITHOUT the bubblewrap sandbox (--sandbox none): submissions can read "
                     "the course files, including the reference observations")
    problem = sandbox.kernel_import_problem(settings.threads)
    if problem:   # every kernel of the class would die before it answered: say why once, grade nothing
        raise UsageError(f"the grading kernels cannot start: {problem}")
    paths = prepare_folders(course, coursedir, settings.shard)
    return Plan(settings, coursedir, layout, tasks, paths, settings.limits(str(Path(paths.grading) / "mplcache")),
                kind or "none", backup_gradebook(coursedir, course))


# A kernel's sockets lie in the run's scratch folder, the deepest a reference run's,
# <root>/pte-grading-XXXXXXXX/reference-XXXXXXXX/run/kernel-N, and a socket's path may not exceed 107 bytes: under a
# deeper root ZMQ refused every kernel of the run ("File name too long").
SOCKET_PATH_MAX = 107
SOCKET_BELOW_ROOT = len("/pte-grading-XXXXXXXX/reference-XXXXXXXX/run/kernel-NN")


def scratch_root() -> str:
    """Where the run's scratch folder is made: ``PTE_SCRATCH``, else the temporary folder; UsageError when the
    kernels' sockets in it would be too long a path."""
    root = os.environ.get("PTE_SCRATCH") or tempfile.gettempdir()
    if len(os.fsencode(os.path.abspath(root))) + SOCKET_BELOW_ROOT > SOCKET_PATH_MAX:
        raise UsageError(f"the scratch folder {root} is too deep for the kernels' sockets, whose paths may not exceed "
                         f"{SOCKET_PATH_MAX} bytes: set PTE_SCRATCH (or TMPDIR) to a folder of at most "
                         f"{SOCKET_PATH_MAX - SOCKET_BELOW_ROOT} bytes")
    return root


def prepare_folders(course: Path, coursedir, shard=None) -> Paths:
    root = scratch_root()
    grading_dir = course / GRADING_DIR
    staged = grading_dir / shards.work_name(shard) / "staged"   # a shard's own: shards share the course folder
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix="pte-grading-", dir=root))
    os.chmod(scratch, 0o711)

    def folder(name: str) -> str:
        return str(Path(coursedir.format_path(getattr(coursedir, name), ".", ".")).resolve())

    return Paths(folder("submitted_directory"), folder("release_directory"), folder("source_directory"),
                 str(grading_dir), str(staged), str(scratch))


def matplotlib_cache(grading_dir: Path) -> subprocess.Popen | None:
    """Start building matplotlib's font cache, once, so that each sandbox does not rebuild it (the folder is
    ``grading_dir / "mplcache"``, which :class:`settings.Limits` names to every kernel; wait for the process
    before a kernel starts)."""
    cache = grading_dir / "mplcache"
    if any(cache.glob("fontlist-*.json")):
        return None
    cache.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", "import matplotlib.font_manager"],
                            env=dict(os.environ, MPLCONFIGDIR=str(cache)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
