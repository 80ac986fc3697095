"""The student edition (`python -m autograder.edition DEST`): all students need, nothing they must not see.

One edition (with its git commit) is built per module and scanned file by file, git objects
included. A copy in a scratch folder outside the course must then work on its own: `make lab`
serves headless; through the edition's own `make check`, the first lesson filled with the solutions' answers
passes every visible check, and an untouched notebook fails only in its test cells. The edition's
notebooks are the release byte for byte, and the round trip (test_autograde.py) shows every untouched
release failing only in its test cells, so `make check` runs one untouched notebook (the first lesson's),
enough to prove it reports one. Every solution passes its visible checks in the course (nbval of
``solutions/``, ``make test``); what the edition adds for each lesson is that it runs with nothing but the
edition's package importable, and the kernel code it runs is the course's, copied. So one filled lesson runs
(until issue 47, all nine did, one kernel each), and for every lesson each ``autograder`` import of its filled
notebook, and of each package module that loads, is run in the copy's environment (OBSERVE_IMPORTS: Python
resolves it there, statements inside functions included, which a run of the lesson reaches only when it calls
them); the exercises and points make check would list are read from the edition's test cells.
The copy runs on this venv (`VENV=...`, so nothing is installed) with PYTHONPATH pointing at the
copy and the course's editable install switched off, so nothing of the course can be imported.
Running the copy's notebooks is marked slow: `make test-quick` keeps the scans.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from test_lab import free_port, get_json

from autograder import course
from autograder.edition import build, contents, pins
from autograder.edition.errors import EditionError
from autograder.kernel import selfcheck
from autograder.kernel.vocabulary import protocol

import coursekit as kit
import kernel_tally

LESSONS = course.lessons()
ALL_LESSONS = course.lessons(narrowed=False)
TOP_LEVEL = {".git", ".gitignore", ".student-edition", "LICENSE", "LICENSE-CONTENT", "Makefile", "README.md",
             "autograder", "data", "environment.yml", "notebooks", "pyproject.toml", "requirements.txt"}
MARKERS = tuple(marker.lstrip("# ") for marker in protocol.MARKERS)
# a line of solution or hidden code this short may well occur elsewhere (`return x`, `else:`)
MIN_SECRET_LINE = 10
# this many consecutive lines of a solution or hidden test are a copy, however generic each line is
WINDOW = 4
# the kernel package names the reference file (protocol.py; hidden.py looks it up on the instructor's side)
NAME_ALLOWED = "autograder/kernel/"
MIN_LABEL = 16
# the course's editable install resolves `autograder.<anything>` to the course; switched off in the copy
SITECUSTOMIZE = '''import sys
sys.meta_path[:] = [f for f in sys.meta_path
                    if not ("__editable__" in getattr(f, "__module__", "") and "autograder" in f.__module__)]
'''
TIMINGS: dict[str, float] = {}


# ---------------------------------------------------------------- what must not ship

def _regions(source: str) -> dict[str, list[str]]:
    """Lines between the SOLUTION markers and between the HIDDEN TESTS markers of one cell."""
    found = {"SOLUTION": [], "HIDDEN TESTS": []}
    inside = None
    for line in source.splitlines():
        marker = kit.MARKER_LINE.match(line)
        if marker:
            inside = marker[2] if marker[1] == "BEGIN" else None
        elif inside:
            found[inside].append(line.strip())
    return found


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _long_floats(value) -> list[float]:
    """Floats in an encoded observation with at least 8 significant digits (too specific to occur by chance)."""
    if isinstance(value, float):
        digits = re.sub(r"[^0-9]", "", repr(value).split("e")[0]).lstrip("0")
        return [value] if len(digits) >= 8 else []
    if isinstance(value, dict):
        return [f for v in value.values() for f in _long_floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _long_floats(v)]
    return []


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _windows(lines: list[str]) -> set[str]:
    return {"\n".join(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}


def public_material() -> dict[str, set[str]]:
    """What students see anyway: the lines, runs of lines and text of every release notebook;
    the lines of the course's kernel-side package (where generic code such as ``optimizer.step()`` is fine)."""
    lines, windows, texts_ = set(), set(), []
    for path in (kit.REPO / "notebooks").glob("*/*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            lines |= set(_lines(cell.source))
            windows |= _windows(_lines(cell.source))
            texts_.append(cell.source)
    for path in (kit.REPO / "autograder" / "kernel").rglob("*.py"):
        lines |= set(_lines(path.read_text()))
    return {"lines": lines, "windows": windows, "text": "\n".join(texts_)}


def secrets() -> dict[str, set[str]]:
    """What must not reach the edition, by kind, from every lesson (not just the shipped ones).

    Single lines of solutions and hidden tests count unless students see them anyway; runs of
    WINDOW consecutive lines count unless a release notebook shows them, however generic each line
    is (a helper module that repeats a solution's loop is a copy of it).
    """
    public = public_material()
    found = {"solution line": set(), "hidden test line": set(), "solution code": set(), "hidden test code": set(),
             "reference label": set(), "reference value": set()}
    for lesson in ALL_LESSONS:
        for cell in nbformat.read(course.solution_path(lesson), as_version=4).cells:
            regions = _regions(cell.source)
            for name, key in (("SOLUTION", "solution"), ("HIDDEN TESTS", "hidden test")):
                lines = [line for line in regions[name] if line]
                found[f"{key} line"] |= {line for line in lines
                                         if len(line) >= MIN_SECRET_LINE and line not in public["lines"]}
                found[f"{key} code"] |= _windows(lines) - public["windows"]
        reference = course.solution_path(lesson).parent / course.REFERENCE_FILE
        if reference.exists():
            for observations in json.loads(reference.read_text())["cells"].values():
                for obs in observations:
                    if len(obs["label"]) >= MIN_LABEL and obs["label"] not in public["text"]:
                        found["reference label"].add(obs["label"])
                    found["reference value"] |= {repr(v) for v in _long_floats(obs["value"])}
    return found


def forbidden_files() -> dict[str, str]:
    """sha256 -> course path of every file that must not ship: instructor tools, solutions, tests."""
    paths = [*(kit.REPO / "autograder" / "grading").rglob("*.py"),
             *(kit.REPO / "autograder" / "edition").rglob("*.py"),
             *(kit.REPO / "autograder" / name for name in ("course.py", "__main__.py")),
             *(p for p in (kit.REPO / "solutions").rglob("*") if p.is_file()),
             *(p for p in (kit.REPO / "tests").rglob("*") if p.is_file() and "__pycache__" not in p.parts)]
    return {hashlib.sha256(p.read_bytes()).hexdigest(): str(p.relative_to(kit.REPO)) for p in paths}


def texts(data: bytes) -> list[str]:
    """The bytes as text; for a notebook also each cell's source (JSON escapes its quotes and newlines)."""
    text = data.decode("utf-8", errors="replace")
    out = [text]
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            return out
        out.append("\n".join(_strings(doc)))
        out += ["".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                for c in doc.get("cells", []) if isinstance(c, dict)]
    return out


FLOAT = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def leaks(name: str, data: bytes, secret: dict[str, set[str]], forbidden: dict[str, str]) -> list[str]:
    found = []
    digest = hashlib.sha256(data).hexdigest()
    if digest in forbidden and data.strip():
        found.append(f"{name} is a copy of the course's {forbidden[digest]}")
    for text in texts(data):
        found += [f"{name}: hidden-test or solution marker '{m}'" for m in MARKERS if m in text]
        if course.REFERENCE_FILE in text and not name.startswith(NAME_ALLOWED):
            found.append(f"{name}: names {course.REFERENCE_FILE}")
        lines = _lines(text)
        present = {
            "solution line": set(lines), "hidden test line": set(lines),
            "solution code": _windows(lines), "hidden test code": _windows(lines),
            "reference value": {m.lstrip("-") for m in FLOAT.findall(text)},
        }
        for kind, strings in present.items():
            found += [f"{name}: {kind} {s!r}" for s in strings & secret[kind]]
        found += [f"{name}: reference label {s!r}" for s in secret["reference label"] if s in text]
    return sorted(set(found))


# ---------------------------------------------------------------- the edition and its copy

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The edition as `python -m autograder.edition DEST --git` writes it (run in this process: no second start-up)."""
    dest = tmp_path_factory.mktemp("edition") / "pytorch-essentials-student"
    args = [a for lesson in LESSONS for a in ("--lesson", lesson)]
    start = time.monotonic()
    assert build.main([str(dest), "--git", *args]) == 0
    TIMINGS["build"] = time.monotonic() - start
    return dest


# the one untouched notebook and the one filled notebook make check runs (the module docstring says why one each)
UNTOUCHED = LESSONS[0]
FILLED = LESSONS[0]


def edition_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts)


@pytest.fixture(scope="module")
def scratch(built, tmp_path_factory):
    """A copy of the edition outside the course, the environment to run it in, a pristine copy of its notebooks."""
    root = tmp_path_factory.mktemp("scratch")
    assert kit.REPO not in root.parents
    copy = root / "student"
    shutil.copytree(built, copy, ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(copy / "notebooks" / UNTOUCHED, root / "pristine" / UNTOUCHED)
    isolate = root / "isolate"
    isolate.mkdir()
    (isolate / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTE_")}
    env.update(PYTHONPATH=os.pathsep.join([str(copy), str(isolate)]), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               PYTHONDONTWRITEBYTECODE="1")
    return {"root": root, "copy": copy, "pristine": root / "pristine", "env": env, "venv": sys.prefix}


@pytest.fixture(scope="module")
def lab(scratch):
    """`make lab` in the copy, started early so that it boots while the notebooks run."""
    port, token = free_port(), "pte-edition-token"
    args = f"--no-browser --port {port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    log_path = scratch["root"] / "lab.log"
    log = open(log_path, "w+")
    proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"VENV={scratch['venv']}", f"LAB_ARGS={args}"],
                            cwd=scratch["copy"], stdout=log, stderr=subprocess.STDOUT, env=scratch["env"],
                            start_new_session=True)
    yield {"proc": proc, "port": port, "token": token, "log": log_path}
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    log.close()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture(scope="module")
def filled(scratch):
    """Every lesson of the copy filled with the solutions' answers: lesson -> its notebook."""
    notebooks = {}
    for lesson in LESSONS:
        path = notebooks[lesson] = scratch["copy"] / "notebooks" / lesson / f"{lesson}.ipynb"
        solution = nbformat.read(course.solution_path(lesson), as_version=4)
        nbformat.write(kit.fill_answers(nbformat.read(path, as_version=4), solution), path)
    return notebooks


@pytest.fixture(scope="module")
def checked(scratch, filled, lab):
    """One `make check` over the untouched notebook (../pristine) and the one of FILLED (the docstring says why one)."""
    copy = scratch["copy"]
    report = scratch["root"] / "check.json"
    jobs = max(2, min(4, os.cpu_count() or 2))
    start, cpu = time.monotonic(), _children_cpu()
    notebooks = f"{filled[FILLED].relative_to(copy)} {scratch['pristine']}"
    proc = subprocess.run(["make", "--no-print-directory", "check", f"VENV={scratch['venv']}",
                           f"NOTEBOOKS={notebooks}", f"CHECK_ARGS=--jobs {jobs} --json {report}"],
                          cwd=copy, env=scratch["env"], capture_output=True, text=True, timeout=1200)
    TIMINGS["make check"] = time.monotonic() - start
    TIMINGS["make check, CPU s"] = _children_cpu() - cpu
    assert report.exists(), proc.stdout + proc.stderr
    reports = json.loads(report.read_text())["notebooks"]
    for _ in reports:   # a kernel per notebook; the copy's own PYTHONPATH has no tally, so it is counted here
        kernel_tally.tally.record("cold")
    TIMINGS["notebooks (s)"] = {r["notebook"]: r["seconds"] for r in reports}
    by_path = {(copy / r["notebook"]).resolve(): r for r in reports}
    assert len(by_path) == 2, reports
    return {"proc": proc, "filled": {FILLED: by_path[filled[FILLED].resolve()]},
            "untouched": {UNTOUCHED: by_path[(scratch["pristine"] / UNTOUCHED / f"{UNTOUCHED}.ipynb").resolve()]}}


# Run in the copy's environment: every `autograder` import statement of the notebooks given, and of each module of
# the package that they load (statements inside functions included), the way Python resolves it there.
OBSERVE_IMPORTS = '''
import ast, importlib, json, sys
from pathlib import Path

import nbformat

copy = Path(sys.argv[1]).resolve()


def parse(source):
    return ast.parse("\\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()))


def statements(tree, package):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            yield from ((base, alias.name) for alias in node.names)


def run(module, name):
    found = importlib.import_module(module)
    if name not in (None, "*") and not hasattr(found, name):
        importlib.import_module(f"{module}.{name}")


found, seen = {}, set()
for path in sys.argv[2:]:
    entry = found.setdefault(Path(path).stem, {"failed": [], "loaded": [], "ran": []})
    todo = [(parse(c.source), "") for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    while todo:
        tree, package = todo.pop()
        for module, name in statements(tree, package):
            if module.split(".")[0] == "autograder":
                entry["ran"].append(f"{module} import {name}")
                try:
                    run(module, name)
                except Exception as exc:
                    entry["failed"].append(f"{module} import {name}: {type(exc).__name__}: {exc}")
        for loaded, module in sorted(sys.modules.items()):
            if loaded.split(".")[0] == "autograder" and loaded not in seen:
                seen.add(loaded)
                entry["loaded"].append(loaded)
                file = Path(module.__file__).resolve()
                if copy not in file.parents:
                    entry["failed"].append(f"{loaded} loaded from {file}")
                    continue
                todo.append((parse(file.read_text()), loaded if file.name == "__init__.py" else
                             loaded.rpartition(".")[0]))
print(json.dumps(found))
'''


@pytest.fixture(scope="module")
def imports_observed(scratch, filled):
    """What OBSERVE_IMPORTS found for each filled notebook: lesson -> statements that failed, modules it loaded first,
    statements it ran."""
    done = subprocess.run([sys.executable, "-c", OBSERVE_IMPORTS, str(scratch["copy"]), *map(str, filled.values())],
                          cwd=scratch["root"], env=scratch["env"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


# ---------------------------------------------------------------- what ships, what does not

def kernel_modules(root: Path) -> set[str]:
    """Each module of the kernel package, dotted below it (a subpackage's ``__init__`` as ``pkg.__init__``)."""
    kernel = root / "autograder" / "kernel"
    return {".".join(p.relative_to(kernel).with_suffix("").parts) for p in kernel.rglob("*.py")
            if "__pycache__" not in p.parts}


def reachable_modules(root: Path) -> set[str]:
    """Kernel modules the edition's notebooks and `make check` import, directly or through each other."""
    def imported(text: str, package: str = "") -> set[str]:
        names = set(re.findall(r"autograder\.kernel\.([\w.]*\w)", text))
        groups = re.findall(r"from autograder\.kernel((?:\.\w+)*) import \(([\w\s,]+)\)", text)
        groups += re.findall(r"from autograder\.kernel((?:\.\w+)*) import ([\w ,]+?)\s*(?:#.*)?$", text, re.M)
        for base, group in groups:
            names |= {base[1:] + "." * bool(base) + n.strip().split(" as ")[0] for n in group.split(",") if n.strip()}
        here = package + "." * bool(package)
        relative = re.findall(r"from \.(\w+) import", text) + re.findall(r"from \. import (\w+)", text)
        names |= {here + n for n in relative}
        # a dotted name brings each package above it (its __init__) and may end in a name defined in a module
        return {".".join(n.split(".")[:i]) + tail for n in names for i in range(1, n.count(".") + 2)
                for tail in ("", ".__init__")}

    available = kernel_modules(root)
    todo = {"__init__", "selfcheck"}
    for path in (root / "notebooks").glob("*/*.ipynb"):
        todo |= imported("\n".join(c.source for c in nbformat.read(path, as_version=4).cells))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in available:
            continue
        seen.add(name)
        package = name.rpartition(".")[0]
        todo |= imported((root / "autograder" / "kernel" / f"{name.replace('.', '/')}.py").read_text(), package)
    return seen


def test_edition_holds_what_students_need(built):
    assert {p.name for p in built.iterdir()} == TOP_LEVEL
    for name in contents.LICENCE_FILES:
        assert (built / name).read_bytes() == (kit.REPO / name).read_bytes(), f"{name} must ship unchanged"
        assert f"`{name}`" in (built / "README.md").read_text(), f"the student README must name {name}"
    assert sorted(p.name for p in (built / "notebooks").iterdir()) == LESSONS
    for lesson in LESSONS:
        assert (built / "notebooks" / lesson / f"{lesson}.ipynb").is_file()
    assert sorted(p.name for p in (built / "autograder").iterdir()) == ["__init__.py", "kernel"]
    assert kernel_modules(built) == reachable_modules(built), "ship what the lessons and make check import, no more"
    assert {"__init__", "checks", "selfcheck"} <= kernel_modules(built)
    for path in (built / "autograder" / "kernel").rglob("*.py"):   # what the lessons run is the course's code
        where = path.relative_to(built)
        assert path.read_bytes() == (kit.REPO / where).read_bytes(), f"{where} differs from the course's"
    assert (built / "data" / "README.md").is_file()
    data = {p.name for p in (kit.REPO / "data").iterdir() if p.is_file() and p.suffix != ".py"}
    assert data <= {p.name for p in (built / "data").iterdir()}
    readme = (built / "README.md").read_text()
    for needed in ("make lab", "make check", "nbgrader submit", "upload", "hidden tests", "Validate"):
        assert needed in readme, f"the student README does not mention {needed}"
    for lesson in LESSONS:
        assert f"notebooks/{lesson}/{lesson}.ipynb" in readme


def test_edition_leaves_out_instructor_material(built):
    names = {str(p.relative_to(built)) for p in edition_files(built)}
    for part in ("solutions", "tests", "grading", "gradebook.db", "submitted", "autograded", "feedback",
                 "exchange", ".venv", "__pycache__", ".ipynb_checkpoints", "nbgrader_config.py", "bench", ".ci"):
        assert not any(part in Path(n).parts for n in names), f"{part} shipped"
    for name in ("autograder/course.py", "autograder/__main__.py", "data/build_digits.py"):
        assert name not in names
    assert not any(n.startswith("autograder/edition/") for n in names), "the edition's builder shipped"
    assert not any(Path(n).name == course.REFERENCE_FILE for n in names)
    left_out = [p.name for p in (kit.REPO / "data").iterdir() if p.is_file() and p.name not in
                {q.name for q in (built / "data").iterdir()}]
    for path in edition_files(built):   # what students read tells them of nothing that is not there
        if path.suffix == ".md" or path.name == "Makefile":
            for name in left_out:
                assert name not in path.read_text(), f"{path.name} refers to {name}, which does not ship"


def test_no_file_leaks_solutions_hidden_tests_or_reference(built):
    secret, forbidden = secrets(), forbidden_files()
    assert secret["solution line"] and secret["hidden test line"], "found nothing to look for"
    found = []
    for path in edition_files(built):
        found += leaks(str(path.relative_to(built)), path.read_bytes(), secret, forbidden)
    assert not found, "\n".join(found)


def test_git_history_holds_only_the_edition(built):
    def git(*args):
        return subprocess.run(["git", *args], cwd=built, capture_output=True, check=True).stdout

    assert git("status", "--porcelain") == b"", "the edition's commit does not match its files"
    paths = {}   # blob -> a path it had in some commit
    for commit in git("rev-list", "--all").decode().split():
        for entry in git("ls-tree", "-r", "-z", commit).decode().split("\0"):
            if entry:
                meta, path = entry.split("\t", 1)
                paths.setdefault(meta.split()[2], path)
    assert set(paths.values()) == {str(p.relative_to(built)) for p in edition_files(built)}
    secret, forbidden = secrets(), forbidden_files()
    listing = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)").decode()
    blobs = [line.split()[0] for line in listing.splitlines() if line.endswith(" blob")]
    found = []
    for blob in blobs:   # every blob in the repository, reachable or not
        found += leaks(paths.get(blob, f"git blob {blob}"), git("cat-file", "blob", blob), secret, forbidden)
    assert not found, "\n".join(found)


def test_pins_are_the_course_pins(built):
    course_pins = pins.course_pins()
    student = {}
    for line in (built / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            student[name] = version
    assert set(pins.STUDENT_PACKAGES) <= set(student)
    assert all(course_pins[name] == version for name, version in student.items()), "a pin drifted from the course's"
    env = (built / "environment.yml").read_text()
    conda = dict(re.findall(r"^  - ([A-Za-z0-9_.\-]+)=([^\s#]+)", env, re.M))
    assert conda.pop("python") == "3.11"
    assert {pins.CONDA_NAMES.get(n, n): v for n, v in student.items()} == conda
    assert not {"pytest", "nbval", "psycopg2-binary", "scikit-learn", "psutil"} & set(student)


def test_dest_must_be_new_empty_or_an_edition(tmp_path):
    """A folder of someone else's is never overwritten; an earlier edition is refreshed, its history kept."""
    other = tmp_path / "somebody-elses"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(EditionError, match="not empty"):
        build.build(other, LESSONS[:1])
    assert (other / "keep.txt").read_text() == "mine"
    with pytest.raises(EditionError, match="outside the course"):
        build.build(kit.REPO / "notebooks" / "edition", LESSONS[:1])
    assert not (kit.REPO / "notebooks" / "edition").exists()

    again = tmp_path / "again"
    build.build(again, LESSONS[:1], git=True)
    assert sorted(p.name for p in (again / "notebooks").iterdir()) == LESSONS[:1]
    assert kernel_modules(again) == reachable_modules(again), "an edition of some lessons carries only their helpers"
    (again / "stray.txt").write_text("left over")
    build.build(again, LESSONS[:1], git=True)
    assert not (again / "stray.txt").exists()
    log = subprocess.run(["git", "log", "--format=%s"], cwd=again, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1, "an unchanged rebuild makes no new commit"


# ---------------------------------------------------------------- the copy works on its own

def test_copy_imports_only_itself(scratch):
    """In the copy's environment `autograder` is the copy's own package, and the instructor's tools are absent."""
    code = ("import importlib.util as u\n"
            "print(u.find_spec('autograder.kernel.checks').origin)\n"
            "print([m for m in ('autograder.grading', 'autograder.course', 'autograder.edition') if u.find_spec(m)])\n"
            "if u.find_spec('autograder.kernel.paths'):\n"
            "    import autograder.kernel.paths as p; print(p.data_dir())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=scratch["root"], env=scratch["env"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[:2] == [str(scratch["copy"] / "autograder" / "kernel" / "checks.py"), "[]"]
    assert out[2:] in ([], [str(scratch["copy"] / "data")])


def test_edition_notebooks_are_the_release(built):
    """What the round trip proves of notebooks/ holds for the edition's copies (one untouched run suffices)."""
    for lesson in LESSONS:
        where = f"notebooks/{lesson}/{lesson}.ipynb"
        assert (built / where).read_bytes() == (kit.REPO / where).read_bytes(), f"{where} differs from the release"


@pytest.mark.slow
def test_untouched_notebook_fails_only_in_test_cells(checked):
    lesson = UNTOUCHED
    report = checked["untouched"][lesson]
    assert report["status"] == "ran", report["problem"]
    assert not report["other_errors"], f"{lesson}: cells other than test cells raised: {report['other_errors']}"
    assert report["checks"], f"{lesson}: no test cell found"
    passing = [c["grade_id"] for c in report["checks"] if c["passed"]]
    assert not passing, f"{lesson}: make check says an untouched stub passes {passing}"


@pytest.mark.slow
def test_solutions_pass_every_visible_check(checked):
    report = checked["filled"][FILLED]
    assert report["status"] == "ran", report["problem"]
    failed = {c["grade_id"]: c["message"] for c in report["checks"] if not c["passed"]}
    assert not failed, f"{FILLED}: the solutions' answers fail visible checks: {failed}"
    assert not report["other_errors"], report["other_errors"]
    solution = kit.exercises(nbformat.read(course.solution_path(FILLED), as_version=4))
    assert {c["exercise"]: c["points"] for c in report["checks"]} == {n: e["points"] for n, e in solution.items()}


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS)
def test_every_lesson_imports_only_the_edition(imports_observed, filled, lesson):
    """What the edition changes for each lesson, observed without running it (until issue 47 all nine ran in make
    check; FILLED still does, and nbval of solutions/ runs every solution's visible checks on the same kernel code):
    every ``autograder`` import of the filled lesson (answers and test cells), and of each module that loads,
    resolves in the copy's environment to the copy's package; and make check's table would list the solution's
    exercises and points (read from the edition's test cells as selfcheck.check_notebook reads them)."""
    observed = imports_observed[lesson]
    assert not observed["failed"], f"{lesson} in the edition: {observed['failed']}"
    assert observed["ran"], f"{lesson}: no autograder import found to run"
    cells = [c for c in nbformat.read(filled[lesson], as_version=4).cells if protocol.is_test_cell(c)]
    listed = {protocol.exercise_of(str(protocol.nbgrader_meta(c)["grade_id"])): protocol.nbgrader_meta(c)["points"]
              for c in cells}
    solution = kit.exercises(nbformat.read(course.solution_path(lesson), as_version=4))
    assert listed == {n: e["points"] for n, e in solution.items()}, lesson


@pytest.mark.slow
def test_make_check_prints_the_table(checked):
    out = checked["proc"].stdout
    assert checked["proc"].returncode != 0, "untouched notebooks fail, so make check must too"
    assert "Hidden tests run when your work is graded" in out
    for check in checked["filled"][FILLED]["checks"]:
        assert re.search(rf"^{FILLED}\s+{check['exercise']}\s+{check['points']}\s+passed$", out, re.M), out
    print(f"\nstudent edition timings: {json.dumps(TIMINGS, indent=1)}")


@pytest.mark.slow
def test_make_lab_serves_headless(lab):
    proc, port, token = lab["proc"], lab["port"], lab["token"]
    status = None
    for _ in range(240):
        try:
            status = get_json(f"http://127.0.0.1:{port}/api/status?token={token}")
            break
        except OSError:
            assert proc.poll() is None, f"make lab exited early:\n{lab['log'].read_text()}"
            time.sleep(0.5)
    assert status is not None and "started" in status, lab["log"].read_text()
    listing = get_json(f"http://127.0.0.1:{port}/api/contents?token={token}")
    assert sorted(item["name"] for item in listing["content"]) == LESSONS
    lesson = LESSONS[0]
    item = get_json(f"http://127.0.0.1:{port}/api/contents/{lesson}/{lesson}.ipynb?content=0&token={token}")
    assert item["type"] == "notebook"


# ---------------------------------------------------------------- make check itself

def _cell(source, grade_id=None, points=0, tags=()):
    cell = nbformat.v4.new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade": grade_id.startswith("test_"), "grade_id": grade_id, "locked": True,
                                     "points": points, "schema_version": 3, "solution": False, "task": False}
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def test_selfcheck_reports_visible_checks_only(tmp_path):
    """Passing, failing and hidden parts; errors outside test cells; cells meant to raise; the exit status."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("x = 1"),
        _cell("undefined_name", grade_id="ex_broken"),
        _cell('"""visible passes, hidden would fail"""\nprint("ok")\n### BEGIN HIDDEN TESTS\n'
              'raise RuntimeError("the hidden part ran")\n### END HIDDEN TESTS', grade_id="test_first", points=2),
        _cell("1 / 0", tags=("raises-exception",)),
        _cell('raise AssertionError("x is wrong\\nLikely mistake: a guess")', grade_id="test_second", points=3),
    ]
    folder = tmp_path / "notebooks" / "98_mixed"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "98_mixed.ipynb")
    good = tmp_path / "notebooks" / "99_good"
    good.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[_cell("print(1)", grade_id="test_only", points=1)]),
                   good / "99_good.ipynb")
    before = (folder / "98_mixed.ipynb").read_bytes()

    found = selfcheck.find_notebooks([str(tmp_path / "notebooks")])
    assert [p.name for p in found] == ["98_mixed.ipynb", "99_good.ipynb"]
    reports = selfcheck.run(found[:1], jobs=1)   # 99_good runs once, below (it ran twice until issue 47)
    mixed, = reports
    assert [(c["exercise"], c["points"], c["passed"]) for c in mixed["checks"]] == [
        ("first", 2, True), ("second", 3, False)]
    assert mixed["checks"][1]["message"] == "AssertionError: x is wrong\nLikely mistake: a guess"
    assert [(e["grade_id"], e["message"]) for e in mixed["other_errors"]] == [
        ("ex_broken", "NameError: name 'undefined_name' is not defined")]
    assert (folder / "98_mixed.ipynb").read_bytes() == before, "make check must not change the notebook"
    text = selfcheck.format_report(reports)
    assert re.search(r"^98_mixed\s+second\s+3\s+FAILED: AssertionError: x is wrong$", text, re.M), text
    assert "Likely mistake: a guess" in text and "cell 1 (ex_broken)" in text and selfcheck.NOTE in text
    assert selfcheck.main([str(good), "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["notebooks"][0]["checks"][0]["passed"] is True
