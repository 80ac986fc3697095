"""Observations: what a hidden test saw the student's code produce, in a safe, plain form.

A hidden test does not decide anything by itself. It *observes* values (the result of
the student's function on seeded inputs) and each observation is encoded here as plain
JSON: tensors and arrays as dtype, shape, optional strides and values; numbers, strings,
booleans and ``None`` as themselves; lists, tuples and string-keyed dicts of those.
Nothing is pickled, and nothing the student's code returns can run code when read.

The same :func:`compare` decides a match in two places:
- inside an instructor's kernel (plain ``nbgrader autograde``, Validate on ``solutions/``),
  against the stored reference observation;
- in the grader's own trusted process, where the student's kernel only recorded.

Tolerances and labels always come from the *reference* entry.

An observation travels from the kernel as display data whose MIME type names its format
(:data:`MIME`, as Vega-Lite's ``application/vnd.vegalite.v5+json`` does); the grader reads it back as an
``autograder.kernel.vocabulary.messages.Observation`` of :data:`FORMAT` and refuses one of another format.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from autograder.kernel import private_apis

FORMAT = 1                   # the observation message's version (messages.Observation.VERSION): it is in MIME
MIME = f"application/vnd.pte.observation.v{FORMAT}+json"
_ANY_MIME = re.compile(r"application/vnd\.pte\.observation(?:\.v(\d{1,9}))?\+json")
MAX_ELEMENTS = 50_000        # per tensor or array
MAX_CHARS = 400_000          # one encoded observation
MAX_DEPTH = 6


def is_mime(key: Any) -> bool:
    """Is ``key`` an observation's MIME type, of any format (so that one of another format is refused, not
    overlooked)?"""
    return isinstance(key, str) and _ANY_MIME.fullmatch(key) is not None


def mime_format(mime: str) -> int | None:
    """The format an observation MIME type names; None for the unversioned type of the first releases."""
    found = _ANY_MIME.fullmatch(mime)
    return int(found.group(1)) if found and found.group(1) else None


class TooLarge(ValueError):
    """The value is too large to observe (a limit protects the grader)."""


def _number(x: float) -> Any:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _decode_number(x: Any) -> float:
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[x]
    return float(x)


def _array(kind: str, dtype: str, shape: list[int], values: list, strides: list[int] | None) -> dict:
    if len(values) > MAX_ELEMENTS:
        raise TooLarge(f"{kind} with {len(values)} elements (the limit is {MAX_ELEMENTS})")
    out = {"type": kind, "dtype": dtype, "shape": shape, "values": values}
    if strides is not None:
        out["strides"] = strides
    return out


def encode(value: Any, *, strides: bool = False, depth: int = 0) -> Any:  # noqa: C901  (one branch per type; to split)
    """``value`` as plain JSON data (see the module docstring); unknown types become ``{"type": "object"}``."""
    if depth > MAX_DEPTH:
        raise TooLarge("nested more than 6 levels deep")
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is int:
        return {"type": "int", "value": value}
    if type(value) is float:
        return {"type": "float", "value": _number(value)}
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is always there in this course
        torch = None
    if torch is not None and type(value) in (torch.Tensor, torch.nn.Parameter):
        # Unbound methods of the C base class, which cannot be patched: neither an instance attribute
        # (``t.detach = ...``) nor a patched ``torch.Tensor`` answers for the tensor.
        base = private_apis.get(private_apis.TENSOR_BASE)
        t = base.cpu(base.detach(value))
        if t.numel() > MAX_ELEMENTS:
            raise TooLarge(f"a tensor with {t.numel()} elements (the limit is {MAX_ELEMENTS})")
        if t.is_complex():
            flat = [[_number(float(z.real)), _number(float(z.imag))] for z in t.reshape(-1).tolist()]
        elif t.dtype == torch.bool:
            flat = [bool(v) for v in t.reshape(-1).tolist()]
        elif t.is_floating_point():
            flat = [_number(float(v)) for v in t.to(torch.float64).reshape(-1).tolist()]
        else:
            flat = [int(v) for v in t.reshape(-1).tolist()]
        return _array("tensor", str(value.dtype), list(value.shape), flat,
                      list(base.stride(value)) if strides else None)
    if torch is not None and isinstance(value, torch.dtype):
        return {"type": "dtype", "value": str(value)}
    if torch is not None and isinstance(value, torch.device):
        return {"type": "device", "value": value.type}
    if torch is not None and type(value) is torch.Size:
        return {"type": "tuple", "items": [encode(int(v), depth=depth + 1) for v in value]}
    import numpy as np
    if type(value) is np.ndarray:
        if value.size > MAX_ELEMENTS:
            raise TooLarge(f"an array with {value.size} elements (the limit is {MAX_ELEMENTS})")
        if value.dtype.kind == "f":
            flat = [_number(float(v)) for v in value.astype(np.float64).reshape(-1).tolist()]
        elif value.dtype.kind in "iub":
            flat = [v if isinstance(v, bool) else int(v) for v in value.reshape(-1).tolist()]
        else:
            flat = [str(v) for v in value.reshape(-1).tolist()]
        return _array("ndarray", str(value.dtype), list(value.shape), flat,
                      [s // value.itemsize for s in value.strides] if strides else None)
    if isinstance(value, (np.bool_,)):
        return {"type": "numpy-scalar", "dtype": str(value.dtype), "value": bool(value)}
    if isinstance(value, np.integer):
        return {"type": "numpy-scalar", "dtype": str(value.dtype), "value": int(value)}
    if isinstance(value, np.floating):
        return {"type": "numpy-scalar", "dtype": str(value.dtype), "value": _number(float(value))}
    if type(value) in (list, tuple):
        return {"type": type(value).__name__, "items": [encode(v, strides=strides, depth=depth + 1) for v in value]}
    if type(value) is dict:
        if not all(type(k) is str for k in value):
            return {"type": "object", "name": "dict with non-string keys"}
        return {"type": "dict", "items": {k: encode(v, strides=strides, depth=depth + 1) for k, v in value.items()}}
    return {"type": "object", "name": type(value).__name__}


def to_json(entry: dict) -> str:
    text = json.dumps(entry, allow_nan=False, sort_keys=True)
    if len(text) > MAX_CHARS:
        raise TooLarge(f"an observation of {len(text)} characters (the limit is {MAX_CHARS})")
    return text


# ---------------------------------------------------------------- comparison

def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("type", "?")
    if value is None:
        return "None"
    return type(value).__name__


def _compare(expected: Any, actual: Any, atol: float, rtol: float, path: str) -> tuple[str, str] | None:
    """``None`` on a match, else ``(problem, detail)``: problem names no expected value, detail may."""
    if _kind(expected) != _kind(actual):
        return "type", f"{path}: expected {_kind(expected)}, got {_kind(actual)}"
    if not isinstance(expected, dict):
        if expected != actual:
            return "value", f"{path}: expected {expected!r}, got {actual!r}"
        return None
    kind = expected["type"]
    if kind in ("tensor", "ndarray"):
        return _compare_array(expected, actual, atol, rtol, path)
    if kind in ("int", "float", "numpy-scalar"):
        return _compare_number(expected, actual, atol, rtol, path)
    if kind in ("list", "tuple"):
        return _compare_items(expected, actual, atol, rtol, path)
    if kind == "dict":
        return _compare_dict(expected, actual, atol, rtol, path)
    if expected != actual:
        return "value", f"{path}: expected {expected!r}, got {actual!r}"
    return None


def _compare_array(expected: dict, actual: dict, atol: float, rtol: float, path: str) -> tuple[str, str] | None:
    """A tensor or an array: its dtype, shape and strides exactly, then each value within the tolerance."""
    for key in ("dtype", "shape", "strides"):
        if key in expected and expected[key] != actual.get(key):
            return key, f"{path}: {key} is {actual.get(key)}, expected {expected[key]}"
    values_e, values_a = expected["values"], actual.get("values")
    if not isinstance(values_a, list) or len(values_a) != len(values_e):
        return "values", f"{path}: malformed values"
    worst = 0.0
    for e, a in zip(values_e, values_a):
        if isinstance(e, list) or isinstance(e, bool) or isinstance(a, bool):
            if e != a:
                return "values", f"{path}: values differ"
            continue
        try:
            fe, fa = _decode_number(e), _decode_number(a)
        except (KeyError, TypeError, ValueError):
            return "values", f"{path}: malformed values"
        if math.isnan(fe) or math.isnan(fa):
            if not (math.isnan(fe) and math.isnan(fa)):
                return "values", f"{path}: NaN where the reference has none (or the reverse)"
            continue
        if math.isinf(fe) or math.isinf(fa):
            if fe != fa:
                return "values", f"{path}: infinite values differ"
            continue
        diff = abs(fa - fe)
        if diff > atol + rtol * abs(fe):
            worst = max(worst, diff)
    if worst:
        return "values", (f"{path}: values differ (max difference {worst:.3g}, "
                          f"tolerance atol={atol:g} rtol={rtol:g})")
    return None


def _compare_number(expected: dict, actual: dict, atol: float, rtol: float, path: str) -> tuple[str, str] | None:
    """An int, a float or a numpy scalar (its dtype exactly): equal, both NaN, or within the tolerance."""
    if expected["type"] == "numpy-scalar" and expected.get("dtype") != actual.get("dtype"):
        return "dtype", f"{path}: dtype {actual.get('dtype')}, expected {expected.get('dtype')}"
    e, a = expected.get("value"), actual.get("value")
    if isinstance(e, bool) or isinstance(a, bool):
        return (None if e == a else ("value", f"{path}: expected {e!r}, got {a!r}"))
    try:
        fe, fa = _decode_number(e), _decode_number(a)
    except (KeyError, TypeError, ValueError):
        return "value", f"{path}: malformed number"
    if math.isnan(fe) and math.isnan(fa):
        return None
    if fe == fa or (math.isfinite(fe) and math.isfinite(fa) and abs(fa - fe) <= atol + rtol * abs(fe)):
        return None
    return "value", f"{path}: expected {e!r}, got {a!r} (tolerance atol={atol:g} rtol={rtol:g})"


def _compare_items(expected: dict, actual: dict, atol: float, rtol: float, path: str) -> tuple[str, str] | None:
    """A list or a tuple: its length, then each item in order (the first difference)."""
    items_e, items_a = expected["items"], actual.get("items")
    if not isinstance(items_a, list) or len(items_a) != len(items_e):
        got = len(items_a) if isinstance(items_a, list) else "?"
        return "length", f"{path}: {got} items, expected {len(items_e)}"
    for i, (e, a) in enumerate(zip(items_e, items_a)):
        found = _compare(e, a, atol, rtol, f"{path}[{i}]")
        if found:
            return found
    return None


def _compare_dict(expected: dict, actual: dict, atol: float, rtol: float, path: str) -> tuple[str, str] | None:
    """A dict: its keys, then each value in the reference's order (the first difference)."""
    items_e, items_a = expected["items"], actual.get("items")
    if not isinstance(items_a, dict) or sorted(items_a) != sorted(items_e):
        got = sorted(items_a) if isinstance(items_a, dict) else "?"
        return "keys", f"{path}: keys {got}, expected {sorted(items_e)}"
    for key in items_e:
        found = _compare(items_e[key], items_a[key], atol, rtol, f"{path}[{key!r}]")
        if found:
            return found
    return None


def compare(reference: dict, actual: Any) -> tuple[str, str] | None:
    """Compare one encoded observation with its reference entry (``label``, ``value``, ``atol``, ``rtol``)."""
    atol = float(reference.get("atol", 0.0))
    rtol = float(reference.get("rtol", 0.0))
    return _compare(reference["value"], actual, atol, rtol, "value")
