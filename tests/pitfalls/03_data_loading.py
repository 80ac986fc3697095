"""Wrong answers for lesson 03: one per pitfall the curriculum lists, and a few more (exercise -> pitfall -> answer).

PITFALLS fail a visible check with their message; HIDDEN_ONLY pass every visible check and fail a hidden one.
"""

_DIGITS_HEAD = '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        train_raw = arrays.images[arrays.train_index].astype(np.float64)
        self.mean = float(train_raw.mean())
        self.std = float(train_raw.std())
        rows = arrays.train_index if split == "train" else arrays.val_index
'''

_DIGITS_TAIL = '''
    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]
'''

_SPIRAL_HEAD = '''
class SpiralDataset(Dataset):
    def __init__(self, n_per_class=400, seed=0):
        self.n_per_class = n_per_class
        self.seed = seed
        self.t = torch.linspace(0.5, 3 * math.pi, n_per_class)
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self):
        return 2 * self.n_per_class

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(i)
        label = i // self.n_per_class
        t = self.t[i % self.n_per_class]
        radius = t / (3 * math.pi) * 2.5
        angle = t + label * math.pi
'''

_SPIRAL_TAIL = '''
        point = radius * torch.stack([torch.cos(angle), torch.sin(angle)]) + 0.08 * noise
        return point, torch.tensor(label)
'''

PITFALLS = {
    "DigitsDataset": {
        "uint8 images (raw bytes, not converted or normalized)": _DIGITS_HEAD + '''
        self.images = torch.from_numpy(arrays.images[rows]).unsqueeze(1)
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "float64 images (normalized in NumPy, from_numpy keeps float64)": _DIGITS_HEAD + '''
        self.images = torch.from_numpy((arrays.images[rows][:, None] - self.mean) / self.std)
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "float labels": _DIGITS_HEAD + '''
        self.images = (torch.from_numpy(arrays.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = torch.from_numpy(arrays.labels[rows]).float()
''' + _DIGITS_TAIL,
        "validation split normalized with its own statistics": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        rows = arrays.train_index if split == "train" else arrays.val_index
        raw = torch.from_numpy(arrays.images[rows]).float().unsqueeze(1)
        self.mean = raw.mean().item()
        self.std = raw.std(correction=0).item()
        self.images = (raw - self.mean) / self.std
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "the sample standard deviation (torch's default .std(), n - 1) instead of the population one": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        train_raw = torch.from_numpy(arrays.images[arrays.train_index]).double()
        self.mean = train_raw.mean().item()
        self.std = train_raw.std().item()
        rows = arrays.train_index if split == "train" else arrays.val_index
        self.images = ((torch.from_numpy(arrays.images[rows]).double().unsqueeze(1) - self.mean) / self.std).float()
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "statistics computed over all images, both splits": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        self.mean = float(arrays.images.mean())
        self.std = float(arrays.images.std())
        rows = arrays.train_index if split == "train" else arrays.val_index
        self.images = (torch.from_numpy(arrays.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
    },
    "SpiralDataset": {
        "one generator shared by all items (item i changes with access order)": _SPIRAL_HEAD + '''
        noise = torch.randn(2, generator=self.gen)
''' + _SPIRAL_TAIL,
        "the global RNG (item i changes with access order)": _SPIRAL_HEAD + '''
        noise = torch.randn(2)
''' + _SPIRAL_TAIL,
        "a fresh generator seeded with the seed alone (every item gets the same noise)": _SPIRAL_HEAD + '''
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed))
''' + _SPIRAL_TAIL,
        "reseeding the global RNG in __getitem__ (deterministic items, but shuffling and dropout are reseeded)":
            _SPIRAL_HEAD + '''
        torch.manual_seed(self.seed * len(self) + i)
        noise = torch.randn(2)
''' + _SPIRAL_TAIL,
    },
    "make_loaders": {
        "shuffling the validation loader": '''
def make_loaders(train_ds, val_ds, batch_size):
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True),
            DataLoader(val_ds, batch_size=batch_size, shuffle=True))
''',
        "not shuffling the training loader": '''
def make_loaders(train_ds, val_ds, batch_size):
    return DataLoader(train_ds, batch_size=batch_size), DataLoader(val_ds, batch_size=batch_size)
''',
    },
    "seed_worker": {
        "a constant seed: every worker draws the same NumPy numbers": '''
def seed_worker(worker_id):
    np.random.seed(0)
    random.seed(0)
''',
        "seeding from the worker id alone (same numbers every epoch and run)": '''
def seed_worker(worker_id):
    np.random.seed(worker_id)
    random.seed(worker_id)
''',
    },
}


HIDDEN_ONLY = {
    "SpiralDataset": {
        "t spaced over a fixed 400 points, whatever n_per_class is (the visible checks use 400)": '''
class SpiralDataset(Dataset):
    def __init__(self, n_per_class=400, seed=0):
        self.n_per_class = n_per_class
        self.seed = seed
        self.t = torch.linspace(0.5, 3 * math.pi, 400)

    def __len__(self):
        return 2 * self.n_per_class

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(i)
        label = i // self.n_per_class
        t = self.t[i % self.n_per_class]
        radius = t / (3 * math.pi) * 2.5
        angle = t + label * math.pi
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
        point = radius * torch.stack([torch.cos(angle), torch.sin(angle)]) + 0.08 * noise
        return point, torch.tensor(label)
''',
    },
}
