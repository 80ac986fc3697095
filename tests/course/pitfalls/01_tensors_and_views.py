"""Wrong answers for lesson 01: each embodies one listed pitfall (exercise -> pitfall -> answer cell)."""
from coursekit import FORGED_OBSERVE

SAME_START = '''
def shares_storage(a, b):
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return sa.nbytes() > 0 and sb.nbytes() > 0 and sa.data_ptr() == sb.data_ptr()
'''

# The solution's window, by hand; the wrong answers below change one decision of it.
WINDOW = '''
def _window(x):
    n, rest = x.shape[0], x.shape[1:].numel()
    kept = [(size, stride) for size, stride in zip(x.shape[1:], x.stride()[1:]) if size != 1]
    if all(outer == size * inner for (_, outer), (size, inner) in zip(kept, kept[1:])):
        return x.as_strided((n, rest), (x.stride(0), kept[-1][1] if kept else 1), x.storage_offset())
    return None


def _packed(x):
    packed = x.contiguous()
    rest = x.shape[1:].numel()
    return packed.as_strided((x.shape[0], rest), (rest, 1), packed.storage_offset())
'''

COPY_UNLESS_CONTIGUOUS = WINDOW + '''

def flatten_features(x):
    return _window(x) if x.is_contiguous() else _packed(x)
'''

# The solution's checks of the labels; the wrong answers below change one decision.
LABEL_CHECKS = '''
def _checked(arr):
    if arr.ndim != 1:
        raise ValueError(f"labels must be 1-D class numbers or 2-D rows, got shape {arr.shape}")
    for value in arr.tolist():
        if not (value >= 0 and value % 1 == 0):
            raise ValueError(f"label {value} is not a class number")
    return arr
'''

TRUNCATES = '''
def to_class_labels(arr):
    if arr.ndim == 2:
        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)
    return torch.tensor(arr, dtype=torch.long)
'''

LABELS_SHARE = LABEL_CHECKS + '''

def to_class_labels(arr):
    if arr.ndim == 2:
        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)
    return torch.as_tensor(_checked(arr)).long()
'''

LINEAR_CHECKS = '''
def _fits(x, weight, bias):
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, the weight expects {weight.shape[1]}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias has shape {tuple(bias.shape)}, the weight has {weight.shape[0]} outputs")
'''

# The solution's snapshot of a dict by hand (one copy per storage, of the stretch its entries show); the answers
# below change one decision of it.
SNAPSHOT = '''
def _copy_all(tensors, keep=lambda window: window.clone()):
    stretches = {}
    for t in tensors.values():
        if t.numel():
            first = t.storage_offset()
            end = first + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1
            low, high = stretches.get(t.untyped_storage().data_ptr(), (first, end))
            stretches[t.untyped_storage().data_ptr()] = (min(low, first), max(high, end))
    copies, result = {}, {}
    for name, t in tensors.items():
        if not t.numel():
            result[name] = keep(t.detach())
            continue
        key = t.untyped_storage().data_ptr()
        first, end = stretches[key]
        if key not in copies:
            copies[key] = keep(t.detach().as_strided((end - first,), (1,), first))
        result[name] = copies[key].as_strided(t.shape, t.stride(), t.storage_offset() - first)
    return result
'''

PER_ENTRY = '''
def independent_copy(tensors):
    if isinstance(tensors, torch.Tensor):
        return tensors.detach().clone()
    return {name: t.detach().clone() for name, t in tensors.items()}
'''

