"""Wrong answers for lesson 06_reading_errors: each embodies one listed pitfall (exercise -> pitfall -> answer cell).

checked_loss's wrong answers are the solution with one part changed (:func:`_loss`), so that each breaks one thing.
"""

_LOSS = '''
def checked_loss(pred, target, task):
    if task == "regression":
        if pred.shape != target.shape:
            raise ValueError(f"pred has shape {tuple(pred.shape)}, target {tuple(target.shape)}")
        if pred.dtype != target.dtype:
            raise TypeError(f"pred is {pred.dtype}, target {target.dtype}")
        return F.mse_loss(pred, target)
    if target.dtype.is_floating_point or target.dtype == torch.bool:
        raise TypeError(f"the target is {target.dtype}; classes are integers")
    if pred.dim() != 2 or target.dim() != 1 or pred.shape[0] != target.shape[0]:
        raise ValueError(f"pred has shape {tuple(pred.shape)}, target {tuple(target.shape)}")
    outside = target[(target < 0) | (target >= pred.shape[1])]
    if outside.numel() > 0:
        raise ValueError(f"class {int(outside[0])} is out of range")
    return F.cross_entropy(pred, target.long())
'''


def _loss(old: str, new: str) -> str:
    """The solution of checked_loss with ``old`` (which it must hold) replaced by ``new``."""
    assert old in _LOSS, old
    return _LOSS.replace(old, new)


_SHAPE_CHECK = '''        if pred.shape != target.shape:
            raise ValueError(f"pred has shape {tuple(pred.shape)}, target {tuple(target.shape)}")
'''
_DTYPE_CHECK = '''        if pred.dtype != target.dtype:
            raise TypeError(f"pred is {pred.dtype}, target {target.dtype}")
'''
_LABEL_CHECK = '''    if target.dtype.is_floating_point or target.dtype == torch.bool:
        raise TypeError(f"the target is {target.dtype}; classes are integers")
'''
_RANGE = "(target < 0) | (target >= pred.shape[1])"
_ABOVE_ONLY = "checks only classes above C - 1, so -1 and the -100 that F.cross_entropy skips get through"

PITFALLS = {
    "checked_loss": {
        "lets broadcasting through": _loss(_SHAPE_CHECK, ""),
        "compares the number of elements, so (8,) and (8, 1) pass": _loss(_SHAPE_CHECK, '''\
        if pred.numel() != target.numel():
            raise ValueError(f"pred has shape {tuple(pred.shape)}, target {tuple(target.shape)}")
        pred, target = pred.reshape(-1), target.reshape(-1)
'''),
        "refuses without naming the shapes": _loss(_SHAPE_CHECK, '''        if pred.shape != target.shape:
            raise ValueError("pred and target have different shapes")
'''),
        "lets float64 targets meet float32 predictions": _loss(_DTYPE_CHECK, ""),
        "passes float labels on as classes": _loss(_LABEL_CHECK, ""),
        "leaves classes out of range to F.cross_entropy": _loss(_RANGE, "target < 0"),
    },
    "move_batch": {
        "calls .to without using its result": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        batch.to(device)
        return batch
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(item, device) for item in batch)
    return batch
''',
        "returns every sequence as a list": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [move_batch(item, device) for item in batch]
    return batch
''',
        "moves only the top level": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in batch.items()}
    return type(batch)(item.to(device) if isinstance(item, torch.Tensor) else item for item in batch)
''',
    },
    "classify_error": {
        "matches only the word 'shape'": '''
def classify_error(exc):
    message = str(exc)
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    if "shape" in message:
        return "shape"
    return "other"
''',
        "knows only the CUDA wording 'same device'": '''
def classify_error(exc):
    message = str(exc)
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "same device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
        "matches only 'inplace', not 'in-place'": '''
def classify_error(exc):
    message = str(exc)
    if "inplace" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
        "reads 'mat1 and mat2' as a shape error before looking for a dtype": '''
def classify_error(exc):
    message = str(exc)
    if "mat1" in message or "shape" in message or "size" in message:
        return "shape"
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    return "other"
''',
        "matches only the word 'dtype', not 'scalar type'": '''
def classify_error(exc):
    message = str(exc)
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message:
        return "dtype"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
    },
}

