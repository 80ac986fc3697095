"""Wrong answers for lesson 06_reading_errors: each embodies one listed pitfall (exercise -> pitfall -> answer cell)."""

PITFALLS = {
    "checked_mse": {
        "lets broadcasting through": '''
def checked_mse(pred, target):
    return F.mse_loss(pred, target)
''',
        "compares the number of elements, so (8,) and (8, 1) pass": '''
def checked_mse(pred, target):
    if pred.numel() != target.numel():
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    return F.mse_loss(pred.reshape(-1), target.reshape(-1))
''',
        "refuses without naming the shapes": '''
def checked_mse(pred, target):
    if pred.shape != target.shape:
        raise ValueError("pred and target have different shapes")
    return F.mse_loss(pred, target)
''',
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
    "checked_mse": {
        "divides the summed squares by the batch size, not by the number of elements": '''
def checked_mse(pred, target):
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    return ((pred - target) ** 2).sum() / pred.shape[0]
''',
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
    "checked_mse": {
        "refuses with an assert, which raises AssertionError, not ValueError": '''
def checked_mse(pred, target):
    assert pred.shape == target.shape, f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ"
    return F.mse_loss(pred, target)
''',
        "compares only the number of dimensions, so (4, 2) against (2, 4) gets through": '''
def checked_mse(pred, target):
    if pred.dim() != target.dim():
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    return F.mse_loss(pred, target)
''',
        "squeezes both first, so (8,) against (8, 1) is quietly accepted": '''
def checked_mse(pred, target):
    pred, target = pred.squeeze(), target.squeeze()
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    return F.mse_loss(pred, target)
''',
        "averages over dim 0 only, so a (5, 3) pair gives 3 numbers instead of one": '''
def checked_mse(pred, target):
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    return ((pred - target) ** 2).mean(dim=0)
''',
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
    "checked_mse": {
        "by hand, naming the shapes as torch.Size, printing to stdout and stderr": '''
def checked_mse(pred, target):
    import sys
    print("checked_mse:", pred.shape, target.shape)
    if pred.shape != target.shape:
        print("refusing", file=sys.stderr)
        raise ValueError(f"shapes differ: {pred.shape} vs {target.shape}")
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
    "checked_mse": {
        "equal shapes: the mean squared error":
            HIDDEN_ONLY["checked_mse"]["divides the summed squares by the batch size, not by the number of elements"],
        "a 0-dimensional tensor autograd can backpropagate through": '''
def checked_mse(pred, target):
    if pred.shape != target.shape:
        raise ValueError(f"pred has shape {tuple(pred.shape)}, target {tuple(target.shape)}")
    return torch.tensor(F.mse_loss(pred, target).item())
''',
        "different shapes raise `ValueError`":
            PITFALLS["checked_mse"]["compares the number of elements, so (8,) and (8, 1) pass"],
        "the message names both shapes": PITFALLS["checked_mse"]["refuses without naming the shapes"],
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
