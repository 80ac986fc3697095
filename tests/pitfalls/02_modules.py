"""Wrong answers for lesson 02, one per pitfall the curriculum lists (exercise -> pitfall -> answer cell)."""

PITFALLS = {
    "count_parameters": {
        "counts module by module, so a tied weight counts twice": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False)
               if p.requires_grad or not trainable_only)
''',
        "ignores trainable_only and counts frozen parameters": '''
def count_parameters(model, trainable_only=True):
    return sum(p.numel() for p in model.parameters())
''',
    },
    "MLP": {
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
        "a softmax at the end returns probabilities, not logits": '''
class MLP(nn.Module):
    def __init__(self, sizes, dropout=0.0):
        super().__init__()
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers += [nn.ReLU(), nn.Dropout(dropout)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)
''',
    },
    "RunningMean": {
        "a Parameter instead of a buffer would be trained by an optimizer": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(num_features), requires_grad=False)
        self.count = nn.Parameter(torch.tensor(0), requires_grad=False)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                n_new = x.shape[0]
                self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
                self.count += n_new
        return x - self.mean
''',
        "a plain tensor attribute is lost from state_dict": '''
class RunningMean(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.mean = torch.zeros(num_features)
        self.count = torch.tensor(0)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                n_new = x.shape[0]
                self.mean += (x.sum(dim=0) - n_new * self.mean) / (self.count + n_new)
                self.count += n_new
        return x - self.mean
''',
    },
}
