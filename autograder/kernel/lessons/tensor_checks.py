"""The visible checks of lesson 01's exercises (01_tensors_and_views).

Each takes the student's function; the test cell seeds before calling it, and the inputs are drawn here in a
fixed order, so the expected values never stand in the test cell.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np
import torch

from autograder.kernel import checks
from autograder.kernel.lessons.explorers import check_new_object, expect_answer

__all__ = ["ProductCounter", "ReshapeCounter", "raised", "check_shares_storage_answers", "check_flatten_answers",
           "check_copy_answers", "check_label_answers", "check_linear_answers", "held_bytes", "shown_bytes"]

# The calls that flatten for you: flatten_features must decide the layout itself.
_RESHAPERS = {"view", "reshape", "flatten", "ravel", "view_as", "reshape_as", "unflatten", "_reshape_alias"}


# The products that compute linear_forward for you: it is built by broadcasting.
_PRODUCTS = {"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "einsum",
             "tensordot", "linear", "bilinear", "addmm", "addmv", "addbmm", "baddbmm", "chain_matmul", "multi_dot"}


class ReshapeCounter(torch.overrides.TorchFunctionMode):
    """Counts the calls of view, reshape, flatten and their spellings (methods, ``torch.`` functions,
    ``nn.Flatten``) made while it is active."""

    names = _RESHAPERS

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.names:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


class ProductCounter(ReshapeCounter):
    """Counts the calls of matrix and vector products (``@``, ``matmul``, ``einsum``, ``F.linear``, ...)."""

    names = _PRODUCTS


def raised(fn: Callable, *args: Any) -> tuple[str, str]:
    """``(exception type name, message)`` of ``fn(*args)``, or ``("returned", "")`` when it returns."""
    try:
        fn(*args)
    except NotImplementedError:
        raise
    except Exception as exc:  # the student's error is what is compared
        return type(exc).__name__, str(exc)
    return "returned", ""


# ---------------------------------------------------------------- exercise 1

def check_shares_storage_answers(shares_storage: Callable) -> None:
    """The visible checks of exercise 1."""
    t = torch.randn(10)
    arr = np.arange(6.0)
    cases = [
        ((t, t.view(2, 5)), True, "shares_storage(t, t.view(2, 5))",
         "t.view(2, 5) is a window on t's storage: same memory, other shape."),
        ((t, t.clone()), False, "shares_storage(t, t.clone())", "clone() copies the data into memory of its own."),
        ((t, t[3:]), True, "shares_storage(t, t[3:])",
         "t[3:] starts 3 elements later, so its data_ptr() differs, but it lives in t's storage: a tensor's "
         "data_ptr() is where its first element sits, not where its storage starts."),
        ((t[:5], t[5:]), True, "shares_storage(t[:5], t[5:])",
         "the two halves do not overlap, yet both are windows on t's storage: what counts is the memory of the "
         "storages, not the elements the windows show."),
        ((torch.empty(0), torch.empty(0)), False, "shares_storage(torch.empty(0), torch.empty(0))",
         "unrelated empty tensors own no memory (every storage of 0 bytes may report address 0): an empty "
         "block has no byte in common with anything."),
        ((torch.from_numpy(arr), torch.from_numpy(arr)[2:]), True,
         "shares_storage(from_numpy(arr), from_numpy(arr)[2:])",
         "both tensors wrap the one buffer of the NumPy array arr. Each torch.from_numpy call builds its own "
         "storage object on that memory: compare memory, not objects."),
        ((torch.from_numpy(arr), torch.from_numpy(arr[2:])), True,
         "shares_storage(from_numpy(arr), from_numpy(arr[2:]))",
         "from_numpy(arr[2:]) wraps the last four elements of arr's buffer in a storage of its own that starts "
         "16 bytes later: the two storages start at different addresses, yet the second block lies inside the "
         "first."),
        ((torch.from_numpy(arr[:3]), torch.from_numpy(arr[3:])), False,
         "shares_storage(from_numpy(arr[:3]), from_numpy(arr[3:]))",
         "the two storages are blocks side by side in arr's buffer: the first ends where the second starts, "
         "so no byte belongs to both."),
    ]
    for args, want, label, hint in cases:
        expect_answer(shares_storage, args, want, label, hint)


# ---------------------------------------------------------------- exercise 2

_VIEW_HINT = {r"view size is not compatible|not compatible with input tensor's size and stride":
              "`.view` needs compatible strides and fails on a permuted (non-contiguous) tensor."}


def _distinct(*shape: int) -> torch.Tensor:
    return (torch.randperm(math.prod(shape)) - 20).float().reshape(shape)


def check_flatten_answers(flatten_features: Callable) -> None:
    """The visible checks of exercise 2."""
    counter = ReshapeCounter()
    base = _distinct(6, 3, 4)
    views = [("contiguous (6, 3, 4)", base), ("every other example, x[::2] of a contiguous (6, 3, 4)", base[::2]),
             ("every other column, x[:, :, ::2] of a contiguous (6, 3, 4)", base[:, :, ::2])]
    permuted, one, two_d = base.permute(0, 2, 1), base[:1], _distinct(4, 5)
    with counter:
        flat_permuted = checks.call(flatten_features, permuted, hints=_VIEW_HINT)
        results = [(label, x, checks.call(flatten_features, x, hints=_VIEW_HINT)) for label, x in views]
        flat_one = checks.call(flatten_features, one, hints=_VIEW_HINT)
        flat_two_d = checks.call(flatten_features, two_d, hints=_VIEW_HINT)
    for label, x, flat in results:
        want = torch.stack([example.flatten() for example in x])
        checks.check_tensor(flat, want, f"flatten_features({label})")
        checks.check_shares_storage(flat, x, f"flatten_features({label})",
                                    hint="the strides of these feature dimensions can be walked as one dimension, "
                                         "so a view exists: copy only when no window on x's storage can show the "
                                         "result.")
    checks.check_tensor(flat_permuted, torch.stack([example.flatten() for example in permuted]),
                        "flatten_features(x.permute(0, 2, 1), shape (6, 4, 3))",
                        hints={"values": "each row must hold x[k]'s elements in logical order (x[k].flatten()'s "
                                         "order), not in the order they sit in memory."})
    checks.check_tensor(flat_one, one.flatten().unsqueeze(0), "flatten_features(a batch of one, (1, 3, 4))",
                        hints={"shape": "the batch dimension stays, also when it holds a single example."})
    checks.check_tensor(flat_two_d, two_d, "flatten_features(2-D input (4, 5))")
    checks.expect(flat_two_d is not two_d,
                  "flatten_features(2-D input (4, 5)) returned its input object itself. The course asks for a new "
                  "object on every call, never the argument itself (a view of x is a new object): a caller that "
                  "changes the result's shape in place would change x's.")
    checks.expect(not counter.calls,
                  f"flatten_features called {', '.join(sorted(set(counter.calls)))} ({len(counter.calls)} calls): "
                  "the exercise asks you to decide the layout yourself; view, reshape and flatten decide it for you.")


# ---------------------------------------------------------------- exercise 3

_SHARED_HINT = ("a tensor cut from the graph (detach(), .data) is still a window on the same storage, and a "
                "conversion that has nothing to do (contiguous() of a contiguous tensor, to() a dtype it already "
                "has) returns its input itself.")
_GRAPH_HINT = ("autograd records copies too (clone(), copy_, to()): cut the result from the graph, or copy where "
               "nothing is recorded.")


def _stretch(t: torch.Tensor) -> tuple[int, int] | None:
    """Where, in elements of its storage, the first and one past the last element ``t`` shows sit."""
    if t.numel() == 0:
        return None
    first = t.storage_offset()
    return first, first + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1


def shown_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes from the first to the last element the tensors on each storage show, summed over the storages."""
    spans: dict[int, tuple[int, int, int]] = {}
    for t in tensors:
        stretch = _stretch(t)
        if stretch is not None:
            low, high, size = spans.get(checks.storage_id(t), (*stretch, t.element_size()))
            spans[checks.storage_id(t)] = (min(low, stretch[0]), max(high, stretch[1]), size)
    return sum((high - low) * size for low, high, size in spans.values())


