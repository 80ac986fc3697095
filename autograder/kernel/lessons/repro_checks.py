"""Visible checks of lesson 07's exercises, graded by invariants and by replay.

Each check observes behaviour the student can reason about: reruns after each global generator is scrambled
on its own, the data order and the jitter against the width and against earlier global draws, each epoch a new
permutation with new jitter, the workers' streams, and a replay of the student's own points through ``coupled_run``'s
training. None of
them compares with one reference order or one generator state, so any right way to decouple keeps its points.
The hidden tests of the lesson observe the same invariants as numbers (counts, differences).
"""
from __future__ import annotations

import random
from typing import Callable

import numpy as np
import torch
from torch import nn

from autograder.kernel import checks

__all__ = ["SCRAMBLERS", "scramble_all", "epochs_of", "epoch_faults", "replay_run", "jitter_of",
           "repeated_jitter", "points_differ", "weight_gap",
           "check_reproducible_script", "check_decoupled_run", "check_compare_recipes"]


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


def replay_run(X, y, width: int, seed: int, batches, points=None) -> nn.Module:
    """``coupled_run``'s training on the given batches, in order: seed, build the model, one SGD step per batch.

    ``points[k]`` (the jittered points of batch ``k``) are the inputs when given, else ``X`` at the batch's items.
    Nothing but the initialization and the dropout masks draws from torch's global stream here."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for k, idx in enumerate(batches):
        idx = torch.as_tensor(idx, dtype=torch.long)
        inputs = X[idx] if points is None else points[k]
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), y[idx]).backward()
        optimizer.step()
    return model


def jitter_of(X, batches, points):
    """The noise of every visit, one row per item visited, in training order (None when the points do not fit the
    batches: one float32 tensor per batch, with one row per item and X's columns)."""
    fits = (isinstance(points, list) and len(points) == len(batches) and all(
        isinstance(p, torch.Tensor) and p.dtype == torch.float32 and tuple(p.shape) == (len(b), *X.shape[1:])
        for b, p in zip(batches, points)))
    if not fits or not batches:
        return None
    return torch.cat([p.detach() - X[torch.as_tensor(b, dtype=torch.long)] for b, p in zip(batches, points)])


def repeated_jitter(batches, noise, n_items: int) -> int:
    """Visits whose noise equals the same item's noise in the epoch before (the batches hold whole epochs)."""
    seen, repeats = {}, 0
    for k, i in enumerate(i for b in batches for i in b):
        epoch = k // n_items
        if (i, epoch - 1) in seen and torch.equal(seen[(i, epoch - 1)], noise[k]):
            repeats += 1
        seen[(i, epoch)] = noise[k]
    return repeats


def points_differ(first, second) -> int:
    """How many batches' points differ between two runs (a batch one run lacks counts as differing)."""
    same = sum(isinstance(p, torch.Tensor) and isinstance(q, torch.Tensor) and p.shape == q.shape and torch.equal(p, q)
               for p, q in zip(first, second))
    return max(len(first), len(second)) - same


def weight_gap(model, other) -> float:
    """The largest absolute difference between two models' parameters and buffers (1e9 if they do not match)."""
    if not isinstance(model, nn.Module):
        return 1e9
    a, b = model.state_dict(), other.state_dict()
    if list(a) != list(b) or any(a[k].shape != b[k].shape for k in a):
        return 1e9
    return max((float((a[k].double() - b[k].double()).abs().max()) for k in a), default=0.0)


# ---------------------------------------------------------------- exercise 1


def _script_data():
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(48, 4, generator=gen)
    return X, (X.sum(dim=1) > 0).long()


def _run_script(script: Callable, X, y, width: int, seed: int, num_workers: int = 0):
    out = checks.call(script, X, y, width, seed, num_workers=num_workers)
    checks.expect(isinstance(out, tuple) and len(out) == 2,
                  f"the script returned {checks.describe(out)}; expected (batches, losses), as jitter_script does.")
    batches, losses = out
    checks.expect(isinstance(batches, list) and len(batches) == 6
                  and all(isinstance(b, list) and all(type(i) is int for i in b) for b in batches),
                  "for 48 items in batches of 16 and 2 epochs, batches should be a list of 6 lists of Python ints, "
                  f"one per step; got {checks.describe(batches)}.")
    checks.expect(isinstance(losses, list) and len(losses) == 6 and all(type(v) is float for v in losses),
                  f"losses should be a list of 6 Python floats, one per step; got {checks.describe(losses)}.")
    return batches, losses


def _check_same_training(batches: list, losses: list, with_workers: tuple) -> None:
    not_perm, repeats = epoch_faults([sum(batches[k:k + 3], []) for k in (0, 3)], 48)
    checks.expect(not_perm == 0, "an epoch's batches do not visit each of the 48 items once: like jitter_script, the "
                  "script trains on every item once per epoch, in batches of 16.")
    checks.expect(repeats == 0, "the second epoch repeated the first one's order: like jitter_script, each epoch is a "
                  "new permutation.")
    checks.expect(with_workers[0] == batches, "with num_workers=2 the script trained on other batches than with no "
                  "workers: the number of workers must not change the data order.")
    equal = sum(p == q for p, q in zip(with_workers[1], losses))
    checks.expect(equal < len(losses), "runs with no workers and with 2 workers gave bitwise-equal losses at every "
                  "step: nothing random happens to the points any more, or the workers are not used. jitter_script "
                  "jitters its points, and with workers the jitter is drawn in other processes, so the losses differ: "
                  "keep the jitter and the workers, and repair where their random numbers come from.")


def check_reproducible_script(script: Callable) -> None:
    """Visible checks of exercise 1: reruns after each global generator is scrambled alone, with and without
    workers; the seed picks the run; jitter_script's training kept (permutations, jitter, workers used)."""
    X, y = _script_data()
    scramble_all(1)
    batches, losses = _run_script(script, X, y, 4, 0)
    for k, (name, scramble) in enumerate(SCRAMBLERS.items(), start=2):
        scramble_all(1)
        scramble(k)   # the three generators as before the first run, but this one
        again, again_losses = _run_script(script, X, y, 4, 0)
        checks.expect(again == batches, f"after {name} global generator alone was put in another state, the same "
                      "arguments trained on other batches: the data order comes from a stream that the seed does "
                      "not put in a fixed state.")
        checks.expect(again_losses == losses,
                      f"after {name} global generator alone was put in another state, the same arguments trained "
                      "on the same batches but gave other losses: something the run draws comes from that "
                      "generator, in a state the seed does not fix.")
    scramble_all(1)
    first = _run_script(script, X, y, 4, 0, num_workers=2)
    scramble_all(2)
    second = _run_script(script, X, y, 4, 0, num_workers=2)
    checks.expect(first == second, "with num_workers=2, two runs with the same arguments gave other losses or "
                  "batches, with no workers the same: what the worker processes draw is not fixed by the seed. "
                  "Workers start with random generators of their own: how are they seeded?")
    _check_same_training(batches, losses, first)
    other, other_losses = _run_script(script, X, y, 4, 1)
    checks.expect(other != batches and other_losses != losses, "seeds 0 and 1 gave the same batches or the same "
                  "losses: the seed must pick the run (a fixed number inside the script makes every seed the same "
                  "experiment).")
    torch.manual_seed(0)


# ---------------------------------------------------------------- exercise 2


def _decoupled_data():
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(48, 4, generator=gen)
    return X, (X[:, 0] > X[:, 1]).long()


def _run_decoupled(decoupled_run: Callable, X, y, width: int, seed: int = 0):
    out = checks.call(decoupled_run, X, y, width, seed)
    checks.expect(isinstance(out, tuple) and len(out) == 3,
                  f"decoupled_run returned {checks.describe(out)}; expected (batches, points, model), as coupled_run "
                  "does.")
    batches, points, model = out
    checks.check_type(model, nn.Module, "the model decoupled_run returned", hint="return the trained model.")
    checks.expect(isinstance(batches, list) and len(batches) == 6
                  and all(isinstance(b, list) and all(type(i) is int for i in b) for b in batches),
                  "for 48 items, batch_size 16 and 2 epochs, batches should be a list of 6 lists of Python ints "
                  f"(one list per batch trained on); got {checks.describe(batches)}.")
    noise = jitter_of(X, batches, points)
    checks.expect(noise is not None, "points should hold, for each batch, the float32 tensor of the points trained "
                  f"on, one row per item of the batch (here 16 rows of 4); got {checks.describe(points)}.")
    not_perm, repeats = epoch_faults([sum(batches[k:k + 3], []) for k in (0, 3)], 48)
    checks.expect(not_perm == 0, "an epoch's batches do not visit each of the 48 items exactly once.")
    checks.expect(repeats == 0, "the second epoch repeated the first one's order: each epoch is a new permutation.")
    std = float(noise.double().std())
    checks.expect(0.08 <= std <= 0.12, "the points you returned differ from X at the items of their batches by noise "
                  f"of standard deviation {std:.3f}; coupled_run jitters every point with Gaussian noise of standard "
                  "deviation 0.1 (0 means no jitter at all; row k of points[j] is item batches[j][k]).")
    again = repeated_jitter(batches, noise, 48)
    checks.expect(again == 0, f"{again} of the 48 items got the same noise in the second epoch as in the first: "
                  "coupled_run jitters each point anew at every visit.")
    return batches, points, model


def _check_data_side(decoupled_run: Callable, X, y):
    """The batches and the jitter against the width and against earlier global draws; returns both widths' runs."""
    scramble_all(1)
    narrow = _run_decoupled(decoupled_run, X, y, 4)
    scramble_all(2)
    wide = _run_decoupled(decoupled_run, X, y, 16)
    checks.expect(narrow[0][:3] == wide[0][:3],
                  "with widths 4 and 16 (seed 0) the first epoch's batches differ: the data order depends on how "
                  "many numbers building the model drew, so the shuffle reads a stream that the initialization has "
                  "just used, and a wider model uses more of it.")
    checks.expect(narrow[0][3:] == wide[0][3:],
                  "with widths 4 and 16 (seed 0) the first epoch agrees but the second does not: the second epoch's "
                  "shuffle still reads a stream that the first epoch's dropout masks, whose size depends on the "
                  "width, have moved in between.")
    differ = points_differ(narrow[1], wide[1])
    checks.expect(differ == 0, f"with widths 4 and 16 (seed 0) the batches agree but the jittered points of {differ} "
                  "of the 6 batches differ: the jitter reads a stream that the initialization or the dropout masks, "
                  "whose sizes depend on the width, have moved.")
    scramble_all(3)
    again = _run_decoupled(decoupled_run, X, y, 4)
    checks.expect(again[0] == narrow[0], "the same arguments gave other batches the second time, after something "
                  "else had drawn from the global generators: the data order depends on what ran before the call.")
    checks.expect(points_differ(again[1], narrow[1]) == 0, "the same arguments gave the same batches but other "
                  "jittered points the second time, after something else had drawn from the global generators: the "
                  "jitter depends on what ran before the call.")
    gap = weight_gap(again[2], narrow[2])
    checks.expect(gap == 0.0, f"the same arguments, after other global states, gave other final weights (largest "
                  f"difference {gap:.3g}): the model's numbers depend on what ran before the call.")
    return narrow, wide


def check_decoupled_run(decoupled_run: Callable) -> None:
    """Visible checks of exercise 2: the batches and the jitter against the width and earlier draws, the jitter
    itself, then a replay of the student's own points through coupled_run's training."""
    X, y = _decoupled_data()
    runs = _check_data_side(decoupled_run, X, y)
    for (batches, points, model), width in zip(runs, (4, 16)):
        gap = weight_gap(model, replay_run(X, y, width, 0, batches, points))
        checks.expect(gap <= 1e-6,
                      f"coupled_run's training replayed on the points you returned (width {width}, seed 0: seed, "
                      "build the model, one step per batch on your points) ends with other weights than yours "
                      f"(largest difference {gap:.3g}): your run is not coupled_run's training on those points. "
                      "Either something besides the initialization and the dropout masks drew from torch's global "
                      "stream during your run, or it was seeded at another moment, or the model, optimizer, mode or "
                      "steps differ.")
    other = _run_decoupled(decoupled_run, X, y, 4, seed=1)
    checks.expect(other[0] != runs[0][0] and points_differ(other[1], runs[0][1]) > 0, "seeds 0 and 1 trained on "
                  "the same batches or the same jittered points: the seed must pick the data order and the jitter "
                  "too, or five seeds would vary the model only.")
    torch.manual_seed(0)


# ---------------------------------------------------------------- exercise 3

# Results the checks' fake recipes give, in call order. CLEAR: ranges far apart, any sound rule says B is better.
# MIXED: the results interleave; B's mean is 0.024 higher and its first run 0.21 higher, the spread about 0.23.
CLEAR_A, CLEAR_B = [0.70, 0.72, 0.71, 0.69, 0.70], [0.90, 0.91, 0.93, 0.92, 0.90]
MIXED_A, MIXED_B = [0.72, 0.95, 0.80, 0.88, 0.75], [0.93, 0.74, 0.86, 0.79, 0.90]


class FakeRecipe:
    """A stand-in for ``train_fn(model_seed, data_seed)``: records each call's seeds, returns its results in turn."""

    def __init__(self, results, name: str = "train_fn"):
        self.results, self.calls, self.__name__ = list(results), [], name

    def __call__(self, model_seed, data_seed):
        self.calls.append((model_seed, data_seed))
        return self.results[(len(self.calls) - 1) % len(self.results)]


def sweep(compare_recipes: Callable, results_a, results_b, seeds):
    """Run ``compare_recipes`` on two fake recipes; return (its result, the calls of A, the calls of B)."""
    a, b = FakeRecipe(results_a, "train_a"), FakeRecipe(results_b, "train_b")
    return checks.call(compare_recipes, a, b, seeds), a.calls, b.calls


def _check_calls(calls_a: list, calls_b: list, seeds: list) -> None:
    n = len(seeds)
    extra = " It trained once and reused that result: each seed needs a run of its own." if len(calls_a) == 1 else ""
    checks.expect(len(calls_a) == n and len(calls_b) == n, f"with {n} seeds, train_a ran {len(calls_a)} times and "
                  f"train_b {len(calls_b)} times; expected one run per seed for each recipe." + extra)
    checks.expect(calls_a == calls_b, f"train_a ran with the (model_seed, data_seed) pairs {calls_a} and train_b with "
                  f"{calls_b}: give both recipes the same seeds, so that their difference is the recipe's and not "
                  "the luck of the draw.")
    models, datas = [m for m, _ in calls_a], [d for _, d in calls_a]
    checks.expect(len(set(models)) == n, f"the model seeds of the {n} runs were {models}: two runs share a model "
                  "seed, so they are one draw counted twice.")
    checks.expect(len(set(datas)) == n, f"the data seeds of the {n} runs were {datas}: runs share a data set, so the "
                  "spread leaves out what a new data set changes. A new run of an experiment draws its data too.")


def _check_summary(summary, want: list, name: str) -> None:
    checks.check_type(summary, dict, f"result['{name}']", hint="a dict with 'values', 'mean', 'min' and 'max'.")
    keys = {"values", "mean", "min", "max"}
    checks.expect(set(summary) == keys, f"result['{name}'] has the keys {sorted(summary)}; expected exactly 'values', "
                  "'mean', 'min' and 'max'.")
    checks.expect(summary["values"] == want and all(type(v) is float for v in summary["values"]),
                  f"result['{name}']['values'] is {checks.describe(summary['values'])}; expected the results of "
                  f"train_{name} as Python floats, in the order of seeds: {want}.")
    mean = sum(want) / len(want)
    hint = ("that is halfway between min and max, which is not the mean." if isinstance(summary["mean"], float)
            and abs(summary["mean"] - (min(want) + max(want)) / 2) < 1e-9 else "the mean of the values.")
    checks.check_number(summary["mean"], mean, f"result['{name}']['mean'] for {want}", tol=1e-9, hint=hint)
    checks.check_type(summary["mean"], float, f"result['{name}']['mean']", hint="a Python float, not a NumPy scalar.")
    checks.check_number(summary["min"], min(want), f"result['{name}']['min']", tol=1e-12, hint="the smallest value.")
    checks.check_number(summary["max"], max(want), f"result['{name}']['max']", tol=1e-12, hint="the largest value.")


def _check_verdict(result, want: str, what: str) -> None:
    checks.expect(isinstance(result, dict) and set(result) == {"a", "b", "verdict"},
                  f"compare_recipes returned {checks.describe(result)}; expected a dict with the keys 'a', 'b' and "
                  "'verdict'.")
    checks.expect(result["verdict"] == want, f"{what}: the verdict is {result['verdict']!r}, expected {want!r}.")


def check_compare_recipes(compare_recipes: Callable) -> None:
    """Visible checks of exercise 3 on fake recipes whose results are known (returned in call order)."""
    seeds = [3, 1, 4, 15, 9]
    result, calls_a, calls_b = sweep(compare_recipes, CLEAR_A, CLEAR_B, seeds)
    _check_calls(calls_a, calls_b, seeds)
    _check_verdict(result, "b", f"A gave {CLEAR_A} and B {CLEAR_B}, every run of B far above every run of A")
    _check_summary(result["a"], CLEAR_A, "a")
    _check_summary(result["b"], CLEAR_B, "b")
    again, calls_again, _ = sweep(compare_recipes, CLEAR_A, CLEAR_B, seeds)
    checks.expect(calls_again == calls_a, f"the same seeds gave the runs {calls_a}, then {calls_again}: each run's "
                  "seeds must follow from `seeds` alone.")
    _, calls_other, _ = sweep(compare_recipes, CLEAR_A, CLEAR_B, [20, 21, 22, 23, 24])
    checks.expect(calls_other != calls_a, "the seeds [3, 1, 4, 15, 9] and [20, 21, 22, 23, 24] gave the same runs: "
                  "the seeds must pick the runs.")
    flipped, _, _ = sweep(compare_recipes, CLEAR_B, CLEAR_A, seeds)
    _check_verdict(flipped, "a", f"A gave {CLEAR_B} and B {CLEAR_A}, every run of A far above every run of B")
    mixed, _, _ = sweep(compare_recipes, MIXED_A, MIXED_B, seeds)
    _check_verdict(mixed, "noise", f"A gave {MIXED_A} and B {MIXED_B}: B's mean is 0.024 higher and its first run "
                   "0.21 higher, but the runs of each recipe lie 0.23 apart and the two interleave, so the difference "
                   "is within what another seed changes")
    checks.expect_raises(compare_recipes, ValueError, "one seed gives no spread to compare against: raise a "
                         "ValueError before training anything.", FakeRecipe([0.5]), FakeRecipe([0.6]), [7])
