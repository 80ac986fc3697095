"""The student edition: a folder to hand out as its own repository, with nothing students must not see.

    python -m autograder.edition DEST [--lesson ID ...] [--git]

DEST receives the release (``notebooks/``), the kernel-side package the notebooks import
(``autograder/__init__.py`` and the modules of ``autograder/kernel/`` that the shipped lessons
and ``make check`` import, directly or not), the shipped data (``data/``,
without the scripts that rebuild it), pinned ``requirements.txt`` and ``environment.yml``
(the students' subset of the course's pins), a ``pyproject.toml`` that packages only the
kernel side, a Makefile (``make lab``, ``make check``), a student README and the course's two
licences, ``LICENSE`` (MIT, the code) and ``LICENSE-CONTENT`` (CC BY-SA 4.0, the prose and
figures). The templates live in ``edition/`` of the course.

Left out: ``solutions/`` (answers, hidden tests, reference observations), the instructor's
tools (``autograder/grading``, ``course.py``, ``__main__.py``, this module), ``tests/``,
gradebooks, submissions, feedback, virtual environments and caches. Before writing, the
release is checked for solution or hidden-test markers, outputs and imports of modules
the edition does not ship; any of them stops the build.

DEST must be a new or empty folder, or an earlier edition (it holds ``.student-edition``):
then everything in it except ``.git/`` is replaced. ``--git`` commits the result (creating
the repository if needed), ready to push.
"""
from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from . import course
from .kernel import protocol

TEMPLATES = course.REPO_ROOT / "edition"
MARKER = ".student-edition"
HIDDEN_FILES = {protocol.REFERENCE_FILE}
SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
SKIP_SUFFIXES = {".pyc", ".pyo"}
# the licences, shipped as they are; the student README (edition/README.md) says which covers what
LICENCE_FILES = ("LICENSE", "LICENSE-CONTENT")

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
# the edition's autograder/__init__.py (the course's may grow instructor-side imports)
SELFCHECK = "autograder.kernel.selfcheck"   # `make check`
PACKAGE_INIT = '"""PyTorch Essentials: the package the notebooks import (``autograder.kernel``)."""\n'


class EditionError(RuntimeError):
    """The student edition cannot be built as asked; the message says why and what to do."""


# ---------------------------------------------------------------- what the course holds

def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def course_pins(root: Path = course.REPO_ROOT) -> dict[str, str]:
    """The course's ``requirements.txt``: normalized name -> exact version."""
    pins = {}
    for line in (root / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9.]*)", line)
        if not match:
            raise EditionError(f"requirements.txt: '{line}' is not an exact pin (name==version)")
        pins[_normal(match[1])] = match[2]
    return pins


def course_id(root: Path = course.REPO_ROOT) -> str:
    match = re.search(r"""course_id\s*=\s*["']([^"']+)["']""", (root / "nbgrader_config.py").read_text())
    if not match:
        raise EditionError("nbgrader_config.py sets no CourseDirectory.course_id")
    return match[1]


def course_version(root: Path = course.REPO_ROOT) -> str:
    match = re.search(r'^version\s*=\s*"([^"]+)"', (root / "pyproject.toml").read_text(), re.M)
    return match[1] if match else "0.1.0"


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


# ---------------------------------------------------------------- imports of the shipped code

