"""Wrong answers for lesson 02: each embodies one listed pitfall (exercise -> pitfall -> answer cell)."""

_MLP_LAYERS = '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers += [nn.ReLU(), nn.Dropout(dropout)]
'''

_RUNNING_FORWARD = '''
    def forward(self, x):
        if self.training:
            with torch.no_grad():
                n_new = x.shape[0]
                self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
                self.count += n_new
        return x - self.mean
'''

# The lesson's DraftMLP, handed over (the cell word for word but for the name and docstring:
# tests/unit/test_modules_view.py): the layers after the first sit in a plain list, F.dropout keeps its default
# training=True, and a ReLU follows the last layer.
DRAFT = '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        self.first = nn.Linear(sizes[0], sizes[1])
        self.rest = [nn.Linear(a, b) for a, b in zip(sizes[1:-1], sizes[2:])]
        self.p = dropout

    def forward(self, x):
        h = self.first(x)
        for layer in self.rest:
            h = layer(nn.functional.dropout(torch.relu(h), self.p))
        return torch.relu(h)
'''

PITFALLS = {
    "MLP": {
        "the draft as handed over (three lines wrong)": DRAFT,
        "the draft with its layers registered, F.dropout still on in eval mode and a ReLU at the end": DRAFT.replace(
            "self.rest = [", "self.rest = nn.ModuleList([").replace("sizes[2:])]", "sizes[2:])])"),
        "the draft with its layers registered and dropout following the mode, a ReLU still at the end": DRAFT.replace(
            "self.rest = [", "self.rest = nn.ModuleList([").replace("sizes[2:])]", "sizes[2:])])").replace(
            "self.p)", "self.p, self.training)"),
        "layers kept in a plain Python list are not registered": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        self.layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            self.layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                self.layers += [nn.ReLU(), nn.Dropout(dropout)]

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
''',
        "a softmax at the end returns probabilities, not logits": _MLP_LAYERS + '''
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)
''',
        "a log-softmax at the end": _MLP_LAYERS + '''
        self.net = nn.Sequential(*layers, nn.LogSoftmax(dim=-1))

    def forward(self, x):
        return self.net(x)
''',
        "a ReLU after the last Linear": _MLP_LAYERS + '''
        self.net = nn.Sequential(*layers, nn.ReLU())

    def forward(self, x):
        return self.net(x)
''',
        "dropout after the last Linear too": _MLP_LAYERS + '''
        self.net = nn.Sequential(*layers, nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)
''',
        "F.dropout without self.training stays on in eval mode": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.p = dropout

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = nn.functional.dropout(torch.relu(layer(x)), self.p)
        return self.layers[-1](x)
''',
        "dropout never applied": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)
''',
    },
    "RunningMean": {
        "BatchNorm-style: the output subtracts a mean autograd saw computed from the batch": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))

    def forward(self, x):
        if not self.training:
            return x - self.mean
        n_new = x.shape[0]
        updated = self.mean + (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
        with torch.no_grad():
            self.mean.copy_(updated)
            self.count += n_new
        return x - updated
''',
        "a Parameter instead of a buffer would be trained by an optimizer": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(num_features), requires_grad=False)
        self.count = nn.Parameter(torch.tensor(0), requires_grad=False)
''' + _RUNNING_FORWARD,
        "a plain tensor attribute is lost from state_dict": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.mean = torch.zeros(num_features)
        self.count = torch.tensor(0)
''' + _RUNNING_FORWARD,
        "updates in eval mode too": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))

    def forward(self, x):
        with torch.no_grad():
            n_new = x.shape[0]
            self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
            self.count += n_new
        return x - self.mean
''',
        "averages the batch means instead of the rows": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))
        self.batches = 0

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                self.batches += 1
                self.mean += (x.mean(dim=0) - self.mean) / self.batches
                self.count += x.shape[0]
        return x - self.mean
''',
        "updates the buffer outside no_grad, so it carries a graph": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))

    def forward(self, x):
        if self.training:
            n_new = x.shape[0]
            self.mean = self.mean + (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
            self.count = self.count + n_new
        return x - self.mean
''',
    },
}

# Wrong answers that pass every visible check and fail only a hidden one (other inputs, edge cases).
HIDDEN_ONLY = {
    "MLP": {
        "hard-codes the example's dropout of 0.5 instead of using the argument": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers += [nn.ReLU(), nn.Dropout(0.5)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)
''',
    },
}

# Wrong answers students really write that the spec's pitfall list does not name; the hidden checks reject each.
PLAUSIBLE = {
    "MLP": {
        "reads dropout as a keep probability, as TensorFlow 1's keep_prob": _MLP_LAYERS.replace(
            "nn.Dropout(dropout)", "nn.Dropout(1 - dropout)") + '''
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)
''',
        "nn.Dropout(inplace=True) overwrites the ReLU output that backward needs": _MLP_LAYERS.replace(
            "nn.Dropout(dropout)", "nn.Dropout(dropout, inplace=True)") + '''
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)
''',
        "GELU instead of ReLU between the layers": _MLP_LAYERS.replace("nn.ReLU()", "nn.GELU()") + '''
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)
''',
        "dropout on the input instead of after each hidden ReLU": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        x = self.drop(x)
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)
''',
    },
    "RunningMean": {
        "tests `if self.train:`, a method and always true, so eval mode updates too": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))

    def forward(self, x):
        if self.train:
            with torch.no_grad():
                n_new = x.shape[0]
                self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
                self.count += n_new
        return x - self.mean
''',
        "@torch.no_grad() on the whole forward, so the output carries no gradient either": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))

    @torch.no_grad()
    def forward(self, x):
        if self.training:
            n_new = x.shape[0]
            self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
            self.count += n_new
        return x - self.mean
