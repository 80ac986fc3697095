"""The verdict on each test cell, decided here, outside the student's kernel.

The kernel ran the instructor's test cell (hidden part included) in recording mode: its
hidden checks published observations of what the student's code produced, and nothing
else. This module compares those observations with the reference observations that
``make release`` stored from the solution. The number, order, labels and tolerances all
come from the reference; the kernel's copies of them are ignored.

A test cell passes only if its execution finished without an error *and* its
observations match the reference one for one. Feedback names the failing hidden check by
its position and the kind of difference; it never shows the label, the hidden code or
an expected value.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from autograder.kernel import observations, protocol

REFERENCE_FILE = protocol.REFERENCE_FILE
MAX_OBSERVATIONS = 500


@dataclass
class Verdict:
    passed: bool
    reason: str = ""


class ReferenceMissing(Exception):
    """The course has no reference observations for an assignment (run ``make release``)."""


def load_reference(source_dir: Path, assignment: str) -> dict[str, list[dict]]:
    """grade id -> reference observations, from ``<source>/<assignment>/reference_observations.json``."""
    path = Path(source_dir) / assignment / REFERENCE_FILE
    if not path.is_file():
        raise ReferenceMissing(f"{path} is missing: run `make release` (it records the reference observations)")
    data = json.loads(path.read_text())
    if data.get("format") != protocol.REFERENCE_FORMAT or not isinstance(data.get("cells"), dict):
        raise ReferenceMissing(f"{path} is not a reference observations file of format {protocol.REFERENCE_FORMAT}")
    return data["cells"]


def observed(cell) -> list:
    """The observation payloads published in ``cell``'s outputs (raw, untrusted)."""
    found = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "display_data" and observations.MIME in out.get("data", {}):
            found.append(out["data"][observations.MIME])
    return found


def strip_observations(cell) -> None:
    cell["outputs"] = [out for out in cell.get("outputs", [])
                       if not (out.get("output_type") == "display_data"
                               and observations.MIME in out.get("data", {}))]


def judge_cell(reference: list[dict], payloads: list, finished: bool) -> Verdict:
    """Decide one test cell from its reference and the kernel's (untrusted) observation payloads."""
    if not finished:
        return Verdict(False, "the test cell did not run to its end")
    if not reference:
        return Verdict(False, "this test has no reference observations (the course must run `make release`)")
    if len(payloads) > MAX_OBSERVATIONS:
        return Verdict(False, f"the test cell published {len(payloads)} observations")
    total = len(reference)
    for index, ref in enumerate(reference):
        if index >= len(payloads):
            return Verdict(False, f"hidden check {index + 1} of {total} was never reached")
        payload = payloads[index]
        if not isinstance(payload, dict) or "value" not in payload:
            return Verdict(False, f"hidden check {index + 1} of {total}: malformed observation")
        try:
            observations.to_json({"value": payload["value"]})  # size cap, and plain JSON only
            found = observations.compare(ref, payload["value"])
        except Exception:  # whatever the kernel sent (10**400, a cycle, a bad type): this cell's failure alone
            return Verdict(False, f"hidden check {index + 1} of {total}: malformed or oversized observation")
        if found:
            return Verdict(False, f"hidden check {index + 1} of {total} failed (wrong {found[0]})")
    if len(payloads) > total:
        return Verdict(False, f"the test cell published {len(payloads)} observations; the test makes {total}")
    return Verdict(True)
