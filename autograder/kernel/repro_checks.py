"""Visible checks of lesson 07's exercises, graded by invariants and by replay.

Each check observes behaviour the student can reason about: reruns after each global generator is scrambled
on its own, the data order against the width and against earlier global draws, each epoch a new permutation,
the workers' streams, and a replay of the student's own batches through ``coupled_run``'s training. None of
them compares with one reference order or one generator state, so any right way to decouple keeps its points.
The hidden tests of the lesson observe the same invariants as numbers (counts, differences).
"""
from __future__ import annotations

import random
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from autograder.kernel import checks
from autograder.kernel.repro import WorkerDraws, worker_draws

__all__ = ["SCRAMBLERS", "scramble_all", "epochs_of", "epoch_faults", "replay_run", "weight_gap",
           "check_reproducible", "check_decoupled_run", "check_seed_sweep"]


def _scramble_torch(k: int) -> None:
    torch.manual_seed(1000 + k)
    torch.randn(k % 7 + 1)


def _scramble_numpy(k: int) -> None:
    np.random.seed(2000 + k)
    np.random.random_sample(k % 5 + 1)


def _scramble_python(k: int) -> None:
    random.seed(3000 + k)
    random.random()


# Each scrambles one global generator and leaves the two others as they are.
SCRAMBLERS = {"torch's": _scramble_torch, "NumPy's": _scramble_numpy, "Python's random": _scramble_python}


def scramble_all(k: int) -> None:
    for scramble in SCRAMBLERS.values():
        scramble(k)


def epochs_of(loader, count: int = 3) -> list[list[int]]:
    """The item order of ``count`` passes over a loader whose batches open with the item indices."""
    return [[int(i) for batch in loader for i in batch[0].tolist()] for _ in range(count)]


def epoch_faults(epochs: list[list[int]], n_items: int) -> tuple[int, int]:
    """(passes that are not a permutation of the items, passes in the same order as the pass before)."""
    not_perm = sum(sorted(e) != list(range(n_items)) for e in epochs)
    repeats = sum(a == b for a, b in zip(epochs, epochs[1:]))
    return not_perm, repeats


def replay_run(X, y, width: int, seed: int, batches) -> nn.Module:
    """``coupled_run``'s training on the given batches, in order: seed, build the model, one SGD step per batch.

    Nothing but the initialization and the dropout masks draws from torch's global stream here."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for idx in batches:
        idx = torch.as_tensor(idx, dtype=torch.long)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
        optimizer.step()
    return model


def weight_gap(model, other) -> float:
    """The largest absolute difference between two models' parameters and buffers (1e9 if they do not match)."""
    if not isinstance(model, nn.Module):
        return 1e9
    a, b = model.state_dict(), other.state_dict()
    if list(a) != list(b) or any(a[k].shape != b[k].shape for k in a):
        return 1e9
    return max((float((a[k].double() - b[k].double()).abs().max()) for k in a), default=0.0)


# ---------------------------------------------------------------- exercise 1


def _check_set_seed(set_seed: Callable) -> None:
    was = torch.are_deterministic_algorithms_enabled()
    checks.call(set_seed, 0)
    checks.expect(torch.are_deterministic_algorithms_enabled() == was,
                  "set_seed(0) changed the switch for deterministic algorithms: a seeding function changes random "
                  "number generators and nothing else (section 5's switch is a decision of its own).")


def _check_loader(make_loader: Callable) -> None:
    items = TensorDataset(torch.arange(10))
    torch.manual_seed(99)
    torch.randn(3)   # a state that no seeding call gives
    state = torch.get_rng_state()
    loader = checks.call(make_loader, items, 4, 0)
    checks.check_type(loader, DataLoader, "make_generator_loader(items, 4, 0)", hint="return the DataLoader itself.")
    checks.expect(torch.equal(state, torch.get_rng_state()),
                  "building the loader moved or reset torch's global generator: that stream belongs to the model "
                  "(its initialization and dropout), and a loader that seeds or draws from it while it is built "
                  "changes them.")
    first = epochs_of(loader)
    sizes = [len(batch[0]) for batch in loader]
    checks.expect(sizes == [4, 4, 2], f"10 items in batches of 4 gave batch sizes {sizes}; expected [4, 4, 2] "
                  "(keep the last, smaller batch).")
    not_perm, repeats = epoch_faults(first, 10)
    checks.expect(not_perm == 0, f"a pass over the loader did not visit each of the 10 items once: {first}.")
    checks.expect(first[0] != list(range(10)), "the first pass came in dataset order 0, 1, ..., 9: the loader does "
                  "not shuffle.")
    checks.expect(repeats == 0, f"two passes in a row came in the same order ({first[0]}): each epoch must be a new "
                  "permutation, as a shuffled loader gives, not one order fixed once.")
    torch.manual_seed(123)
    torch.randn(77)
    moved = checks.call(make_loader, items, 4, 0)
    again = []
    for _ in range(3):
        torch.randn(5)   # something else draws between the epochs
        again += epochs_of(moved, 1)
    checks.expect(again == first, f"two loaders made with seed 0 gave other orders ({first[0]} and {again[0]}) once "
                  "other code had drawn from torch's global generator before or between the epochs: the order "
                  "still comes from the global stream, so anything that draws from it (a wider model, a sanity "
                  "check) moves your data. (torch.manual_seed(seed) returns the global generator itself.)")
    other = epochs_of(checks.call(make_loader, items, 4, 1))
    checks.expect(other != first, "seeds 0 and 1 gave the same passes: the order must depend on the seed.")


