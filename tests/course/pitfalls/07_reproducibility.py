"""Wrong answers for lesson 07 (exercise -> description -> answer cell).

PITFALLS are the mistakes the lesson names; HIDDEN_ONLY pass every visible check; PLAUSIBLE are what
students write that the lesson does not name; RIGHT_ANSWERS are correct answers written another way;
FORGERIES also forge the evidence. The lesson is hardened (it has FORGERIES): every wrong answer must
be rejected by a value observation, not only by a boolean.
"""
from coursekit import FORGED_OBSERVE

# decoupled_run's recipe, shared by the answers below: `{seed_line}`, `{model}`, `{loader}`, `{train}` vary.
_MODEL = "nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))"
_DATA = "TensorDataset(torch.arange(len(X)), X, y)"
_TRAIN = '''    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = []
    model.train()
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
            batches.append(idx.tolist())
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return batches, model
'''


def _run(body: str, train: str = _TRAIN) -> str:
    return ("\ndef decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):\n" + body + train)


# Exercise 1's answer cell holds two functions: a wrong answer replaces one of them, the other stays right.
_SEED_OK = '''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
'''
_LOADER_OK = '''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed))
'''


def _seed(wrong: str) -> str:
    """A wrong set_seed with a right make_generator_loader."""
    return wrong + "\n" + _LOADER_OK


def _loader(wrong: str) -> str:
    """A right set_seed with a wrong make_generator_loader (imports stay at the top)."""
    head, sep, body = wrong.partition("\ndef make_generator_loader")
    return head + "\n" + _SEED_OK + "\n" + sep + body


PITFALLS = {
    "make_reproducible": {
        "set_seed seeds torch only: NumPy keeps its own stream": _seed('''
def set_seed(seed):
    torch.manual_seed(seed)
    random.seed(seed)
'''),
        "set_seed forgets Python's random module": _seed('''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
'''),
        "set_seed seeds a new NumPy Generator object instead of the global one": _seed('''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.default_rng(seed)
    random.seed(seed)
'''),
        "the loader shuffles from the global stream (torch.manual_seed, no generator)": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    torch.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
'''),
        "the loader has its own generator but does not shuffle": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed))
'''),
        "generator=torch.manual_seed(seed), which is the global generator": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.manual_seed(seed))
'''),
        "a worker_init_fn seeds NumPy with the seed in every worker": _loader('''
import functools


def _numpy_seed(seed, worker_id):
    np.random.seed(seed)


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      worker_init_fn=functools.partial(_numpy_seed, seed),
                      generator=torch.Generator().manual_seed(seed))
'''),
    },
    "decoupled_run": {
        "coupled_run unchanged: the loader shuffles from the global stream, after the initialization": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True)
'''),
        "generator=torch.manual_seed(seed): the global stream seeded again for the loader": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.manual_seed(seed))
'''),
        "the model is built before torch.manual_seed(seed)": _run(f'''
    model = {_MODEL}
    torch.manual_seed(seed)
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
'''),
        "a seeded RandomSampler instead of a seeded loader": '''
from torch.utils.data import RandomSampler
''' + _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    data = {_DATA}
    sampler = RandomSampler(data, generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
'''),
        "seeds the global stream again after building the model: the dropout masks move": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
'''),
    },
    "seed_sweep": {
        "mean over the seeds instead of the results": '''
def seed_sweep(train_fn, seeds):
    values = [float(train_fn(seed)) for seed in seeds]
    return {"values": values, "mean": sum(seeds) / len(seeds), "min": min(values), "max": max(values)}
''',
        "midpoint of min and max reported as the mean": '''
def seed_sweep(train_fn, seeds):
    values = [float(train_fn(seed)) for seed in seeds]
    return {"values": values, "mean": (min(values) + max(values)) / 2, "min": min(values), "max": max(values)}
''',
        "trains once and reuses that result for every seed": '''
def seed_sweep(train_fn, seeds):
    seeds = list(seeds)
    result = float(train_fn(seeds[0]))
    values = [result for _ in seeds]
    return {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
        "passes the first seed to every run": '''
def seed_sweep(train_fn, seeds):
    seeds = list(seeds)
    values = [float(train_fn(seeds[0])) for _ in seeds]
    return {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
        "no 'values' key": '''
def seed_sweep(train_fn, seeds):
    values = [float(train_fn(seed)) for seed in seeds]
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
    },
}

HIDDEN_ONLY = {
    "make_reproducible": {
        "one generator object for every loader, re-seeded on each call": _loader('''
_GENERATOR = torch.Generator()


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=_GENERATOR.manual_seed(seed))
'''),
    },
    "decoupled_run": {
        "ignores num_epochs and batch_size (always coupled_run's defaults)": _run(f'''
    num_epochs, batch_size = 2, 16
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
'''),
    },
}

