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
