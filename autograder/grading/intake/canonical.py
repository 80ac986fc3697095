"""Turn a submitted notebook into the notebook the grader runs.

The student's cells run as written, in the student's order: answers, helper cells they
added, edited demos, top-level statements, everything. Only the graded *test* cells are
replaced, by the instructor's versions from the gradebook (hidden tests included), with
the release's metadata. Nothing here tries to judge whether student code is "safe":
verdicts are decided outside the kernel (see ``judge``), so honest code is never dropped.

What the rebuild reports:
- findings (status ``tampered``): a locked test cell edited, deleted, duplicated, or
  given an unknown grade id; a cell the student added that claims to be graded;
- notes (harmless, in the report): edited release code cells (for example the Setup
  cell: the edited version ran), a missing answer cell, a copied answer cell.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.grading.plan.settings import MAX_CELLS
from autograder.grading.status import Status, SubmissionError
from autograder.kernel.vocabulary import protocol


@dataclass
class Canonical:
    nb: nbformat.NotebookNode
    findings: list[str] = field(default_factory=list)   # tampering: makes the status 'tampered'
    notes: list[str] = field(default_factory=list)      # harmless remarks for the report


def read_submission(path: Path, data: bytes | None = None) -> nbformat.NotebookNode:
    """Parse a submitted notebook (``data``, its bytes as read safely, or else ``path``) or raise
    SubmissionError('corrupt', ...)."""
    try:
        raw = (path.read_bytes() if data is None else data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError(Status.CORRUPT, f"{path.name} is not UTF-8 text ({exc.reason})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SubmissionError(Status.CORRUPT, f"{path.name} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionError(Status.CORRUPT, f"{path.name} is JSON but not a notebook (no list of cells)")
    if data.get("nbformat") != 4:
        raise SubmissionError(Status.CORRUPT,
                              f"{path.name} is not a version 4 notebook (nbformat={data.get('nbformat')!r})")
    if len(data["cells"]) > MAX_CELLS:
        raise SubmissionError(Status.REFUSED, f"{path.name} has {len(data['cells'])} cells; the limit is {MAX_CELLS} "
                                         "(a lesson has fewer than 100)")
    for cell in data["cells"]:
        source = cell.get("source") if isinstance(cell, dict) else None
        if not (isinstance(source, str) or (isinstance(source, list) and all(isinstance(x, str) for x in source))):
            raise SubmissionError(Status.CORRUPT, f"{path.name} is not a readable notebook (a cell has no text source)")
    try:
        nb = nbformat.reads(raw, as_version=4)
    except Exception as exc:  # nbformat raises several types for malformed notebooks
        raise SubmissionError(Status.CORRUPT,
                              f"{path.name} is not a readable notebook ({type(exc).__name__})") from None
    for cell in nb.cells:
        if not isinstance(cell.get("source", ""), str) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise SubmissionError(Status.CORRUPT, f"{path.name} has a malformed cell")
    return nb


# ---------------------------------------------------------------- the canonical notebook

def _plain(cell) -> None:
    """Drop a cell's nbgrader metadata: it runs as ordinary student code."""
    cell.setdefault("metadata", {}).pop("nbgrader", None)


def _unnamed(cell, result: Canonical) -> None:
    """A cell with nbgrader metadata but no grade id of its own (the student added it, or emptied its id):
    nbgrader cannot record such a cell, so it runs as plain code. One that claims points is tampering."""
    meta = protocol.nbgrader_meta(cell)
    if meta.get("grade") or meta.get("points"):
        result.findings.append(f"cell '{cell.get('id', '?')}' claims to be graded but has no grade id of the "
                               "release (it ran as ordinary code and earned nothing)")
    else:
        result.notes.append(f"cell '{cell.get('id', '?')}' had nbgrader metadata without a grade id: it ran as "
                            "ordinary code")
    _plain(cell)


