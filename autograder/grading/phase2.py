"""Record already-executed notebooks with nbgrader's own autograde and feedback steps.

Run as ``python -m autograder.grading.phase2 COURSE_DIR ASSIGNMENT STAGED_DIR [STUDENT ...]``, or as
``--serve COURSE_DIR`` for one batch after another (:func:`serve`, what the grading command uses).
nbgrader reads the staged submissions (the grader's executed, canonical notebooks) as if
they were the submitted ones, sanitizes them as usual, and then, instead of executing
them again, :class:`LoadStaged` puts the executed cells back. The rest is nbgrader's:
scores and comments into the gradebook (manual grades kept), late penalties, the
``autograded/`` copies, and the HTML feedback.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import nbformat
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Unicode
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader


class LoadStaged(NbGraderPreprocessor):
    """Replace the notebook's cells with the executed cells staged by the grader."""

    staged_root = Unicode("", help="folder holding <student>/<assignment>/<notebook>.ipynb").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = Path(self.staged_root) / info["student"] / info["assignment"] / f"{info['notebook']}.ipynb"
        staged = nbformat.read(path, as_version=4)
        nb.cells = staged.cells
        return nb, resources


def autograde_preprocessors(course_dir: Path) -> list:
    """nbgrader's own autograde steps, as the course's config sets them (nbgrader's default list otherwise),
    with only the execution step swapped for :class:`LoadStaged`: the grader has run the notebook already."""
    from nbgrader.converters import Autograde

    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    config_file = Path(course_dir) / "nbgrader_config.py"
    if config_file.is_file():
        config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
        steps = list(config.get("Autograde", {}).get("autograde_preprocessors", steps))
    swapped = [LoadStaged if isinstance(step, type) and issubclass(step, Execute) else step for step in steps]
    if LoadStaged not in swapped:
        raise RuntimeError("the course's Autograde.autograde_preprocessors has no Execute step to replace")
    return swapped


def others(folder: Path, assignment: str, batch: list[str]) -> str:
    """nbgrader's ``student_id_exclude``: every student with ``<student>/<assignment>`` under ``folder`` who is
    not in ``batch``, so that a run records and returns feedback to the batch alone."""
    if not folder.is_dir():
        return ""
    present = {p.name for p in folder.iterdir() if (p / assignment).is_dir()}
    return ",".join(sorted(present - set(batch)))


def run_app(app_class, config: Config, assignment: str) -> Path:
    """One nbgrader app, configured before initialize() so that the course directory and converters see it;
    returns the course's autograded folder."""
    app = app_class.instance(config=config)
    try:
        app.initialize([assignment, "--log-level=ERROR"])
        app.start()
        coursedir = app.coursedir
    finally:   # the next batch gets an app of its own, with its own configuration
        app_class.clear_instance()
    return Path(coursedir.format_path(coursedir.autograded_directory, ".", ".")).resolve()


def main(argv: list[str]) -> int:
    """COURSE_DIR ASSIGNMENT STAGED_DIR [STUDENT ...]: record the given students (every staged one if none)."""
    course_dir, assignment, staged = argv[:3]
    students = argv[3:]
    from nbgrader.apps import AutogradeApp, GenerateFeedbackApp

    root = Path(course_dir).resolve()
    staged_abs = Path(staged).resolve()
    grading = Config()
    grading.CourseDirectory.root = str(root)
    grading.CourseDirectory.submitted_directory = str(staged_abs.relative_to(root))
    grading.LoadStaged.staged_root = str(staged_abs)
    grading.Autograde.autograde_preprocessors = autograde_preprocessors(root)
    grading.Autograde.create_student = True
    grading.BaseConverter.force = True
    feedback = Config()
    feedback.CourseDirectory.root = str(root)
    feedback.BaseConverter.force = True
    if len(students) == 1:
        grading.CourseDirectory.student_id = feedback.CourseDirectory.student_id = students[0]
    elif students:   # a batch: the students recorded before it keep their records and feedback as they are
        grading.CourseDirectory.student_id_exclude = others(staged_abs, assignment, students)
    graded = run_app(AutogradeApp, grading, assignment)
    if len(students) > 1:
        feedback.CourseDirectory.student_id_exclude = others(graded, assignment, students)
    run_app(GenerateFeedbackApp, feedback, assignment)
    return 0


RESULT = "pte-phase2-result "


def serve(course_dir: str) -> int:
    """``--serve COURSE_DIR``: record batch after batch in one process, so that nbgrader is imported once per
    grading run rather than once per batch. Each line on stdin is a JSON request (``assignment``,
    ``staged``, ``students``); each answer is one line on stdout, ``RESULT`` and JSON whose ``error`` is
    None or what went wrong. nbgrader's own output goes to stderr."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # whatever nbgrader prints stays out of the answers
    for line in sys.stdin:
        request = json.loads(line)
        try:
            main([course_dir, request["assignment"], request["staged"], *request["students"]])
            error = None
        except SystemExit as exc:   # nbgrader's apps exit when a step fails
            error = None if exc.code in (0, None) else f"nbgrader exited with {exc.code}"
        except Exception:  # reported to the grader, which records the batch's students one by one
            error = traceback.format_exc()[-2000:]
        answers.write(RESULT + json.dumps({"error": error}) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(serve(sys.argv[2]))
    sys.exit(main(sys.argv[1:]))
