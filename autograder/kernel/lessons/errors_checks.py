"""Lesson 06 (reading errors): the visible checks of the exercises, and the hints their messages give.

Each ``check_<exercise>(fn)`` runs a student's function on seeded inputs and fails with a message that names
what was seen and the likely mistake (:mod:`autograder.kernel.checks`). The observation helpers they share with
the hidden tests are in :mod:`autograder.kernel.lessons.errors`.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autograder.kernel.lessons.errors import batch_layout, caught, error_line, message_names

__all__ = ["check_checked_loss", "check_move_batch", "check_gated_residual", "check_classify_error", "INPLACE_HINTS"]

# What each kind of refusal should have caught, for the messages of check_checked_loss.
LOSS_HINTS = {
    "broadcast": ("shapes like (8,) and (8, 1) broadcast to (8, 8) without any error: compare the two shapes and "
                  "raise the ValueError before computing anything."),
    "elements": "as many elements is not the same shape: (4, 2) and (2, 4) pair up the wrong numbers.",
    "batch": ("scores (N, C) need one class per example, a target of shape (N,): a different N is a shape problem, "
              "which F.cross_entropy reports without naming the shapes."),
    "float64": ("float32 predictions against float64 targets (NumPy's default) compute in float64 without a word: "
                "refuse two different dtypes with a TypeError."),
    "labels": ("class indices are integers: a float target is the labels mistake of section 2 (F.cross_entropy "
               "would even read a float target of shape (N, C) as probabilities): refuse it with a TypeError."),
    "range": ("with C classes a class index runs from 0 to C - 1: F.cross_entropy raises an IndexError for the ones "
              "above, and silently skips -100; check the range yourself and raise the ValueError."),
}
NAMED = {"shapes": "name both shapes", "dtypes": "name both dtypes", "target dtype": "name the target's dtype",
         "class": "name the class index that is out of range"}


def _check_loss_value(fn, pred: torch.Tensor, target: torch.Tensor, task: str, want: torch.Tensor,
                      label: str) -> None:
    from autograder.kernel import checks

    loss = checks.call(fn, pred, target, task)
    checks.check_tensor(loss, want, label)
    checks.expect(loss.requires_grad,
                  f"{label} is not attached to the autograd graph: compute it with tensor operations (no .item(), no "
                  "torch.tensor(...)), so that loss.backward() reaches pred.")


def check_checked_loss(fn) -> None:
    """Visible checks of exercise 1: one loss of each task with its graph, and seven batches that must be refused,
    each with the exception type and a message that names what does not fit."""
    from autograder.kernel import checks

    torch.manual_seed(60)
    p, t = torch.randn(8, requires_grad=True), torch.randn(8)
    _check_loss_value(fn, p, t, "regression", F.mse_loss(p, t), "checked_loss(pred (8,), target (8,), 'regression')")
    scores, classes = torch.randn(4, 3, requires_grad=True), torch.tensor([0, 2, 1, 1])
    _check_loss_value(fn, scores, classes, "classification", F.cross_entropy(scores, classes),
                      "checked_loss(pred (4, 3), target (4,) of int64, 'classification')")
    refused = [
        (ValueError, "shapes", "broadcast", torch.randn(8), torch.randn(8, 1), "regression"),
        (ValueError, "shapes", "broadcast", torch.randn(8, 1), torch.randn(8), "regression"),
        (ValueError, "shapes", "elements", torch.randn(4, 2), torch.randn(2, 4), "regression"),
        (TypeError, "dtypes", "float64", torch.randn(4), torch.randn(4, dtype=torch.float64), "regression"),
        (ValueError, "shapes", "batch", torch.randn(4, 3), torch.tensor([0, 2, 1]), "classification"),
        (TypeError, "target dtype", "labels", torch.randn(4, 3), torch.tensor([0., 2., 1., 1.]), "classification"),
        (ValueError, "class", "range", torch.randn(4, 3), torch.tensor([0, 3, 1, 1]), "classification"),
    ]
    for exc_type, naming, hint, pred, target, task in refused:
        err = checks.expect_raises(fn, exc_type, LOSS_HINTS[hint], pred, target, task)
        if message_names(naming, str(err), [pred, target]):
            continue
        what = {"shapes": f"{tuple(pred.shape)} and {tuple(target.shape)}",
                "dtypes": f"{pred.dtype} and {target.dtype}", "target dtype": str(target.dtype),
                "class": "it"}[naming]
        checks.fail(f"checked_loss(pred {tuple(pred.shape)}, target {tuple(target.shape)} of "
                    f"{str(target.dtype).replace('torch.', '')}, {task!r})",
                    f"the {exc_type.__name__} says {str(err)!r}",
                    f"{NAMED[naming]}, {what}, so that whoever reads it knows what to fix.")


def check_move_batch(fn) -> None:
    """Visible checks of exercise 2: a tuple and a nested dict moved to the meta device (and to CUDA if present)."""
    from autograder.kernel import checks

    unused_hint = ("Tensor.to returns a new tensor and leaves the original where it was: build the result from what "
                   ".to(device) returns (t = t.to(device)); a bare t.to(device) changes nothing.")
    torch.manual_seed(61)
    xb, yb = torch.randn(4, 3), torch.randint(0, 2, (4,))
    moved = checks.call(fn, (xb, yb), "meta")
    checks.check_type(moved, tuple, "move_batch((xb, yb), 'meta')",
                      hint="a tuple in, a tuple out: keep the container's type.")
    checks.expect(len(moved) == 2, f"move_batch((xb, yb), 'meta') returned {len(moved)} items, expected 2.")
    for name, got, source in [("xb", moved[0], xb), ("yb", moved[1], yb)]:
        checks.check_type(got, torch.Tensor, f"move_batch((xb, yb), 'meta'): {name}")
        checks.expect(got.device.type == "meta", f"{name} is still on {got.device}, expected meta. {unused_hint}")
        checks.expect(got.dtype == source.dtype and got.shape == source.shape,
                      f"{name} came back as {checks.describe(got)}; expected dtype {source.dtype} and shape "
                      f"{tuple(source.shape)}: .to(device) alone keeps the dtype.")
    nested = {"inputs": [xb, xb * 2], "target": {"labels": yb, "weight": 0.5}, "name": "batch-0"}
    got = batch_layout(checks.call(fn, nested, torch.device("meta")))
    want = {"inputs": ["Tensor(device=meta, dtype=torch.float32, shape=(4, 3))"] * 2,
            "target": {"labels": "Tensor(device=meta, dtype=torch.int64, shape=(4,))", "weight": 0.5},
            "name": "batch-0"}
    checks.expect(got == want, f"move_batch(nested dict, torch.device('meta')) gave\n  {got}\nexpected\n  {want}\n"
                               "Apply the same rule to every item of every container, keep lists as lists and dicts as "
                               f"dicts, and leave non-tensors alone. {unused_hint}")
    if torch.cuda.is_available():
        on_gpu = checks.call(fn, [xb, yb], "cuda")
        checks.expect(type(on_gpu) is list and all(isinstance(v, torch.Tensor) and v.is_cuda for v in on_gpu),
                      f"move_batch([xb, yb], 'cuda') gave {batch_layout(on_gpu)}: every tensor should be on the GPU.")


# An exception of a backward pass broken by an in-place update, mapped to the mistake behind it.
INPLACE_HINTS = {r"inplace|in-place": "an in-place update (h.mul_(...), h *= ..., out=...) still overwrites a tensor "
                                      "that autograd saved for backward: build a new tensor instead (h = h * g)."}


def check_gated_residual(fn, reference: Callable) -> None:
    """Visible checks of the warm-up: the values of ``reference`` (the in-place version, run without a graph), a
    backward pass, and gradients that agree with finite differences."""
    from autograder.kernel import checks

    torch.manual_seed(62)
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 3, requires_grad=True)
    with torch.no_grad():
        want = reference(x, w)
    out = checks.call(fn, x, w, hints=INPLACE_HINTS)
    checks.check_tensor(out, want, "gated_residual(x (4, 3), w (3, 3))")
    checks.expect(out.requires_grad, "gated_residual(...) carries no autograd graph: was it computed under "
                                     "torch.no_grad() or from detached tensors?")
    checks.call(out.sum().backward, hints=INPLACE_HINTS)
    checks.expect(x.grad is not None and w.grad is not None,
                  "after backward, x.grad or w.grad is None: the result must depend on both through autograd.")
    x64 = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    w64 = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    checks.expect(torch.autograd.gradcheck(fn, (x64, w64), raise_exception=False),
                  "the gradients of gated_residual disagree with finite differences: part of the computation is hidden "
                  "from autograd (.data, .detach(), torch.no_grad()), so backward runs but computes the wrong thing.")


def check_classify_error(fn) -> None:
    """Visible checks of exercise 3: real errors of every family, an index out of range among them."""
    from autograder.kernel import checks

    torch.manual_seed(63)


    def sigmoid_then_mul_():
        a = torch.randn(3, requires_grad=True)
        s = a.sigmoid()
        s.mul_(2)
        s.sum().backward()


    def backward_twice():
        a = torch.randn(3, requires_grad=True)
        loss = (a * a).sum()
        loss.backward()
        loss.backward()


    leaf = torch.randn(3, requires_grad=True)
    family_hints = {
        "shape": "shape errors do not always say 'shape': broadcasting says 'The size of tensor a (5) must match the "
                 "size of tensor b (3)', cross_entropy speaks of 'batch_size'.",
        "dtype": "dtype errors say 'dtype' or 'scalar type'; 'mat1 and mat2 must have the same dtype' is about dtypes, "
                 "although it names the two matrices like a shape error.",
        "device": "device errors mention a device, but not always as 'same device': on the CPU a mismatch with the "
                  "meta device reads 'Tensor on device meta is not on the expected device cpu!'.",
        "inplace": "PyTorch writes both 'inplace' and 'in-place'.",
        "other": "only the four families count; anything else is 'other', an index out of range too, even when its "
             "message names a dimension and a size.",
    }
    cases = [
        ("Linear(10, 3) applied to (4, 8)", caught(lambda: nn.Linear(10, 3)(torch.randn(4, 8))), "shape"),
        ("(2, 5) + (2, 3)", caught(lambda: torch.randn(2, 5) + torch.randn(2, 3)), "shape"),
        ("cross_entropy with float labels",
         caught(lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([0., 2., 1., 1.]))), "dtype"),
        ("float64 input to a float32 Linear",
         caught(lambda: nn.Linear(2, 1)(torch.randn(4, 2, dtype=torch.float64))), "dtype"),
        ("float ids into nn.Embedding", caught(lambda: nn.Embedding(5, 2)(torch.tensor([1., 3.]))), "dtype"),
        ("cpu tensor + meta tensor", caught(lambda: torch.randn(3) + torch.zeros(3, device="meta")), "device"),
        ("sigmoid output changed by mul_", caught(sigmoid_then_mul_), "inplace"),
        ("add_ on a leaf that requires grad", caught(lambda: leaf.add_(1.0)), "inplace"),
        ("backward twice", caught(backward_twice), "other"),
        ("label 3 with 3 classes", caught(lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3]))), "other"),
    ]
    cases.append(("index 5 of a 3-element tensor", caught(lambda: torch.arange(3)[5]), "other"))
    if torch.cuda.is_available():
        cases.append(("CUDA layer, CPU input", caught(lambda: nn.Linear(3, 2).to("cuda")(torch.randn(4, 3))), "device"))
    for label, exc, want in cases:
        got = checks.call(fn, exc)
        checks.check_type(got, str, f"classify_error({label})")
        checks.expect(got in ("shape", "dtype", "device", "inplace", "other"),
                      f"classify_error({label}) returned {got!r}: "
                      "return one of 'shape', 'dtype', 'device', 'inplace', 'other'.")
        checks.expect(got == want, f"classify_error({label}) returned {got!r}, expected {want!r}. The message was\n"
                                   f"  {error_line(exc, 200)}\n{family_hints[want]}")
