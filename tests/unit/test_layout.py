"""No module of ``autograder/`` grows past LIMIT lines, and no function past FUNCTION_LIMIT: past that, a module
(a function) is usually several things, and it is split into what it holds (as ``kernel/checks.py`` became
``checks`` and ``hidden``, ``kernel/data.py`` became ``digits``, ``workers`` and ``data_loading_checks``, and
``observations._compare`` one comparison per kind of value).

The modules and functions over the limit today are listed with a reason and their size now, which they may not
pass; an entry whose module or function is gone or back under the limit fails too, so the lists only shrink.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400
FUNCTION_LIMIT = 70

# module -> (its lines when listed, the most it may have; why it is allowed past LIMIT for now)
EXCEPTIONS: dict[str, tuple[int, str]] = {}


def module_lengths(root: Path = ROOT) -> dict[str, int]:
    """Every Python module under ``root/autograder``, relative to ``root``, with its number of lines."""
    return {path.relative_to(root).as_posix(): len(path.read_text().splitlines())
            for path in sorted((root / "autograder").rglob("*.py")) if "__pycache__" not in path.parts}


def test_no_module_grows_past_the_limit():
    lengths = module_lengths()
    assert "autograder/kernel/checks.py" in lengths   # the scan sees the package
    too_long = {name: lines for name, lines in lengths.items()
                if lines > EXCEPTIONS.get(name, (LIMIT, ""))[0]}
    assert not too_long, (
        f"modules longer than {LIMIT} lines (or than their listed size): {too_long}. A module that long is usually "
        "several things: split it into what it holds, one module each, with a docstring line saying what it is.")


def test_every_exception_is_still_needed():
    lengths = module_lengths()
    stale = {name: lengths.get(name) for name in EXCEPTIONS if lengths.get(name, 0) <= LIMIT}
    assert not stale, (f"listed as too long but gone or back under {LIMIT} lines: {stale}; remove them from "
                       "EXCEPTIONS in tests/unit/test_layout.py")


# "module:qualified name" -> (its lines when listed, the most it may have; why it is allowed past FUNCTION_LIMIT)
FUNCTION_EXCEPTIONS: dict[str, tuple[int, str]] = {}


def function_lengths(root: Path = ROOT) -> dict[str, int]:
    """Every function and method under ``root/autograder`` (nested ones too), as ``module:Class.name``, with its
    lines from ``def`` to its last line (``end_lineno - lineno + 1``)."""
    lengths = {}

    def visit(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lengths[f"{module}:{name}"] = child.end_lineno - child.lineno + 1
                name += "."
            visit(child, module, name)

    for path in sorted((root / "autograder").rglob("*.py")):
        if "__pycache__" not in path.parts:
            visit(ast.parse(path.read_text()), path.relative_to(root).as_posix(), "")
    return lengths


def test_no_function_grows_past_the_limit():
    lengths = function_lengths()
    assert "autograder/kernel/vocabulary/observations.py:compare" in lengths   # the scan sees the package
    too_long = {name: lines for name, lines in lengths.items()
                if lines > FUNCTION_EXCEPTIONS.get(name, (FUNCTION_LIMIT, ""))[0]}
    assert not too_long, (
        f"functions longer than {FUNCTION_LIMIT} lines (or than their listed size): {too_long}. A function that "
        "long is usually several steps: give each a function of its own, with a docstring line saying what it does.")


def test_every_function_exception_is_still_needed():
    lengths = function_lengths()
    stale = {name: lengths.get(name) for name in FUNCTION_EXCEPTIONS if lengths.get(name, 0) <= FUNCTION_LIMIT}
    assert not stale, (f"listed as too long but gone or back under {FUNCTION_LIMIT} lines: {stale}; remove them "
                       "from FUNCTION_EXCEPTIONS in tests/unit/test_layout.py")


def test_a_long_function_is_found(tmp_path):
    """The scan can fail: a method of 71 lines in a nested class is over the limit, one of 70 lines is not."""
    def method(name: str, lines: int) -> str:
        return f"      def {name}(self):\n" + "".join(f"        x{i} = {i}\n" for i in range(lines - 1))

    (tmp_path / "autograder").mkdir()
    (tmp_path / "autograder" / "planted.py").write_text("class A:\n    class B:\n" + method("long", 71)
                                                         + method("fits", 70))
    lengths = function_lengths(tmp_path)
    assert lengths == {"autograder/planted.py:A.B.long": 71, "autograder/planted.py:A.B.fits": 70}
    assert [name for name, lines in lengths.items() if lines > FUNCTION_LIMIT] == ["autograder/planted.py:A.B.long"]


# --- kernel/: the checking machinery, the vocabulary, and the lesson instruments in kernel/lessons/
# the modules directly in autograder/kernel/: the checking machinery (and the package's __init__)
KERNEL_MACHINERY = {
    "__init__", "checks", "hidden", "notebook_check", "outputcap", "selfcheck", "nodebugger", "predictions",
    "paths", "private_apis"}
KERNEL_PACKAGES = {"vocabulary", "lessons"}   # the shared vocabulary, the lesson instruments


def _kernel_modules_imported(source: str) -> set[str]:
    """The modules directly below ``autograder.kernel`` that a code cell imports (``autograder.kernel.X...`` or
    ``from autograder.kernel import X``: X), read with ``ast`` (IPython's magic lines left out)."""
    kept = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tree = ast.parse(kept)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "autograder.kernel":
            names |= {f"autograder.kernel.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {name.split(".")[2] for name in names if name.startswith("autograder.kernel.")}


def kernel_layout_problems(root: Path = ROOT) -> list[str]:
    """Modules directly in ``autograder/kernel/`` that are not machinery, subpackages other than the vocabulary
    and the lessons, machinery inside ``lessons/``, and kernel modules that the lessons' notebooks import from
    elsewhere than the machinery, the vocabulary or ``lessons/``."""
    import nbformat

    kernel = root / "autograder" / "kernel"
    found = [f"autograder/kernel/{p.name}: a lesson instrument? it belongs in autograder/kernel/lessons/"
             for p in sorted(kernel.glob("*.py")) if p.stem not in KERNEL_MACHINERY]
    found += [f"autograder/kernel/{p.name}/: not a package of kernel/" for p in sorted(kernel.iterdir())
              if p.is_dir() and p.name not in KERNEL_PACKAGES and p.name != "__pycache__"]
    found += [f"autograder/kernel/lessons/{p.name}: machinery belongs in autograder/kernel/"
              for p in sorted((kernel / "lessons").glob("*.py")) if p.stem in KERNEL_MACHINERY - {"__init__"}]
    for path in sorted((root / "solutions").glob("*/*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        imported = set().union(*(_kernel_modules_imported(c.source) for c in cells if c.cell_type == "code"))
        found += [f"{path.relative_to(root)}: imports autograder.kernel.{module}, not under lessons/"
                  for module in sorted(imported - KERNEL_MACHINERY - KERNEL_PACKAGES)]
    return found


def test_kernel_holds_the_machinery_and_lessons_the_instruments():
    assert (ROOT / "autograder" / "kernel" / "lessons" / "__init__.py").is_file()
    assert (ROOT / "autograder" / "kernel" / "checks.py").is_file()   # the scan sees the package
    found = kernel_layout_problems()
    assert not found, ("autograder/kernel/ holds the checking machinery (KERNEL_MACHINERY) and the vocabulary; "
                       "each lesson's instruments live in autograder/kernel/lessons/:\n" + "\n".join(found))


def test_a_misplaced_kernel_module_is_caught(tmp_path):
    """The check can fail: an instrument left in kernel/, machinery in lessons/, a notebook importing either."""
    import nbformat

    kernel = tmp_path / "autograder" / "kernel"
    (kernel / "lessons").mkdir(parents=True)
    for name in ("__init__.py", "checks.py", "sundial.py", "lessons/__init__.py", "lessons/hidden.py",
                 "lessons/amp.py"):
        (kernel / name).write_text("")
    lesson = tmp_path / "solutions" / "04_x"
    lesson.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from autograder.kernel import checks\nfrom autograder.kernel.sundial import shadow\n"
        "from autograder.kernel.lessons.amp import x\nfrom autograder.kernel.gone import y")])
    nbformat.write(nb, lesson / "04_x.ipynb")
    assert kernel_layout_problems(tmp_path) == [
        "autograder/kernel/sundial.py: a lesson instrument? it belongs in autograder/kernel/lessons/",
        "autograder/kernel/lessons/hidden.py: machinery belongs in autograder/kernel/",
        "solutions/04_x/04_x.ipynb: imports autograder.kernel.gone, not under lessons/",
        "solutions/04_x/04_x.ipynb: imports autograder.kernel.sundial, not under lessons/"]