def _code_of_notebook(path: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _parse(source: str) -> ast.AST | None:
    try:
        return ast.parse(source)
    except SyntaxError:   # IPython magics and shell escapes: drop them and try again
        kept = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
        try:
            return ast.parse(kept)
        except SyntaxError:
            return None


def imports_of(sources: dict[str, list[str]]) -> dict[str, set[str]]:
    """Absolute imports in ``sources`` (where -> code): module -> where; ``from m import n`` gives ``m`` and ``m.n``."""
    found: dict[str, set[str]] = {}
    for where, chunks in sources.items():
        for chunk in chunks:
            tree = _parse(chunk)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        found.setdefault(alias.name, set()).add(where)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.setdefault(node.module, set()).add(where)
                    for alias in node.names:
                        found.setdefault(f"{node.module}.{alias.name}", set()).add(where)
    return found


def _requires_closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, as installed here (extras left out)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = _normal(todo.pop())
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
    """The students' packages with the course's exact versions: STUDENT_PACKAGES plus what the shipped code imports."""
    pins = course_pins(root)
    wanted = {_normal(n) for n in STUDENT_PACKAGES}
    providers = metadata.packages_distributions()
    third_party = sorted({m.split(".")[0] for m in imported} - set(sys.stdlib_module_names) - {"autograder"})
    unpinned: dict[str, set[str]] = {}
    for module in third_party:
        dists = {_normal(d) for d in providers.get(module, [])}
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
    closure = _requires_closure(wanted)
    loose = sorted(m for m, dists in unpinned.items() if not dists & closure)
    if loose:
        raise EditionError(f"the shipped code imports {', '.join(loose)}, which neither requirements.txt pins "
                           "nor a pinned package brings: pin it in the course's requirements.txt")
    return {name: pins[name] for name in sorted(wanted)}


def _module_file(module: str, package: dict[Path, str]) -> Path | None:
    """The file of ``module`` among ``package`` (relative path -> source), ``None`` if it is not there."""
    base = Path(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate in package:
            return candidate
    return None


def _defined_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_autograder_modules(imported: dict[str, set[str]], package: dict[Path, str]) -> dict[str, set[str]]:
    """``autograder`` imports that the shipped package (relative path -> source) cannot satisfy: module -> where."""
    missing = {}
    for module, where in imported.items():
        if module.split(".")[0] != "autograder" or _module_file(module, package):
            continue
        parent, _, name = module.rpartition(".")
        parent_file = _module_file(parent, package) if parent else None
        if parent_file and (parent_file.name != "__init__.py" or name in _defined_names(package[parent_file])):
            continue   # a name defined in a shipped module (`from autograder.kernel.checks import CheckFailed`)
        missing[module] = where
    # `from autograder.data import a, b` is one finding, not three
    return {m: w for m, w in missing.items() if not any(m.startswith(other + ".") for other in missing)}


def _module_name(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of_module(rel: Path, source: str) -> set[str]:
    """Absolute names a package module imports, relative imports resolved (``from m import n`` gives m and m.n)."""
    package = _module_name(rel) if rel.name == "__init__.py" else _module_name(rel).rpartition(".")[0]
    names: set[str] = set()
    tree = _parse(source)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def needed_modules(package: dict[Path, str], roots: set[str]) -> set[Path]:
    """The package files that ``roots`` (module names) import, directly or through each other, with their packages."""
    needed: set[Path] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        rel = _module_file(name, package)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]     # parent packages
        if rel is None or rel in needed:
            continue
        needed.add(rel)
        todo += [m for m in _imports_of_module(rel, package[rel]) if m.split(".")[0] == "autograder"]
    return needed


# ---------------------------------------------------------------- generated files

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
    reasons = {_normal(k): v for k, v in STUDENT_PACKAGES.items()}
    for name, version in pins.items():
        entry = f"  - {CONDA_NAMES.get(name, name)}={version}"
        reason = reasons.get(name, "imported by the lessons' package")
        lines.append(f"{entry:<26} # {reason}")
    return "\n".join(lines) + "\n"


def _fill(template: str, values: dict[str, str]) -> str:
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


# ---------------------------------------------------------------- building

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
        if protocol.is_test_cell(cell) and re.search(r"\bchecks\.hidden\(|\bhidden\.observe\(", cell.source):
            raise EditionError(f"{where}: a test cell still holds hidden checks: regenerate it with `make release`")


def _prepare_dest(dest: Path, root: Path) -> None:
    root = root.resolve()
    if dest == root or root in dest.parents or dest in root.parents:
        raise EditionError(f"{dest}: the edition must go outside the course folder {root}")
    if dest.exists() and not dest.is_dir():
        raise EditionError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        if not (dest / MARKER).is_file():
            raise EditionError(f"{dest} is not empty and holds no earlier student edition ({MARKER}): "
                               "choose a new or empty folder")
        for entry in dest.iterdir():
            if entry.name == ".git":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    dest.mkdir(parents=True, exist_ok=True)


def build(dest: Path | str, lesson_ids: list[str] | None = None, root: Path = course.REPO_ROOT,
          git: bool = False) -> Path:
    """Write the student edition into ``dest`` (see the module docstring); returns ``dest``."""
    root = Path(root)
    dest = Path(dest).resolve()
    known = course.lessons(root, narrowed=False)
    lesson_ids = list(lesson_ids) if lesson_ids else known
    unknown = [lesson for lesson in lesson_ids if lesson not in known]
    if unknown:
        raise EditionError(f"unknown lesson(s): {', '.join(unknown)}; known: {', '.join(known)}")
    release = _read_release(root, lesson_ids)
    copies = _course_copies(root, lesson_ids)
    package, pins = _shipped_package(root, lesson_ids, copies)
    _prepare_dest(dest, root)
    for rel, src in sorted(copies.items()):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == Path("data/README.md"):
            target.write_text(data_readme(src.read_text()))
        else:
            shutil.copyfile(src, target)
    (dest / "autograder" / "__init__.py").write_text(PACKAGE_INIT)
    _write_project_files(dest, root, release, package, pins, lesson_ids[0])
    if git and not commit(dest, lesson_ids):
        print(f"{dest}: unchanged since its last commit")
    return dest


def _read_release(root: Path, lesson_ids: list[str]) -> dict:
    import nbformat

    release = {}
    for lesson in lesson_ids:
        path = root / "notebooks" / lesson / f"{lesson}.ipynb"
        if not path.is_file():
            raise EditionError(f"notebooks/{lesson}/{lesson}.ipynb is missing: run `make release`")
        release[lesson] = nbformat.read(path, as_version=4)
        check_release(lesson, release[lesson])
    return release


def _course_copies(root: Path, lesson_ids: list[str]) -> dict[Path, Path]:
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


def _shipped_package(root: Path, lesson_ids: list[str], copies: dict[Path, Path]) -> tuple[dict, list]:
    """The kernel modules the shipped notebooks import (and `make check`), with what those import in turn (an
    edition of some lessons carries no helper of a lesson it leaves out; ``copies`` loses the others), and the
    pinned packages that code imports. Every autograder module it imports must ship."""
    notebook_code = {f"notebooks/{lesson}": _code_of_notebook(root / "notebooks" / lesson / f"{lesson}.ipynb")
                     for lesson in lesson_ids}
    package = {rel: src.read_text() for rel, src in copies.items()
               if rel.suffix == ".py" and rel.parts[0] == "autograder"}
    package[Path("autograder/__init__.py")] = PACKAGE_INIT
    roots = {m for m in imports_of(notebook_code) if m.split(".")[0] == "autograder"} | {SELFCHECK, "autograder.kernel"}
    keep = needed_modules(package, roots)
    for rel in [r for r in package if r not in keep]:
        del package[rel]
        copies.pop(rel, None)
    sources = {str(rel): [text] for rel, text in package.items()}
    sources.update(notebook_code)
    imported = imports_of(sources)
    missing = missing_autograder_modules(imported, package)
    if missing:
        details = "; ".join(f"{m} ({', '.join(sorted(w))})" for m, w in sorted(missing.items()))
        raise EditionError(f"the edition would not ship modules that its code imports: {details}. "
                           "Lesson helpers belong in autograder/kernel/; regenerate stale notebooks with "
                           "`make release`.")
    return package, student_pins(imported, root)


def _write_project_files(dest: Path, root: Path, release: dict, package: dict, pins, first: str) -> None:
    packages = sorted(".".join(rel.parent.parts) for rel in package if rel.name == "__init__.py")
    values = {
        "version": course_version(root),
        "dependencies": ", ".join(f'"{name}"' for name in pins),
        "packages": ", ".join(f'"{p}"' for p in packages),
        "lessons": lessons_table(release),
        "first_lesson": first,
        "course_id": course_id(root),
    }
    (dest / "README.md").write_text(_fill((TEMPLATES / "README.md").read_text(), values))
    (dest / "pyproject.toml").write_text(_fill((TEMPLATES / "pyproject.toml.in").read_text(), values))
    shutil.copyfile(TEMPLATES / "Makefile", dest / "Makefile")
    shutil.copyfile(TEMPLATES / "gitignore", dest / ".gitignore")
    (dest / "requirements.txt").write_text(requirements_txt(pins))
    (dest / "environment.yml").write_text(environment_yml(pins))
    (dest / MARKER).write_text("Written by `python -m autograder.edition` of the PyTorch Essentials course.\n"
                               "Rebuilding it replaces everything in this folder except .git/.\n")


def commit(dest: Path, lesson_ids: list[str]) -> bool:
    """Commit the edition (``git init`` first if needed); ``False`` when nothing changed since the last commit."""
    def git(*args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=dest, capture_output=True, text=True, **kw)

    if not (dest / ".git").exists():
        git("init", "-q", check=True)
    git("add", "-A", check=True)
    has_head = git("rev-parse", "--verify", "-q", "HEAD").returncode == 0
    if has_head and git("diff", "--cached", "--quiet").returncode == 0:
        return False
    identity = []
    if not git("config", "user.email").stdout.strip():
        identity = ["-c", "user.name=PyTorch Essentials", "-c", "user.email=pytorch-essentials@localhost"]
    message = f"PyTorch Essentials, student edition: {', '.join(lesson_ids)}"
    result = subprocess.run(["git", *identity, "commit", "-q", "-m", message], cwd=dest, capture_output=True, text=True)
    if result.returncode:
        raise EditionError(f"git commit failed in {dest}:\n{result.stderr}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.edition", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", type=Path, help="the folder to write (new, empty, or an earlier edition)")
    parser.add_argument("--lesson", action="append", dest="lessons", metavar="ID",
                        help="ship only this lesson (repeatable; default: every lesson)")
    parser.add_argument("--git", action="store_true", help="commit the edition in DEST (git init if needed)")
    args = parser.parse_args(argv)
    try:
        dest = build(args.dest, args.lessons, git=args.git)
    except EditionError as exc:
        print(f"student edition: {exc}", file=sys.stderr)
        return 1
    files = sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file() and ".git" not in p.parts)
    print(f"student edition written to {dest}: {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