def held_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages the tensors are windows on (asked through the C-level methods)."""
    storages = {checks.storage_id(t): torch.UntypedStorage.nbytes(torch.Tensor.untyped_storage(t)) for t in tensors}
    return sum(storages.values())


def _model_tensors() -> dict[str, torch.Tensor]:
    weight = torch.randn(4, 3, requires_grad=True)
    history = torch.arange(100.0)
    return {"embed.weight": weight, "head.weight": weight, "head.bias": torch.randn(4, requires_grad=True),
            "recent": history[-6:], "recent_odd": history[-5::2]}


def _check_copied_dict(independent_copy: Callable) -> None:
    tensors = _model_tensors()
    label = "independent_copy(model tensors)"
    copies = checks.call(independent_copy, tensors)
    checks.expect(isinstance(copies, dict) and list(copies) == list(tensors),
                  f"{label} returned {checks.describe(copies)}, expected a dict with the keys {list(tensors)}, in "
                  "that order\nLikely mistake: a dict of tensors gives a new dict, one copy per entry.")
    inputs = {checks.storage_id(t) for t in tensors.values()}
    for name, t in tensors.items():
        entry = f"{label}['{name}']"
        checks.check_tensor(copies[name], t.detach(), entry)
        checks.check_no_autograd_history(copies[name], entry, hint=_GRAPH_HINT)
        checks.expect(checks.storage_id(copies[name]) not in inputs,
                      f"{entry}: shares storage with an input, so writing to one changes the other\n"
                      f"Likely mistake: {_SHARED_HINT}")
    for step, (name, t) in enumerate(tensors.items()):
        marker = -1000.0 * (step + 1) - torch.arange(float(t.numel())).reshape(t.shape)
        with torch.no_grad():
            torch.Tensor.copy_(copies[name], marker)
            t.detach().copy_(marker)
        for other, source in tensors.items():
            if not torch.equal(copies[other], source.detach()):
                tied = checks.storage_id(source) == checks.storage_id(t)
                checks.fail(label, f"after the same write into '{name}' and into its copy, the copy of '{other}' "
                                   f"no longer equals '{other}'",
                            f"'{name}' and '{other}' are windows on one storage, so their copies must be windows on "
                            "one copy of it, laid out the same way: a copy per entry unties them." if tied else
                            f"'{other}' shares no memory with '{name}', yet its copy changed.")
    held, shown = held_bytes(list(copies.values())), shown_bytes(list(tensors.values()))
    checks.expect(held <= shown,
                  f"{label}: the copies hold {held} bytes of storage, but the entries show only {shown} bytes (on "
                  "each storage, from the first to the last element an entry shows)\nLikely mistake: a whole "
                  "storage was copied (copy.deepcopy and torch.save do that too), though the entries show only a "
                  "stretch of it: copy that stretch.")


def check_copy_answers(independent_copy: Callable) -> None:
    """The visible checks of exercise 3, and the course's "a new object on every call"."""
    leaf = torch.randn(3, requires_grad=True)
    doubled = leaf * 2
    snap = checks.call(independent_copy, doubled,
                       hints={r"'Tensor' object has no attribute": "independent_copy takes one tensor as well as a "
                                                                   "dict of them: a tensor gives a tensor."})
    checks.check_tensor(snap, doubled.detach(), "independent_copy(doubled)")
    checks.check_no_autograd_history(snap, "independent_copy(doubled)", hint=_GRAPH_HINT)
    checks.check_own_storage(snap, doubled, "independent_copy(doubled)", hint=_SHARED_HINT)
    check_new_object(independent_copy, (doubled,), "independent_copy(doubled)")
    _check_copied_dict(independent_copy)


