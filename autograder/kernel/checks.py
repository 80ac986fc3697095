"""Tensor-aware checks for the course's test cells.

Every check raises :class:`CheckFailed` (an ``AssertionError``) whose message says what
was expected, what arrived (shape, dtype, device, storage, autograd history, largest
difference) and, where the symptom points at a known misconception, names it.
Nothing is returned on success; a test cell simply runs to its end.

These *visible* checks help a student in JupyterLab; they do not decide a grade. The
grade comes from the hidden part of each test cell (:mod:`autograder.kernel.hidden`),
which observes what the student's code produced on seeded inputs.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

import numpy as np
import torch

# Called unbound on what a student's function returned, so that an instance attribute of the same name (a plain
# tensor has a __dict__) cannot answer for it. Taken at import, before any student code: these are the methods
# of torch._C.TensorBase and torch._C.StorageBase, immutable types that a later patch of torch.Tensor leaves alone.
_untyped_storage = torch.Tensor.untyped_storage
_storage_data_ptr = torch.UntypedStorage.data_ptr
_detach = torch.Tensor.detach
_EXACT_BUILTINS = (bool, int, float, str)

__all__ = [
    "CheckFailed",
    "describe",
    "storage_id",
    "expect",
    "call",
    "check_type",
    "check_tensor",
    "check_number",
    "check_shares_storage",
    "check_own_storage",
    "check_no_autograd_history",
    "passed",
    "needs",
    "fail",
]


class CheckFailed(AssertionError):
    """A course check failed; the message explains what and, where known, why.

    In a notebook, IPython shows it as the check's message and the line of the test
    cell that failed, without the frames inside this package.
    """

    def _render_traceback_(self) -> list[str]:
        import linecache
        import traceback

        lines = ["CheckFailed: " + str(self)]
        frames = [f for f in traceback.extract_tb(self.__traceback__)
                  if f.filename.startswith("<") or "ipykernel" in f.filename]
        if frames:
            frame = frames[-1]
            last = frame.end_lineno or frame.lineno
            code = "\n".join(linecache.getline(frame.filename, n).rstrip()
                             for n in range(frame.lineno, last + 1)).strip() or frame.line
            lines.insert(0, f"The check that failed (line {frame.lineno}):\n{code}\n")
        return lines


class needs:
    """``with checks.needs("exercise 2 (fit)"):`` runs a demo that calls an exercise.

    While the exercise is still the stub (it raises ``NotImplementedError``), the demo
    prints what to solve first instead of stopping with a traceback, so a student who is
    stuck can still run every cell below. Any other error is shown as usual.
    """

    def __init__(self, what: str):
        self.what = what

    def __enter__(self) -> "needs":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, NotImplementedError):
            print(f"This demo needs {self.what}: solve it first, then run this cell again.")
            return True
        return False


def fail(name: str, problem: str, hint: str | None = None) -> None:
    """Raise :class:`CheckFailed` saying ``name: problem`` and, if given, the likely mistake ``hint``."""
    message = f"{name}: {problem}"
    if hint:
        message += f"\nLikely mistake: {hint}"
    raise CheckFailed(message)


def describe(value: Any) -> str:
    """One line naming what ``value`` is: for a tensor its shape, dtype, device and graph."""
    if isinstance(value, torch.Tensor):
        parts = [f"shape={tuple(value.shape)}", f"dtype={value.dtype}", f"device={value.device}"]
        if value.requires_grad:
            parts.append("requires_grad=True")
        if value.grad_fn is not None:
            parts.append(f"grad_fn={type(value.grad_fn).__name__}")
        return f"Tensor({', '.join(parts)})"
    if isinstance(value, np.ndarray):
        return f"numpy.ndarray(shape={value.shape}, dtype={value.dtype})"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def storage_id(t: torch.Tensor) -> int:
    """Address of the storage ``t`` is a window on (equal for every view of it).

    Asked of the tensor through the C-level method, never through ``t``'s own attributes.
    """
    return _storage_data_ptr(_untyped_storage(t))


def expect(condition: Any, message: str) -> None:
    """Fail with ``message`` unless ``condition`` is exactly ``True`` (or truthy bool-like)."""
    if isinstance(condition, torch.Tensor):
        if condition.numel() != 1:
            raise CheckFailed(f"{message}\n(the check got a tensor of shape {tuple(condition.shape)}, not a bool)")
        condition = bool(condition.item())
    if condition is not True and not (isinstance(condition, (bool, np.bool_)) and bool(condition)):
        raise CheckFailed(message)


def _argument_summary(args: tuple, kwargs: Mapping[str, Any]) -> str:
    shown = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return ", ".join(shown)


def call(fn: Callable, *args: Any, hints: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
    """Call a student's function; turn an exception into a failure that explains it.

    ``hints`` maps a regular expression searched in ``"ExceptionType: message"`` to the
    misconception it reveals.
    """
    name = getattr(fn, "__name__", repr(fn))
    try:
        return fn(*args, **kwargs)
    except CheckFailed:
        raise
    except Exception as exc:  # the student's error is the finding we report
        _explain_exception(exc, name, f"{name}({_argument_summary(args, kwargs)})", hints)


def _explain_exception(exc: Exception, what: str, label: str, hints: Mapping[str, str] | None) -> None:
    """Fail for an exception raised by student code: a stub left in place, or an error with a hint."""
    if isinstance(exc, NotImplementedError):
        raise CheckFailed(
            f"{what} is not implemented yet: replace the `raise NotImplementedError()` line with your code."
        ) from None
    text = f"{type(exc).__name__}: {exc}"
    hint = next((h for pattern, h in (hints or {}).items() if re.search(pattern, text)), None)
    fail(label, f"raised {text}", hint)


def check_type(value: Any, expected_type: type | tuple, name: str = "result", hint: str | None = None) -> None:
    """``value`` must be an instance of ``expected_type`` (a Python bool is not accepted as an int)."""
    types = expected_type if isinstance(expected_type, tuple) else (expected_type,)
    # Built-in values must be exactly that type: a subclass could redefine == or float().
    ok = any(type(value) is t if t in _EXACT_BUILTINS else isinstance(value, t) for t in types)
    if not ok:
        wanted = " or ".join(t.__name__ for t in types)
        if hint is None:
            if value is None:
                hint = "the function does not return anything (a missing `return`?)"
            elif isinstance(value, torch.Tensor) and value.numel() == 1 and any(t in (bool, int, float) for t in types):
                hint = "a one-element tensor is not a Python number: use `.item()` (or `bool(...)`)"
        fail(name, f"expected a {wanted}, got {describe(value)}", hint)


def _dtype_hint(actual: torch.dtype, expected: torch.dtype) -> str | None:
    if actual == torch.float64 and expected == torch.float32:
        return ("float64 usually comes from NumPy: torch.from_numpy keeps the array's dtype. "
                "Convert with .float() (PyTorch's default is float32).")
    if expected == torch.long and actual.is_floating_point:
        return ("class labels must be integers of dtype torch.long (int64): CrossEntropyLoss and "
                "indexing want class indices, not floats. Convert with .long().")
    if expected == torch.long and actual in (torch.int32, torch.int16, torch.int8, torch.uint8):
        return f"{actual} is an integer type, but class indices are expected as torch.long (int64): use .long()."
    if actual == torch.uint8 and expected.is_floating_point:
        return "raw image bytes (uint8): convert with .float() and normalize before feeding a model."
    if expected.is_floating_point and not actual.is_floating_point:
        return "an integer tensor where floats are expected: convert with .float()."
    return None


def _shape_hint(actual: tuple, expected: tuple) -> str | None:
    if len(actual) == len(expected) >= 2 and actual[-2:] == expected[-2:][::-1] and actual[:-2] == expected[:-2]:
        return "the last two dimensions are swapped: a transpose missing (or one too many)?"
    if len(actual) == 1 and len(expected) >= 2 and actual[0] == math.prod(expected):
        return "everything was flattened into one dimension, including the batch dimension."
    if math.prod(actual) == math.prod(expected):
        if len(actual) == len(expected) + 1 and 1 in actual:
            return "an extra dimension of size 1: squeeze it (or do not unsqueeze)."
        if len(actual) + 1 == len(expected) and 1 in expected:
            return "a dimension of size 1 is missing: keep the batch or feature dimension."
        return "right number of elements, wrong arrangement: check which dimensions you merged or split."
    return None


def check_tensor(
    actual: Any,
    expected: torch.Tensor,
    name: str = "result",
    *,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    check_dtype: bool = True,
    check_device: bool = True,
    hints: Mapping[str, str] | None = None,
) -> None:
    """``actual`` must be a tensor with ``expected``'s shape, dtype, device and values.

    ``hints`` may override the message for one kind of problem: ``"type"``,
    ``"shape"``, ``"dtype"``, ``"device"`` or ``"values"``.
    """
    hints = dict(hints or {})
    if not isinstance(actual, torch.Tensor):
        hint = hints.get("type")
        if hint is None:
            if actual is None:
                hint = "the function does not return anything (a missing `return`?)"
            elif isinstance(actual, np.ndarray):
                hint = "a NumPy array, not a tensor: convert with torch.from_numpy or torch.as_tensor."
            elif isinstance(actual, (int, float, list, tuple)):
                hint = "a Python value, not a tensor: keep the result as a torch.Tensor."
        fail(name, f"expected a torch.Tensor, got {describe(actual)}", hint)
    if type(actual) not in (torch.Tensor, torch.nn.Parameter):
        fail(name, f"expected a plain torch.Tensor, got an instance of {type(actual).__name__}",
             "return an ordinary tensor (a Tensor subclass can change how it compares).")
    if tuple(actual.shape) != tuple(expected.shape):
        fail(
            name,
            f"shape is {tuple(actual.shape)}, expected {tuple(expected.shape)}",
            hints.get("shape") or _shape_hint(tuple(actual.shape), tuple(expected.shape)),
        )
    if check_dtype and actual.dtype != expected.dtype:
        fail(name, f"dtype is {actual.dtype}, expected {expected.dtype}",
             hints.get("dtype") or _dtype_hint(actual.dtype, expected.dtype))
    if check_device and actual.device != expected.device:
        fail(name, f"device is {actual.device}, expected {expected.device}",
             hints.get("device")
             or "tensors must be on the same device: move them with .to(device) and use the result.")
    a = _detach(actual).to("cpu", torch.float64)
    e = _detach(expected).to("cpu", torch.float64)
    if a.numel() == 0:
        return
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if not bool(torch.all(torch.eq(nan_a, nan_e))):
        fail(name, f"has NaN where the expected result has {'none' if not bool(torch.any(nan_e)) else 'numbers'}",
             hints.get("values"))
    a = a.masked_fill(nan_a, 0.0)
    e = e.masked_fill(nan_e, 0.0)
    diff = torch.abs(a - e)
    allowed = atol + rtol * torch.abs(e)
    bad = torch.gt(diff, allowed)
    if bool(torch.any(bad)):
        worst = int(diff.argmax())
        index = tuple(int(i) for i in np.unravel_index(worst, tuple(a.shape))) if a.dim() else ()
        fail(
            name,
            f"values differ: {int(bad.sum())} of {a.numel()} elements outside tolerance, "
            f"max difference {float(diff.max()):.3g} at index {index} "
            f"(got {float(a.flatten()[worst]):.6g}, expected {float(e.flatten()[worst]):.6g})",
            hints.get("values"),
        )


def check_number(actual: Any, expected: float, name: str = "result", *, tol: float = 1e-6,
                 kind: type = float, hint: str | None = None) -> None:
    """``actual`` must be a plain Python number (not a tensor) within ``tol`` of ``expected``."""
    if isinstance(actual, torch.Tensor):
        fail(name, f"expected a Python {kind.__name__}, got {describe(actual)}",
             "a tensor was returned: convert a one-element tensor with `.item()` "
             "(keeping the tensor also keeps its autograd graph alive).")
    if kind is float and isinstance(actual, int) and not isinstance(actual, bool):
        actual = float(actual)
    check_type(actual, kind, name)
    if not math.isfinite(actual) or abs(actual - expected) > tol:
        fail(name, f"is {actual!r}, expected {expected!r} (tolerance {tol:g})", hint)


def check_shares_storage(a: torch.Tensor, b: torch.Tensor, name: str = "result", hint: str | None = None) -> None:
    """``a`` and ``b`` must be windows on one storage (a view, not a copy)."""
    check_type(a, torch.Tensor, name)
    if storage_id(a) != storage_id(b):
        fail(name, "is a copy: it does not share storage with the input", hint)


def check_own_storage(result: torch.Tensor, source: torch.Tensor, name: str = "result",
                      hint: str | None = None) -> None:
    """``result`` must not share storage with ``source`` (writing to one must not change the other)."""
    check_type(result, torch.Tensor, name)
    if storage_id(result) == storage_id(source):
        fail(name, "shares storage with the input, so writing to one changes the other", hint
             or "`.detach()` (like a view) returns a tensor on the same storage: add `.clone()` to copy the data.")


def check_no_autograd_history(t: torch.Tensor, name: str = "result", hint: str | None = None) -> None:
    """``t`` must be outside the autograd graph: no ``grad_fn``, ``requires_grad=False``."""
    check_type(t, torch.Tensor, name)
    if t.grad_fn is not None or t.requires_grad:
        fail(name, f"is still attached to the autograd graph ({describe(t)})", hint
             or "`.clone()` is recorded by autograd (grad_fn=CloneBackward0): call `.detach()` before `.clone()`.")


def passed(what: str) -> None:
    """Print the line a test cell shows when all its checks passed."""
    print(f"All checks passed: {what}")


def dataset_item(dataset: Any, index: int, name: str | None = None, size: int = 2,
                 hints: Mapping[str, str] | None = None) -> tuple:
    """``dataset[index]``, which must be a tuple (or list) of ``size`` parts, e.g. ``(input, label)``.

    An exception raised by ``__getitem__`` becomes a failure naming the item (``hints`` as in
    :func:`call`). Returns the item as a tuple. (Added for lesson 03.)
    """
    label = name or f"{type(dataset).__name__}[{index}]"
    try:
        item = dataset[index]
    except CheckFailed:
        raise
    except Exception as exc:  # the student's error is the finding we report
        _explain_exception(exc, f"{label}: __getitem__", label, hints)
    if not isinstance(item, (tuple, list)) or len(item) != size:
        fail(label, f"returned {describe(item)}; expected a tuple of {size} parts",
             "__getitem__ should return one example as a tuple, e.g. `return image, label`.")
    return tuple(item)


def expect_raises(fn: Callable, exc_type: type[BaseException] | tuple, message: str, *args: Any,
                  **kwargs: Any) -> BaseException:
    """``fn(*args, **kwargs)`` must raise ``exc_type``; otherwise fail with ``message``.

    A different exception fails too, naming what was raised instead. Returns the exception.
    (Added for lesson 03.)
    """
    name = getattr(fn, "__name__", repr(fn))
    wanted = exc_type.__name__ if isinstance(exc_type, type) else " or ".join(t.__name__ for t in exc_type)
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        return exc
    except Exception as exc:  # a wrong exception type is itself the finding
        if isinstance(exc, NotImplementedError):
            _explain_exception(exc, name, name, None)
        fail(f"{name}({_argument_summary(args, kwargs)})",
             f"raised {type(exc).__name__}: {exc}, expected {wanted}", message)
    fail(f"{name}({_argument_summary(args, kwargs)})", f"returned without raising {wanted}", message)
