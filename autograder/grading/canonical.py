"""Turn a submitted notebook into the notebook the grader runs.

The grader runs the *release's* cells (prose, setup, demos, locked tests) with the
student's answer cells (matched by grade id) put in their places. Whatever else the
submission changed is not run: edited or deleted locked cells come back from the
release, renamed or duplicated grade ids cannot smuggle code into a graded place, and
cells the student added contribute only their definitions.

Answer cells and added cells are reduced to *definitions*: ``def``, ``class``,
``import``, and assignments of literals. Top-level statements that would run arbitrary
code at definition time (patching torch, installing IPython input transformers,
printing) are dropped, and each drop is reported.
"""
from __future__ import annotations

import ast
import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*$", re.S | re.M)


class SubmissionError(Exception):
    """The submission cannot be graded; ``status`` says why (``corrupt`` or ``missing``)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class Canonical:
    nb: nbformat.NotebookNode
    findings: list[str] = field(default_factory=list)   # tampering: makes the status 'tampered'
    notes: list[str] = field(default_factory=list)      # harmless remarks for the report
    deleted_tests: set[str] = field(default_factory=set)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def read_submission(path: Path) -> nbformat.NotebookNode:
    """Read a submitted notebook or raise SubmissionError('corrupt', ...)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError("corrupt", f"{path.name} is not UTF-8 text ({exc.reason})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SubmissionError("corrupt", f"{path.name} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionError("corrupt", f"{path.name} is JSON but not a notebook (no list of cells)")
    if data.get("nbformat") != 4:
        raise SubmissionError("corrupt", f"{path.name} is not a version 4 notebook (nbformat={data.get('nbformat')!r})")
    for cell in data["cells"]:
        source = cell.get("source") if isinstance(cell, dict) else None
        if not (isinstance(source, str) or (isinstance(source, list) and all(isinstance(x, str) for x in source))):
            raise SubmissionError("corrupt", f"{path.name} is not a readable notebook (a cell has no text source)")
    try:
        nb = nbformat.reads(raw, as_version=4)
    except Exception as exc:  # nbformat raises several types for malformed notebooks
        raise SubmissionError("corrupt", f"{path.name} is not a readable notebook ({type(exc).__name__})") from None
    for cell in nb.cells:
        if not isinstance(cell.get("source", ""), str) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise SubmissionError("corrupt", f"{path.name} has a malformed cell")
    return nb


# ---------------------------------------------------------------- definitions only

def _is_literal(node: ast.AST | None) -> bool:
    if node is None:
        return True
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _is_dotted(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_safe_expr(node: ast.AST | None) -> bool:
    """Literals, names and attribute chains (``torch.float32``), and calls of dotted names with such arguments."""
    if node is None or _is_literal(node) or _is_dotted(node):
        return True
    if isinstance(node, ast.Call) and _is_dotted(node.func):
        return all(_is_safe_expr(a) for a in node.args) and all(_is_safe_expr(k.value) for k in node.keywords)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_safe_expr(e) for e in node.elts)
    if isinstance(node, ast.Subscript):  # type hints such as list[int]
        return _is_safe_expr(node.value) and _is_safe_expr(node.slice)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # int | None
        return _is_safe_expr(node.left) and _is_safe_expr(node.right)
    if isinstance(node, ast.UnaryOp):
        return _is_safe_expr(node.operand)
    return False


def _safe_signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = fn.args
    defaults = list(args.defaults) + [d for d in args.kw_defaults if d is not None]
    return (all(_is_safe_expr(d) for d in fn.decorator_list) and all(_is_safe_expr(d) for d in defaults)
            and _is_safe_expr(fn.returns)
            and all(_is_safe_expr(a.annotation) for a in args.args + args.kwonlyargs + args.posonlyargs))


def _keep(node: ast.stmt, in_class: bool = False) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _safe_signature(node)
    if isinstance(node, ast.ClassDef):
        return (all(_is_safe_expr(b) for b in node.bases) and all(_is_safe_expr(k.value) for k in node.keywords)
                and all(_is_safe_expr(d) for d in node.decorator_list)
                and all(_keep(child, in_class=True) for child in node.body))
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return not any(alias.name == "*" for alias in node.names)
    if isinstance(node, ast.Assign):
        return all(isinstance(t, ast.Name) for t in node.targets) and _is_safe_expr(node.value)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and _is_safe_expr(node.annotation) and _is_safe_expr(node.value)
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)  # docstrings, a bare string
    return isinstance(node, ast.Pass)


