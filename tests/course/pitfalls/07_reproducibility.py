"""Wrong answers for lesson 07 (exercise -> description -> answer cell).

PITFALLS are the mistakes the lesson names; HIDDEN_ONLY pass every visible check; PLAUSIBLE are what
students write that the lesson does not name; RIGHT_ANSWERS are correct answers written another way;
FORGERIES also forge the evidence. The lesson is hardened (it has FORGERIES): every wrong answer must
be rejected by a value observation, not only by a boolean.
"""
from coursekit import FORGED_OBSERVE

# decoupled_run's recipe, shared by the answers below: the lines before the training loop vary (`body`), and so do
# the jitter line inside it (`jitter`) and the loop itself (`train`).
_MODEL = "nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))"
_DATA = "TensorDataset(torch.arange(len(X)), X, y)"
_OWN = "torch.Generator().manual_seed(seed)"
_NOISE = "    noise = torch.Generator().manual_seed(seed + 1)\n"
_JITTER = "            xb = xb + 0.1 * torch.randn(xb.shape, generator=noise)\n"
_TRAIN = '''    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches, points = [], []
    model.train()
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
{jitter}            batches.append(idx.tolist())
            points.append(xb)
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return batches, points, model
'''


def _run(body: str, jitter: str = _JITTER, train: str = _TRAIN) -> str:
    return ("\ndef decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):\n" + body
            + train.format(jitter=jitter))


def _seeded(loader: str = f"DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator={_OWN})",
            before: str = "    torch.manual_seed(seed)\n    model = " + _MODEL + "\n", after: str = "") -> str:
    """The lines before the loop: seed, model, a jitter generator of its own, the loader (and what comes after)."""
    return before + _NOISE + f"    loader = {loader}\n" + after


# Exercise 1 repairs jitter_script: `{seed}` (the seeding before the model), `{after_model}` (after it), `{workers}`
# (the loader's worker arguments) and `{dataset}` vary; the training loop is jitter_script's.
_SCRIPT = """
def reproducible_script(X, y, width, seed, num_workers=0, num_epochs=2):
{seed}    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Linear(width, 2))
{after_model}    loader = DataLoader({dataset}, batch_size=16, shuffle=True, num_workers={workers})
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches, losses = [], []
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            batches.append(idx.tolist())
            losses.append(loss.item())
    return batches, losses
"""
_SEED_ALL = "    torch.manual_seed(seed)\n    np.random.seed(seed)\n    random.seed(seed)\n"


def _script(seed: str = _SEED_ALL, after_model: str = "", workers: str = "num_workers",
            dataset: str = "JitterDataset(X, y)", before: str = "") -> str:
    return before + _SCRIPT.format(seed=seed, after_model=after_model, workers=workers, dataset=dataset)


# compare_recipes: `{pairs}` (the seeds of each run), `{verdict}` (the rule) and `{check}` (the guard) vary.
_COMPARE = """
def compare_recipes(train_a, train_b, seeds):
    seeds = list(seeds)
{check}    summaries = {{}}
    for name, train_fn in (("a", train_a), ("b", train_b)):
        values = [float(train_fn({pairs})) for seed in seeds]
        summaries[name] = {{"values": values, "mean": {mean}, "min": min(values), "max": max(values)}}
    a, b = summaries["a"], summaries["b"]
    verdict = {verdict}
    return {{**summaries, "verdict": verdict}}
"""
_CHECK = "    if len(seeds) < 2:\n        raise ValueError('a spread needs two seeds')\n"
_RANGES = '"b" if b["min"] > a["max"] else "a" if a["min"] > b["max"] else "noise"'


def _compare(pairs: str = "seed, seed", verdict: str = _RANGES, check: str = _CHECK,
             mean: str = "sum(values) / len(values)") -> str:
    return _COMPARE.format(pairs=pairs, verdict=verdict, check=check, mean=mean)


