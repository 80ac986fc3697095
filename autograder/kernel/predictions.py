"""Checked predictions: the reveal a lesson's demo prints after the student's prediction cell.

A prediction cell (an ordinary code cell, metadata ``pte.prediction``) holds one line
``prediction_<name> = None``; the student replaces ``None`` with a number, a shape or a choice.
The demo right below it computes as usual and shows its answer only through ``reveal``, which
asks for a prediction first while there is none. ``reveal`` never raises: Run All on an
untouched release reaches the end. Predictions are never graded; the grading command reads the
literal from the submitted cell's source (``autograder.grading.intake.predictions``) for the
class report.
"""
from __future__ import annotations

import math
import numbers

ASK = "Write your prediction in the cell above first, then run this cell again."
# numbers agree to this relative tolerance (a prediction is written by hand: 0.1 for 0.1000000015)
REL_TOL = 1e-3
SIGNIFICANT = 6   # digits of a float shown: what float32 arithmetic determines, not rounding noise


def normalise(value: object) -> object:
    """The comparable form of a prediction or an answer.

    Shapes (``torch.Size``, tuples, lists of integers) become tuples of ints; one-element tensors and
    NumPy scalars become Python numbers; strings are stripped and lower-cased. Anything else is kept."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower()
    item = getattr(value, "item", None)
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    if callable(item) and not isinstance(value, (tuple, list)):
        try:
            count = size() if callable(size) else size
            if count in (None, 1):
                return normalise(item())
        except Exception:  # noqa: BLE001 - an odd object stays as it is
            return value
    if isinstance(value, (tuple, list)):
        return tuple(normalise(v) for v in value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def matches(prediction: object, actual: object) -> bool:
    """Whether a prediction agrees with the answer: shapes element by element, numbers within
    ``REL_TOL``, choices ignoring case and surrounding spaces."""
    try:
        return _same(normalise(prediction), normalise(actual))
    except Exception:  # noqa: BLE001
        return False


def _same(p: object, a: object) -> bool:
    if isinstance(p, tuple) and isinstance(a, tuple):
        return len(p) == len(a) and all(_same(x, y) for x, y in zip(p, a))
    if isinstance(p, bool) or isinstance(a, bool):
        return p is a
    if isinstance(p, numbers.Real) and isinstance(a, numbers.Real):
        if math.isnan(p) or math.isnan(a):
            return math.isnan(p) and math.isnan(a)
        return math.isclose(p, a, rel_tol=REL_TOL, abs_tol=1e-12)
    return p == a


def shown(value: object) -> str:
    """How a prediction or an answer is written in the reveal."""
    v = normalise(value)
    if isinstance(v, tuple):
        return "(" + ", ".join(shown(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, float) and not isinstance(v, bool):
        return f"{v:.{SIGNIFICANT}g}"
    if isinstance(value, str):
        return repr(value.strip())
    return repr(v) if isinstance(v, str) else str(v)


def reveal(prediction: object, actual: object, *, name: str) -> None:
    """Print the answer of prediction ``name`` (``"<lesson id>:<short name>"``) once one was written.

    While ``prediction`` is ``None`` it only asks for one. Otherwise: "You predicted …; the answer
    is …." and whether the two agree. Never raises."""
    try:
        if prediction is None:
            print(ASK)
            return
        verdict = ("Your prediction matches." if matches(prediction, actual) else
                   "They differ: work out why before you read on.")
        print(f"You predicted {shown(prediction)}; the answer is {shown(actual)}. {verdict}")
    except Exception:  # noqa: BLE001 - a reveal never stops Run All
        try:
            print(f"You predicted {prediction!r}; the answer is {actual!r}.")
        except Exception:  # noqa: BLE001
            print(f"The answer to {name} could not be shown.")
