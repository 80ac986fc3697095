"""Wrong answers for lesson 03: one per pitfall the curriculum lists, and a few more (exercise -> pitfall -> answer).

PITFALLS fail a visible check with their message; HIDDEN_ONLY pass every visible check and fail a hidden one;
PLAUSIBLE fail the hidden checks, RIGHT_ANSWERS pass everything, FORGERIES (a wrong answer that forges its
evidence) fail the hidden checks.
"""
from coursekit import FORGED_OBSERVE

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
        i = operator.index(i)
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
        "the generator seeded with the index as given (a NumPy integer or 0-d tensor index raises)":
            _SPIRAL_HEAD.replace("        i = operator.index(i)\n", "") + '''
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
''' + _SPIRAL_TAIL,
    },
    "make_loaders": {
        "shuffling the validation loader": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True),
            DataLoader(val_ds, batch_size=batch_size, shuffle=True))
''',
        "not shuffling the training loader": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return DataLoader(train_ds, batch_size=batch_size), DataLoader(val_ds, batch_size=batch_size)
''',
        "one generator shared by both loaders (every pass over the validation loader moves the training order)": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=generator),
            DataLoader(val_ds, batch_size=batch_size, generator=generator))
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
        i = operator.index(i)
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


# Mistakes students make that the spec's pitfall list does not name; the hidden checks reject each on values.
PLAUSIBLE = {
    "DigitsDataset": {
        "an unknown split raises KeyError (a dict lookup), not ValueError": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        arrays = load_digits()
        rows = {"train": arrays.train_index, "val": arrays.val_index}[split]
        train_raw = arrays.images[arrays.train_index].astype(np.float64)
        self.mean = float(train_raw.mean())
        self.std = float(train_raw.std())
        self.images = (torch.from_numpy(arrays.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "labels returned as Python ints (a DataLoader collates them into the same batch)": _DIGITS_HEAD + '''
        self.images = (torch.from_numpy(arrays.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = [int(v) for v in arrays.labels[rows]]
''' + _DIGITS_TAIL,
        "each image normalized with its own mean and std": _DIGITS_HEAD + '''
        raw = torch.from_numpy(arrays.images[rows]).float().unsqueeze(1)
        flat = raw.flatten(1)
        self.images = ((flat - flat.mean(1, keepdim=True)) / flat.std(1, correction=0, keepdim=True).clamp_min(1e-6)
                       ).reshape(raw.shape)
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "mean and std kept as 0-dimensional tensors (no .item())": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        train_raw = torch.from_numpy(arrays.images[arrays.train_index]).double()
        self.mean = train_raw.mean()
        self.std = train_raw.std(correction=0)
        rows = arrays.train_index if split == "train" else arrays.val_index
        raw = torch.from_numpy(arrays.images[rows]).double().unsqueeze(1)
        self.images = ((raw - self.mean) / self.std).float()
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
    },
    "SpiralDataset": {
        "no bounds check: an index past the end wraps onto a third spiral": '''
class SpiralDataset(Dataset):
    def __init__(self, n_per_class=400, seed=0):
        self.n_per_class, self.seed = n_per_class, seed
        self.t = torch.linspace(0.5, 3 * math.pi, n_per_class)

    def __len__(self):
        return 2 * self.n_per_class

    def __getitem__(self, i):
        label = i // self.n_per_class
        t = self.t[i % self.n_per_class]
        radius, angle = t / (3 * math.pi) * 2.5, t + label * math.pi
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
        return radius * torch.stack([torch.cos(angle), torch.sin(angle)]) + 0.08 * noise, torch.tensor(label)
''',
        "forgets the 0.08 noise scale": _SPIRAL_HEAD + '''
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
        point = radius * torch.stack([torch.cos(angle), torch.sin(angle)]) + noise
        return point, torch.tensor(label)
''',
        "the point computed in NumPy, so it is float64": '''
class SpiralDataset(Dataset):
    def __init__(self, n_per_class=400, seed=0):
        self.n_per_class, self.seed = n_per_class, seed
        self.t = np.linspace(0.5, 3 * np.pi, n_per_class)

    def __len__(self):
        return 2 * self.n_per_class

    def __getitem__(self, i):
        i = operator.index(i)
        if not 0 <= i < len(self):
            raise IndexError(i)
        label = i // self.n_per_class
        t = self.t[i % self.n_per_class]
        radius, angle = t / (3 * np.pi) * 2.5, t + label * np.pi
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i)).numpy()
        point = radius * np.array([np.cos(angle), np.sin(angle)]) + 0.08 * noise
        return torch.from_numpy(point), torch.tensor(label)
''',
        "radius t / (3 pi), without the factor 2.5": _SPIRAL_HEAD.replace("* 2.5", "") + '''
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
''' + _SPIRAL_TAIL,
    },
    "make_loaders": {
        "shuffles once: a fixed permutation, the same order every epoch": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    order = torch.randperm(len(train_ds)).tolist()
    return (DataLoader(torch.utils.data.Subset(train_ds, order), batch_size=batch_size),
            DataLoader(val_ds, batch_size=batch_size))
''',
        "a validation batch twice as large (no gradients, so it fits)": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True),
            DataLoader(val_ds, batch_size=2 * batch_size))