PITFALLS = {
    "reproducible_script": {
        "seeds torch only: the jitter's NumPy and random draws keep their own streams": _script(
            seed="    torch.manual_seed(seed)\n"),
        "forgets Python's random module (the jitter's strength)": _script(
            seed="    torch.manual_seed(seed)\n    np.random.seed(seed)\n"),
        "seeds a new NumPy Generator object instead of the global one": _script(
            seed="    torch.manual_seed(seed)\n    np.random.default_rng(seed)\n    random.seed(seed)\n"),
        "seeds everything, but after building the model (jitter_script's order kept)": _script(
            seed="", after_model=_SEED_ALL),
        "keeps distinct_worker_seeds: the workers seed from their process ids": _script(
            workers="num_workers, worker_init_fn=distinct_worker_seeds"),
        "drops the jitter: the points as they are, so nothing random happens to them": _script(
            dataset="TensorDataset(torch.arange(len(X)), X, y)"),
    },
    "decoupled_run": {
        "coupled_run unchanged: the loader shuffles from the global stream, after the initialization": _run(
            _seeded("DataLoader(NoisyPoints(X, y), batch_size=batch_size, shuffle=True)"), jitter=""),
        "generator=torch.manual_seed(seed): the global stream seeded again for the loader": _run(_seeded(
            f"DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator=torch.manual_seed(seed))")),
        "the model is built before torch.manual_seed(seed)": _run(_seeded(
            before=f"    model = {_MODEL}\n    torch.manual_seed(seed)\n")),
        "a seeded RandomSampler instead of a seeded loader": _run(_seeded(
            f"DataLoader({_DATA}, batch_size=batch_size,\n"
            f"                        sampler=torch.utils.data.RandomSampler(range(len(X)), generator={_OWN}))")),
        "seeds the global stream again after building the model: the dropout masks move": _run(_seeded(
            after="    torch.manual_seed(seed)\n")),
        "generator= on the loader only: NoisyPoints still jitters from the global stream": _run(_seeded(
            f"DataLoader(NoisyPoints(X, y), batch_size=batch_size, shuffle=True, generator={_OWN})"), jitter=""),
        "the jitter drawn in the loop from the global stream": _run(
            _seeded(), jitter="            xb = xb + 0.1 * torch.randn(xb.shape)\n"),
        "the jitter drawn once, before training: each item keeps its noise in every epoch": _run(_seeded(
            "DataLoader(TensorDataset(torch.arange(len(X)), X + 0.1 * torch.randn(X.shape, generator=noise), y),\n"
            f"                        batch_size=batch_size, shuffle=True, generator={_OWN})"), jitter=""),
        "the jitter dropped: the points trained on as they are": _run(_seeded(), jitter=""),
    },
    "compare_recipes": {
        "every run on one data set: the data seed fixed": _compare(pairs="seed, 0"),
        "the recipes on other seeds: B's runs shifted by one": _compare(pairs="seed + (name == 'b'), seed"),
        "the verdict from the first seed alone": _compare(
            verdict='"b" if b["values"][0] > a["values"][0] else "a" if a["values"][0] > b["values"][0] else "noise"'),
        "the verdict from the means alone": _compare(
            verdict='"b" if b["mean"] > a["mean"] else "a" if a["mean"] > b["mean"] else "noise"'),
        "midpoint of min and max reported as the mean": _compare(mean="(min(values) + max(values)) / 2"),
        "trains once and reuses that result for every seed": """
def compare_recipes(train_a, train_b, seeds):
    seeds = list(seeds)
    if len(seeds) < 2:
        raise ValueError("a spread needs two seeds")
    summaries = {}
    for name, train_fn in (("a", train_a), ("b", train_b)):
        result = float(train_fn(seeds[0], seeds[0]))
        values = [result for _ in seeds]
        summaries[name] = {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
    a, b = summaries["a"], summaries["b"]
    verdict = "b" if b["min"] > a["max"] else "a" if a["min"] > b["max"] else "noise"
    return {**summaries, "verdict": verdict}
""",
    },
}

