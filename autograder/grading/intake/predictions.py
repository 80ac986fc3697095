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

from autograder.grading.messages import PredictionRead

KINDS = ("number", "shape", "choice")
NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")
ID = re.compile(r"(\d\d_[a-z0-9_]+):([a-z][a-z0-9_]{0,40})")
ANSWERED, NOT_ANSWERED, UNREADABLE = "answered", "not_answered", "unreadable"


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


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def read_cells(cells) -> list[PredictionRead]:
    """Every prediction cell of a notebook's cells, in order, read without running anything (the cells'
    own metadata says which: for a notebook the course wrote; a submission goes through :func:`submitted`).

    A cell whose metadata id is malformed is skipped (it is not a prediction the course defined)."""
    found: list[PredictionRead] = []
    for cell in cells:
        spec = meta(cell)
        if spec is None:
            continue
        try:
            name = short_name(spec.get("id", ""))
        except ValueError:
            continue
        state, value = parse(_source(cell), name)
        form = spec.get("kind") if spec.get("kind") in KINDS else "number"
        found.append(PredictionRead(spec["id"], form, state, value))
    return found


def submitted(release_cells, submitted_cells) -> list[PredictionRead]:
    """The predictions of a submitted notebook: which cells are prediction cells, their ids and kinds come
    from the release (a student controls a submission's metadata); each is found in the submission by its
    cell id (the first cell of that id), and its source is read. A cell the student deleted is not answered."""
    by_id: dict[str, object] = {}
    for cell in submitted_cells:
        if cell.get("cell_type") == "code" and isinstance(cell.get("id"), str):
            by_id.setdefault(cell["id"], cell)
    found: list[PredictionRead] = []
    for ours in read_cells(release_cells):
        release_cell = next(c for c in release_cells if (meta(c) or {}).get("id") == ours.id)
        theirs = by_id.get(release_cell.get("id")) if release_cell.get("id") else None
        if theirs is None:
            found.append(PredictionRead(ours.id, ours.form, NOT_ANSWERED, None))
            continue
        state, value = parse(_source(theirs), short_name(ours.id))
        found.append(PredictionRead(ours.id, ours.form, state, value))
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