''',
        "samples with replacement (RandomSampler(replacement=True))": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    sampler = torch.utils.data.RandomSampler(train_ds, replacement=True)
    return DataLoader(train_ds, batch_size=batch_size, sampler=sampler), DataLoader(val_ds, batch_size=batch_size)
''',
        "shuffles from torch's global generator: the order follows whatever drew before": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return DataLoader(train_ds, batch_size=batch_size, shuffle=True), DataLoader(val_ds, batch_size=batch_size)
''',
        "a generator seeded with 0, whatever the seed": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(0)),
            DataLoader(val_ds, batch_size=batch_size))
''',
    },
    "seed_worker": {
        "seeds a new NumPy Generator (default_rng), which leaves np.random's global state alone": '''
def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    global worker_rng
    worker_rng = np.random.default_rng(seed)
    random.seed(seed)
''',
        "random seeded from the worker id alone (the same numbers every epoch and run)": '''
def seed_worker(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)
    random.seed(worker_id)
''',
        "seeds NumPy only, not random": '''
def seed_worker(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)
''',
    },
}

# Correct answers written differently: they keep their points.
RIGHT_ANSWERS = {
    "DigitsDataset": {
        "float32 statistics from torch, images multiplied by the reciprocal of the std": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        train = torch.from_numpy(arrays.images[arrays.train_index]).float()
        self.mean, self.std = train.mean().item(), train.std(correction=0).item()
        rows = arrays.train_index if split == "train" else arrays.val_index
        images = torch.from_numpy(arrays.images[rows]).float()[:, None]
        self.images = (images - self.mean) * (1 / self.std)
        self.labels = torch.from_numpy(arrays.labels[rows].astype(np.int64))
''' + _DIGITS_TAIL,
        "torch throughout, float64 statistics, prints to stdout and stderr": '''
import sys


class DigitsDataset(Dataset):
    def __init__(self, split):
        arrays = load_digits()
        if split == "train":
            rows = arrays.train_index
        elif split == "val":
            rows = arrays.val_index
        else:
            raise ValueError(f"unknown split {split}")
        train = torch.as_tensor(arrays.images[arrays.train_index], dtype=torch.float64)
        self.mean, self.std = train.mean().item(), train.std(correction=0).item()
        print(f"{split}: mean {self.mean:.3f} std {self.std:.3f}")
        print("normalizing with the training statistics", file=sys.stderr)
        images = torch.as_tensor(arrays.images[rows], dtype=torch.float64)[:, None]
        self.images = ((images - self.mean) / self.std).to(torch.float32)
        self.labels = torch.as_tensor(arrays.labels[rows]).to(torch.long)

    def __len__(self):
        return self.labels.shape[0]

    def __getitem__(self, i):
        return self.images[i], self.labels[i]
''',
    },
    "SpiralDataset": {
        "math on Python floats, another seed formula, float64 inside": '''
class SpiralDataset(Dataset):
    def __init__(self, n_per_class=400, seed=0):
        self.n_per_class, self.seed = n_per_class, seed

    def __len__(self):
        return 2 * self.n_per_class

    def __getitem__(self, i):
        i = int(i)
        if i < 0 or i >= len(self):
            raise IndexError(f"{i} is out of range")
        label, k = divmod(i, self.n_per_class)
        t = torch.linspace(0.5, 3 * math.pi, self.n_per_class, dtype=torch.float64)[k].item()
        radius, angle = t / (3 * math.pi) * 2.5, t + label * math.pi
        gen = torch.Generator()
        gen.manual_seed(1_000_003 * self.seed + i)
        noise = torch.randn(2, generator=gen, dtype=torch.float64)
        point = torch.tensor([radius * math.cos(angle), radius * math.sin(angle)], dtype=torch.float64) + 0.08 * noise
        return point.float(), torch.tensor(label, dtype=torch.long)
''',
    },
    "make_loaders": {
        "a generator for each loader, both seeded with the seed": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)),
            DataLoader(val_ds, batch_size=batch_size, generator=torch.Generator().manual_seed(seed)))
''',
        "explicit samplers, the random one with a generator of its own, prints to stdout and stderr": '''
import sys

from torch.utils.data import RandomSampler, SequentialSampler


def make_loaders(train_ds, val_ds, batch_size, seed=0):
    print(f"{len(train_ds)} training and {len(val_ds)} validation examples")
    print("batch size", batch_size, file=sys.stderr)
    train = DataLoader(train_ds, batch_size=batch_size, drop_last=False,
                       sampler=RandomSampler(train_ds, generator=torch.Generator().manual_seed(seed)))
    val = DataLoader(val_ds, batch_size=batch_size, sampler=SequentialSampler(val_ds))
    return train, val
''',
        "each epoch's permutation from a private np.random.default_rng": '''
class _NumpyOrder(torch.utils.data.Sampler):
    def __init__(self, n, seed):
        self.n, self.rng = n, np.random.default_rng(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(self.rng.permutation(self.n).tolist())


def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return (DataLoader(train_ds, batch_size=batch_size, sampler=_NumpyOrder(len(train_ds), seed)),
            DataLoader(val_ds, batch_size=batch_size))
''',
    },
    "seed_worker": {
        "modulo 2**31: fewer seeds, but each worker its own": '''
def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**31
    np.random.seed(seed)
    random.seed(seed)
''',
        "adds the worker id again (the torch seed already includes it, but it does no harm)": '''
def seed_worker(worker_id):
    seed = (torch.initial_seed() + worker_id) % 2**32
    np.random.seed(seed)
    random.seed(seed)
''',
        "a bit mask instead of the modulo, random seeded first": '''
def seed_worker(worker_id):
    seed = torch.initial_seed() & 0xFFFF_FFFF
    random.seed(seed)
    np.random.seed(seed)
''',
        "the seed read from get_worker_info(), NumPy seeded through its legacy RandomState API": '''
def seed_worker(worker_id):
    info = torch.utils.data.get_worker_info()
    seed = info.seed % (1 << 32)
    np.random.set_state(np.random.RandomState(seed).get_state())
    random.seed(seed)
''',
    },
}