HIDDEN_ONLY = {
    "reproducible_script": {
        "ignores num_epochs: always two epochs": _script().replace("range(num_epochs)", "range(2)"),
    },
    "decoupled_run": {
        "ignores num_epochs and batch_size (always coupled_run's defaults)": _run(
            "    num_epochs, batch_size = 2, 16\n" + _seeded()),
    },
}

PLAUSIBLE = {
    "reproducible_script": {
        "jitter_script handed in unchanged": _script(
            seed="", after_model="    torch.manual_seed(seed)\n",
            workers="num_workers, worker_init_fn=distinct_worker_seeds"),
        "seeds everything with a fixed number, whatever the seed": _script(
            seed="    torch.manual_seed(0)\n    np.random.seed(0)\n    random.seed(0)\n"),
        "ignores num_workers: every item is fetched in the main process": _script(workers="0"),
        "torch.seed() for torch, which seeds from a fresh non-deterministic number": _script(
            seed="    torch.seed()\n    np.random.seed(seed)\n    random.seed(seed)\n"),
        "one permutation drawn up front, the same order every epoch": _script(
            dataset="torch.utils.data.Subset(JitterDataset(X, y), torch.randperm(len(X)).tolist())").replace(
            "shuffle=True", "shuffle=False"),
        "drop_last=True, so every batch has the same size": _script().replace("shuffle=True",
                                                                               "shuffle=True, drop_last=True"),
    },
    "decoupled_run": {
        "records the batches in a first pass over the loader, then trains on later passes": _run(_seeded(), train='''\
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches, points = [], []
    for _ in range(num_epochs):
        for idx, xb, _ in loader:
            batches.append(idx.tolist())
            points.append(xb + 0.1 * torch.randn(xb.shape, generator=noise))
    model.train()
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
{jitter}            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return batches, points, model
'''),
        "trains in eval mode, so that no dropout mask can depend on the width": _run(
            _seeded(), train=_TRAIN.replace("model.train()", "model.eval()")),
        "seeds the loader's generator with a number drawn from the global stream": _run(_seeded(
            f"DataLoader({_DATA}, batch_size=batch_size, shuffle=True,\n"
            "                        generator=torch.Generator().manual_seed(int(torch.randint(2**31, ()))))")),
        "one permutation drawn once, the same order every epoch": _run(_seeded(
            f"DataLoader(torch.utils.data.Subset({_DATA}, torch.randperm(len(X), generator={_OWN}).tolist()),\n"
            "                        batch_size=batch_size)")),
        "returns each batch's indices as a tensor": _run(
            _seeded(), train=_TRAIN.replace("batches.append(idx.tolist())", "batches.append(idx)")),
        "returns the points before the jitter": _run(_seeded(), train=_TRAIN.replace(
            "{jitter}            batches.append(idx.tolist())\n            points.append(xb)\n",
            "            batches.append(idx.tolist())\n            points.append(xb)\n{jitter}")),
        "a sanity-check forward pass before training (an extra draw of dropout masks)": _run(_seeded(
            after="    assert model(X[:2]).shape == (2, 2)\n")),
    },
    "compare_recipes": {
        "no ValueError for a single seed": _compare(check=""),
        "np.mean: the mean is a NumPy float64, not a Python float": _compare(mean="np.mean(values)"),
        "rounds each score to 1 decimal": _compare().replace("float(train_fn(seed, seed))",
                                                             "round(float(train_fn(seed, seed)), 1)"),
        "sorts the values (for min and max) and returns them sorted": _compare().replace(
            "values = [float(train_fn(seed, seed)) for seed in seeds]",
            "values = sorted(float(train_fn(seed, seed)) for seed in seeds)"),
        "the verdict from a difference of means above 0.01": _compare(
            verdict='"b" if b["mean"] - a["mean"] > 0.01 else "a" if a["mean"] - b["mean"] > 0.01 else "noise"'),
        "the model seed fixed, only the data seed varies": _compare(pairs="0, seed"),
    },
}

