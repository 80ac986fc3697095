"""Record already-executed notebooks with nbgrader's own autograde and feedback steps.

Run as ``python -m autograder.grading.phase2 COURSE_DIR ASSIGNMENT STAGED_DIR``.
nbgrader reads the staged submissions (the grader's executed, canonical notebooks) as if
they were the submitted ones, sanitizes them as usual, and then, instead of executing
them again, :class:`LoadStaged` puts the executed cells back. The rest is nbgrader's:
scores and comments into the gradebook (manual grades kept), late penalties, the
``autograded/`` copies, and the HTML feedback.
"""
from __future__ import annotations

import sys
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


def main(argv: list[str]) -> int:
    course_dir, assignment, staged = argv[:3]
    students = argv[3:]
    from nbgrader.apps import AutogradeApp, GenerateFeedbackApp

    staged_abs = str(Path(staged).resolve())
    relative = str(Path(staged_abs).relative_to(Path(course_dir).resolve()))
    extra = Config()
    extra.CourseDirectory.root = str(Path(course_dir).resolve())
    extra.CourseDirectory.submitted_directory = relative
    extra.LoadStaged.staged_root = staged_abs
    extra.Autograde.autograde_preprocessors = autograde_preprocessors(Path(course_dir))
    extra.Autograde.create_student = True
    extra.BaseConverter.force = True
    if len(students) == 1:
        extra.CourseDirectory.student_id = students[0]

    feedback = Config()
    feedback.CourseDirectory.root = extra.CourseDirectory.root
    feedback.BaseConverter.force = True
    if len(students) == 1:
        feedback.CourseDirectory.student_id = students[0]
    for app_class, config in ((AutogradeApp, extra), (GenerateFeedbackApp, feedback)):
        # Configuration given before initialize() reaches the course directory and converters.
        app = app_class.instance(config=config)
        app.initialize([assignment, "--log-level=ERROR"])
        app.start()
        app_class.clear_instance()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
