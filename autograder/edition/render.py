"""The files the student edition generates rather than copies: the README (with its table of lessons) and
``pyproject.toml`` filled in from the templates in ``edition/``, ``requirements.txt`` and ``environment.yml``
from the students' pins, the data README without its rebuilding section, the package's ``__init__.py`` and the
marker that says a folder is an edition."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from packaging.utils import canonicalize_name

from .. import course
from ..kernel.vocabulary import protocol
from .errors import EditionError
from .pins import CONDA_NAMES, STUDENT_PACKAGES, course_id, course_version

TEMPLATES = course.REPO_ROOT / "edition"
MARKER = ".student-edition"
# the edition's autograder/__init__.py (the course's may grow instructor-side imports)
PACKAGE_INIT = '"""PyTorch Essentials: the package the notebooks import (``autograder.kernel``)."""\n'
MARKER_TEXT = ("Written by `python -m autograder.edition` of the PyTorch Essentials course.\n"
               "Rebuilding it replaces everything in this folder except .git/.\n")


def requirements_txt(pins: dict[str, str]) -> str:
    lines = ["# Exact versions of what the notebooks, JupyterLab, nbgrader and `make check` need.",
             "# environment.yml lists the same versions for conda (from the course's pins)."]
    return "\n".join(lines + [f"{name}=={version}" for name, version in pins.items()]) + "\n"


def environment_yml(pins: dict[str, str]) -> str:
    lines = ["# Conda equivalent of requirements.txt (same exact versions).",
             "#   conda env create -f environment.yml && conda activate pytorch-essentials-student",
             "#   pip install --no-deps -e .          # the package the notebooks import",
             "#   make lab VENV=$CONDA_PREFIX",
             "name: pytorch-essentials-student",
             "channels:",
             "  - conda-forge",
             "dependencies:",
             "  - python=3.11            # the course targets CPython 3.11"]
    reasons = {canonicalize_name(k): v for k, v in STUDENT_PACKAGES.items()}
    for name, version in pins.items():
        entry = f"  - {CONDA_NAMES.get(name, name)}={version}"
        reason = reasons.get(name, "imported by the lessons' package")
        lines.append(f"{entry:<26} # {reason}")
    return "\n".join(lines) + "\n"


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{{key}}`` replaced by its value; every placeholder must be filled."""
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", value)
    leftover = re.findall(r"\{\{\w+\}\}", template)
    if leftover:
        raise EditionError(f"edition template has unfilled placeholders: {leftover}")
    return template


def _title(nb) -> str:
    first = nb.cells[0].source.splitlines()[0] if nb.cells and nb.cells[0].source else ""
    return re.sub(r"^#\s*\d\d\s*·\s*", "", first).strip() or "(untitled)"


def lessons_table(release: dict[str, object]) -> str:
    rows = ["| lesson | notebook | graded exercises |", "| --- | --- | --- |"]
    for lesson, nb in release.items():
        tests = [c for c in nb.cells if protocol.is_test_cell(c)]
        points = sum(protocol.nbgrader_meta(c).get("points", 0) for c in tests)
        rows.append(f"| {lesson[:2]} · {_title(nb)} | `notebooks/{lesson}/{lesson}.ipynb` | "
                    f"{len(tests)} ({points} points) |")
    return "\n".join(rows)


def data_readme(text: str) -> str:
    """The data README without its rebuilding section (the scripts and their tests stay with the course)."""
    out, skipping_level = [], 0
    for line in text.splitlines():
        heading = re.match(r"^(#+)\s", line)
        if heading and skipping_level and len(heading[1]) <= skipping_level:
            skipping_level = 0
        if heading and re.search(r"rebuild", line, re.I):
            skipping_level = len(heading[1])
            out += [line, "", "These files are built by the instructor's copy of the course; this edition",
                    "ships them ready to use.", ""]
            continue
        if not skipping_level:
            out.append(line)
    return "\n".join(out).rstrip() + "\n"


def write_project_files(dest: Path, root: Path, release: dict, package: dict[Path, str], pins: dict[str, str],
                        first: str) -> None:
    """The generated files of the edition in ``dest``: README, pyproject, Makefile, .gitignore, requirements,
    environment and the marker."""
    packages = sorted(".".join(rel.parent.parts) for rel in package if rel.name == "__init__.py")
    values = {
        "version": course_version(root),
        "dependencies": ", ".join(f'"{name}"' for name in pins),
        "packages": ", ".join(f'"{p}"' for p in packages),
        "lessons": lessons_table(release),
        "first_lesson": first,
        "course_id": course_id(root),
    }
    (dest / "README.md").write_text(fill((TEMPLATES / "README.md").read_text(), values))
    (dest / "pyproject.toml").write_text(fill((TEMPLATES / "pyproject.toml.in").read_text(), values))
    shutil.copyfile(TEMPLATES / "Makefile", dest / "Makefile")
    shutil.copyfile(TEMPLATES / "gitignore", dest / ".gitignore")
    (dest / "requirements.txt").write_text(requirements_txt(pins))
    (dest / "environment.yml").write_text(environment_yml(pins))
    (dest / MARKER).write_text(MARKER_TEXT)