FORGERIES = {
    "make_loaders": {
        "no shuffling; observe patched so that booleans come out True": FORGED_OBSERVE + '''

def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return DataLoader(train_ds, batch_size=batch_size), DataLoader(val_ds, batch_size=batch_size)
''',
        "shuffles once, when the loaders are made; observe patched so that booleans come out True":
            FORGED_OBSERVE + '''

def make_loaders(train_ds, val_ds, batch_size, seed=0):
    order = [int(i) for i in torch.utils.data.RandomSampler(train_ds)]
    return (DataLoader(torch.utils.data.Subset(train_ds, order), batch_size=batch_size),
            DataLoader(val_ds, batch_size=batch_size))
''',
    },
    "SpiralDataset": {
        "the global RNG, its state put back after every draw; observe patched so that booleans come out True":
            FORGED_OBSERVE + _SPIRAL_HEAD + '''
        state = torch.get_rng_state()
        noise = torch.randn(2)
        torch.set_rng_state(state)
''' + _SPIRAL_TAIL,
    },
}

# One wrong answer per rule bullet of each exercise's spec (the bold lead of the bullet is its key): each breaks
# that rule alone and loses the exercise's points (test_pitfalls.py, test_rule_breaker_loses_its_points).
RULES = {
    "DigitsDataset": {
        "`split` is `\"train\"` or `\"val\"`": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        split = split.strip().lower()
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        train_raw = arrays.images[arrays.train_index].astype(np.float64)
        self.mean = float(train_raw.mean())
        self.std = float(train_raw.std())
        rows = arrays.train_index if split == "train" else arrays.val_index
        self.images = (torch.from_numpy(arrays.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "the listed rows, in order": '''
class DigitsDataset(Dataset):
    def __init__(self, split):
        if split not in ("train", "val"):
            raise ValueError(split)
        arrays = load_digits()
        train_raw = arrays.images[arrays.train_index].astype(np.float64)
        self.mean = float(train_raw.mean())
        self.std = float(train_raw.std())
        # the first 1437 rows of the file for training, the rest for validation: the index arrays ignored
        n_train = len(arrays.train_index)
        rows = np.arange(n_train) if split == "train" else np.arange(n_train, len(arrays.labels))
        self.images = (torch.from_numpy(arrays.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = torch.from_numpy(arrays.labels[rows]).long()
''' + _DIGITS_TAIL,
        "training statistics, as Python floats":
            PITFALLS["DigitsDataset"]["validation split normalized with its own statistics"],
        "images `float32`, `(1, 8, 8)`, normalized":
            PITFALLS["DigitsDataset"]["float64 images (normalized in NumPy, from_numpy keeps float64)"],
        "labels 0-dimensional `torch.long`": PITFALLS["DigitsDataset"]["float labels"],
    },
    "SpiralDataset": {
        # Merged bullets keep one breaker each here; the others stay in PITFALLS / PLAUSIBLE (radius without 2.5,
        # a float64 point), which lose their points there.
        "`2 * n_per_class` items, by the recipe": _SPIRAL_HEAD.replace(
            "label = i // self.n_per_class\n        t = self.t[i % self.n_per_class]",
            "label = i % 2\n        t = self.t[i // 2]") + '''
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
''' + _SPIRAL_TAIL,
        "noise of its own":
            PITFALLS["SpiralDataset"]["a fresh generator seeded with the seed alone (every item gets the same noise)"],
        "torch's global generator untouched":
            PITFALLS["SpiralDataset"]["reseeding the global RNG in __getitem__ (deterministic items, but shuffling and "
                                      "dropout are reseeded)"],
        "types, any integer index": PITFALLS["SpiralDataset"]["the generator seeded with the index as given (a NumPy "
                                                       "integer or 0-d tensor index raises)"],
        "`IndexError` outside the range": _SPIRAL_HEAD.replace("if not 0 <= i < len(self):", "if i >= len(self):") + '''
        noise = torch.randn(2, generator=torch.Generator().manual_seed(self.seed * len(self) + i))
''' + _SPIRAL_TAIL,
    },
    "make_loaders": {
        "two loaders, one batch size":
            PLAUSIBLE["make_loaders"]["a validation batch twice as large (no gradients, so it fits)"],
        "training reshuffles every epoch":
            PLAUSIBLE["make_loaders"]["shuffles once: a fixed permutation, the same order every epoch"],
        "the order is the seed's":
            PLAUSIBLE["make_loaders"]["shuffles from torch's global generator: the order follows whatever drew before"],
        "validation in dataset order": PITFALLS["make_loaders"]["shuffling the validation loader"],
        "nothing dropped": '''
def make_loaders(train_ds, val_ds, batch_size, seed=0):
    return (DataLoader(train_ds, batch_size=batch_size, shuffle=True, drop_last=True,
                       generator=torch.Generator().manual_seed(seed)),
            DataLoader(val_ds, batch_size=batch_size))
''',
    },
    "seed_worker": {
        "every worker its own numbers": PITFALLS["seed_worker"]["a constant seed: every worker draws the same NumPy "
                                                                "numbers"],
        "fixed by the loader's seed": '''
import time


def seed_worker(worker_id):
    seed = (torch.initial_seed() + time.perf_counter_ns()) % 2**32
    np.random.seed(seed)
    random.seed(seed)
''',
    },
}