''',
        "centres with the mean from before the update": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0))

    def forward(self, x):
        out = x - self.mean
        if self.training:
            with torch.no_grad():
                n_new = x.shape[0]
                self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
                self.count += n_new
        return out
''',
        "keeps count as a float tensor, not torch.long": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.tensor(0.0))
''' + _RUNNING_FORWARD,
    },
}

# Correct answers written differently: they keep full marks.
RIGHT_ANSWERS = {
    "MLP": {
        "layers registered with setattr, functional ReLU and F.dropout(x, p, self.training)": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.depth = len(sizes) - 1
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            setattr(self, f"fc{i}", nn.Linear(n_in, n_out))

    def forward(self, x):
        for i in range(self.depth):
            x = getattr(self, f"fc{i}")(x)
            if i < self.depth - 1:
                x = nn.functional.dropout(torch.relu(x), self.p, self.training)
        return x
''',
        "Linear, ReLU, Dropout for every layer, then the last two trimmed": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(n_in, n_out), nn.ReLU(), nn.Dropout(dropout)]
        self.net = nn.Sequential(*layers[:-2])

    def forward(self, x):
        return self.net(x)
''',
    },
    "RunningMean": {
        "rebinds the buffers to new tensors (a sum-based formula) under no_grad": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                total = self.mean * self.count + x.sum(dim=0)
                self.count = self.count + x.shape[0]
                self.mean = total / self.count
        return x - self.mean
''',
    },
}

# One wrong answer per rule of each spec's rules list: it breaks that rule alone, and loses the exercise's points.
RULES = {
    "MLP": {
        "registered Linear layers": PITFALLS["MLP"]["layers kept in a plain Python list are not registered"],
        "ReLU, then dropout, between layers": PLAUSIBLE["MLP"]["GELU instead of ReLU between the layers"],
        "dropout in train mode only": PITFALLS["MLP"]["F.dropout without self.training stays on in eval mode"],
        "raw logits": PITFALLS["MLP"]["a softmax at the end returns probabilities, not logits"],
        "it trains": PLAUSIBLE["MLP"]["nn.Dropout(inplace=True) overwrites the ReLU output that backward needs"],
    },
    "RunningMean": {
        "buffers, not parameters": PITFALLS["RunningMean"][
            "a Parameter instead of a buffer would be trained by an optimizer"],
        "cumulative mean by row, in train mode":
            PITFALLS["RunningMean"]["averages the batch means instead of the rows"],
        "eval mode changes nothing": PITFALLS["RunningMean"]["updates in eval mode too"],
        "a constant to autograd": PITFALLS["RunningMean"][
            "BatchNorm-style: the output subtracts a mean autograd saw computed from the batch"],
    },
}


# The ungraded warm-up count_parameters: no points to lose, so these are not pitfall rows; each must still fail
# the warm-up's visible checks (tests/unit/test_modules_view.py), and the right ones pass them.
WARM_UP = {
    "wrong": {
        "counts module by module, so a tied weight counts twice": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False)
               if p.requires_grad or not trainable_only)
''',
        "ignores trainable_only and counts frozen parameters": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for p in model.parameters())
''',
        "counts the entries of state_dict(): a tied weight twice, and the buffers": '''
def count_parameters(model, trainable_only=True):
    return sum(v.numel() for v in model.state_dict(keep_vars=True).values()
               if v.requires_grad or not trainable_only)
''',
        "named_parameters(remove_duplicate=False) lists a tied weight twice": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False)
               if p.requires_grad or not trainable_only)
''',
        "counts parameter tensors instead of elements": '''
def count_parameters(model, trainable_only=True):
    return len([p for p in model.parameters() if p.requires_grad or not trainable_only])
''',
    },
    "plausible": {
        "keeps the parameters whose requires_grad equals trainable_only, so False counts only the frozen ones": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for p in model.parameters() if p.requires_grad == trainable_only)
''',
        "always counts only the trainable ones, whatever trainable_only says": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
''',
        "multiplies the shape with np.prod, which returns a NumPy integer, not a Python int": '''
def count_parameters(model, trainable_only=True):
    import numpy as np
    return sum(np.prod(p.shape) for p in model.parameters() if p.requires_grad or not trainable_only)
''',
        "walks model.children(), so a module without children counts nothing": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for child in model.children() for p in child.parameters()
               if p.requires_grad or not trainable_only)
''',
    },
    "right": {
        "named_parameters() (which skips duplicates), printing to stdout and stderr": '''
def count_parameters(model, trainable_only=True):
    import sys
    total = 0
    for name, p in model.named_parameters():
        if trainable_only and not p.requires_grad:
            print("skipping frozen", name, file=sys.stderr)
            continue
        total += p.numel()
    print("counted", total)
    return total
''',
    },
}