RIGHT_ANSWERS = {
    "reproducible_script": {
        "a worker_init_fn seeding NumPy and random from torch's worker seed, a loader generator of its own": _script(
            workers=("num_workers, worker_init_fn=seed_from_torch,\n"
                     "                        generator=torch.Generator().manual_seed(seed)"),
            before="""
def seed_from_torch(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)
    random.seed(torch.initial_seed())

"""),
        "other seeds for each stream, derived from the seed, and prints": _script(seed=(
            "    print('seeding with', seed)\n    random.seed(f'jitter-{seed}')\n"
            "    np.random.seed(seed + 1)\n    torch.random.manual_seed(seed + 2)\n")),
        "seeds torch from a NumPy draw fixed by the seed": _script(seed=(
            "    np.random.seed(seed)\n    random.seed(seed)\n    torch.manual_seed(int(np.random.randint(2**31)))\n")),
    },
    "decoupled_run": {
        "one generator for order and jitter, the loader built before the seed, CrossEntropyLoss, prints": '''
import sys


def decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):
    data_gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(TensorDataset(torch.arange(len(X)), X, y), batch_size, True, generator=data_gen)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches, points = [], []
    model.train()
    for epoch in range(num_epochs):
        for step, (idx, xb, yb) in enumerate(loader):
            xb = torch.randn(xb.shape, generator=data_gen) * 0.1 + xb
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            batches.append([int(i) for i in idx])
            points.append(xb.detach())
        print(f"epoch {epoch}: last loss {loss.item():.4f}")
        print(f"debug: {step + 1} batches", file=sys.stderr)
    return batches, points, model
''',
        "order and jitter from a private np.random.default_rng, batches sliced by hand": '''
def decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    batches, points = [], []
    for epoch in range(num_epochs):
        order = rng.permutation(len(X))
        for start in range(0, len(X), batch_size):
            idx = [int(i) for i in order[start:start + batch_size]]
            xb = X[idx] + torch.from_numpy(rng.normal(0.0, 0.1, (len(idx), X.shape[1]))).float()
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), y[idx]).backward()
            optimizer.step()
            batches.append(idx)
            points.append(xb)
    return batches, points, model
''',
        "a dataset of its own whose items jitter from a generator it holds": '''
class OwnNoise(torch.utils.data.Dataset):
    def __init__(self, X, y, seed):
        self.X, self.y, self.gen = X, y, torch.Generator().manual_seed(seed)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return i, self.X[i] + 0.1 * torch.randn(self.X.shape[1:], generator=self.gen), self.y[i]

''' + _run(f"""    torch.manual_seed(seed)
    model = {_MODEL}
    loader = DataLoader(OwnNoise(X, y, seed + 5), batch_size=batch_size, shuffle=True, generator={_OWN})
""", jitter=""),
        "NoisyPoints kept, fetched by one worker process: its generator is seeded from the loader's generator": _run(
            _seeded("DataLoader(NoisyPoints(X, y), batch_size=batch_size, shuffle=True, num_workers=1,\n"
                    f"                        generator={_OWN})"), jitter=""),
        "NoisyPoints kept: each batch fetched inside torch.random.fork_rng, the global stream seeded per step": '''
def decoupled_run(X, y, width, seed, num_epochs=2, batch_size=16):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    loader = DataLoader(NoisyPoints(X, y), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches, points, step = [], [], 0
    model.train()
    for epoch in range(num_epochs):
        fetch = iter(loader)
        while True:
            with torch.random.fork_rng():
                torch.manual_seed(seed * 100_003 + step)
                batch = next(fetch, None)
            if batch is None:
                break
            idx, xb, yb = batch
            step += 1
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            batches.append(idx.tolist())
            points.append(xb)
    return batches, points, model
''',
    },
    "compare_recipes": {
        "interleaved runs, data seeds offset, a 2-standard-deviation rule, statistics.fmean": """
import statistics
import sys


def compare_recipes(train_a, train_b, seeds):
    seeds = list(seeds)
    if len(seeds) <= 1:
        raise ValueError(f"need two seeds or more, got {seeds}")
    values = {"a": [], "b": []}
    for seed in seeds:
        values["a"].append(float(train_a(seed, 10_000 + seed)))
        values["b"].append(float(train_b(seed, 10_000 + seed)))
        print(f"seed {seed}: {values['a'][-1]:.3f} {values['b'][-1]:.3f}", file=sys.stderr)
    out = {name: {"values": v, "mean": statistics.fmean(v), "min": min(v), "max": max(v)} for name, v in values.items()}
    spread = max(statistics.stdev(values["a"]), statistics.stdev(values["b"]))
    gap = out["b"]["mean"] - out["a"]["mean"]
    out["verdict"] = "b" if gap > 2 * spread else "a" if -gap > 2 * spread else "noise"
    return out
""",
    },
}

