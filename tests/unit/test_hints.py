"""A failed hidden check shows its hint in graded feedback, and a hint carries nothing of the test.

The judge takes a hint from the reference observations (recorded from the solution by ``make release``), never
from what a student's kernel sent. Every hidden check of every lesson has one, and what makes showing it safe
is checked here: each hint the reference holds is a string literal of its test cell's hidden code (so no
input, seed-drawn value or expected value can have been formatted into it), it names no label of its cell (a
label describes the hidden inputs), and it spells out none of the reference's expected numbers.
"""
from __future__ import annotations

import ast
import re

import nbformat
import pytest

from autograder import course
from autograder.grading.judging import judge
from autograder.kernel.vocabulary import messages, protocol

LESSONS = course.lessons()


def hidden_literals(source: str) -> set[str]:
    """Every string literal of the hidden part of a test cell (adjacent literals joined, as Python joins them)."""
    _, hidden = protocol.split_hidden(source)
    tree = ast.parse(hidden)
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def expected_numbers(value) -> set[float]:
    """The numbers an encoded observation holds (a tensor's values, a float, nested lists and dicts)."""
    found: set[float] = set()
    if isinstance(value, bool):
        return found
    if isinstance(value, (int, float)):
        found.add(float(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("shape", "stride", "strides", "dtype", "type"):
                found |= expected_numbers(item)
    elif isinstance(value, list):
        for item in value:
            found |= expected_numbers(item)
    return found


def spelled(number: float) -> set[str]:
    """How a hint could spell ``number``: the forms a person or ``str``/``format`` would write. Small whole
    numbers (a count of 3, a dimension 0) are left out: hints name shapes and counts in prose legitimately."""
    if number.is_integer() and abs(number) < 100:
        return set()
    forms = {repr(number), f"{number:.4g}", f"{number:.3f}", f"{number:.4f}", f"{number:.6f}"}
    if number.is_integer():
        forms.add(str(int(number)))
    return {form for form in forms if len(form.lstrip("-")) >= 3}


def cells_with_hints(lesson: str):
    source = nbformat.read(course.REPO_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    reference = protocol.Reference.read(course.REPO_ROOT / "solutions" / lesson / protocol.REFERENCE_FILE).cells
    for cell in source.cells:
        grade_id = protocol.nbgrader_meta(cell).get("grade_id")
        if protocol.is_test_cell(cell) and grade_id in reference:
            yield grade_id, cell.source, reference[grade_id]


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_hidden_check_has_a_hint_that_is_a_literal_of_the_hidden_code_and_carries_no_value(lesson):
    hints = 0
    for grade_id, source, entries in cells_with_hints(lesson):
        literals = hidden_literals(source)
        labels = [entry["label"] for entry in entries]
        for entry in entries:
            hint = entry.get("hint")
            where = f"{lesson} {grade_id} '{entry['label']}'"
            assert hint, f"{where}: a hidden check without a hint (feedback would say only which check failed)"
            hints += 1
            assert hint in literals, (f"{where}: its hint is not a string literal of the hidden code (formatted or "
                                      f"computed, it could carry the test's inputs): {hint!r}")
            named = [label for label in labels if len(label) > 6 and label in hint]
            assert not named, f"{where}: the hint names the hidden inputs' label {named[0]!r}"
            for number in expected_numbers(entry.get("value")):
                for form in spelled(number):
                    assert not re.search(rf"(?<![\w.]){re.escape(form)}(?![\w])", hint), (
                        f"{where}: the hint spells an expected value ({form}): {hint!r}")
    assert hints, f"{lesson}: no hidden check has a hint"


REFERENCE = [{"label": "to_class_labels([0., 2.])", "atol": 0.0, "rtol": 0.0,
              "value": {"type": "tensor", "dtype": "torch.int64", "shape": [2], "values": [0, 2]},
              "hint": "class labels must be integers of dtype torch.long."}]


def test_a_failed_hidden_check_shows_the_references_hint_and_nothing_of_the_kernels():
    forged = {"type": "tensor", "dtype": "torch.float32", "shape": [2], "values": [0.0, 2.0]}
    sent = messages.Observation("test_x", 0, "KERNEL LABEL", forged, 0.0, 0.0, "SENT BY THE KERNEL")
    verdict = judge.judge_cell(REFERENCE, [sent], finished=True)
    assert not verdict.passed
    assert verdict.reason == ("hidden check 1 of 1 failed (wrong dtype). Hint: class labels must be integers of "
                              "dtype torch.long."), verdict.reason
    assert "KERNEL" not in verdict.reason and "to_class_labels" not in verdict.reason


def test_a_check_without_a_hint_says_only_which_check_failed():
    reference = [dict(REFERENCE[0], hint=None)]
    forged = {"type": "tensor", "dtype": "torch.int64", "shape": [2], "values": [0, 1]}
    verdict = judge.judge_cell(reference, [messages.Observation("test_x", 0, "x", forged, 0.0, 0.0, None)],
                               finished=True)
    assert verdict.reason == "hidden check 1 of 1 failed (wrong values)", verdict.reason


def test_the_spelling_check_can_fail():
    """The value check above finds an expected number written into a hint."""
    hint = "the mean should be 0.1781, not the sum"
    assert any(re.search(rf"(?<![\w.]){re.escape(form)}(?![\w])", hint) for form in spelled(0.178103))
    # a formatted hint is no literal: its text (here "1") is not among the literals the first check accepts
    cell = "x = 1\n### BEGIN HIDDEN TESTS\nh.observe('a', 1, hint=f'{x}')\n### END HIDDEN TESTS\n"
    assert hidden_literals(cell) == {"a"}
