"""Notebook hygiene: every lesson's code (solution and release), the template and the course's Python pass ruff.

The rules live in ``[tool.ruff]`` of pyproject.toml: pyflakes (F), pycodestyle errors and warnings
(E, W) at 120 characters a line. ruff reads notebooks natively, cell by cell, so a name defined in
an earlier cell counts. The release (``notebooks/``) may leave imports and names unused: nbgrader
replaced the solution code that used them with ``raise NotImplementedError()``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from autograder import course

import coursekit as kit

RUFF = [sys.executable, "-m", "ruff"]
PYTHON_CODE = ["autograder", "tests", "bench", "data", "nbgrader_config.py"]


def ruff(paths: list[str]) -> str:
    """ruff's findings on ``paths`` (relative to the repository), one line each, grouped by file; "" if clean."""
    existing = [p for p in paths if (kit.REPO / p).exists()]
    if not existing:
        return ""
    run = subprocess.run([*RUFF, "check", "--no-cache", "--output-format", "json", *existing],
                         cwd=kit.REPO, capture_output=True, text=True, timeout=120)
    if run.returncode not in (0, 1) or not run.stdout.strip().startswith("["):
        pytest.fail(f"ruff did not run (exit {run.returncode}):\n{run.stdout}{run.stderr}")
    found: dict[str, list[str]] = defaultdict(list)
    for item in json.loads(run.stdout):
        path = Path(item["filename"]).resolve().relative_to(kit.REPO)
        where = f"line {item['location']['row']}"
        if item.get("cell"):
            where = f"cell {item['cell']}{_cell_id(path, item['cell'])}, {where}"
        found[str(path)].append(f"{where}: {item['code']} {item['message']}")
    return "\n".join(f"{path} ({len(lines)}):\n    " + "\n    ".join(lines) for path, lines in sorted(found.items()))


def _cell_id(path: Path, cell: int) -> str:
    """` (id code-012)` for ruff's 1-based cell number, so the cell can be found in JupyterLab."""
    try:
        cells = json.loads((kit.REPO / path).read_text())["cells"]
        return f" (id {cells[cell - 1].get('id')})"
    except (OSError, ValueError, IndexError, KeyError):
        return ""


def test_ruff_is_configured():
    config = tomllib.loads((kit.REPO / "pyproject.toml").read_text()).get("tool", {}).get("ruff", {})
    assert config.get("line-length") == 120, "pyproject.toml: [tool.ruff] line-length = 120"
    select = set(config.get("lint", {}).get("select", []))
    assert {"E", "F", "W"} <= select, f"pyproject.toml: [tool.ruff.lint] select should include E, F and W, got {select}"


def test_the_python_code_keeps_its_shape():
    """Complexity (C901, at most 15 branches a function), import order (I) and bugbear (B) hold on the course's
    Python code: autograder/, bench/ and tests/ (the grading engine stays in small, readable stages)."""
    lint = tomllib.loads((kit.REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"C901", "I", "B"} <= set(lint["select"]), lint["select"]
    assert lint["mccabe"]["max-complexity"] == 15
    for folder in ("autograder", "bench", "tests"):
        assert not any(folder.startswith(pattern.split("/")[0]) and set(rules) >= {"C901", "I", "B"}
                       for pattern, rules in lint.get("per-file-ignores", {}).items()
                       if pattern.rstrip("*/") == folder), f"{folder}/ must not be exempt from the gate"
    found = ruff(["autograder", "bench", "tests"])
    assert not found, f"ruff (C901, I, B included) on the Python code:\n{found}"


@pytest.mark.parametrize("lesson", course.lessons() + ["NN_topic"])
def test_lesson_code_passes_ruff(lesson):
    if lesson == "NN_topic":
        paths = ["templates/NN_topic.ipynb"]
    else:
        paths = [f"solutions/{lesson}/{lesson}.ipynb", f"notebooks/{lesson}/{lesson}.ipynb"]
    findings = ruff(paths)
    assert not findings, f"ruff ([tool.ruff] in pyproject.toml) on {lesson}:\n{findings}"


def test_python_code_passes_ruff():
    findings = ruff(PYTHON_CODE)
    assert not findings, f"ruff ([tool.ruff] in pyproject.toml):\n{findings}"