WHOLE_STORAGES = '''
def independent_copy(tensors):
    import copy
    if isinstance(tensors, torch.Tensor):
        return tensors.detach().clone()
    return copy.deepcopy({name: t.detach() for name, t in tensors.items()})
'''

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
        "compares where the storages start: from_numpy(arr[2:])'s storage starts inside from_numpy(arr)'s": SAME_START,
        "closed intervals: two blocks side by side meet at an address that belongs to neither": '''
def shares_storage(a, b):
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    return max(sa.data_ptr(), sb.data_ptr()) <= min(sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes())
''',
    },
    "flatten_features": {
        "reshape: the right values and views, but reshape decides the layout (the exercise is by hand)": '''
def flatten_features(x):
    return x.reshape(x.shape[0], -1)
''',
        "copies whenever x is not contiguous, though x[::2] and x[:, :, ::2] have a window": COPY_UNLESS_CONTIGUOUS,
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
        "the colleague's snapshot as given: a dict only, one copy per entry": '''
def independent_copy(tensors):
    return {name: t.detach().clone() for name, t in tensors.items()}
''',
        "copies each entry on its own: a tied weight comes back as two tensors": PER_ENTRY,
        "copy.deepcopy of the detached entries keeps the sharing but copies each storage whole": WHOLE_STORAGES,
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
        "converts without testing: .long() cuts 2.5 to 2 and hands a wrong class on silently": TRUNCATES,
        "treats every array as class numbers: one-hot rows come back as a 2-D tensor": '''
def to_class_labels(arr):
    return torch.tensor(arr, dtype=torch.long)
''',
        "shares an int64 array's memory: as_tensor wraps it and .long() has nothing to do": LABELS_SHARE,
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
        "no shape check: a mismatch raises torch's RuntimeError, not a ValueError that names the sizes": '''
def linear_forward(x, weight, bias):
    out = x @ weight.T
    return out if bias is None else out + bias
''',
        "the matrix product by habit: right values, but the exercise builds them by broadcasting": LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    out = x @ weight.mT
    return out if bias is None else out + bias
''',
        "multiplies x by the weight without a new axis: (N, in) against (out, in) only broadcasts when N is out":
            LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    out = (x * weight).sum(dim=-1, keepdim=True)
    return out if bias is None else out + bias
''',
        "a ValueError that does not say which sizes clash": '''
def linear_forward(x, weight, bias):
    if x.shape[-1] != weight.shape[1] or (bias is not None and bias.shape != (weight.shape[0],)):
        raise ValueError("the shapes do not fit")
    out = x @ weight.T
    return out if bias is None else out + bias
''',
    },
}

