"""Building the student edition: the destination folder made ready, the course's files copied, the generated
ones written, the result committed with git; and the command line (``python -m autograder.edition``)."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from .. import course
from . import contents, imports, render
from .errors import EditionError
from .pins import student_pins


def prepare_dest(dest: Path, root: Path) -> None:
    """Make ``dest`` ready: new or empty, or an earlier edition emptied of everything but ``.git/``."""
    root = root.resolve()
    if dest == root or root in dest.parents or dest in root.parents:
        raise EditionError(f"{dest}: the edition must go outside the course folder {root}")
    if dest.exists() and not dest.is_dir():
        raise EditionError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        if not (dest / render.MARKER).is_file():
            raise EditionError(f"{dest} is not empty and holds no earlier student edition ({render.MARKER}): "
                               "choose a new or empty folder")
        for entry in dest.iterdir():
            if entry.name == ".git":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    dest.mkdir(parents=True, exist_ok=True)


def shipped_package(root: Path, lesson_ids: list[str], copies: dict[Path, Path]) -> tuple[dict, dict]:
    """The kernel modules the shipped notebooks and `make check` need (``copies`` loses the others) and the
    students' pins for what that code imports."""
    notebook_code = {f"notebooks/{lesson}": imports.code_of_notebook(root / "notebooks" / lesson / f"{lesson}.ipynb")
                     for lesson in lesson_ids}
    package = {rel: src.read_text() for rel, src in copies.items()
               if rel.suffix == ".py" and rel.parts[0] == "autograder"}
    package[Path("autograder/__init__.py")] = render.PACKAGE_INIT
    kept, imported = imports.shipped_package(package, notebook_code)
    for rel in package.keys() - kept.keys():
        copies.pop(rel, None)
    return kept, student_pins(imported, root)


def build(dest: Path | str, lesson_ids: list[str] | None = None, root: Path = course.REPO_ROOT,
          git: bool = False) -> Path:
    """Write the student edition into ``dest`` (see the package docstring); returns ``dest``."""
    root = Path(root)
    dest = Path(dest).resolve()
    known = course.lessons(root, narrowed=False)
    lesson_ids = list(lesson_ids) if lesson_ids else known
    unknown = [lesson for lesson in lesson_ids if lesson not in known]
    if unknown:
        raise EditionError(f"unknown lesson(s): {', '.join(unknown)}; known: {', '.join(known)}")
    release = contents.read_release(root, lesson_ids)
    copies = contents.course_copies(root, lesson_ids)
    package, pins = shipped_package(root, lesson_ids, copies)
    prepare_dest(dest, root)
    for rel, src in sorted(copies.items()):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == Path("data/README.md"):
            target.write_text(render.data_readme(src.read_text()))
        else:
            shutil.copyfile(src, target)
    (dest / "autograder" / "__init__.py").write_text(render.PACKAGE_INIT)
    render.write_project_files(dest, root, release, package, pins, lesson_ids[0])
    if git and not commit(dest, lesson_ids):
        print(f"{dest}: unchanged since its last commit")
    return dest


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
    from .. import edition

    parser = argparse.ArgumentParser(prog="python -m autograder.edition", description=edition.__doc__,
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
