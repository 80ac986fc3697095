"""Helpers for lesson 07 (reproducibility): datasets that show worker RNGs, the random tape and seed-spread
figures, and the visible checks of the lesson's exercises.

``WorkerDraws`` and ``JitterDataset`` live here, not in the notebook, because DataLoader workers started
with ``spawn`` (macOS, Windows) or ``forkserver`` import the dataset class by name and cannot see anything
defined in a notebook. The same holds for any ``worker_init_fn``.

The ``check_*`` functions are the visible checks of the lesson's test cells: they compute what they compare
with here, so that no expected value stands in a test cell.
"""
from __future__ import annotations

import random
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset, get_worker_info

from autograder.kernel import checks

__all__ = ["WorkerDraws", "worker_draws", "JitterDataset", "random_tape", "plot_random_tape", "plot_seed_spread",
           "check_reproducible", "check_decoupled_run", "check_seed_sweep"]


class WorkerDraws(Dataset):
    """Item ``i`` is ``(i, worker id, one draw)``; the worker id is -1 in the main process.

    The draw (``torch.rand``, or ``np.random.random`` with ``source="numpy"``) stands for a random
    augmentation: it comes from whichever process fetches the item, so it shows which generator a loader's
    workers (or the main process) draw from.
    """

    def __init__(self, length: int = 8, source: str = "torch"):
        if length < 1:
            raise ValueError(f"length must be positive, got {length}")
        if source not in ("torch", "numpy"):
            raise ValueError(f"source must be 'torch' or 'numpy', got {source!r}")
        self.length = length
        self.source = source

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        if not 0 <= i < self.length:
            raise IndexError(f"index {i} is out of range for {self.length} items")
        info = get_worker_info()
        worker = -1 if info is None else info.id
        if self.source == "numpy":
            return i, worker, torch.tensor(float(np.random.random()), dtype=torch.float64)
        return i, worker, torch.rand(())


def worker_draws(loader) -> dict[int, tuple[int, float]]:
    """One pass over a loader of :class:`WorkerDraws`: item index -> (worker id, draw rounded to 4 places)."""
    found: dict[int, tuple[int, float]] = {}
    for indices, workers, draws in loader:
        for i, w, d in zip(indices.tolist(), workers.tolist(), draws.tolist()):
            found[i] = (w, round(d, 4))
    return dict(sorted(found.items()))


def plot_seed_spread(results: Mapping[str, Mapping[int, float]], ax=None, *, title: str | None = None,
                     ylabel: str = "final validation accuracy", xlabel: str = "configuration"):
    """Strip plot: one column per configuration, one dot per seed, the mean as a bar and the range as a line.

    ``results`` maps a configuration's label to ``{seed: value}``. Each dot is labelled
    with its seed; the text under each column gives the mean and the range (min to max).
    """
    import matplotlib.pyplot as plt

    if not results:
        raise ValueError("results is empty: give at least one configuration with one seed")
    if ax is None:
        _, ax = plt.subplots(figsize=(2.2 + 2.0 * len(results), 4))
    positions = range(len(results))
    for x, by_seed in zip(positions, results.values()):
        seeds: Sequence[int] = list(by_seed)
        values = [float(by_seed[s]) for s in seeds]
        lo, hi, mean = min(values), max(values), sum(values) / len(values)
        offsets = [0.0] * len(values) if len(values) == 1 else [
            -0.12 + 0.24 * k / (len(values) - 1) for k in range(len(values))]
        ax.vlines(x, lo, hi, color="0.6", linewidth=6, alpha=0.5, zorder=1,
                  label="range (min to max)" if x == 0 else None)
        ax.hlines(mean, x - 0.25, x + 0.25, color="black", linewidth=2, zorder=2,
                  label="mean" if x == 0 else None)
        ax.scatter([x + o for o in offsets], values, s=45, color="tab:blue", edgecolors="white", zorder=3,
                   label="one seed" if x == 0 else None)
        for o, v, s in zip(offsets, values, seeds):
            ax.annotate(f"seed {s}", (x + o, v), xytext=(6, 0), textcoords="offset points", fontsize=8,
                        va="center")
        ax.annotate(f"mean {mean:.4f}\nrange {lo:.4f} to {hi:.4f}", (x, lo), xytext=(0, -14),
                    textcoords="offset points", ha="center", va="top", fontsize=9)
    ax.set_xticks(list(positions))
    ax.set_xticklabels(list(results))
    ax.set_xlim(-0.6, len(results) - 0.4)
    low = min(float(v) for by_seed in results.values() for v in by_seed.values())
    high = max(float(v) for by_seed in results.values() for v in by_seed.values())
    pad = max(0.02, 0.15 * (high - low))
    ax.set_ylim(low - 2.5 * pad, high + pad)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


