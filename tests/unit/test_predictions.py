"""Checked predictions: the kernel's reveal, the grader's reader (ast, never run) and the release's strip step."""
from __future__ import annotations

import json

import nbformat
import numpy as np
import pytest
import torch

from autograder import course
from autograder.grading.intake import predictions as read
from autograder.kernel import predictions

import coursekit as kit


def revealed(capsys, prediction, actual) -> str:
    predictions.reveal(prediction, actual, name="01_tensors:shape")
    return capsys.readouterr().out.strip()


def test_reveal_asks_first_while_there_is_no_prediction(capsys):
    assert revealed(capsys, None, torch.Size([2, 3])) == predictions.ASK
    assert "(2, 3)" not in revealed(capsys, None, torch.Size([2, 3]))


@pytest.mark.parametrize("prediction, actual", [
    ((2, 3), torch.Size([2, 3])),
    ([2, 3], torch.zeros(2, 3).shape),
    ((4,), torch.Size([4])),
    (0.5, torch.tensor(0.5000001)),
    (3, np.int64(3)),
    (2, 2.0),
    ("B", "b"),
    (" sgd ", "SGD"),
])
def test_reveal_says_a_right_prediction_matches(capsys, prediction, actual):
    out = revealed(capsys, prediction, actual)
    assert out.startswith("You predicted ") and "; the answer is " in out
    assert out.endswith("Your prediction matches.")
    assert predictions.matches(prediction, actual)


@pytest.mark.parametrize("prediction, actual", [
    ((3, 2), torch.Size([2, 3])),
    ((2, 3, 1), torch.Size([2, 3])),
    (0.6, torch.tensor(0.5)),
    ("a", "b"),
    (True, 1),
    ("2", 2),
    (float("nan"), 1.0),
])
def test_reveal_says_a_wrong_prediction_differs(capsys, prediction, actual):
    out = revealed(capsys, prediction, actual)
    assert "They differ" in out
    assert not predictions.matches(prediction, actual)


def test_reveal_writes_the_answer_plainly(capsys):
    assert revealed(capsys, (2, 3), torch.Size([2, 3])) == (
        "You predicted (2, 3); the answer is (2, 3). Your prediction matches.")
    assert revealed(capsys, 1, torch.tensor(0.123456789)) == (
        "You predicted 1; the answer is 0.123457. They differ: work out why before you read on.")
    assert revealed(capsys, (5,), (5,)).startswith("You predicted (5,); the answer is (5,).")


class Hostile:
    def __repr__(self):
        raise RuntimeError("no repr")

    def __eq__(self, other):
        raise RuntimeError("no eq")

    __hash__ = None


def test_reveal_never_raises(capsys):
    predictions.reveal(Hostile(), torch.zeros(3, 3), name="x:y")
    predictions.reveal([1, [2, Hostile()]], Hostile(), name="x:y")
    predictions.reveal({"a": 1}, object(), name="x:y")
    out = capsys.readouterr().out
    assert out.count("\n") == 3


# --- the grader's reader: the cell's source through ast, never executed -------------------------------

def cell(source: str, pid: str = "01_tensors:shape", **spec) -> nbformat.NotebookNode:
    c = nbformat.v4.new_code_cell(source)
    c.metadata["pte"] = {"prediction": {"id": pid, "kind": spec.pop("kind", "shape"), **spec}}
    return c


