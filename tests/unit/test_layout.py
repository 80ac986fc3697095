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
LIMIT = 450
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
