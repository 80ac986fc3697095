"""Each graded cell's checks as the report records them (autograder/grading/judging/outcomes.py): from the
judge's comparison and the reference alone, never the kernel's text."""
from __future__ import annotations

import nbformat

from autograder.grading.judging import outcomes
from autograder.grading.run.runner import Run
from autograder.grading.status import Status
from autograder.kernel.vocabulary import observations
from autograder.kernel.vocabulary.messages import Observation

HINT = "the batch dimension stays, even for a batch of one"
VISIBLE_HINT = "a contiguous input can be flattened without copying"
SOURCE = (f'check_shape(flatten_features(x), (2, 12), hint="{VISIBLE_HINT}")\n'
          "### BEGIN HIDDEN TESTS\nh = HiddenTests('test_flat')\nh.observe('flat(SECRET_INPUT_7)', f(x))\n"
          "### END HIDDEN TESTS\n")


def tensor(values, dtype="torch.float32"):
    return {"type": "tensor", "dtype": dtype, "shape": [len(values)], "values": values}


REFERENCE = {"test_flat": [
    {"label": "flat(SECRET_INPUT_7)", "value": tensor([1.0, 2.0]), "atol": 0, "rtol": 0, "hint": HINT},
    {"label": "flat(other)", "value": tensor([3.0]), "atol": 0, "rtol": 0, "hint": "second"},
    {"label": "count", "value": 4, "atol": 0, "rtol": 0, "hint": None}]}


def observed(index, value, label="FORGED LABEL", hint="FORGED HINT"):
    data = Observation("test_flat", index, label, value, 0.0, 0.0, hint).display_data()
    return nbformat.v4.new_output("display_data", data=data)


def run_of(visible_outputs, hidden_outputs=None, reply="ok", hidden_status="ok", status=Status.GRADED):
    cell = nbformat.v4.new_code_cell(SOURCE)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test_flat", "points": 2, "solution": False}
    cell.outputs = visible_outputs
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), cell])
    run = Run(nb, status=status, test_cells={1})
    if reply is not None:
        run.replies[1] = reply
    if hidden_outputs is not None:
        run.hidden_runs[1] = (hidden_outputs, hidden_status)
    return run


def summary(results):
    return [(r.part, r.index, r.status, r.failure, r.exception, r.hint) for r in results]


def test_each_hidden_check_is_judged_by_its_kind_of_difference_with_the_reference_s_hint():
    run = run_of([], [observed(0, tensor([1.0, 2.0], "torch.float64")), observed(1, tensor([3.5])),
                      observed(2, 4)])
    assert summary(outcomes.of(run, REFERENCE)) == [
        ("visible", 0, "passed", "", "", ""),
        ("hidden", 1, "failed", "dtype", "", HINT),
        ("hidden", 2, "failed", "values", "", "second"),
        ("hidden", 3, "passed", "", "", "")]


def test_a_crash_in_a_hidden_check_is_an_error_there_and_the_rest_did_not_run():
    error = nbformat.v4.new_output("error", ename="IndexError", evalue="SECRET_VALUE 42", traceback=[])
    run = run_of([], [observed(0, tensor([1.0, 2.0])), error], reply="error", hidden_status="error")
    assert summary(outcomes.of(run, REFERENCE)) == [
        ("visible", 0, "passed", "", "", ""),   # the cell's reply is the hidden part's: the visible part passed
        ("hidden", 1, "passed", "", "", HINT),
        ("hidden", 2, "error", "exception", "IndexError", "second"),
        ("hidden", 3, "not-run", "not-run", "", "")]


def test_the_visible_part_gives_a_known_exception_name_and_only_a_hint_the_test_code_holds():
    said = nbformat.v4.new_output("error", ename="CheckFailed",
                                  evalue=f"shape is (24,)\nLikely mistake: {VISIBLE_HINT}. SECRET", traceback=[])
    [visible, *hidden] = outcomes.of(run_of([said], reply="error"), REFERENCE)
    assert (visible.status, visible.failure, visible.exception, visible.hint) == (
        "failed", "check", "CheckFailed", VISIBLE_HINT)
    assert {h.status for h in hidden} == {"not-run"}
    course_words = "is an integer type, but class indices are expected as torch.long (int64): use .long()."
    helper = nbformat.v4.new_output("error", ename="CheckFailed", evalue="to_class_labels(int32 SECRET): dtype "
                                    f"torch.int32\nLikely mistake: {course_words}", traceback=[])
    [visible, *_] = outcomes.of(run_of([helper], reply="error"), REFERENCE)
    assert visible.hint == course_words, "a sentence of the course's check helpers, named by the failure"
    forged = nbformat.v4.new_output("error", ename="SECRET_ClassName", evalue="Likely mistake: SECRET words here",
                                    traceback=[])
    [visible, *_] = outcomes.of(run_of([forged], reply="error"), REFERENCE)
    assert (visible.status, visible.failure, visible.exception, visible.hint) == ("error", "exception", "other", "")


def test_a_timeout_says_so_and_nothing_the_kernel_sent_as_text_is_kept():
    run = run_of([], reply=None, status=Status.TIMEOUT)
    assert {(r.status, r.failure) for r in outcomes.of(run, REFERENCE)} == {("timeout", "timeout"),
                                                                           ("not-run", "not-run")}
    run = run_of([], [observed(0, tensor([1.0, 2.0]))], hidden_status=None, status=Status.TIMEOUT)
    assert summary(outcomes.of(run, REFERENCE))[2] == ("hidden", 2, "timeout", "timeout", "", "second")
    malformed = nbformat.v4.new_output("display_data", data={observations.MIME: {"SECRET": 1}})
    results = outcomes.of(run_of([], [malformed]), REFERENCE)
    assert summary(results)[1][2:4] == ("failed", "malformed")
    text = repr([r.to_dict() for r in results])
    assert "SECRET" not in text and "FORGED" not in text
