"""Prediction cells, read without running anything.

A prediction cell is an ordinary (non-nbgrader) code cell whose metadata holds
``pte.prediction = {"id": "<lesson id>:<name>", "kind": "number"|"shape"|"choice",
"choices": [...] (choice only), "answer": <JSON>}`` and whose source assigns one literal:
``prediction_<name> = <literal>``. The solution carries the answer; the release strips it
(``autograder.course``). The grading command reads each submitted cell's source with ``ast``:
``None`` is "not answered", a literal is the prediction, anything else is "unreadable" (never
evaluated: ``ast.literal_eval`` of the assigned node only).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

KINDS = ("number", "shape", "choice")
NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")
ID = re.compile(r"(\d\d_[a-z0-9_]+):([a-z][a-z0-9_]{0,40})")
ANSWERED, NOT_ANSWERED, UNREADABLE = "answered", "not_answered", "unreadable"


@dataclass(frozen=True)
class Read:
    """One prediction cell of a submitted notebook: its id, what the student wrote, and whether
    it could be read. ``value`` is a JSON-able literal only when ``state`` is ``answered``."""
    id: str
    kind: str
    state: str
    value: object = None


def meta(cell) -> dict | None:
    """The cell's ``pte.prediction`` metadata, or None for any other cell."""
    if cell.get("cell_type") != "code":
        return None
    found = (cell.get("metadata") or {}).get("pte", {})
    found = found.get("prediction") if isinstance(found, dict) else None
    return found if isinstance(found, dict) else None


def short_name(prediction_id: str) -> str:
    match = ID.fullmatch(prediction_id or "")
    if not match:
        raise ValueError(f"prediction id {prediction_id!r} is not '<lesson id>:<short name>'")
    return match.group(2)


def _jsonable(value: object) -> object:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and value != value:
            raise ValueError("nan")
        return value
    raise ValueError(type(value).__name__)


def parse(source: str, name: str) -> tuple[str, object]:
    """(state, value) of a prediction cell's source for ``prediction_<name>``.

    Comments and blank lines are allowed; the one statement must be ``prediction_<name> = <literal>``
    (a number, a string, a tuple or list of them, or None)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return UNREADABLE, None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return UNREADABLE, None
    node = tree.body[0]
    if (len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name)
            or node.targets[0].id != f"prediction_{name}"):
        return UNREADABLE, None
    try:
        value = ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNREADABLE, None
    if value is None:
        return NOT_ANSWERED, None
    try:
        return ANSWERED, _jsonable(value)
    except (ValueError, RecursionError):
        return UNREADABLE, None


def read_cells(cells) -> list[Read]:
    """Every prediction cell of a notebook's cells, in order, read without running anything.

    A cell whose metadata id is malformed is skipped (it is not a prediction the course defined)."""
    found: list[Read] = []
    for cell in cells:
        spec = meta(cell)
        if spec is None:
            continue
        try:
            name = short_name(spec.get("id", ""))
        except ValueError:
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        state, value = parse(source, name)
        kind = spec.get("kind") if spec.get("kind") in KINDS else "number"
        found.append(Read(id=spec["id"], kind=kind, state=state, value=value))
    return found


def answers(cells) -> dict[str, dict]:
    """id -> the solution's prediction metadata (kind, choices, answer) of a solution notebook's cells."""
    return {spec["id"]: dict(spec) for spec in map(meta, cells)
            if spec is not None and ID.fullmatch(str(spec.get("id", ""))) and "answer" in spec}


def strip_answers(cells) -> int:
    """Remove ``answer`` from every prediction cell's metadata (the student's release); how many."""
    removed = 0
    for cell in cells:
        spec = meta(cell)
        if spec is not None and "answer" in spec:
            del spec["answer"]
            removed += 1
    return removed
