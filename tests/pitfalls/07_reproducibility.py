"""Wrong answers for lesson 07, one per pitfall the curriculum lists (exercise -> pitfall -> answer cell)."""

PITFALLS = {
    "set_seed": {
        "seeds torch only: NumPy keeps its own stream": '''
def set_seed(seed):
    torch.manual_seed(seed)
    random.seed(seed)
''',
        "forgets Python's random module": '''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
''',
        "seeds a new NumPy Generator object instead of the global one": '''
def set_seed(seed):
    torch.manual_seed(seed)
    np.random.default_rng(seed)
    random.seed(seed)
''',
    },
    "make_generator_loader": {
        "shuffles from the global stream (torch.manual_seed, no generator)": '''
def make_generator_loader(dataset, batch_size, seed):
    torch.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)
''',
        "own generator but no shuffling": '''
def make_generator_loader(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, generator=torch.Generator().manual_seed(seed))
''',
        "generator=torch.manual_seed(seed), which is the global generator": '''
def make_generator_loader(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.manual_seed(seed))
''',
        "seeded RandomSampler, but the DataLoader still draws its base seed from the global stream": '''
from torch.utils.data import RandomSampler


def make_generator_loader(dataset, batch_size, seed):
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)
''',
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
    "environment_record": {
        "missing keys: no determinism flags": '''
def environment_record():
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "num_threads": torch.get_num_threads(),
    }
''',
        "determinism flags fixed in advance instead of read at call time": '''
_FLAGS = {
    "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    "cudnn_benchmark": torch.backends.cudnn.benchmark,
    "cudnn_deterministic": torch.backends.cudnn.deterministic,
    "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
}


def environment_record():
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "num_threads": torch.get_num_threads(),
        **_FLAGS,
    }
''',
        "torch.__version__ stored as a TorchVersion, not a plain str": '''
def environment_record():
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "num_threads": torch.get_num_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
''',
    },
}

HIDDEN_ONLY = {
    "environment_record": {
        "copy-paste slip: cudnn_deterministic reads cudnn.benchmark": '''
def environment_record():
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "num_threads": torch.get_num_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.benchmark,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
''',
    },
}
