"""Wrong answers for lesson 01: each embodies one listed pitfall (exercise -> pitfall -> answer cell)."""
from coursekit import FORGED_OBSERVE

PITFALLS = {
    "shares_storage": {
        "compares data_ptr(), which moves with the storage offset": '''
def shares_storage(a, b):
    return a.data_ptr() == b.data_ptr()
''',
        "tests whether the two element spans overlap (disjoint slices share a storage too)": '''
def shares_storage(a, b):
    def span(t):
        start = t.data_ptr()
        extent = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1 if t.numel() else 0
        return start, start + extent * t.element_size()
    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1
''',
        "compares storage addresses, so two unrelated empty tensors (address 0) share": '''
def shares_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
''',
        "compares storage objects with `is`, but each from_numpy call builds its own storage object "
        "on the one buffer": '''
def shares_storage(a, b):
    return a.untyped_storage() is b.untyped_storage()
''',
    },
    "flatten_features": {
        "torch.flatten(x, 1) returns x itself for a 2-D input, not a new object": '''
def flatten_features(x):
    return torch.flatten(x, start_dim=1)
''',
        ".view fails on non-contiguous input": '''
def flatten_features(x):
    return x.view(x.shape[0], -1)
''',
        "flattens the batch dimension too": '''
def flatten_features(x):
    return x.flatten()
''',
        "handles only 3-D input": '''
def flatten_features(x):
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2])
''',
        "always copies, even when a view is possible": '''
def flatten_features(x):
    return x.clone().reshape(x.shape[0], -1)
''',
    },
    "independent_copy": {
        ".detach() alone shares storage": '''
def independent_copy(t):
    return t.detach()
''',
        ".clone() alone keeps the autograd graph": '''
def independent_copy(t):
    return t.clone()
''',
        ".data is the same storage": '''
def independent_copy(t):
    return t.data
''',
        "copy_ into a new tensor is recorded by autograd": '''
def independent_copy(t):
    return torch.empty_like(t).copy_(t)
''',
    },
    "to_class_labels": {
        "from_numpy keeps float64": '''
def to_class_labels(arr):
    return torch.from_numpy(arr)
''',
        ".int() gives int32, not torch.long": '''
def to_class_labels(arr):
    return torch.from_numpy(arr).int()
''',
    },
    "linear_forward": {
        "x @ weight only passes for square weights": '''
def linear_forward(x, weight, bias):
    return x @ weight + bias
''',
        "forgets the bias": '''
def linear_forward(x, weight, bias):
    return x @ weight.T
''',
        "torch.mm takes only 2-D input": '''
def linear_forward(x, weight, bias):
    return torch.mm(x, weight.t()) + bias
''',
    },
}

# Wrong answers that pass every visible check and fail only a hidden one (other inputs, edge cases).
HIDDEN_ONLY = {
    "independent_copy": {
        "rebuilds the tensor from Python numbers, so an int32 tensor comes back as int64": '''
def independent_copy(t):
    return torch.tensor(t.tolist())
''',
    },
    "linear_forward": {
        "flattens the leading dimensions with flatten(0, -2), which fails on a single example": '''
def linear_forward(x, weight, bias):
    return (x.flatten(0, -2) @ weight.T + bias).reshape(*x.shape[:-1], weight.shape[0])
''',
    },
}

# The answer is the bool itself: its observations are the function's results, as returned.
BOOLEAN_RESULTS = {"shares_storage"}

# Wrong answers that also forge the evidence a check in the kernel would see; the judge must reject each.
FORGERIES = {
    "shares_storage": {
        "compares data_ptr(); observe patched so that booleans come out True": FORGED_OBSERVE + '''

def shares_storage(a, b):
    return a.data_ptr() == b.data_ptr()
''',
    },
    "flatten_features": {
        "always copies; the copy's instance attribute untyped_storage returns the input's storage": '''
def flatten_features(x):
    flat = x.clone().reshape(x.shape[0], -1)
    flat.untyped_storage = x.untyped_storage
    return flat
''',
        "always copies; observe patched so that booleans come out True": FORGED_OBSERVE + '''

def flatten_features(x):
    return x.clone().reshape(x.shape[0], -1)
''',
    },
    "independent_copy": {
        ".detach() alone; the result's instance attribute untyped_storage returns a storage of its own": '''
def independent_copy(t):
    shallow = t.detach()
    decoy = torch.zeros(t.numel() + 1, dtype=t.dtype).untyped_storage()
    shallow.untyped_storage = lambda: decoy
    return shallow
''',
        ".detach() alone; observe patched so that booleans come out True": FORGED_OBSERVE + '''

def independent_copy(t):
    return t.detach()
''',
        ".clone() alone; observe patched so that booleans come out True": FORGED_OBSERVE + '''

def independent_copy(t):
    return t.clone()
''',
    },
}

