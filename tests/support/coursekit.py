"""Helpers the tests share: scratch courses, submissions built from the release, scores.

Naming convention in every lesson (checked by test_lessons.py): the answer cell of
exercise ``X`` has grade id ``ex_X``; its locked test cell (visible checks, then hidden
ones) has grade id ``test_X`` and carries all of the exercise's points.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import course
from autograder.grading.plan.planning import GRADING_DIR
from autograder.grading.run.reference import CACHE_DIR
from autograder.kernel.vocabulary import protocol

REPO = course.REPO_ROOT
PITFALL_DIR = Path(__file__).parents[1] / "course" / "pitfalls"
MARKER_LINE = re.compile(r"^\s*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")


nbgrader_meta = protocol.nbgrader_meta


def exercises(nb) -> dict[str, dict]:
    """Exercise name -> {'solution': cell, 'test': cell, 'points': int} from a notebook."""
    found: dict[str, dict] = {}
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id", "")
        if meta.get("solution") and grade_id.startswith("ex_"):
            found.setdefault(grade_id[3:], {})["solution"] = cell
        elif meta.get("grade") and grade_id.startswith("test_"):
            entry = found.setdefault(grade_id[5:], {})
            entry["test"] = cell
            entry["points"] = meta["points"]
    return found


def solution_body(source: str) -> str:
    """The solution cell as a student who got it right would have written it (markers removed)."""
    return "\n".join(line for line in source.splitlines() if not MARKER_LINE.match(line))


def load_pitfall_module(lesson: str):
    """tests/course/pitfalls/<lesson>.py as a module (``None`` if the lesson has none yet).

    ``PITFALLS``: exercise -> {pitfall description: wrong answer cell}, each failing a visible check;
    ``HIDDEN_ONLY``: the same shape, wrong answers that pass every visible check and fail a hidden one;
    ``FORGERIES``: the same shape, wrong answers that also forge the evidence (see test_pitfalls.py).
    """
    path = PITFALL_DIR / f"{lesson}.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"pitfalls_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer_from_table(lesson: str, table: str, exercise: str, name: str):
    """One answer of tests/course/pitfalls/<lesson>.py (``table``: PITFALLS, PLAUSIBLE, RIGHT_ANSWERS, ...) defined
    outside a notebook, with the imports every lesson's setup makes: the unit tests of a lesson's check helpers
    take their answers from the one table the notebook tests use, instead of copies."""
    cells = getattr(load_pitfall_module(lesson), table)[exercise]
    namespace: dict = {}
    exec("import numpy as np\nimport torch\nfrom torch import nn\n" + cells[name], namespace)
    return namespace[exercise]


# The first lines of a forging answer cell: every boolean observation (or tuple/list of booleans) comes out True.
FORGED_OBSERVE = '''
from autograder.kernel import hidden as _hidden


def _all_true(value):
    if type(value) is bool:
        return True
    if type(value) in (list, tuple) and value and all(type(v) is bool for v in value):
        return type(value)(True for _ in value)
    return value


_true_observe = _hidden.HiddenTests.observe
_hidden.HiddenTests.observe = lambda self, label, value, **kw: _true_observe(self, label, _all_true(value), **kw)
'''


def load_pitfalls(lesson: str) -> dict[str, dict[str, str]]:
    """tests/course/pitfalls/<lesson>.py's PITFALLS: exercise -> {pitfall description: wrong answer cell}."""
    module = load_pitfall_module(lesson)
    return getattr(module, "PITFALLS", {}) if module else {}


# The grading command runs each lesson's solution once per course, on this host, and caches what it observed
# (autograder/grading/run/reference.py, keyed by the solution files, the CPU, its dispatch settings and the
# thread count). The scratch courses of one test run share that cache through this folder, so a lesson's
# reference runs once per key, not once per class; a class that changes the solution gets another key.
SHARED_REFERENCE_CACHE_ENV = "TESTS_REFERENCE_CACHE"


# The same goes for nbgrader's generate_assignment: a dozen e2e files build a scratch course of lesson 01 from
# the same files, each with an nbgrader start of its own (about 3 CPU seconds). What it writes (the release in
# notebooks/ and the gradebook's records of it) is kept per run under this folder, keyed by the bytes it reads
# (nbgrader_config.py and the lessons' solutions/ folders); a course whose files differ gets a key of its own.
SHARED_RELEASE_CACHE_ENV = "TESTS_RELEASE_CACHE"


