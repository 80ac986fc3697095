"""Judging what ran and saying so: a row per lesson (cells run, skipped, passed, failed, status), read from
pytest's JUnit XML, from a notebook's outputs or from the CUDA assertions' result line, and the summary table
with its total. Standard library only."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from autograder.kernel.vocabulary import protocol  # standard library only: the tags this runner acts on

RAISES = frozenset({protocol.RAISES_EXCEPTION, "nbval-raises-exception"})
NAME_WIDTH = 40


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags") or [])


def row(name: str, run: int = 0, skipped: int = 0, passed: int = 0, failed: int = 0, status: str = "ok",
        notes=()) -> dict:
    """One line of the summary table."""
    return {"lesson": name, "run": run, "skipped": skipped, "passed": passed, "failed": failed,
            "status": status, "notes": list(notes)}


def is_bad(result: dict) -> bool:
    return result["status"] != "ok" or result["failed"] > 0


def junit_counts(path: Path) -> dict:
    """Passed, failed and skipped test cases of a pytest JUnit XML file, with a note per skip."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "notes": []}
    if not path.is_file():
        return counts
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag == "skipped":
                outcome = "skipped"
                counts["notes"].append(f"skipped {case.get('name')}: {child.get('message', '')}")
            elif child.tag in ("failure", "error"):
                outcome = "failed"
        counts[outcome] += 1
    return counts


def judge_cells(name: str, cells: list[tuple[dict, list | None]]) -> dict:
    """``cells``: ``[(cell, outputs, or None when skipped)]`` -> a table row.

    A cell fails when it has an error output and is not tagged to raise.
    """
    result = row(name)
    for index, (cell, outputs) in enumerate(cells):
        if outputs is None:
            result["skipped"] += 1
            result["notes"].append(f"skipped cell {index} (id {cell.get('id')}): requires CUDA (not available here)")
            continue
        result["run"] += 1
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors and not (tags(cell) & RAISES):
            result["failed"] += 1
            result["notes"].append(f"cell {index} (id {cell.get('id')}): {errors[0].get('ename')}: "
                                   f"{str(errors[0].get('evalue'))[:300]}")
        else:
            result["passed"] += 1
    if result["failed"]:
        result["status"] = "FAIL"
    return result


def result_line_counts(stdout: str) -> dict[str, int]:
    """The ``RESULT passed=.. failed=.. skipped=..`` line of ``python tests/unit/test_amp.py``; {} without one."""
    counts = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            counts = {key: int(value) for key, value in (part.split("=", 1) for part in line.split()[1:])}
    return counts


def summary(rows: list[dict], runner: str, seconds: float) -> list[str]:
    """The summary table's lines, its total last."""
    total = row("total", *(sum(r[k] for r in rows) for k in ("run", "skipped", "passed", "failed")))
    bad = [r for r in rows if is_bad(r)]
    total["status"] = "ok" if not bad else f"FAIL ({len(bad)})"
    header = f"{'lesson':{NAME_WIDTH}} {'cells run':>9} {'skipped':>7} {'passed':>6} {'failed':>6}  status"
    lines = [f"== GPU test summary: runner {runner}, {seconds:.0f} s ==", header, "-" * len(header)]
    for r in rows + [total]:
        if r is total:
            lines.append("-" * len(header))
        lines.append(f"{r['lesson']:{NAME_WIDTH}} {r['run']:>9} {r['skipped']:>7} {r['passed']:>6} "
                     f"{r['failed']:>6}  {r['status']}")
    return lines