def definitions_only(source: str) -> tuple[str, list[str]]:
    """Keep the definitions of a code cell; return the kept source and what was dropped."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        # Let the kernel report the syntax error to the student exactly as Python would.
        return source, [f"syntax error on line {exc.lineno}"]
    lines = source.splitlines()
    kept, dropped = [], []
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "\n".join(lines[start - 1: node.end_lineno])
        if _keep(node):
            kept.append(text)
        else:
            dropped.append(f"line {start}: {lines[start - 1].strip()[:60]}")
    return "\n".join(kept), dropped


# ---------------------------------------------------------------- the canonical notebook

def build(release: nbformat.NotebookNode, submitted: nbformat.NotebookNode) -> Canonical:
    """The notebook to run: the release's cells with the student's answers in place."""
    result = Canonical(nb=copy.deepcopy(release))
    answers: dict[str, str] = {}
    release_ids = {_meta(c).get("grade_id") for c in release.cells if _meta(c).get("grade_id")}
    release_cell_ids = {c.get("id") for c in release.cells}
    kinds = {_meta(c).get("grade_id"): c for c in release.cells if _meta(c).get("grade_id")}

    seen: dict[str, int] = {}
    for cell in submitted.cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id:
            seen[grade_id] = seen.get(grade_id, 0) + 1
    for grade_id, count in seen.items():
        if count > 1:
            result.findings.append(f"grade id '{grade_id}' appears {count} times")
    for grade_id in seen:
        if grade_id not in release_ids:
            result.findings.append(f"unknown grade id '{grade_id}' (renamed or invented)")

    added: list[tuple[str | None, str]] = []  # (release cell id it follows, definitions)
    previous_known = None
    for cell in submitted.cells:
        meta = _meta(cell)
        grade_id = meta.get("grade_id")
        source = cell.get("source", "")
        if grade_id in kinds and _meta(kinds[grade_id]).get("solution"):
            if grade_id in answers:
                continue  # duplicates already reported; the first one counts
            if cell.cell_type != "code":
                result.findings.append(f"answer cell '{grade_id}' was turned into {cell.cell_type}")
                continue
            kept, dropped = definitions_only(source)
            answers[grade_id] = kept
            result.notes += [f"{grade_id}: not run by the grader: {d}" for d in dropped]
        elif grade_id in kinds:
            original = kinds[grade_id]
            if source.strip() != original.source.strip() and _meta(original).get("locked"):
                result.findings.append(f"locked cell '{grade_id}' was edited (restored from the release)")
        elif cell.get("id") in release_cell_ids:
            pass  # a release cell, possibly edited by the student: the release version runs
        elif cell.cell_type == "code" and source.strip():
            kept, dropped = definitions_only(source)
            if kept.strip():
                added.append((previous_known, kept))
            result.notes += [f"added cell: not run by the grader: {d}" for d in dropped]
        if cell.get("id") in release_cell_ids:
            previous_known = cell.get("id")

    for grade_id, cell in kinds.items():
        meta = _meta(cell)
        if meta.get("grade") and not meta.get("solution") and grade_id not in seen:
            result.deleted_tests.add(grade_id)
            result.findings.append(f"graded cell '{grade_id}' was deleted (counts as zero)")
        if meta.get("solution") and grade_id not in answers and grade_id not in seen:
            result.notes.append(f"answer cell '{grade_id}' is missing: the release stub runs instead")

    cells = []
    for after, source in added:
        if after is None:
            extra = nbformat.v4.new_code_cell(source)
            extra["id"] = f"added-{len(cells)}"
            cells.append(extra)
    for cell in result.nb.cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
        cells.append(cell)
        for after, source in added:
            if after == cell.get("id"):
                extra = nbformat.v4.new_code_cell(source)
                extra["id"] = f"added-{len(cells)}"
                cells.append(extra)
    result.nb.cells = cells
    return result


def strip_hidden_tests(source: str) -> str:
    """A test cell's source as feedback may show it: hidden tests replaced by one line."""
    return HIDDEN.sub("# (hidden tests run here; their code is not shown)", source)
