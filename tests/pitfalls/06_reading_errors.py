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
    "gated_residual": {
        "an in-place rewrite that still breaks backward": '''
def gated_residual(x, w):
    h = torch.tanh(x @ w)
    h *= torch.sigmoid(x)
    return x + h
''',
        "hides the in-place update from autograd with .data": '''
def gated_residual(x, w):
    h = torch.tanh(x @ w)
    h.data.mul_(torch.sigmoid(x))
    return x + h
''',
        "detaches the gate": '''
def gated_residual(x, w):
    return x + torch.tanh(x @ w) * torch.sigmoid(x).detach()
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
    "gated_residual": {
        "uses x.mm(w), which takes only 2-D input": '''
def gated_residual(x, w):
    return x + torch.tanh(x.mm(w)) * torch.sigmoid(x)
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
    if "shape" in message or "size" in message or "dimension" in message:
        return "shape"
    return "other"
''',
    },
}