def build(release: nbformat.NotebookNode, submitted: nbformat.NotebookNode,
          test_sources: dict[str, str]) -> Canonical:
    """The notebook to run: the student's cells, with each graded test cell the instructor's own.

    ``test_sources`` maps each graded test cell's grade id to its source as the gradebook
    holds it (hidden tests included).
    """
    result = Canonical(nb=nbformat.v4.new_notebook(metadata=copy.deepcopy(release.metadata)))
    kinds = {protocol.nbgrader_meta(c).get("grade_id"): c for c in release.cells
             if protocol.nbgrader_meta(c).get("grade_id")}
    tests = {g for g, c in kinds.items() if protocol.is_test_cell(c)}
    release_by_id = {c.get("id"): c for c in release.cells if c.get("id")}
    placed: set[str] = set()
    cells = []
    for original in submitted.cells:
        cell = copy.deepcopy(original)
        grade_id = protocol.nbgrader_meta(cell).get("grade_id")
        if "nbgrader" not in cell.get("metadata", {}):
            _note_edited_release_cell(cell, release_by_id, result)
        elif not (isinstance(grade_id, str) and grade_id):
            _unnamed(cell, result)
        elif grade_id not in kinds:
            result.findings.append(f"unknown grade id '{grade_id}' (renamed or invented)")
            _plain(cell)
        elif grade_id in tests:
            cell = _test_cell(cell, kinds[grade_id], test_sources[grade_id], placed, result)
            if cell is None:
                continue
        else:
            _answer_or_locked_cell(cell, kinds[grade_id], placed, result)
        cells.append(cell)
    for grade_id, cell in kinds.items():
        if grade_id in tests and grade_id not in placed:
            result.findings.append(f"graded cell '{grade_id}' was deleted (counts as zero)")
        elif protocol.nbgrader_meta(cell).get("solution") and grade_id not in placed:
            result.notes.append(f"answer cell '{grade_id}' is missing: the notebook's own definitions ran")
    for position, cell in enumerate(cells):
        if not cell.get("id"):
            cell["id"] = f"cell-{position}"
    result.nb.cells = cells
    return result


def _note_edited_release_cell(cell, release_by_id: dict, result: Canonical) -> None:
    if cell.cell_type == "code" and cell.get("id") in release_by_id:
        ours = release_by_id[cell["id"]]
        if ours.cell_type == "code" and cell.source.strip() != ours.source.strip():
            result.notes.append(f"release cell '{cell['id']}' was edited: the edited version ran")


def _test_cell(cell, release_cell, source: str, placed: set[str], result: Canonical):
    """The instructor's test cell in place of the student's copy (None: a duplicate, dropped)."""
    grade_id = protocol.nbgrader_meta(release_cell)["grade_id"]
    if grade_id in placed:
        result.findings.append(f"graded test cell '{grade_id}' appears more than once")
        return None
    placed.add(grade_id)
    if cell.get("source", "").strip() != release_cell.source.strip() or cell.cell_type != "code":
        result.findings.append(f"locked cell '{grade_id}' was edited (the instructor's version ran)")
    ours = nbformat.v4.new_code_cell(source)
    ours["id"] = release_cell.get("id") or f"test-{grade_id}"
    ours.metadata = copy.deepcopy(release_cell.metadata)
    return ours


def _answer_or_locked_cell(cell, release_cell, placed: set[str], result: Canonical) -> None:
    """An answer cell (or another cell of the release with a grade id): the release's metadata, once."""
    grade_id = protocol.nbgrader_meta(release_cell)["grade_id"]
    if grade_id in placed:
        result.notes.append(f"cell '{grade_id}' appears more than once: the copy ran as ordinary code")
        _plain(cell)
        return
    placed.add(grade_id)
    cell.setdefault("metadata", {})["nbgrader"] = copy.deepcopy(protocol.nbgrader_meta(release_cell))
    if cell.cell_type != release_cell.cell_type:
        result.notes.append(f"cell '{grade_id}' was turned into a {cell.cell_type} cell")
        _plain(cell)