PLAUSIBLE = {
    "make_reproducible": {
        "torch.seed() for torch, which seeds from a fresh non-deterministic number": _seed('''
def set_seed(seed):
    torch.seed()
    np.random.seed(seed)
    random.seed(seed)
'''),
        "set_seed also switches deterministic algorithms on (the contract: change nothing else)": _seed('''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    torch.use_deterministic_algorithms(True)
'''),
        "a plain shuffled DataLoader: the order ignores the seed and follows the global stream": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
'''),
        "right loader, but also calls torch.manual_seed(seed) (resets everybody's stream)": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    torch.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed))
'''),
        "a RandomSampler without its own generator, plus generator= on the DataLoader": _loader('''
from torch.utils.data import RandomSampler


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, sampler=RandomSampler(dataset), num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed))
'''),
        "one permutation drawn up front, the same order every epoch": _loader('''
from torch.utils.data import Subset


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return DataLoader(Subset(dataset, order), batch_size=batch_size, shuffle=False, num_workers=num_workers)
'''),
        "drop_last=True, so every batch has the same size": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed))
'''),
        "ignores num_workers: every item is fetched in the main process": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
'''),
    },
    "decoupled_run": {
        "records the batches in a first pass over the loader, then trains on later passes": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
''', '''    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [idx.tolist() for _ in range(num_epochs) for idx, _, _ in loader]
    model.train()
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return batches, model
'''),
        "trains in eval mode, so that no dropout mask can depend on the width": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
''', _TRAIN.replace("model.train()", "model.eval()")),
        "seeds the loader's generator with a number drawn from the global stream": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    data_seed = int(torch.randint(2**31, ()))
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(data_seed))
'''),
        "one permutation drawn once, the same order every epoch": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed)).tolist()
    loader = DataLoader(torch.utils.data.Subset({_DATA}, order), batch_size=batch_size)
'''),
        "returns each batch's indices as a tensor": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
''', _TRAIN.replace("batches.append(idx.tolist())", "batches.append(idx)")),
        "a sanity-check forward pass before training (an extra draw of dropout masks)": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
    assert model(X[:2]).shape == (2, 2)
'''),
    },
    "seed_sweep": {
        "sorts the values (for min and max) and returns them sorted": '''
def seed_sweep(train_fn, seeds):
    values = sorted(float(train_fn(seed)) for seed in seeds)
    return {"values": values, "mean": sum(values) / len(values), "min": values[0], "max": values[-1]}
''',
        "seeds torch itself before each call instead of only passing the seed on": '''
def seed_sweep(train_fn, seeds):
    values = []
    for seed in seeds:
        torch.manual_seed(seed)
        values.append(float(train_fn(seed)))
    return {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
        "rounds each result to 4 decimals": '''
def seed_sweep(train_fn, seeds):
    values = [round(float(train_fn(seed)), 4) for seed in seeds]
    return {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
        "keeps each result as returned: tensors stay tensors, ints stay ints": '''
def seed_sweep(train_fn, seeds):
    values = [train_fn(seed) for seed in seeds]
    return {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
        "the first and the last value reported as min and max": '''
def seed_sweep(train_fn, seeds):
    values = [float(train_fn(seed)) for seed in seeds]
    return {"values": values, "mean": sum(values) / len(values), "min": values[0], "max": values[-1]}
''',
        "np.mean: the mean is a NumPy float64, not a Python float": '''
def seed_sweep(train_fn, seeds):
    values = [float(train_fn(seed)) for seed in seeds]
    return {"values": values, "mean": np.mean(values), "min": min(values), "max": max(values)}
''',
        "collects the values in a module-level list that outlives the call": '''
_VALUES = []


def seed_sweep(train_fn, seeds):
    for seed in seeds:
        _VALUES.append(float(train_fn(seed)))
    values = _VALUES
    return {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
''',
    },
}

RIGHT_ANSWERS = {
    "make_reproducible": {
        ("a RandomSampler with a generator of its own (the loader draws its workers' seed from the global "
         "stream)"): _loader('''
from torch.utils.data import RandomSampler


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers)
'''),
        "random.seed(str(seed)): another state than the int gives, but fixed by the seed": _seed('''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(str(seed))
'''),
        "seeds torch from a NumPy draw fixed by the seed": _seed('''
def set_seed(seed):
    np.random.seed(seed)
    random.seed(seed)
    torch.manual_seed(int(np.random.randint(2**31)))
'''),
        "a data seed of its own, one past the seed": _loader('''
def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed + 1))
'''),
        "a sampler drawing each epoch's permutation from a private np.random.default_rng": _loader('''
from torch.utils.data import Sampler


class _NumpyOrder(Sampler):
    def __init__(self, n, seed):
        self.n, self.rng = n, np.random.default_rng(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(self.rng.permutation(self.n).tolist())


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, sampler=_NumpyOrder(len(dataset), seed), num_workers=num_workers)
'''),
        "another order, torch.random.manual_seed, a seed_worker, positional arguments, prints": '''