HIDDEN_ONLY = {
    "checked_loss": {
        "passes int32 classes to F.cross_entropy as they are": _loss("target.long())", "target)"),
    },
    "move_batch": {
        "looks only two containers deep": '''
def move_batch(batch, device):
    def move(value):
        return value.to(device) if isinstance(value, torch.Tensor) else value
    def one_level(value):
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(move(item) for item in value)
        return move(value)
    if isinstance(batch, dict):
        return {key: one_level(item) for key, item in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(one_level(item) for item in batch)
    return move(batch)
''',
    },
    "classify_error": {
        "knows only the two device phrasings shown in the lesson": '''
def classify_error(exc):
    message = str(exc)
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "on the same device" in message or "is not on the expected device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    if "out of bounds" in message or "out of range" in message:
        return "other"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
    },
}

# Wrong answers students really write that the spec's pitfall list does not name; the hidden checks reject each.
PLAUSIBLE = {
    "checked_loss": {
        "refuses with an assert, which raises AssertionError, not ValueError": _loss(_SHAPE_CHECK, '''\
        assert pred.shape == target.shape, f"pred {tuple(pred.shape)}, target {tuple(target.shape)}"
'''),
        "squeezes both first, so (8,) against (8, 1) is quietly accepted": _loss(_SHAPE_CHECK, '''\
        pred, target = pred.squeeze(), target.squeeze()
''' + _SHAPE_CHECK),
        _ABOVE_ONLY: _loss(_RANGE, "target >= pred.shape[1]"),
        "accepts only torch.long classes, so int32 and uint8 are refused": _loss(
            "target.dtype.is_floating_point or target.dtype == torch.bool", "target.dtype != torch.long"),
        "averages over dim 0 only, so a (5, 3) pair gives 3 numbers instead of one":
            _loss("return F.mse_loss(pred, target)", "return ((pred - target) ** 2).mean(dim=0)"),
    },
    "move_batch": {
        "knows lists and dicts but not tuples, so (inputs, labels) stays where it was": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, list):
        return [move_batch(item, device) for item in batch]
    return batch
''',
        "treats every iterable as a container, so a string recurses forever": '''
def move_batch(batch, device):
    from collections.abc import Iterable
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, Iterable):
        return type(batch)(move_batch(item, device) for item in batch)
    return batch
''',
        "adds .float() by habit, so the labels stop being torch.long": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device).float()
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(item, device) for item in batch)
    return batch
''',
        "writes the moved tensors into the caller's dicts and lists": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        for key in batch:
            batch[key] = move_batch(batch[key], device)
        return batch
    if isinstance(batch, list):
        for i, item in enumerate(batch):
            batch[i] = move_batch(item, device)
        return batch
    if isinstance(batch, tuple):
        return tuple(move_batch(item, device) for item in batch)
    return batch
''',
    },
    "classify_error": {
        "reads 'index 5 is out of bounds for dimension 0 with size 3' as a shape error": '''
def classify_error(exc):
    message = str(exc).lower()
    # "dimension" and "size" in "index 5 is out of bounds for dimension 0 with size 3" read as a shape error
    for family, words in [("inplace", ("inplace", "in-place")), ("device", ("device",)),
                          ("dtype", ("dtype", "scalar type")), ("shape", ("shape", "size", "dimension"))]:
        if any(word in message for word in words):
            return family
    return "other"
''',
        '"mat1 and mat2" decides nothing':
            PITFALLS["classify_error"]["reads 'mat1 and mat2' as a shape error before looking for a dtype"],
        "matches 'type' to catch 'scalar type', so a device message becomes 'dtype'": '''
def classify_error(exc):
    message = str(exc).lower()
    # "type" to catch "scalar type" as well as "dtype": but "type" occurs in other messages too
    for family, words in [("inplace", ("inplace", "in-place")), ("device", ("device",)), ("dtype", ("type",)),
                          ("shape", ("shape", "size", "dimension"))]:
        if any(word in message for word in words):
            return family
    return "other"
''',
        "only RuntimeError counts, so cross_entropy's ValueError and numpy()'s TypeError come back 'other'": '''
def classify_error(exc):
    if not isinstance(exc, RuntimeError):
        return "other"
    message = str(exc).lower()
    for family, words in [("inplace", ("inplace", "in-place")), ("device", ("device",)),
                          ("dtype", ("dtype", "scalar type")), ("shape", ("shape", "size", "dimension"))]:
        if any(word in message for word in words):
            return family
    return "other"
''',
        "reads 'expected ... but got' as a dtype error, though shape messages say it too": '''
def classify_error(exc):
    message = str(exc).lower()
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message or ("expected" in message and "but got" in message):
        return "dtype"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
        "files everything about grad or backward under 'other' before looking for in-place": '''
def classify_error(exc):
    message = str(exc).lower()
    if "grad" in message or "backward" in message:
        return "other"
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
        "takes every ValueError for a shape error": '''
def classify_error(exc):
    message = str(exc).lower()
    if isinstance(exc, ValueError):
        return "shape"
    if "inplace" in message or "in-place" in message:
        return "inplace"
    if "device" in message:
        return "device"
    if "dtype" in message or "scalar type" in message:
        return "dtype"
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
    },
}

# Correct answers written differently: they keep full marks.
RIGHT_ANSWERS = {
    "checked_loss": {
        "by hand (log_softmax and gather), torch.Size in the messages, printing to stdout and stderr": '''
def checked_loss(pred, target, task):
    import sys
    print("checked_loss:", task, pred.shape, target.shape, file=sys.stderr)
    if task == "classification":
        if target.dtype not in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            raise TypeError(f"classes must be integers, got {target.dtype}")
        if pred.dim() != 2 or target.dim() != 1 or len(pred) != len(target):
            raise ValueError(f"expected (N, C) and (N,), got {pred.shape} and {target.shape}")
        bad = [int(v) for v in target.tolist() if not 0 <= v < pred.shape[1]]
        if bad:
            raise ValueError(f"classes {bad} outside [0, {pred.shape[1]})")
        return -pred.log_softmax(dim=1).gather(1, target.long().unsqueeze(1)).mean()
    if pred.shape != target.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {target.shape}")
    if pred.dtype != target.dtype:
        raise TypeError(f"dtypes differ: {pred.dtype} vs {target.dtype}")
    print("ok")
    return ((pred - target) ** 2).mean()
''',
    },
    "move_batch": {
        "torch.utils._pytree.tree_map over the batch": '''
def move_batch(batch, device):
    from torch.utils._pytree import tree_map
    return tree_map(lambda value: value.to(device) if isinstance(value, torch.Tensor) else value, batch)
''',
        "non_blocking=True, tuple and list handled apart": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(move_batch(item, device) for item in batch)
    if isinstance(batch, list):
        return [move_batch(item, device) for item in batch]
    return batch
''',
    },
    "classify_error": {
        "regular expressions, ignoring case, printing to stdout and stderr": '''
def classify_error(exc):
    import re
    import sys
    text = str(exc)
    print("classifying:", text[:60])
    print(type(exc).__name__, file=sys.stderr)
    for family, pattern in [("inplace", r"in-?place"), ("device", r"device"), ("dtype", r"dtype|scalar type"),
                            ("other", r"out of (bounds|range)"), ("shape", r"shape|size|dimension")]:
        if re.search(pattern, text, flags=re.IGNORECASE):
            return family
    return "other"
''',
    },
}