def _check_workers(set_seed: Callable, make_loader: Callable) -> None:
    for source, label in (("numpy", "NumPy"), ("python", "Python random")):
        runs = []
        for k in (1, 2):
            scramble_all(k)
            checks.call(set_seed, 0)
            runs.append(worker_draws(checks.call(make_loader, WorkerDraws(8, source), 2, 0, num_workers=2)))
        workers = sorted({w for w, _ in runs[0].values()})
        checks.expect(workers == [0, 1], f"make_generator_loader(..., num_workers=2) fetched the items in workers "
                      f"{workers}, expected workers [0, 1]: the loader must use the workers it is given.")
        by_worker = {w: sorted(d for v, d in runs[0].values() if v == w) for w in (0, 1)}
        checks.expect(by_worker[0] != by_worker[1],
                      f"the two workers drew the same {label} numbers ({by_worker[0]}): every worker's generator "
                      "started in the same state, so a random augmentation repeats itself from worker to worker.")
        checks.expect(runs[0] == runs[1], f"set_seed(0) and a new loader with seed 0 gave other {label} draws in the "
                      "workers the second time: the workers' streams must follow from the seed alone.")


def _script_data():
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(48, 4, generator=gen)
    return X, (X.sum(dim=1) > 0).long()


def _check_script(script: Callable) -> None:
    X, y = _script_data()
    scramble_all(1)
    out = checks.call(script, X, y, 4, 0)
    checks.expect(isinstance(out, tuple) and len(out) == 2, f"the script returned {checks.describe(out)}; "
                  "expected (batches, losses).")
    batches, losses = out
    for k, (name, scramble) in enumerate(SCRAMBLERS.items(), start=2):
        scramble_all(1)
        scramble(k)   # the three generators as before the first run, but this one
        again, again_losses = checks.call(script, X, y, 4, 0)
        checks.expect(again == batches, f"after {name} global generator alone was put in another state, the same "
                      "arguments trained on other batches: the data order depends on what drew before the call.")
        checks.expect(again_losses == losses,
                      f"after {name} global generator alone was put in another state, the same arguments trained "
                      "on the same batches but gave other losses: something the run draws from that generator "
                      "was not in a state fixed by the seed.")
    wide, _ = checks.call(script, X, y, 16, 0)
    checks.expect(wide == batches, "with widths 4 and 16 (seed 0) the script trained on other batches: the order "
                  "still reads a stream that the model's initialization has just used, and a wider model uses more.")


def check_reproducible(set_seed: Callable, make_generator_loader: Callable, script: Callable) -> None:
    """Visible checks of exercise 1: the loader's passes, its workers, then the script that uses both."""
    _check_set_seed(set_seed)
    _check_loader(make_generator_loader)
    _check_workers(set_seed, make_generator_loader)
    _check_script(script)
    torch.manual_seed(0)


# ---------------------------------------------------------------- exercise 2


def _decoupled_data():
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(48, 4, generator=gen)
    return X, (X[:, 0] > X[:, 1]).long()


def _run_decoupled(decoupled_run: Callable, X, y, width: int, seed: int = 0):
    out = checks.call(decoupled_run, X, y, width, seed)
    checks.expect(isinstance(out, tuple) and len(out) == 2,
                  f"decoupled_run returned {checks.describe(out)}; expected a pair (batches, model).")
    batches, model = out
    checks.check_type(model, nn.Module, "the model decoupled_run returned", hint="return the trained model.")
    checks.expect(isinstance(batches, list) and len(batches) == 6
                  and all(isinstance(b, list) and all(type(i) is int for i in b) for b in batches),
                  "for 48 items, batch_size 16 and 2 epochs, batches should be a list of 6 lists of Python ints "
                  f"(one list per batch trained on); got {checks.describe(batches)}.")
    epochs = [sum(batches[k:k + 3], []) for k in (0, 3)]
    not_perm, repeats = epoch_faults(epochs, 48)
    checks.expect(not_perm == 0, "an epoch's batches do not visit each of the 48 items exactly once.")
    checks.expect(repeats == 0, "the second epoch repeated the first one's order: each epoch is a new permutation.")
    return batches, model