class JitterDataset(Dataset):
    """Item ``i`` is ``(i, X[i] jittered, y[i])``: Gaussian noise from NumPy's global generator, of a strength
    drawn from Python's ``random``, as an augmentation pipeline might do. The jittered point is float32."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor):
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
        self.X, self.y = X, y

    def __len__(self) -> int:
        return len(self.X)

    def __getitem__(self, i: int):
        strength = random.uniform(0.05, 0.2)
        noise = np.random.standard_normal(self.X.shape[1:])
        return i, (self.X[i] + strength * torch.from_numpy(noise)).float(), self.y[i]


# ---------------------------------------------------------------- the random tape


def random_tape(width: int, *, decoupled: bool, in_features: int = 4, n_items: int = 256, batch_size: int = 16,
                num_epochs: int = 2) -> list[dict]:
    """What a run of lesson 07's ``coupled_run`` (or its decoupled version) draws, in program order.

    Each entry is ``{"stream", "consumer", "count"}``: ``stream`` is ``"global"`` (torch's global generator) or
    ``"loader"`` (the loader's own generator); ``count`` is how many values the consumer takes (building the
    model: one per parameter; dropout: one 64-bit value per element of each hidden activation in training; a
    shuffle without ``generator=``: two 64-bit seeds, one for the workers and one for a fresh generator that then
    draws the order; with ``generator=g``: the workers' seed and the order itself come from ``g``, ``count`` is
    then ``None``). tests/unit/test_repro.py checks the counts against the generator itself.
    """
    tape = [{"stream": "global", "consumer": "initialization",
             "count": in_features * width + width + width * 2 + 2}]
    for epoch in range(1, num_epochs + 1):
        if decoupled:
            tape.append({"stream": "loader", "consumer": f"shuffle, epoch {epoch}", "count": None})
        else:
            tape.append({"stream": "global", "consumer": f"shuffle, epoch {epoch}", "count": 2})
        tape.append({"stream": "global", "consumer": f"dropout masks, epoch {epoch}",
                     "count": n_items * width})
    return tape


_TAPE_COLOURS = {"initialization": "tab:blue", "shuffle": "tab:orange", "dropout masks": "tab:green"}


def plot_random_tape(runs: Mapping[str, Sequence[dict]], ax=None, *, title: str | None = None):
    """Draw runs as tapes: one row per run and stream, one block per consumer, in the order it draws.

    ``runs`` maps a run's label to its :func:`random_tape`. A block's length grows with the logarithm of the
    number of values it takes (a shuffle's two seeds would not show next to thousands of dropout values); the
    count is written on it. A run with a loader of its own gets a second row for that generator. Each row
    starts at its generator's seed: blocks above one another read the same stretch of their streams.
    """
    import math

    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not runs:
        raise ValueError("runs is empty: give at least one tape")
    rows = []
    for label, tape in runs.items():
        rows.append((f"{label}\n(global stream)", list(tape), "global"))
        if any(e["stream"] == "loader" for e in tape):
            rows.append((f"{label}\n(loader's generator)", list(tape), "loader"))
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.9 + 0.75 * len(rows)))
    for y, (_, tape, stream) in enumerate(rows):
        x = 0.0
        for entry in tape:
            if entry["stream"] != stream:
                continue   # another generator: this stream does not move
            length = 2.5 if entry["count"] is None else 1.0 + math.log10(1 + entry["count"])
            kind = next(k for k in _TAPE_COLOURS if entry["consumer"].startswith(k))
            ax.barh(-y, length, left=x, height=0.6, color=_TAPE_COLOURS[kind], edgecolor="white")
            if entry["count"] is None:
                count = "seed + order"
            elif kind == "shuffle":
                count = f"{entry['count']} seeds"
            else:
                count = f"{entry['count']:,} values"
            ax.text(x + length / 2, -y, f"{entry['consumer']}\n{count}", ha="center", va="center", fontsize=7)
            x += length
    ax.set_yticks([-y for y in range(len(rows))])
    ax.set_yticklabels([label for label, _, _ in rows], fontsize=8)
    ax.set_xticks([])
    ax.set_xlabel("position in the generator's stream, from its seed on (block length grows with the log of the count)")
    ax.set_ylabel("run and generator")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in _TAPE_COLOURS.items()], loc="upper right", fontsize=8,
              bbox_to_anchor=(1.0, 1.25), ncol=3)
    if title:
        ax.set_title(title, loc="left")
    return ax


# ---------------------------------------------------------------- visible checks of the exercises

_GLOBAL_HINT = ("A DataLoader without generator= takes each epoch's shuffle from torch's global generator, so its "
                "order depends on whatever drew from that stream before (and torch.manual_seed inside your "
                "function resets everybody's random numbers). Note that torch.manual_seed(seed) returns the global "
                "generator itself, not a new one.")


def _scramble(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def _three_draws():
    return torch.rand(3), np.random.random_sample(3), [random.random() for _ in range(3)]


def _check_set_seed(set_seed: Callable) -> None:
    for seed in (0, 2024):
        _scramble(987654)
        checks.call(set_seed, seed)
        got_torch, got_np, got_py = _three_draws()
        _scramble(seed)
        want_torch, want_np, want_py = _three_draws()
        checks.check_tensor(got_torch, want_torch, f"torch.rand(3) after set_seed({seed})", atol=0, rtol=0,
                            hints={"values": "torch's generator is not in the state torch.manual_seed gives for "
                                             "the seed you were given."})
        checks.expect(np.array_equal(got_np, want_np),
                      f"after set_seed({seed}), NumPy drew {np.round(got_np, 4).tolist()}, but np.random.seed({seed}) "
                      f"gives {np.round(want_np, 4).tolist()}: torch.manual_seed does not touch NumPy's generator, "
                      "and data pipelines and augmentation code often draw from it. Seed NumPy's global generator "
                      "(a new np.random.default_rng(seed) object seeds nothing that other code uses).")
        checks.expect(got_py == want_py,
                      f"after set_seed({seed}), Python's random module was not in the state random.seed({seed}) "
                      "gives: `random` is a third generator of its own (random.shuffle, random.random in "
                      "augmentation code).")
    if torch.cuda.is_available():
        _scramble(987654)
        checks.call(set_seed, 2024)
        checks.expect(torch.cuda.initial_seed() == 2024,
                      "after set_seed(2024) the CUDA generator's seed is not 2024: torch.manual_seed(seed) seeds "
                      "every CUDA device too.")


def _epochs(loader, count: int = 2) -> list:
    return [[batch.tolist() for (batch,) in loader] for _ in range(count)]


def _check_generator_loader(make_generator_loader: Callable) -> None:
    items = TensorDataset(torch.arange(10))
    torch.manual_seed(0)
    loader = checks.call(make_generator_loader, items, 4, 0)
    checks.check_type(loader, DataLoader, "make_generator_loader(items, 4, 0)", hint="return the DataLoader itself.")
    checks.expect(loader.batch_size == 4, f"the loader's batch_size is {loader.batch_size}, expected 4.")
    first = _epochs(loader)
    checks.expect([len(b) for b in first[0]] == [4, 4, 2],
                  f"10 items in batches of 4 gave batch sizes {[len(b) for b in first[0]]}; expected [4, 4, 2] "
                  "(keep the last, smaller batch: leave drop_last at its default).")
    checks.expect(all(sorted(sum(epoch, [])) == list(range(10)) for epoch in first),
                  "an epoch did not visit each of the 10 items exactly once.")
    checks.expect(sum(first[0], []) != list(range(10)),
                  "the first epoch came in dataset order 0, 1, ..., 9: the loader does not shuffle. A generator "
                  "only decides which random order you get; the loader must shuffle for it to be used.")
    checks.expect(first[0] != first[1],
                  "epoch 2 repeated epoch 1's order: build the generator once per loader and let the DataLoader "
                  "draw each epoch's order from it.")

    torch.manual_seed(0)
    a = _epochs(checks.call(make_generator_loader, items, 4, 0))
    b_loader = checks.call(make_generator_loader, items, 4, 0)
    torch.manual_seed(123)
    torch.randn(50)
    b = _epochs(b_loader)
    checks.expect(a == b, "two loaders made with seed 0 gave different orders once the global generator was in "
                  "another state. " + _GLOBAL_HINT)

    torch.manual_seed(0)
    state = torch.get_rng_state()
    c = _epochs(checks.call(make_generator_loader, items, 4, 0))
    checks.expect(torch.equal(state, torch.get_rng_state()),
                  "building and iterating the loader moved torch's global generator: every draw must come from the "
                  "loader's own generator. Each epoch a DataLoader also draws a seed for its workers, from its "
                  "generator= if it has one and from the global stream otherwise, so a RandomSampler with a "
                  "generator is not enough: give the generator to the DataLoader itself. (And torch.manual_seed "
                  "inside the function would reset everybody's random numbers.)")
    d = _epochs(checks.call(make_generator_loader, items, 4, 1))
    checks.expect(d != c, "seeds 0 and 1 gave the same order: the order must depend on the `seed` argument.")
    own = _epochs(DataLoader(items, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)))
    checks.expect(c == own,
                  f"for seed 0 the loader's first epoch is {c[0]}, not {own[0]}, the order of a loader shuffling "
                  "from a generator of its own seeded with 0: the order depends on the seed alone, but not in the "
                  "way the contract fixes (seed the loader's generator with `seed` itself).")


def _check_workers(make_generator_loader: Callable) -> None:
    def draws():
        loader = checks.call(make_generator_loader, WorkerDraws(8, "numpy"), 2, 0, num_workers=2)
        return worker_draws(loader)

    first = draws()
    workers = sorted({w for w, _ in first.values()})
    checks.expect(workers == [0, 1],
                  f"make_generator_loader(..., num_workers=2) fetched the items in workers {workers}, expected "
                  "workers [0, 1]: hand num_workers on to the DataLoader.")
    by_worker = {w: sorted(d for v, d in first.values() if v == w) for w in (0, 1)}
    checks.expect(by_worker[0] != by_worker[1],
                  f"the two workers drew the same NumPy numbers ({by_worker[0]}): every worker's NumPy generator "
                  "starts in the same state, so a random augmentation repeats itself from worker to worker. A "
                  "worker_init_fn that seeds NumPy with one fixed number does that; PyTorch itself seeds each "
                  "worker's NumPy from that worker's own seed.")
    checks.expect(draws() == first, "two loaders made with seed 0 and two workers gave other NumPy draws: the "
                  "workers' seeds must come from the loader's own generator.")


def _script_data():
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(48, 4, generator=gen)
    return X, (X.sum(dim=1) > 0).long()


def _check_script(script: Callable) -> None:
    X, y = _script_data()
    runs = []
    for scramble in (1, 2):
        _scramble(scramble)
        out = checks.call(script, X, y, 4, 0)
        checks.expect(isinstance(out, tuple) and len(out) == 2, f"the script returned {checks.describe(out)}; "
                      "expected (batches, losses).")
        runs.append(out)
    (batches, losses), (batches2, losses2) = runs
    checks.expect(batches == batches2, "two runs of the script with the same arguments trained on other batches "
                  "once the global generators were in other states: the order still depends on what drew before.")
    checks.expect(losses == losses2,
                  "two runs of the script with the same arguments trained on the same batches but gave other "
                  "losses once the global generators were in other states: something the model or the jitter "
                  "draws from (torch's, NumPy's or Python's random generator) was not in a fixed state.")
    _scramble(3)
    wide, _ = checks.call(script, X, y, 16, 0)
    checks.expect(wide == batches, "with widths 4 and 16 (seed 0) the script trained on other batches: the order "
                  "still reads the stream that the model's initialization has just used, and a wider model uses "
                  "more of it.")


def check_reproducible(set_seed: Callable, make_generator_loader: Callable, script: Callable) -> None:
    """Visible checks of exercise 1: the two helpers, the loader's workers, then the script that uses them."""
    _check_set_seed(set_seed)
    _check_generator_loader(make_generator_loader)
    _check_workers(make_generator_loader)
    _check_script(script)
    torch.manual_seed(0)


def check_decoupled_run(decoupled_run: Callable) -> None:
    """Visible checks of exercise 2 (``decoupled_run``): which stream each consumer reads, seen from outside."""
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(48, 4, generator=gen)
    y = (X[:, 0] > X[:, 1]).long()

    def run(width, seed=0):
        out = checks.call(decoupled_run, X, y, width, seed)
        checks.expect(isinstance(out, tuple) and len(out) == 2,
                      f"decoupled_run returned {checks.describe(out)}; expected a pair (batches, model).")
        batches, model = out
        checks.check_type(model, nn.Module, "the model decoupled_run returned", hint="return the trained model.")
        checks.expect(isinstance(batches, list) and len(batches) == 6
                      and all(isinstance(b, list) and all(type(i) is int for i in b) for b in batches),
                      "for 48 items, batch_size 16 and 2 epochs, batches should be a list of 6 lists of Python ints "
                      f"(one list per batch, e.g. idx.tolist()); got {checks.describe(batches)}.")
        checks.expect(all(sorted(sum(batches[k:k + 3], [])) == list(range(48)) for k in (0, 3)),
                      "an epoch's batches do not visit each of the 48 items exactly once: record idx.tolist() for "
                      "every batch you train on.")
        return batches, model

    def loss(model):
        model.eval()
        with torch.no_grad():
            return nn.functional.cross_entropy(model(X), y).item()

    torch.manual_seed(1)
    narrow, narrow_model = run(4)
    torch.manual_seed(2)
    wide, wide_model = run(16)
    checks.expect(narrow[:3] == wide[:3],
                  "with widths 4 and 16 (seed 0) the first epoch's batches differ: the data order depends on how "
                  "many numbers building the model drew, so the shuffle reads a stream that the initialization has "
                  "just used, and a wider model uses more of it.")
    checks.expect(narrow[3:] == wide[3:],
                  "with widths 4 and 16 (seed 0) the first epoch agrees but the second does not: the second epoch's "
                  "shuffle still reads a stream that the first epoch's dropout masks, whose size depends on the "
                  "width, have moved in between.")
    own = next(iter(DataLoader(torch.arange(48), batch_size=16, shuffle=True,
                               generator=torch.Generator().manual_seed(0)))).tolist()
    checks.expect(narrow[0] == own,
                  f"the batches do not depend on the width, but for seed 0 the first one is {narrow[0]}, not {own}, "
                  "the order of a shuffled loader whose generator= is a generator of its own seeded with 0: the "
                  "batches are shuffled some other way than the contract says. (A loader without generator= draws "
                  "the seed of a fresh generator from the global stream, so even right after "
                  "torch.manual_seed(0) its order is another one.)")
    torch.manual_seed(123)
    torch.randn(77)
    again, again_model = run(4)
    checks.expect(again == narrow, "the same arguments gave other batches the second time, after something else "
                  "had drawn from the global stream: the data order depends on what ran before the call.")
    same = all(torch.equal(a, b) for a, b in zip(narrow_model.state_dict().values(),
                                                 again_model.state_dict().values()))
    checks.expect(same, "the same arguments, after another state of the global stream, gave other final weights: "
                  "the model is initialized from whatever the global stream held before the call.")
    checks.check_number(loss(narrow_model), 0.6502, "final loss of the width-4 run on its 48 points (seed 0)",
                        tol=2e-4,
                        hint="the batches are right but the training is not coupled_run's: either something "
                             "besides the initialization and the dropout masks draws from the global stream during "
                             "the run, or the model, the optimizer, the mode or the steps differ from coupled_run's.")
    checks.check_number(loss(wide_model), 0.6167, "final loss of the width-16 run on its 48 points (seed 0)",
                        tol=2e-4, hint="keep coupled_run's model, optimizer and loss, with the width you are given.")
    torch.manual_seed(0)


def check_seed_sweep(seed_sweep: Callable) -> None:
    """Visible checks of exercise 3 (``seed_sweep``) on a fake experiment whose results are known."""
    calls = []
    results = {3: 0.80, 1: 0.95, 4: 0.70, 15: 0.90}

    def fake_train(seed):
        calls.append(seed)
        return results.get(seed, 0.5)

    seeds = list(results)
    want = [results[s] for s in seeds]
    summary = checks.call(seed_sweep, fake_train, seeds)
    extra = ""
    if len(calls) == 1:
        extra = (" It trained once and reused that result, but the spread over seeds is the point: each seed needs "
                 "a run of its own.")
    elif len(calls) > 1 and len(set(calls)) == 1:
        extra = " Every run got the same seed, so the 'spread' is one result repeated: pass each seed to train_fn."
    checks.expect(calls == seeds, f"seed_sweep(train_fn, {seeds}) called train_fn with the seeds {calls}; expected "
                  f"exactly one call per seed, in the order given: {seeds}." + extra)
    checks.check_type(summary, dict, "seed_sweep(...)", hint="return the summary dict.")
    keys = {"values", "mean", "min", "max"}
    checks.expect(set(summary) == keys,
                  f"the summary's keys are {sorted(summary)}; expected exactly 'values', 'mean', 'min' and 'max' "
                  f"(missing: {sorted(keys - set(summary))}, unexpected: {sorted(set(summary) - keys)}).")
    checks.check_type(summary["values"], list, "summary['values']", hint="a list of floats, one per seed.")
    checks.expect(summary["values"] == want and all(type(v) is float for v in summary["values"]),
                  f"summary['values'] is {summary['values']}; expected train_fn's results as floats, in the order "
                  f"of seeds: {want}.")
    mean = sum(want) / len(want)
    mean_hint = "the mean is the sum of the values divided by their number."
    got = summary["mean"]
    if isinstance(got, (int, float)) and abs(got - sum(seeds) / len(seeds)) < 1e-9:
        mean_hint = f"{got} is the mean of the seeds {seeds}; average train_fn's results instead."
    elif isinstance(got, (int, float)) and abs(got - (min(want) + max(want)) / 2) < 1e-9:
        mean_hint = f"{got} is halfway between min and max, which is not the mean of the values."
    for key in ("mean", "min", "max"):
        checks.check_type(summary[key], float, f"summary['{key}']",
                          hint="a plain Python float: np.mean and friends return NumPy float64 scalars, and a "
                               "one-element tensor is not a float either.")
    checks.check_number(got, mean, f"summary['mean'] for results {want}", tol=1e-9, hint=mean_hint)
    checks.check_number(summary["min"], min(want), "summary['min']", tol=1e-12, hint="the smallest of the values.")
    checks.check_number(summary["max"], max(want), "summary['max']", tol=1e-12, hint="the largest of the values.")

    tensor_summary = checks.call(seed_sweep, lambda seed: torch.tensor(seed / 4), range(3))
    for key in ("mean", "min", "max"):
        checks.check_type(tensor_summary.get(key), float, f"summary['{key}'] when train_fn returns tensors",
                          hint="a one-element tensor must become a Python float.")
    checks.expect(all(type(v) is float for v in tensor_summary.get("values", [None])),
                  "summary['values'] holds tensors when train_fn returns tensors: each result must become a "
                  "Python float.")
