"""What the students install, from the course's own files: the exact pins of ``requirements.txt`` (read with
``packaging``), the course's id (``nbgrader_config.py``, read by traitlets as nbgrader reads it) and version
(``pyproject.toml``, read with ``tomllib``), and the students' subset of the pins."""
from __future__ import annotations

import os
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import course
from .errors import EditionError

# What students install: the notebooks' kernel and its packages, JupyterLab, nbgrader (the
# Validate button, the Assignments tab and `nbgrader submit`) and what `make check` uses.
# Whatever else the shipped code imports is added from the course's pins (see student_pins).
STUDENT_PACKAGES = {
    "torch": "the subject of the course; the CPU build is enough for every lesson",
    "numpy": "NumPy interop in the lessons and the shipped data files",
    "matplotlib": "the figures in the lessons",
    "ipywidgets": "the interactive explorers in the lessons",
    "ipykernel": "the Python kernel that runs the notebooks",
    "jupyterlab": "where you work (make lab)",
    "notebook": "needed by nbgrader's JupyterLab extensions",
    "nbgrader": "the Validate button, the Assignments tab and nbgrader submit",
    "nbclient": "make check runs your notebooks with it",
    "nbformat": "make check reads your notebooks with it",
    "pillow": "decodes the PNG images of the data-loading lesson",
}
CONDA_NAMES = {"torch": "pytorch"}   # PyPI name -> conda-forge name, where they differ
DEFAULT_VERSION = "0.1.0"            # where pyproject.toml names none


def exact_pin(line: str) -> tuple[str, str] | None:
    """``(normalized name, version)`` of a requirement line that pins one exact version, else ``None``."""
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    specs = list(req.specifier)
    if req.url or req.extras or req.marker or len(specs) != 1:
        return None
    spec = specs[0]
    if spec.operator != "==" or spec.version.endswith(".*"):
        return None
    return canonicalize_name(req.name), spec.version


def course_pins(root: Path = course.REPO_ROOT) -> dict[str, str]:
    """The course's ``requirements.txt``: normalized name -> exact version."""
    pins = {}
    for line in (root / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        pin = exact_pin(line)
        if pin is None:
            raise EditionError(f"requirements.txt: '{line}' is not an exact pin (name==version)")
        pins[pin[0]] = pin[1]
    return pins


def course_id(root: Path = course.REPO_ROOT) -> str:
    """``c.CourseDirectory.course_id`` of the course's ``nbgrader_config.py``, loaded as nbgrader loads it."""
    from traitlets.config.loader import PyFileConfigLoader

    saved = dict(os.environ)   # the config sets variables for nbgrader's kernels; this process keeps its own
    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    except Exception as exc:  # a config that does not load: say which file and why
        raise EditionError(f"nbgrader_config.py does not load: {type(exc).__name__}: {exc}") from exc
    finally:
        os.environ.clear()
        os.environ.update(saved)
    value = config.get("CourseDirectory", {}).get("course_id")
    if not isinstance(value, str) or not value:
        raise EditionError("nbgrader_config.py sets no CourseDirectory.course_id")
    return value


def course_version(root: Path = course.REPO_ROOT) -> str:
    """``project.version`` of the course's ``pyproject.toml``."""
    with open(root / "pyproject.toml", "rb") as f:
        project = tomllib.load(f).get("project", {})
    return str(project.get("version", DEFAULT_VERSION))


def requires_closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, as installed here (extras left out), normalized."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def student_pins(imported: dict[str, set[str]], root: Path = course.REPO_ROOT) -> dict[str, str]:
    """The students' packages with the course's exact versions: STUDENT_PACKAGES plus what the shipped code
    imports (``imported``: module -> where), sorted by name."""
    pins = course_pins(root)
    wanted = {canonicalize_name(n) for n in STUDENT_PACKAGES}
    providers = metadata.packages_distributions()
    third_party = sorted({m.split(".")[0] for m in imported} - set(sys.stdlib_module_names) - {"autograder"})
    unpinned: dict[str, set[str]] = {}
    for module in third_party:
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not dists:
            where = sorted(set().union(*(w for m, w in imported.items() if m.split(".")[0] == module)))
            raise EditionError(f"the shipped code imports '{module}' ({', '.join(where)}), which no installed "
                               "package provides: pin it in requirements.txt")
        pinned = dists & set(pins)
        if pinned:
            wanted |= pinned
        else:
            unpinned[module] = dists
    missing = sorted(n for n in wanted if n not in pins)
    if missing:
        raise EditionError(f"requirements.txt of the course pins no version of {', '.join(missing)}")
    closure = requires_closure(wanted)
    loose = sorted(m for m, dists in unpinned.items() if not dists & closure)
    if loose:
        raise EditionError(f"the shipped code imports {', '.join(loose)}, which neither requirements.txt pins "
                           "nor a pinned package brings: pin it in the course's requirements.txt")
    return {name: pins[name] for name in sorted(wanted)}
