"""Lesson 06's kernel helpers: real errors, observation helpers, shape tracing, the gallery."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograder.kernel.checks import CheckFailed
from autograder.kernel.lessons import errors, errors_checks


def test_caught_returns_the_real_exception_and_refuses_silence():
    exc = errors.caught(lambda: nn.Linear(10, 3)(torch.zeros(4, 8)))
    assert isinstance(exc, RuntimeError)
    assert str(exc) == "mat1 and mat2 shapes cannot be multiplied (4x8 and 10x3)"
    assert exc.__traceback__ is not None
    with pytest.raises(RuntimeError, match="expected to raise"):
        errors.caught(lambda: torch.zeros(2) + 1)


def test_error_line_keeps_the_type_and_cuts_long_messages():
    exc = ValueError("first line\nsecond line")
    assert errors.error_line(exc) == "ValueError: first line"
    assert errors.error_line(RuntimeError("x" * 50), width=20) == "RuntimeError: xxx..."


def test_recorded_warnings_collects_every_warning_without_printing(capsys):
    loss, warned = errors.recorded_warnings(lambda: F.mse_loss(torch.zeros(8), torch.zeros(8, 1)))
    assert loss.item() == 0.0
    assert len(warned) == 1 and "target size (torch.Size([8, 1]))" in warned[0]
    _, twice = errors.recorded_warnings(lambda: [F.mse_loss(torch.zeros(3), torch.zeros(3, 1)) for _ in range(2)])
    assert len(twice) == 2
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("message, expected", [
    ("pred has shape (8,) but target has shape (8, 1)", True),
    ("torch.Size([8]) vs torch.Size([8, 1])", True),
    ("[8] and [8,1]", True),
    ("pred (8, 1) only", False),
    ("shapes differ", False),
])
def test_mentions_shapes(message, expected):
    assert errors.mentions_shapes(message, (8,), (8, 1)) is expected


def test_mentions_shapes_does_not_mistake_a_prefix_for_a_shape():
    assert not errors.mentions_shapes("got (3, 1) and (2, 3)", (3,), (3, 1))


def test_outcome_and_refusal_name_what_happened():
    assert errors.outcome(lambda: 1) == "ok"
    assert errors.outcome(lambda: torch.zeros(2) + torch.zeros(3)) == "RuntimeError"

    def strict(a, b):
        if a.shape != b.shape:
            raise ValueError(f"{tuple(a.shape)} vs {tuple(b.shape)}")

    def vague(a, b):
        raise ValueError("no")

    a, b = torch.zeros(6), torch.zeros(6, 1)
    assert errors.refusal(strict, a, b) == "ValueError naming the shapes"
    assert errors.refusal(vague, a, b) == "ValueError without the shapes"
    assert errors.refusal(lambda a, b: F.mse_loss(a, b.squeeze(1)), a, b) == "returned without raising"
    assert errors.refusal(lambda a, b: a @ b, torch.zeros(2, 3), torch.zeros(2, 3)) == "RuntimeError without the shapes"


def test_refusal_reads_dtypes_and_classes_in_the_message():
    def says(text):
        def fn(*args):
            raise TypeError(text)
        return fn

    pred, target = torch.zeros(3), torch.zeros(3, dtype=torch.float64)
    assert errors.refusal(says("float32 and torch.float64"), pred, target, "regression",
                          naming="dtypes") == "TypeError naming the dtypes"
    assert errors.refusal(says("float64 only"), pred, target, naming="dtypes") == "TypeError without the dtypes"
    assert errors.refusal(says("target is float64"), pred, target, naming="target dtype") == \
        "TypeError naming the target dtype"
    scores, classes = torch.zeros(2, 3), torch.tensor([5, -100])
    assert errors.refusal(says("class 5."), scores, classes, naming="class") == "TypeError naming the class"
    assert errors.refusal(says("class -100 is out"), scores, classes, naming="class") == "TypeError naming the class"
    assert errors.refusal(says("classes 0 to 2, got 15"), scores, classes, naming="class") == \
        "TypeError without the class"
    with pytest.raises(ValueError, match="unknown naming"):
        errors.refusal(says("x"), scores, classes, naming="colour")


@pytest.mark.parametrize("message, expected", [
    ("torch.float32 and torch.int64", True), ("float32 vs int64", True), ("float32 vs uint8", False),
    ("Float and Long", False),
])
def test_mentions_dtypes(message, expected):
    assert errors.mentions_dtypes(message, torch.float32, torch.int64) is expected


def test_batch_layout_keeps_containers_and_reads_no_values():
    batch = {"pair": (torch.zeros(2, dtype=torch.long), [1, "x", None]), "m": torch.zeros(3, device="meta"),
             "odd": object()}
    assert errors.batch_layout(batch) == {
        "pair": ("Tensor(device=cpu, dtype=torch.int64, shape=(2,))", [1, "x", None]),
        "m": "Tensor(device=meta, dtype=torch.float32, shape=(3,))",
        "odd": "<object>",
    }


def test_shape_trace_prints_each_layer_and_removes_its_hooks(capsys):
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(8, 3))
    with pytest.raises(RuntimeError, match=r"4x16 and 8x3"):
        errors.shape_trace(model, torch.zeros(4, 10))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].strip().startswith("0  Linear(in_features=10") and printed[0].endswith("output (4, 16)")
    assert printed[-1].strip().startswith("2  Linear(in_features=8") and printed[-1].endswith("input (4, 16)")
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    model[2] = nn.Linear(16, 3)
    assert errors.shape_trace(model, torch.zeros(4, 10)).shape == (4, 3)


def test_every_gallery_snippet_raises_and_leaves_the_global_generator_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    for title, code, reading in errors.GALLERY:
        exc = errors.run_snippet(code)
        assert isinstance(exc, Exception), title
        assert title and reading
    assert torch.equal(torch.rand(3), expected)


def test_print_gallery_and_widget_show_the_first_entry(capsys):
    errors.print_gallery(width=80)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * len(errors.GALLERY)
    assert all(len(line) <= 80 for line in lines)
    box = errors.error_gallery()
    dropdown, panel = box.children
    assert dropdown.value == 0
    assert "mat1 and mat2 shapes cannot be multiplied (4x8 and 10x3)" in panel.outputs[0]["text"]
    dropdown.value = 6
    assert len(panel.outputs) == 1 and "expected target dtype to be Long" in panel.outputs[0]["text"]


# ---------------------------------------------------------------- the visible checks of the exercises

def _classify(exc):
    message = str(exc).lower()
    for family, words in [("inplace", ("inplace", "in-place")), ("device", ("device",)),
                          ("dtype", ("dtype", "scalar type")), ("other", ("out of bounds", "out of range")),
                          ("shape", ("shape", "size", "dimension"))]:
        if any(word in message for word in words):
            return family
    return "other"


def checked_loss(pred, target, task):
    if task == "regression":
        if pred.shape != target.shape:
            raise ValueError(f"{tuple(pred.shape)} against {tuple(target.shape)}")
        if pred.dtype != target.dtype:
            raise TypeError(f"{pred.dtype} against {target.dtype}")
        return F.mse_loss(pred, target)
    if target.dtype.is_floating_point or target.dtype == torch.bool:
        raise TypeError(f"target {target.dtype}")
    if pred.dim() != 2 or target.shape != pred.shape[:1]:
        raise ValueError(f"{tuple(pred.shape)} against {tuple(target.shape)}")
    wrong = target[(target < 0) | (target >= pred.shape[1])]
    if len(wrong):
        raise ValueError(f"class {int(wrong[0])} out of range")
    return F.cross_entropy(pred, target.long())


def test_visible_checks_pass_right_answers():
    def move_batch(batch, device):
        if isinstance(batch, torch.Tensor):
            return batch.to(device)
        if isinstance(batch, dict):
            return {key: move_batch(value, device) for key, value in batch.items()}
        if isinstance(batch, (list, tuple)):
            return type(batch)(move_batch(item, device) for item in batch)
        return batch

    def inplace(x, w):
        h = x @ w
        h.tanh_()
        h.mul_(x.sigmoid())
        h.add_(x)
        return h

    errors_checks.check_checked_loss(checked_loss)
    errors_checks.check_move_batch(move_batch)
    errors_checks.check_gated_residual(lambda x, w: x + torch.tanh(x @ w) * torch.sigmoid(x), reference=inplace)
    errors_checks.check_classify_error(_classify)


@pytest.mark.parametrize("breaking, seen", [
    ("no shape check", "returned without raising ValueError"),
    ("no dtype check", "returned without raising TypeError"),
    ("no range check", "raised IndexError"),
    ("shapes not named", "name both shapes, (8,) and (8, 1)"),
])
def test_check_checked_loss_catches_each_missing_refusal(breaking, seen):
    def wrong(pred, target, task):
        if breaking == "no shape check" and task == "regression":
            return F.mse_loss(pred, target)
        if breaking == "no dtype check" and task == "regression" and pred.shape == target.shape:
            return F.mse_loss(pred, target)
        if breaking == "no range check" and task == "classification" and target.dim() == 1 and \
                pred.shape[:1] == target.shape and not target.dtype.is_floating_point:
            return F.cross_entropy(pred, target)
        if breaking == "shapes not named" and pred.shape != target.shape and task == "regression":
            raise ValueError("the shapes differ")
        return checked_loss(pred, target, task)

    with pytest.raises(CheckFailed, match=re.escape(seen)):
        errors_checks.check_checked_loss(wrong)


def test_an_index_out_of_range_is_other_even_with_a_dimension_and_a_size():
    def by_words(exc):
        message = str(exc).lower()
        for family, words in [("inplace", ("inplace", "in-place")), ("device", ("device",)),
                              ("dtype", ("dtype", "scalar type")), ("shape", ("shape", "size", "dimension"))]:
            if any(word in message for word in words):
                return family
        return "other"

    assert _classify(errors.caught(lambda: torch.arange(3)[5])) == "other"
    with pytest.raises(CheckFailed, match="index 5 of a 3-element tensor"):
        errors_checks.check_classify_error(by_words)