# Wrong answers students really write that the spec's pitfall list does not name; the hidden checks reject each
# (on values: booleans granted, this lesson is hardened).
PLAUSIBLE = {
    "shares_storage": {
        "recovers the storage's start as data_ptr() - offset * element_size(), so two empty tensors (0) share": '''
def shares_storage(a, b):
    def start(t):
        return t.data_ptr() - t.storage_offset() * t.element_size()
    return start(a) == start(b)
''',
        "tests numel() instead of the storage's bytes, so an empty slice of a tensor shares nothing": '''
def shares_storage(a, b):
    if a.numel() == 0 or b.numel() == 0:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
''',
        "short-circuits on nbytes(), so an empty storage returns the int 0, not False": '''
def shares_storage(a, b):
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return sa.nbytes() and sb.nbytes() and sa.data_ptr() == sb.data_ptr()
''',
        "uses is_set_to, which also demands the same shape, strides and offset": '''
def shares_storage(a, b):
    return a.is_set_to(b)
''',
    },
    "flatten_features": {
        "squeezes first, so a batch of one loses its batch dimension": '''
def flatten_features(x):
    return x.squeeze().flatten(1)
''',
        "stacks the flattened examples one by one, which always copies": '''
def flatten_features(x):
    return torch.stack([example.flatten() for example in x])
''',
        "falls back to clone().view, but clone keeps the permuted strides and view fails again": '''
def flatten_features(x):
    try:
        return x.view(x.shape[0], -1)
    except RuntimeError:
        return x.clone().view(x.shape[0], -1)
''',
        "puts -1 first, so the batch dimension ends up last": '''
def flatten_features(x):
    return x.reshape(-1, x.shape[0])
''',
    },
    "independent_copy": {
        "detach().contiguous(): contiguous() returns the tensor itself when it is contiguous already": '''
def independent_copy(t):
    return t.detach().contiguous()
''',
        "adds .float() by habit, so an int32 tensor comes back as float32": '''
def independent_copy(t):
    return t.detach().clone().float()
''',
        "detach_() cuts the source itself out of the graph before copying it": '''
def independent_copy(t):
    return t.detach_().clone()
''',
        "keeps requires_grad from t, so the copy of a tensor that requires grad requires grad": '''
def independent_copy(t):
    return t.detach().clone().requires_grad_(t.requires_grad)
''',
        "copy.deepcopy, which refuses a non-leaf and keeps requires_grad on a leaf": '''
def independent_copy(t):
    import copy
    return copy.deepcopy(t)
''',
    },
    "to_class_labels": {
        ".byte(): cross_entropy accepts uint8, but the spec asks for torch.long": '''
def to_class_labels(arr):
    return torch.from_numpy(arr).byte()
''',
        "dtype=torch.int is int32, not torch.long": '''
def to_class_labels(arr):
    return torch.tensor(arr, dtype=torch.int)
''',
        "squeeze() turns a single label into a 0-D tensor": '''
def to_class_labels(arr):
    return torch.as_tensor(arr).long().squeeze()
''',
        "returns a column (N, 1) instead of a 1-D tensor": '''
def to_class_labels(arr):
    return torch.as_tensor(arr).long().view(-1, 1)
''',
    },
    "linear_forward": {
        "(weight @ x.T).T, which only works for 2-D x": '''
def linear_forward(x, weight, bias):
    return (weight @ x.T).T + bias
''',
        "flattens the leading dimensions with view, which fails on a non-contiguous x": '''
def linear_forward(x, weight, bias):
    flat = x.view(-1, x.shape[-1]) @ weight.T + bias
    return flat.view(*x.shape[:-1], weight.shape[0])
''',
        "a matrix-vector product per example, then squeeze(), which drops a batch of one": '''
def linear_forward(x, weight, bias):
    return torch.matmul(weight, x.unsqueeze(-1)).squeeze() + bias
''',
        "an einsum written for 2-D input only": '''
def linear_forward(x, weight, bias):
    return torch.einsum("ni,oi->no", x, weight) + bias
''',
    },
}