# Wrong answers that pass every visible check and fail only a hidden one (other inputs, edge cases).
HIDDEN_ONLY = {
    "independent_copy": {
        "rebuilds a lone tensor from Python numbers, so an int32 tensor comes back as int64": SNAPSHOT + '''

def independent_copy(tensors):
    if isinstance(tensors, torch.Tensor):
        return torch.tensor(tensors.tolist())
    return _copy_all(tensors)
''',
    },
    "flatten_features": {
        "lets the strides of size-1 dimensions decide, so rows x[::2] with odd size-1 strides get a needless copy":
            WINDOW.replace("if size != 1]", "]") + '''

def flatten_features(x):
    window = _window(x)
    return _packed(x) if window is None else window
''',
    },
    "linear_forward": {
        "indexes x[:, ..., None, :], which needs a batch dimension and fails on a single example": LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    out = (x[:, ..., None, :] * weight).sum(dim=-1)
    return out if bias is None else out + bias
''',
    },
    "to_class_labels": {
        "int(value) to test a label: int(inf) raises OverflowError, not a ValueError": '''
def to_class_labels(arr):
    if arr.ndim == 2:
        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)
    if arr.ndim != 1:
        raise ValueError(f"expected 1-D or 2-D labels, got shape {arr.shape}")
    for value in arr.tolist():
        if value != value or value < 0 or value != int(value):
            raise ValueError(f"label {value} is not a class number")
    return torch.tensor(arr, dtype=torch.long)
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
        "compares the storages' intervals the other way round, printing to stdout and stderr": '''
def shares_storage(a, b):
    import sys
    sa, sb = torch.Tensor.untyped_storage(a), torch.Tensor.untyped_storage(b)
    print("storage sizes in bytes:", sa.nbytes(), sb.nbytes())
    print("comparing storage intervals", file=sys.stderr)
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    a_end, b_end = sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes()
    return not (a_end <= sb.data_ptr() or b_end <= sa.data_ptr())
''',
    },
    "flatten_features": {
        "walks the feature dimensions from the inside out, and copies with clone(memory_format=...)": '''
def flatten_features(x):
    n, rest = x.shape[0], 1
    for size in x.shape[1:]:
        rest *= size
    step, reach, fits = 1, None, True
    for size, stride in reversed(list(zip(x.shape[1:], x.stride()[1:]))):
        if size == 1:
            continue
        if reach is None:
            step = stride
        elif stride != reach:
            fits = False
        reach = stride * size
    if fits:
        return x.as_strided((n, rest), (x.stride(0), step), x.storage_offset())
    packed = x.clone(memory_format=torch.contiguous_format)
    return packed.as_strided((n, rest), (rest, 1))
''',
    },
    "independent_copy": {
        "under torch.no_grad(): the last element's offset, torch.empty and copy_ for each stretch": '''
def independent_copy(tensors):
    single = isinstance(tensors, torch.Tensor)
    entries = {"only": tensors} if single else tensors
    spans = {}
    for t in entries.values():
        if t.numel() == 0:
            continue
        last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        key = t.untyped_storage().data_ptr()
        lo, hi = spans.get(key, (t.storage_offset(), last))
        spans[key] = (min(lo, t.storage_offset()), max(hi, last))
    out, fresh = {}, {}
    with torch.no_grad():
        for name, t in entries.items():
            if t.numel() == 0:
                out[name] = torch.empty_like(t)
                continue
            key = t.untyped_storage().data_ptr()
            lo, hi = spans[key]
            if key not in fresh:
                fresh[key] = torch.empty(hi - lo + 1, dtype=t.dtype, device=t.device)
                fresh[key].copy_(t.as_strided((hi - lo + 1,), (1,), lo))
            out[name] = fresh[key].as_strided(t.shape, t.stride(), t.storage_offset() - lo)
    return out["only"] if single else out
''',
        "a lone tensor: clone() under torch.no_grad()": SNAPSHOT + '''

def independent_copy(tensors):
    if isinstance(tensors, torch.Tensor):
        with torch.no_grad():
            return tensors.clone()
    return _copy_all(tensors)
''',
    },
    "to_class_labels": {
        "in torch: argmax over dim 1, a mask of bad labels, a copy with to(copy=True)": '''
def to_class_labels(arr):
    t = torch.as_tensor(arr)
    if t.dim() == 2:
        return t.argmax(dim=1)
    if t.dim() != 1:
        raise ValueError(f"expected 1 or 2 dimensions, got {t.dim()}")
    as_float = t.double()
    bad = ~torch.isfinite(as_float) | (as_float < 0) | (as_float != as_float.floor())
    if bad.any():
        raise ValueError(f"not a class number: {as_float[bad][0].item()}")
    return t.to(torch.long, copy=True)
''',
        "NumPy's checks and astype, then from_numpy": '''
def to_class_labels(arr):
    if arr.ndim == 2:
        return torch.from_numpy(np.argmax(arr, axis=1).astype(np.int64))
    if arr.ndim != 1:
        raise ValueError(f"labels of shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0) | (np.mod(arr, 1) != 0)
    if bad.any():
        raise ValueError(f"bad label {arr[bad][0]}")
    return torch.from_numpy(arr.astype(np.int64))
''',
    },
    "linear_forward": {
        "torch.linalg.vecdot over a new axis of x": LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    out = torch.linalg.vecdot(x[..., None, :], weight)
    return out if bias is None else out + bias
''',
        "float64 inside, back to x's dtype, a zero bias for None": '''
def linear_forward(x, weight, bias):
    n_out, n_in = weight.shape
    if x.shape[-1] != n_in:
        raise ValueError(f"in_features: x gives {x.shape[-1]}, weight wants {n_in}")
    if bias is None:
        bias = torch.zeros(n_out, dtype=x.dtype)
    if bias.dim() != 1 or len(bias) != n_out:
        raise ValueError(f"bias length {bias.shape[0] if bias.dim() else 0} != out_features {n_out}")
    return ((x.double().unsqueeze(-2) * weight.double()).sum(-1) + bias.double()).to(x.dtype)
''',
    },
}

# One wrong answer per rule bullet of each exercise's spec (the bold lead of the bullet is its key): each breaks
# that rule alone and loses the exercise's points (test_pitfalls.py, test_rule_breaker_loses_its_points).
RULES = {
    "shares_storage": {
        "any window on shared memory":
            PITFALLS["shares_storage"]["tests whether the two element spans overlap (disjoint slices share a "
                                       "storage too)"],
        "copies are apart": '''
def shares_storage(a, b):
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return sa.nbytes() > 0 and sa.nbytes() == sb.nbytes()
''',
        "memory, not objects": SAME_START,
        "an empty block shares nothing":
            PITFALLS["shares_storage"]["compares storage addresses, so two unrelated empty tensors (address 0) share"],
        "a Python `bool`": '''
def shares_storage(a, b):
    sa, sb = a.untyped_storage(), b.untyped_storage()
    start = max(sa.data_ptr(), sb.data_ptr())
    return torch.tensor(start < min(sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes()))
''',
    },
    "flatten_features": {
        "shape `(N, d1*d2*...)`": WINDOW + '''

def flatten_features(x):
    window = _window(x)
    out = _packed(x) if window is None else window
    return out[0] if len(out) == 1 else out
''',
        "logical order": WINDOW + '''

def flatten_features(x):
    window = _window(x)
    if window is not None:
        return window
    in_memory_order = sorted(range(1, x.dim()), key=lambda d: -x.stride(d))
    return _packed(x.permute(0, *in_memory_order))
''',
        "a view whenever one exists": COPY_UNLESS_CONTIGUOUS,
        "a new tensor object": WINDOW + '''

def flatten_features(x):
    if x.dim() == 2:
        return x
    window = _window(x)
    return _packed(x) if window is None else window
''',
        "by hand": PITFALLS["flatten_features"]["reshape: the right values and views, but reshape decides the layout "
                                                "(the exercise is by hand)"],
    },
    "independent_copy": {
        "same values, shape, dtype and device": SNAPSHOT + '''

def independent_copy(tensors):
    keep = lambda window: window.clone().float()
    if isinstance(tensors, torch.Tensor):
        return _copy_all({"t": tensors}, keep)["t"]
    return _copy_all(tensors, keep)
''',
        "cut loose": SNAPSHOT + '''

def independent_copy(tensors):
    keep = lambda window: window
    if isinstance(tensors, torch.Tensor):
        return _copy_all({"t": tensors}, keep)["t"]
    return _copy_all(tensors, keep)
''',
        "sharing kept": PER_ENTRY,
        "nothing nobody shows": WHOLE_STORAGES,
        "the input is left as it was": SNAPSHOT + '''

def independent_copy(tensors):
    if isinstance(tensors, torch.Tensor):
        return tensors.detach_().clone()
    return _copy_all(tensors)
''',
    },
    "to_class_labels": {
        "class indices out": LABELS_SHARE,
        "class numbers in": LABEL_CHECKS + '''

def to_class_labels(arr):
    # renumbers the classes that occur as 0, 1, 2, ...: a missing class shifts every label above it
    if arr.ndim == 2:
        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)
    return torch.tensor(np.unique(_checked(arr), return_inverse=True)[1], dtype=torch.long)