FORGERIES = {
    "decoupled_run": {
        "trains on the global stream's order and reports the batches of a separately seeded loader": _run(_seeded(
            after=f"    shown = DataLoader({_DATA}, batch_size=batch_size, shuffle=True, generator={_OWN})\n"),
            train='''\
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(NoisyPoints(X, y), batch_size=batch_size, shuffle=True)
    batches = [idx.tolist() for _ in range(num_epochs) for idx, _, _ in shown]
    points = [X[idx] + 0.1 * torch.randn(len(idx), X.shape[1], generator=noise) for idx in batches]
    model.train()
    for epoch in range(num_epochs):
        for idx, xb, yb in loader:
{jitter}            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return batches, points, model
''', jitter=""),
    },
    "reproducible_script": {
        "seeds torch only; observe patched: booleans come out True": FORGED_OBSERVE + _script(
            seed="    torch.manual_seed(seed)\n"),
    },
}

# One wrong answer per rule bullet of each spec, breaking that rule alone.
RULES = {
    "reproducible_script": {
        "same seed, same run": PITFALLS["reproducible_script"][
            "seeds torch only: the jitter's NumPy and random draws keep their own streams"],
        "with workers too": PITFALLS["reproducible_script"][
            "keeps distinct_worker_seeds: the workers seed from their process ids"],
        "the seed picks the run": PLAUSIBLE["reproducible_script"][
            "seeds everything with a fixed number, whatever the seed"],
        "the same training": PITFALLS["reproducible_script"][
            "drops the jitter: the points as they are, so nothing random happens to them"],
    },
    "decoupled_run": {
        "the data side independent of the model": PITFALLS["decoupled_run"][
            "generator= on the loader only: NoisyPoints still jitters from the global stream"],
        "the same data treatment": PITFALLS["decoupled_run"][
            "the jitter drawn once, before training: each item keeps its noise in every epoch"],
        "a replay gives your weights": PITFALLS["decoupled_run"][
            "seeds the global stream again after building the model: the dropout masks move"],
        "what you return": PLAUSIBLE["decoupled_run"]["returns each batch's indices as a tensor"],
    },
    "compare_recipes": {
        "both recipes on the same runs": PITFALLS["compare_recipes"][
            "the recipes on other seeds: B's runs shifted by one"],
        "every run a new draw": PITFALLS["compare_recipes"]["every run on one data set: the data seed fixed"],
        "a summary per recipe": PITFALLS["compare_recipes"]["midpoint of min and max reported as the mean"],
        "a verdict": PITFALLS["compare_recipes"]["the verdict from the means alone"],
        "a spread needs two runs": PLAUSIBLE["compare_recipes"]["no ValueError for a single seed"],
    },
}