# ---------------------------------------------------------------- exercise 4

def _expect_bad_label(to_class_labels: Callable, arr: np.ndarray, shown: str) -> None:
    label = f"to_class_labels({arr.tolist()})"
    kind, message = raised(to_class_labels, arr)
    if kind == "returned":
        checks.fail(label, "returned labels without complaint",
                    f"{shown} is not a class number: .long() would cut it toward zero and hand a wrong class to the "
                    "loss without a word. Raise a ValueError that shows the value.")
    checks.expect(kind == "ValueError", f"{label} raised {kind}: {message}\nLikely mistake: a label that is not a "
                                        "whole number >= 0 should raise a ValueError.")
    checks.expect(shown in message, f"{label} raised ValueError({message!r}), which does not show the bad value "
                                    f"{shown}\nLikely mistake: name the label that is wrong, so it can be found.")


def check_label_answers(to_class_labels: Callable, rng: np.random.Generator) -> None:
    """The visible checks of exercise 4; ``rng`` (seeded in the test cell) draws the labels."""
    arr = rng.integers(0, 5, size=6).astype(np.float64)
    checks.check_tensor(checks.call(to_class_labels, arr), torch.tensor(arr.astype(np.int64)),
                        f"to_class_labels({arr.tolist()})")
    checks.check_tensor(checks.call(to_class_labels, np.array([0.0, 3.0, 3.0, 1.0])), torch.tensor([0, 3, 3, 1]),
                        "to_class_labels([0., 3., 3., 1.])",
                        hints={"values": "keep the class numbers as they are: class 2 is simply absent here."})
    checks.check_tensor(checks.call(to_class_labels, np.array([4.0])), torch.tensor([4]),
                        "to_class_labels([4.]) (one label)",
                        hints={"shape": "one label is still a 1-D tensor of shape (1,): do not squeeze."})
    checks.check_tensor(checks.call(to_class_labels, np.array([2, 0, 1], dtype=np.int32)), torch.tensor([2, 0, 1]),
                        "to_class_labels(an int32 array [2, 0, 1])")
    one_hot = np.eye(4)[[2, 0, 3]]
    checks.check_tensor(checks.call(to_class_labels, one_hot), torch.tensor([2, 0, 3]),
                        "to_class_labels(one-hot rows (3, 4) of classes 2, 0, 3)",
                        hints={"shape": "a 2-D array holds one row per example: one class per row."})
    probs = np.array([[0.1, 0.6, 0.3], [0.4, 0.2, 0.4]], dtype=np.float32)
    checks.check_tensor(checks.call(to_class_labels, probs), torch.tensor([1, 0]),
                        "to_class_labels(probability rows [[.1, .6, .3], [.4, .2, .4]])",
                        hints={"values": "each row's class is the column of its largest value, the first one on a "
                                         "tie."})
    for bad, shown in [(np.array([0.0, 2.5, 1.0]), "2.5"), (np.array([1.0, -1.0]), "-1"),
                       (np.array([0.0, np.nan]), "nan")]:
        _expect_bad_label(to_class_labels, bad, shown)
    own = np.array([1, 0, 2], dtype=np.int64)
    labels = checks.call(to_class_labels, own)
    own[0] = 7
    checks.check_tensor(labels, torch.tensor([1, 0, 2]),
                        "to_class_labels(an int64 array [1, 0, 2]) after the array was changed to [7, 0, 2]",
                        hints={"values": "the labels changed with the array: they share its memory (as_tensor and "
                                         "from_numpy wrap it, and a conversion to the dtype it already has returns "
                                         "its input itself)."})


