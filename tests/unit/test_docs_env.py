"""docs/grading.md's table of environment variables names every variable the course's code reads or sets: the
package (``autograder/``), ``nbgrader_config.py`` and the Slurm recipe (``deploy/slurm``). A variable added to
the code without a row fails here, with its name and where it is used."""
from __future__ import annotations

import ast
import re

from autograder import course

ROOT = course.REPO_ROOT
OURS = re.compile(r"PTE_[A-Z0-9_]*[A-Z0-9]")


def _is_environ(node) -> bool:
    return isinstance(node, (ast.Attribute, ast.Name)) and getattr(node, "attr", getattr(node, "id", "")) == "environ"


def _key(node) -> str | None:
    """The variable's name where ``node`` reads, sets or tests one, else None."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        if isinstance(func, ast.Attribute) and (func.attr == "getenv" or (
                func.attr in ("get", "pop", "setdefault") and _is_environ(func.value))):
            return node.args[0].value
    if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.slice, ast.Constant):
        return node.slice.value
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and any(
            _is_environ(c) for c in node.comparators):
        return node.left.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and OURS.fullmatch(node.value):
        return node.value   # a name kept in a constant (outputcap.ENV) and read through it
    return None


def used_variables() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in [*sorted((ROOT / "autograder").rglob("*.py")), ROOT / "nbgrader_config.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            key = _key(node)
            if isinstance(key, str):
                found.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "deploy" / "slurm").glob("*.sbatch")):
        for name in re.findall(r"\$\{?([A-Z][A-Z0-9_]+)", path.read_text()):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def documented_variables() -> set[str]:
    """The names in the first column of docs/grading.md's table rows (`A`/`B` after `X_A` means `X_B`)."""
    names = set()
    for line in (ROOT / "docs" / "grading.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        previous = ""
        for joined, name in re.findall(r"(/?)`([A-Za-z0-9_]+)`", first):
            if joined and "_" in previous:
                name = previous.rsplit("_", 1)[0] + "_" + name
            names.add(name)
            previous = name
    return names


def test_every_variable_the_code_uses_is_in_the_table():
    used, documented = used_variables(), documented_variables()
    missing = {name: sorted(where) for name, where in used.items() if name not in documented}
    assert not missing, f"docs/grading.md's table of environment variables lacks: {missing}"


def test_the_scan_finds_a_variable_read_through_a_constant_and_the_table_reader_expands_slashes():
    assert "PTE_CELL_OUTPUT_CAP" in used_variables()          # outputcap.ENV, read as os.environ.get(ENV, "")
    assert {"SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT"} <= documented_variables()
    tree = ast.parse("import os\nos.environ.get('NEW_ONE')\n")
    assert [_key(node) for node in ast.walk(tree) if _key(node)] == ["NEW_ONE"]