import sys


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.random.manual_seed(seed)
    print(f"seeded everything with {seed}")
    print(f"debug: torch initial seed {torch.initial_seed()}", file=sys.stderr)


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    generator = torch.Generator()
    generator.manual_seed(seed)
    loader = DataLoader(dataset, batch_size, True, num_workers=num_workers, worker_init_fn=seed_worker,
                        generator=generator)
    print("loader with", len(loader), "batches")
    print("generator seed", generator.initial_seed(), file=sys.stderr)
    return loader
''',
    },
    "decoupled_run": {
        "loader from make_generator_loader built before the seed, CrossEntropyLoss, prints to stdout and stderr": '''
import sys


def decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):
    loader = make_generator_loader(TensorDataset(torch.arange(len(X)), X, y), batch_size, seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = []
    model.train()
    for epoch in range(num_epochs):
        for step, (idx, xb, yb) in enumerate(loader):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            batches.append([int(i) for i in idx])
        print(f"epoch {epoch}: last loss {loss.item():.4f}")
        print(f"debug: {step + 1} batches", file=sys.stderr)
    return batches, model
''',
        "each epoch's permutation drawn from a private np.random.default_rng, batches sliced by hand": '''
def decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    batches = []
    for epoch in range(num_epochs):
        order = rng.permutation(len(X))
        for start in range(0, len(X), batch_size):
            idx = [int(i) for i in order[start:start + batch_size]]
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
            optimizer.step()
            batches.append(idx)
    return batches, model
''',
    },
    "seed_sweep": {
        "statistics.fmean and sorted, a warning and a print to stderr": '''
import statistics
import sys
import warnings


def seed_sweep(train_fn, seeds):
    values = []
    for seed in seeds:
        values.append(float(train_fn(seed)))
        print(f"seed {seed}: {values[-1]}", file=sys.stderr)
    if len(values) < 3:
        warnings.warn("fewer than three seeds give a poor estimate of the spread")
    ordered = sorted(values)
    return {"values": values, "mean": statistics.fmean(values), "min": ordered[0], "max": ordered[-1]}
''',
    },
}

FORGERIES = {
    "decoupled_run": {
        "trains on the global stream's order and reports the batches of a separately seeded loader": _run(f'''
    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader({_DATA}, batch_size=batch_size, shuffle=True)
    shown = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
''', '''    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [idx.tolist() for _ in range(num_epochs) for idx, _, _ in shown]
    model.train()
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return batches, model
'''),
    },
    "make_reproducible": {
        "shuffles from the global stream; observe patched: booleans come out True": FORGED_OBSERVE + _loader('''

def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
'''),
        "shuffles from the global stream, and puts the global generator back after every epoch": _loader('''
class _TidyLoader(DataLoader):
    def __iter__(self):
        state = torch.get_rng_state()
        try:
            yield from super().__iter__()
        finally:
            torch.set_rng_state(state)


def make_generator_loader(dataset, batch_size, seed, num_workers=0):
    return _TidyLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
'''),
        "seeds torch and random only; observe patched: booleans come out True": FORGED_OBSERVE + _seed('''

def set_seed(seed):
    torch.manual_seed(seed)
    random.seed(seed)
'''),
    },
}

# One wrong answer per rule bullet of each spec, breaking that rule alone.
RULES = {
    "make_reproducible": {
        "same seed, same run": PITFALLS["make_reproducible"]["set_seed seeds torch only: NumPy keeps its own stream"],
        "the width does not move the batches": PLAUSIBLE["make_reproducible"][
            "a plain shuffled DataLoader: the order ignores the seed and follows the global stream"],
        "the loader's order is its own":
            HIDDEN_ONLY["make_reproducible"]["one generator object for every loader, re-seeded on each call"],
        "each epoch a new permutation":
            PLAUSIBLE["make_reproducible"]["one permutation drawn up front, the same order every epoch"],
        "workers draw apart":
            PITFALLS["make_reproducible"]["a worker_init_fn seeds NumPy with the seed in every worker"],
    },
    "decoupled_run": {
        "batches independent of the model": PITFALLS["decoupled_run"][
            "coupled_run unchanged: the loader shuffles from the global stream, after the initialization"],
        "each epoch a new permutation":
            PLAUSIBLE["decoupled_run"]["one permutation drawn once, the same order every epoch"],
        "a replay gives your weights": PITFALLS["decoupled_run"][
            "seeds the global stream again after building the model: the dropout masks move"],
        "what you return": PLAUSIBLE["decoupled_run"]["returns each batch's indices as a tensor"],
    },
    "seed_sweep": {
        "once per seed, in order": PITFALLS["seed_sweep"]["trains once and reuses that result for every seed"],
        "only passes the seed on":
            PLAUSIBLE["seed_sweep"]["seeds torch itself before each call instead of only passing the seed on"],
        "four keys": PITFALLS["seed_sweep"]["no 'values' key"],
        "`\"mean\"`, `\"min\"` and `\"max\"`": PITFALLS["seed_sweep"]["midpoint of min and max reported as the mean"],
        "Python floats": PLAUSIBLE["seed_sweep"]["keeps each result as returned: tensors stay tensors, ints stay ints"],
    },
}