# One wrong answer per rule bullet of each exercise's spec (the bold lead of the bullet is its key): each breaks
# that rule alone and loses the exercise's points (test_pitfalls.py, test_rule_breaker_loses_its_points).
RULES = {
    "checked_loss": {
        "regression: the mean squared error": _loss("return F.mse_loss(pred, target)",
                                                    "return ((pred - target) ** 2).sum() / pred.shape[0]"),
        "classification: the mean cross-entropy": _loss("F.cross_entropy(pred, target.long())",
                                                        "F.cross_entropy(pred, target.long(), reduction='sum')"),
        "shapes that do not fit: `ValueError` naming both shapes":
            PITFALLS["checked_loss"]["compares the number of elements, so (8,) and (8, 1) pass"],
        "dtypes that do not fit: `TypeError` naming them":
            PITFALLS["checked_loss"]["lets float64 targets meet float32 predictions"],
        "a class outside 0 … C − 1: `ValueError` naming it":
            PLAUSIBLE["checked_loss"][_ABOVE_ONLY],
    },
    "move_batch": {
        "every tensor moved, with its dtype": '''
def move_batch(batch, device):
    # moves the tensors it finds inside containers, but a bare tensor is returned as it came
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(item.to(device) if isinstance(item, torch.Tensor) else move_batch(item, device)
                           for item in batch)
    return batch
''',
        "containers keep their type, to any depth": PITFALLS["move_batch"]["returns every sequence as a list"],
        "anything else comes back unchanged": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, (int, float)):
        return torch.tensor(batch, device=device)
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(item, device) for item in batch)
    return batch
''',
        "the caller's batch stays as it was":
            PLAUSIBLE["move_batch"]["writes the moved tensors into the caller's dicts and lists"],
        "either spelling of `device`": '''
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=device.type == "cuda")
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(item, device) for item in batch)
    return batch
''',
    },
    "classify_error": {
        '`"shape"`': PITFALLS["classify_error"]["matches only the word 'shape'"],
        '`"dtype"`': PITFALLS["classify_error"]["matches only the word 'dtype', not 'scalar type'"],
        '`"device"`': PITFALLS["classify_error"]["knows only the CUDA wording 'same device'"],
        '`"inplace"`': PITFALLS["classify_error"]["matches only 'inplace', not 'in-place'"],
        '`"other"`': PLAUSIBLE["classify_error"]["takes every ValueError for a shape error"],
    },
}
