"""Wrong answers for lesson 01, one per pitfall the curriculum lists (exercise -> pitfall -> answer cell)."""

PITFALLS = {
    "shares_storage": {
        "compares data_ptr(), which moves with the storage offset": '''
def shares_storage(a, b):
    return a.data_ptr() == b.data_ptr()
''',
    },
    "flatten_features": {
        ".view fails on non-contiguous input": '''
def flatten_features(x):
    return x.view(x.shape[0], -1)
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
    },
    "to_class_labels": {
        "from_numpy keeps float64": '''
def to_class_labels(arr):
    return torch.from_numpy(arr)
''',
    },
    "linear_forward": {
        "x @ weight only passes for square weights": '''
def linear_forward(x, weight, bias):
    return x @ weight + bias
''',
    },
}