# ---------------------------------------------------------------- exercise 5

def _expect_named_mismatch(linear_forward: Callable, args: tuple, label: str, sizes: tuple[int, int],
                           what: str) -> None:
    kind, message = raised(linear_forward, *args)
    checks.expect(kind == "ValueError",
                  f"{label} {'returned' if kind == 'returned' else f'raised {kind}: {message}'}, expected a "
                  f"ValueError\nLikely mistake: check the shapes before computing, and raise a ValueError when "
                  f"{what} do not fit.")
    named = all(re.search(rf"(?<![\d.]){n}(?![\d.])", message) for n in sizes)
    checks.expect(named, f"{label} raised ValueError({message!r}), which does not name both sizes "
                         f"{sizes[0]} and {sizes[1]}\nLikely mistake: say which sizes clash, so the caller knows "
                         "which tensor to fix.")


def check_linear_answers(linear_forward: Callable) -> None:
    """The visible checks of exercise 5."""
    from torch import nn

    hints = {r"shapes cannot be multiplied|size mismatch":
             "nn.Linear keeps weight as (out_features, in_features): output j uses row j of the weight.",
             r"must match the size of tensor":
             "the shapes do not broadcast: line them up from the right, and give a tensor a dimension of size 1 "
             "where the other has one to pair with.",
             r"self must be a matrix|must be a matrix|2D":
             "x may have extra leading dimensions (..., in_features)."}
    lin = nn.Linear(3, 2)
    weight, bias = lin.weight.detach(), lin.bias.detach()
    for shape in [(4, 3), (2, 5, 3)]:
        inputs = torch.randn(*shape)
        checks.check_tensor(checks.call(linear_forward, inputs, weight, bias, hints=hints), lin(inputs).detach(),
                            f"linear_forward(x {shape}, weight (2, 3), bias (2,))",
                            hints={"values": "every output row is off by the same amounts: is the bias added?"})
    inputs = torch.randn(4, 3)
    checks.check_tensor(checks.call(linear_forward, inputs, weight, None, hints=hints),
                        lin(inputs).detach() - bias, "linear_forward(x (4, 3), weight (2, 3), bias None)")
    _expect_named_mismatch(linear_forward, (torch.randn(4, 5), weight, bias),
                           "linear_forward(x (4, 5), weight (2, 3), bias (2,))", (5, 3), "x's features and the weight")
    _expect_named_mismatch(linear_forward, (inputs, weight, torch.randn(4)),
                           "linear_forward(x (4, 3), weight (2, 3), bias (4,))", (4, 2), "the bias and the weight")
    counter = ProductCounter()
    with counter:
        checks.call(linear_forward, torch.randn(4, 3), weight, bias, hints=hints)
    checks.expect(not counter.calls,
                  f"linear_forward called {', '.join(sorted(set(counter.calls)))}: the exercise builds the outputs "
                  "by broadcasting, without a matrix or vector product (@, matmul, einsum, F.linear, ...).")