@pytest.mark.parametrize("source, state, value", [
    ("# the shape of x @ w\nprediction_shape = None\n", read.NOT_ANSWERED, None),
    ("# the shape of x @ w\nprediction_shape = (2, 3)\n", read.ANSWERED, [2, 3]),
    ("prediction_shape = [2, 3]", read.ANSWERED, [2, 3]),
    ("prediction_shape = -0.5", read.ANSWERED, -0.5),
    ("prediction_shape = 'b'", read.ANSWERED, "b"),
    ("prediction_shape = torch.Size([2, 3])", read.UNREADABLE, None),
    ("prediction_shape = (2, 3)\nprint(1)", read.UNREADABLE, None),
    ("prediction_other = 4", read.UNREADABLE, None),
    ("prediction_shape = x = 4", read.UNREADABLE, None),
    ("prediction_shape = (2, 3", read.UNREADABLE, None),
    ("prediction_shape = {1, 2}", read.UNREADABLE, None),
    ("prediction_shape = float('nan')", read.UNREADABLE, None),
    ("", read.UNREADABLE, None),
])
def test_reader_takes_one_literal_assignment(source, state, value):
    (found,) = read.read_cells([cell(source)])
    assert (found.id, found.form, found.state, found.value) == ("01_tensors:shape", "shape", state, value)


def test_reader_never_runs_the_cell(tmp_path):
    marker = tmp_path / "ran"
    source = f"prediction_shape = __import__('pathlib').Path({str(marker)!r}).touch()"
    (found,) = read.read_cells([cell(source)])
    assert found.state == read.UNREADABLE and not marker.exists()


def test_reader_skips_other_cells_and_keeps_order():
    cells = [nbformat.v4.new_code_cell("prediction_shape = 3"), nbformat.v4.new_markdown_cell("x"),
             cell("prediction_loss = 0.7", "01_tensors:loss", kind="number"),
             cell("prediction_pick = 'a'", "01_tensors:pick", kind="choice", choices=["a", "b"]),
             cell("prediction_x = 1", "not an id")]
    assert [(r.id, r.value) for r in read.read_cells(cells)] == [("01_tensors:loss", 0.7), ("01_tensors:pick", "a")]


def test_release_strips_the_answers(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell("prediction_shape = None", answer=[2, 3]),
                cell("prediction_pick = None", "01_tensors:pick", kind="choice", choices=["a", "b"], answer="b"),
                nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "01_tensors.ipynb"
    nbformat.write(nb, path)
    assert read.answers(nb.cells) == {
        "01_tensors:shape": {"id": "01_tensors:shape", "kind": "shape", "answer": [2, 3]},
        "01_tensors:pick": {"id": "01_tensors:pick", "kind": "choice", "choices": ["a", "b"], "answer": "b"}}
    course._finish_release(path)
    released = nbformat.read(path, as_version=4)
    assert "answer" not in json.dumps([c.metadata for c in released.cells])
    ids = [c.metadata["pte"]["prediction"]["id"] for c in released.cells[:2]]
    assert ids == ["01_tensors:shape", "01_tensors:pick"]
    assert released.cells[1].metadata["pte"]["prediction"]["choices"] == ["a", "b"]


@pytest.mark.parametrize("lesson", course.lessons())
def test_committed_releases_hold_no_answer(lesson):
    release = nbformat.read(kit.REPO / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    assert all("answer" not in (read.meta(c) or {}) for c in release.cells)


def test_a_submission_is_read_by_the_release_s_cells_not_its_own_metadata():
    """Which cells are predictions, their ids and kinds come from the release; the student's copy gives only
    the source of the cell with the same cell id (a forged or deleted prediction cell counts for nothing)."""
    shape, pick = cell("prediction_shape = None"), cell("prediction_pick = None", "01_tensors:pick", kind="choice")
    shape["id"], pick["id"] = "pred-shape", "pred-pick"
    release = [shape, nbformat.v4.new_code_cell("x = 1"), pick]
    mine = cell("prediction_shape = (4, 5)", "01_tensors:shape", kind="number")
    mine["id"] = "pred-shape"
    forged = cell("prediction_extra = 9", "01_tensors:extra", kind="number")
    forged["id"] = "pred-extra"
    again = cell("prediction_shape = (9, 9)")
    again["id"] = "pred-shape"
    found = read.submitted(release, [forged, mine, again])   # the pick cell was deleted
    assert [(r.id, r.form, r.state, r.value) for r in found] == [
        ("01_tensors:shape", "shape", read.ANSWERED, [4, 5]),
        ("01_tensors:pick", "choice", read.NOT_ANSWERED, None)]