''',
        "rows in": LABEL_CHECKS + '''

def to_class_labels(arr):
    # the last column that holds the largest value, not the first
    if arr.ndim == 2:
        return torch.tensor(arr.shape[1] - 1 - arr[:, ::-1].argmax(axis=1), dtype=torch.long)
    return torch.tensor(_checked(arr), dtype=torch.long)
''',
        "bad labels raise": TRUNCATES,
        "other shapes raise": LABEL_CHECKS + '''

def to_class_labels(arr):
    arr = np.atleast_1d(arr)
    if arr.ndim > 2:
        arr = arr.reshape(arr.shape[0], -1)
    if arr.ndim == 2:
        return torch.tensor(arr.argmax(axis=1), dtype=torch.long)
    return torch.tensor(_checked(arr), dtype=torch.long)
''',
    },
    "linear_forward": {
        "`nn.Linear`'s outputs": LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    out = (x.unsqueeze(-1) * weight).sum(dim=-2)  # the weight as if it were (in, out): runs only for a square one
    return out if bias is None else out + bias
''',
        "any leading dimensions": LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    out = (x.reshape(-1, 1, x.shape[-1]) * weight).sum(dim=-1)
    return out if bias is None else out + bias
''',
        "features that do not fit": '''
def linear_forward(x, weight, bias):
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias has shape {tuple(bias.shape)}, the weight has {weight.shape[0]} outputs")
    out = (x.unsqueeze(-2) * weight).sum(dim=-1)
    return out if bias is None else out + bias
''',
        "a bias that does not fit": '''
def linear_forward(x, weight, bias):
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, the weight expects {weight.shape[1]}")
    out = (x.unsqueeze(-2) * weight).sum(dim=-1)
    return out if bias is None else out + bias
''',
        "by hand, by broadcasting": LINEAR_CHECKS + '''

def linear_forward(x, weight, bias):
    _fits(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)
''',
    },
}