def _release_key(root: Path, lesson_ids: list[str]) -> str:
    digest = hashlib.sha256((root / "nbgrader_config.py").read_bytes())
    for lesson in sorted(lesson_ids):
        folder = root / "solutions" / lesson
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(f"\0{path.relative_to(root)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def generate_assignments(root: Path, lesson_ids: list[str]) -> None:
    """``nbgrader generate_assignment`` of every lesson in one start (the assignment id is a glob over
    solutions/), or a copy of what it wrote for the same files earlier in this run."""
    shared = os.environ.get(SHARED_RELEASE_CACHE_ENV)
    cached = Path(shared) / _release_key(root, lesson_ids) if shared else None
    if cached is not None and (cached / "gradebook.db").is_file():
        shutil.copy(cached / "gradebook.db", root / "gradebook.db")
        shutil.copytree(cached / "notebooks", root / "notebooks", dirs_exist_ok=True)
        return
    subprocess.run(course.nbgrader_cmd("generate_assignment", "*", "--force", "--log-level=ERROR"),
                   cwd=root, check=True)
    if cached is None:
        return
    partial = cached.with_name(f".{cached.name}.{os.getpid()}")   # another worker may write the same key
    shutil.copytree(root / "notebooks", partial / "notebooks")
    shutil.copy(root / "gradebook.db", partial / "gradebook.db")
    try:
        partial.rename(cached)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)


def make_scratch_course(root: Path, lesson_ids: list[str]) -> Path:
    """A throwaway copy of the course (config + solutions) with its own gradebook and release; its reference
    cache is the run's shared one (``TESTS_REFERENCE_CACHE``, set by tests/conftest.py) when there is one, and so
    is its release (``TESTS_RELEASE_CACHE``)."""
    root.mkdir(parents=True, exist_ok=True)
    shared = os.environ.get(SHARED_REFERENCE_CACHE_ENV)
    if shared:
        (root / GRADING_DIR).mkdir(exist_ok=True)
        (root / GRADING_DIR / CACHE_DIR).symlink_to(shared, target_is_directory=True)
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    for lesson in lesson_ids:
        shutil.copytree(REPO / "solutions" / lesson, root / "solutions" / lesson)
    if lesson_ids:
        generate_assignments(root, lesson_ids)
    return root


def release_notebook(root: Path, lesson: str):
    return nbformat.read(root / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)


def fill_answers(release_nb, solution_nb, overrides: dict[str, str] | None = None):
    """The release with every answer cell filled in correctly, except ``overrides`` (exercise -> source)."""
    nb = nbformat.from_dict(release_nb)
    solutions = exercises(solution_nb)
    overrides = overrides or {}
    for name, entry in exercises(nb).items():
        if "solution" not in entry:
            continue
        entry["solution"].source = overrides.get(name, solution_body(solutions[name]["solution"].source))
    return nb


def submit(root: Path, student: str, lesson: str, nb) -> None:
    target = root / "submitted" / student / lesson
    target.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target / f"{lesson}.ipynb")


def autograde(root: Path, lesson: str = "*") -> subprocess.CompletedProcess:
    """Plain `nbgrader autograde` of one lesson, or of every lesson in one nbgrader start ("*")."""
    return subprocess.run(
        course.nbgrader_cmd("autograde", lesson, "--force", "--create", "--log-level=ERROR"),
        cwd=root, capture_output=True, text=True, timeout=1800,
    )


def scores(root: Path, lesson: str) -> dict[str, dict[str, float]]:
    """student -> {exercise name: points scored} for every autograded submission."""
    from nbgrader.api import Gradebook

    result: dict[str, dict[str, float]] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assignment = gb.find_assignment(lesson)
        for submission in assignment.submissions:
            per_exercise: dict[str, float] = {}
            for nb in submission.notebooks:
                for grade in nb.grades:
                    if grade.name.startswith("test_"):
                        per_exercise[grade.name[5:]] = grade.score
            result[submission.student.id] = per_exercise
    return result


def output_text(nb, cell_id: str) -> str:
    for cell in nb.cells:
        if cell.get("id") == cell_id or nbgrader_meta(cell).get("grade_id") == cell_id:
            parts = []
            for out in cell.get("outputs", []):
                if out.output_type == "stream":
                    parts.append(out.text)
                elif out.output_type == "error":
                    parts.append(f"{out.ename}: {out.evalue}")
            return "".join(parts)
    raise KeyError(cell_id)


def processes_left(matches, grace_s: float = 10.0) -> list[str]:
    """``pid command`` of each live process for which ``matches(psutil.Process)`` is true (a psutil.Error
    counts as no), polled until there is none or ``grace_s`` has passed: what a run left running."""
    import psutil

    def matching(proc) -> bool:
        try:
            return matches(proc)
        except (OSError, psutil.Error):   # ended meanwhile, or not ours to read
            return False

    deadline = time.monotonic() + grace_s
    while True:
        left = [f"{proc.pid} {' '.join(proc.info['cmdline'] or [])[:100]}"
                for proc in psutil.process_iter(["cmdline"]) if matching(proc)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def venv_path_for_make() -> str:
    """This venv's folder as a make variable may hold it: make splits target names on spaces, so a venv in a
    folder whose path has one (a clone in "/root/my course") is reached through a link in a folder without."""
    venv = sys.prefix
    if not any(ch.isspace() for ch in venv):
        return venv
    link = Path(tempfile.mkdtemp(prefix="pte-venv-link-")) / "venv"
    link.symlink_to(venv, target_is_directory=True)
    return str(link)