# Correct answers written differently: they keep full marks.
RIGHT_ANSWERS = {
    "shares_storage": {
        "compares the storages' start and size, printing to stdout and stderr": '''
def shares_storage(a, b):
    import sys
    sa, sb = torch.Tensor.untyped_storage(a), torch.Tensor.untyped_storage(b)
    print("storage sizes in bytes:", sa.nbytes(), sb.nbytes())
    print("comparing storage addresses", file=sys.stderr)
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    return bool(sa.data_ptr() == sb.data_ptr())
''',
    },
    "flatten_features": {
        "torch.flatten(x, start_dim=1)[:]: a slice is a new view, also of a 2-D input": '''
def flatten_features(x):
    return torch.flatten(x, start_dim=1)[:]
''',
        "contiguous() first (a no-op when it is already), then view": '''
def flatten_features(x):
    return x.contiguous().view(len(x), -1)
''',
    },
    "independent_copy": {
        "torch.tensor(t), which warns and copies without history": '''
def independent_copy(t):
    return torch.tensor(t)
''',
        "clone() under torch.no_grad()": '''
def independent_copy(t):
    with torch.no_grad():
        return t.clone()
''',
    },
    "to_class_labels": {
        "torch.tensor(arr, dtype=torch.long)": '''
def to_class_labels(arr):
    return torch.tensor(arr, dtype=torch.long)
''',
        "NumPy's astype first, then from_numpy": '''
def to_class_labels(arr):
    return torch.from_numpy(arr.astype(np.int64))
''',
    },
    "linear_forward": {
        "an einsum over any leading dimensions": '''
def linear_forward(x, weight, bias):
    return torch.einsum("...i,oi->...o", x, weight) + bias
''',
        "float64 inside, back to x's dtype": '''
def linear_forward(x, weight, bias):
    return (x.double() @ weight.double().mT + bias.double()).to(x.dtype)
''',
    },
}

# One wrong answer per rule bullet of each exercise's spec (the bold lead of the bullet is its key): each breaks
# that rule alone and loses the exercise's points (test_pitfalls.py, test_rule_breaker_loses_its_points).
RULES = {
    "shares_storage": {
        "one storage, any window":
            PITFALLS["shares_storage"]["tests whether the two element spans overlap (disjoint slices share a "
                                       "storage too)"],
        "a copy is not a window": '''
def shares_storage(a, b):
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return sa.nbytes() > 0 and sa.nbytes() == sb.nbytes()
''',
        "an empty storage shares nothing":
            PITFALLS["shares_storage"]["compares storage addresses, so two unrelated empty tensors (address 0) share"],
        "NumPy buffers count":
            PITFALLS["shares_storage"]["compares storage objects with `is`, but each from_numpy call builds its own "
                                       "storage object on the one buffer"],
        "a Python `bool`":
            PLAUSIBLE["shares_storage"]["short-circuits on nbytes(), so an empty storage returns the int 0, not False"],
    },
    "flatten_features": {
        "shape `(N, d1*d2*...)`":
            PLAUSIBLE["flatten_features"]["squeezes first, so a batch of one loses its batch dimension"],
        "logical order": '''
def flatten_features(x):
    if x.is_contiguous():
        return x.view(x.shape[0], -1)
    in_memory_order = sorted(range(1, x.dim()), key=lambda d: -x.stride(d))
    return x.permute(0, *in_memory_order).reshape(x.shape[0], -1)
''',
        "any layout": PITFALLS["flatten_features"][".view fails on non-contiguous input"],
        "a view when the layout allows": PITFALLS["flatten_features"]["always copies, even when a view is possible"],
        "a new tensor object":
            PITFALLS["flatten_features"]["torch.flatten(x, 1) returns x itself for a 2-D input, not a new object"],
    },
    "independent_copy": {
        "same values, shape, dtype and device":
            PLAUSIBLE["independent_copy"]["adds .float() by habit, so an int32 tensor comes back as float32"],
        "its own storage": PITFALLS["independent_copy"][".detach() alone shares storage"],
        "no autograd history": PITFALLS["independent_copy"][".clone() alone keeps the autograd graph"],
        "`t` is left as it was":
            PLAUSIBLE["independent_copy"]["detach_() cuts the source itself out of the graph before copying it"],
    },
    "to_class_labels": {
        "dtype `torch.long`": PITFALLS["to_class_labels"][".int() gives int32, not torch.long"],
        "a 1-D tensor, one entry per label":
            PLAUSIBLE["to_class_labels"]["squeeze() turns a single label into a 0-D tensor"],
        "the same class numbers": '''
def to_class_labels(arr):
    # renumbers the classes that occur as 0, 1, 2, ...: a missing class shifts every label above it
    return torch.unique(torch.as_tensor(arr), return_inverse=True)[1].long()
''',
        "any numeric dtype in": '''
def to_class_labels(arr):
    if arr.dtype != np.float64:
        raise TypeError(f"expected float64 labels, got {arr.dtype}")
    return torch.from_numpy(arr).long()
''',
    },
    "linear_forward": {
        "weight in its `(out, in)` layout": PITFALLS["linear_forward"]["x @ weight only passes for square weights"],
        "plus the bias": PITFALLS["linear_forward"]["forgets the bias"],
        "any leading dimensions": PITFALLS["linear_forward"]["torch.mm takes only 2-D input"],
        "by hand": '''
def linear_forward(x, weight, bias):
    return torch.nn.functional.linear(x, weight, bias)
''',
    },
}