def check_decoupled_run(decoupled_run: Callable) -> None:
    """Visible checks of exercise 2: the batches against the width and earlier draws, then a replay."""
    X, y = _decoupled_data()
    scramble_all(1)
    narrow, narrow_model = _run_decoupled(decoupled_run, X, y, 4)
    scramble_all(2)
    wide, wide_model = _run_decoupled(decoupled_run, X, y, 16)
    checks.expect(narrow[:3] == wide[:3],
                  "with widths 4 and 16 (seed 0) the first epoch's batches differ: the data order depends on how "
                  "many numbers building the model drew, so the shuffle reads a stream that the initialization has "
                  "just used, and a wider model uses more of it.")
    checks.expect(narrow[3:] == wide[3:],
                  "with widths 4 and 16 (seed 0) the first epoch agrees but the second does not: the second epoch's "
                  "shuffle still reads a stream that the first epoch's dropout masks, whose size depends on the "
                  "width, have moved in between.")
    scramble_all(3)
    again, again_model = _run_decoupled(decoupled_run, X, y, 4)
    checks.expect(again == narrow, "the same arguments gave other batches the second time, after something else "
                  "had drawn from the global generators: the data order depends on what ran before the call.")
    gap = weight_gap(again_model, narrow_model)
    checks.expect(gap == 0.0, f"the same arguments, after other global states, gave other final weights (largest "
                  f"difference {gap:.3g}): the model's numbers depend on what ran before the call.")
    for label, batches, model, width in (("4", narrow, narrow_model, 4), ("16", wide, wide_model, 16)):
        gap = weight_gap(model, replay_run(X, y, width, 0, batches))
        checks.expect(gap <= 1e-6,
                      f"coupled_run's training replayed on the batches you returned (width {label}, seed 0: seed, "
                      f"build the model, one step per batch) ends with other weights than yours (largest difference "
                      f"{gap:.3g}): your run is not coupled_run's training on those batches. Either something "
                      "besides the initialization and the dropout masks drew from torch's global stream during "
                      "your run, or it was seeded at another moment, or the model, optimizer, mode or steps differ.")
    other, _ = _run_decoupled(decoupled_run, X, y, 4, seed=1)
    checks.expect(other != narrow, "seeds 0 and 1 trained on the same batches: the seed must pick the data order "
                  "too, or five seeds would vary the model only.")
    torch.manual_seed(0)


# ---------------------------------------------------------------- exercise 3


def _mean_hint(got, want, seeds) -> str:
    if isinstance(got, (int, float)) and abs(got - sum(seeds) / len(seeds)) < 1e-9:
        return f"{got} is the mean of the seeds {seeds}; average train_fn's results instead."
    if isinstance(got, (int, float)) and abs(got - (min(want) + max(want)) / 2) < 1e-9:
        return f"{got} is halfway between min and max, which is not the mean of the values."
    return "the mean is the sum of the values divided by their number."


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
    for key in ("mean", "min", "max"):
        checks.check_type(summary[key], float, f"summary['{key}']",
                          hint="a plain Python float: np.mean and friends return NumPy float64 scalars, and a "
                               "one-element tensor is not a float either.")
    checks.check_number(summary["mean"], sum(want) / len(want), f"summary['mean'] for results {want}", tol=1e-9,
                        hint=_mean_hint(summary["mean"], want, seeds))
    checks.check_number(summary["min"], min(want), "summary['min']", tol=1e-12, hint="the smallest of the values.")
    checks.check_number(summary["max"], max(want), "summary['max']", tol=1e-12, hint="the largest of the values.")
    tensor_summary = checks.call(seed_sweep, lambda seed: torch.tensor(seed / 4), range(3))
    for key in ("mean", "min", "max"):
        checks.check_type(tensor_summary.get(key), float, f"summary['{key}'] when train_fn returns tensors",
                          hint="a one-element tensor must become a Python float.")
    checks.expect(all(type(v) is float for v in tensor_summary.get("values", [None])),
                  "summary['values'] holds tensors when train_fn returns tensors: each result must become a "
                  "Python float.")
