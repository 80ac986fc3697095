"""The visible checks of lesson 03's four exercises: DigitsDataset, SpiralDataset, make_loaders and seed_worker.

Each ``check_*`` is what the exercise's test cell calls; it computes what it compares with
here, so that no expected value stands in a test cell, and a failure names the likely mistake.
"""
from __future__ import annotations

import math
import random

import numpy as np
import torch

from autograder.kernel import checks
from autograder.kernel.lessons.digits import load_digits
from autograder.kernel.lessons.workers import as_worker, constant_seeds, simulated_worker_streams

# ---------------------------------------------------------------- visible checks of DigitsDataset

def _digits_expectations():
    d = load_digits()
    raw = torch.from_numpy(d.images.astype(np.float64))
    train = raw[d.train_index]
    return d, raw, float(train.mean()), float(train.std(correction=0))


def _diagnose_normalization(got, raw, rows, split_rows, mean, std) -> str:
    """Name the normalization mistake whose numbers ``got`` (images of ``rows``, (k, 1, 8, 8)) reproduce."""
    images = raw[rows].unsqueeze(1)
    split = raw[split_rows]
    suspects = {
        "the images were normalized with their own split's mean and std; every split must use the "
        "TRAINING set's statistics (the validation set stands in for data you have not seen).":
            (images - split.mean()) / split.std(correction=0),
        "the statistics were computed over all 1,797 images; use the training split's rows only.":
            (images - raw.mean()) / raw.std(correction=0),
        "the images are not normalized: subtract the training mean and divide by the training std.": images,
        "the mean was not subtracted (or the std not divided by).": images / std,
    }
    for hint, values in suspects.items():
        if torch.is_tensor(got) and got.shape == values.shape and torch.allclose(got.double(), values, atol=1e-4):
            return hint
    return "expected (raw - train mean) / train std, with both statistics taken over every training pixel."


def check_digits_split(ds, split: str, positions) -> None:
    """Visible checks of lesson 03's ``DigitsDataset(split)``: length, statistics, and the items at ``positions``.

    Each image must be float32 of shape (1, 8, 8) equal to ``(raw - train mean) / train std``,
    each label a 0-dimensional ``torch.long``; ``ds.mean`` and ``ds.std`` the training
    statistics, for either split. A failure names the likely mistake.
    """
    d, raw, mean, std = _digits_expectations()
    rows = d.train_index if split == "train" else d.val_index
    name = f"DigitsDataset({split!r})"
    checks.expect(len(ds) == len(rows), f"len({name}) is {len(ds)}, expected {len(rows)} "
                  f"(the rows listed in {split}_index).")
    own = raw[rows]
    stats = {"mean": (mean, float(own.mean()), float(raw.mean())),
             "std": (std, float(own.std(correction=0)), float(raw.std(correction=0)))}
    for attr, (want, own_value, all_value) in stats.items():
        checks.expect(hasattr(ds, attr), f"{name} has no attribute `{attr}`: store the training {attr} as "
                      f"self.{attr} (a Python float).")
        got = getattr(ds, attr)
        hint = None
        if isinstance(got, float) and split != "train" and abs(got - own_value) < 1e-6:
            hint = (f"the validation split computed its own {attr}; every split must use the TRAINING set's "
                    "statistics (the validation set stands in for data you have not seen).")
        elif isinstance(got, float) and abs(got - all_value) < 1e-6:
            hint = f"the {attr} was computed over all 1,797 images; use the training split's rows only."
        elif attr == "std" and isinstance(got, float) and abs(got - float(raw[d.train_index].std())) < 1e-6:
            hint = ("this is the sample standard deviation, torch's default .std() (it divides by n - 1). The spec "
                    "asks for the population standard deviation, NumPy's default: .std(correction=0) in torch.")
        # The hidden check's own tolerance (atol 1e-5 + rtol 1e-6): what passes here passes there.
        checks.check_number(got, want, f"{name}.{attr}", tol=1e-5 + 1e-6 * abs(want), hint=hint)
    for i in positions:
        image, label = checks.dataset_item(ds, i, f"{name}[{i}]")
        want_image = ((raw[rows[i]] - mean) / std).unsqueeze(0).float()
        values_hint = (_diagnose_normalization(image.unsqueeze(0), raw, rows[i:i + 1], rows, mean, std)
                       if torch.is_tensor(image) and image.shape == want_image.shape else None)
        checks.check_tensor(image, want_image, f"{name}[{i}] image", atol=1e-4,
                            hints={"values": values_hint,
                                   "shape": "an image should have one channel: shape (1, 8, 8)."})
        checks.check_tensor(label, torch.tensor(int(d.labels[rows[i]])), f"{name}[{i}] label",
                            hints={"shape": "a label is a single number: a 0-dimensional tensor "
                                            "(index the label tensor with [i])."})


# ---------------------------------------------------------------- visible checks of SpiralDataset

def _clean_spiral_point(n_per_class: int, i: int) -> tuple[torch.Tensor, int]:
    label = i // n_per_class
    t = torch.linspace(0.5, 3 * math.pi, n_per_class, dtype=torch.float64)[i % n_per_class]
    radius, angle = t / (3 * math.pi) * 2.5, t + label * math.pi
    return torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)]), label


def check_spiral_items(ds, n_per_class: int, positions) -> None:
    """Visible checks of lesson 03's ``SpiralDataset`` on the items at ``positions``.

    Each item, read twice, must give the same float32 point of shape (2,), within 0.5 of
    its noise-free spiral position, and the label ``i // n_per_class`` as a 0-dimensional
    ``torch.long``; different items must get different noise.
    """
    name = f"SpiralDataset({n_per_class})"
    noises = set()
    for i in positions:
        point, label = checks.dataset_item(ds, i, f"{name}[{i}]")
        clean, want_label = _clean_spiral_point(n_per_class, i)
        checks.check_tensor(label, torch.tensor(want_label), f"label of {name}[{i}]",
                            hints={"shape": "a label is a single number: a 0-dimensional tensor, "
                                            "e.g. torch.tensor(label)."})
        checks.check_tensor(point, clean.float(), f"point {name}[{i}]", atol=0.5,
                            hints={"values": "more than 6 noise standard deviations from the clean spiral point: "
                                             "check t, the radius, the angle (t + label * pi) and the noise "
                                             "scale 0.08."})
        again = checks.dataset_item(ds, i, f"{name}[{i}], read again")[0]
        checks.expect(torch.equal(point, again),
                      f"item {i} changed between two reads: a generator shared by all items (or the global "
                      "RNG) advances with every access, so an item depends on what was read before it. Seed a "
                      "fresh torch.Generator from (seed, index) inside __getitem__.")
        noises.add(tuple((point.double() - clean).round(decimals=6).tolist()))
    checks.expect(len(noises) == len(positions),
                  f"items {list(positions)} got exactly the same noise: a generator seeded with `seed` alone "
                  "gives every item the same draws; seed it from both the seed and the index.")


def check_spiral_dataset(dataset_class, n_per_class: int, seed: int, positions) -> None:
    """Visible checks of lesson 03's ``SpiralDataset``, built here as ``dataset_class(n_per_class, seed)``.

    Its length; the items at ``positions`` (:func:`check_spiral_items`); torch's global random
    state, which building and reading must leave alone; and an index given as a NumPy integer
    or a 0-dimensional tensor, which must give the same item as the Python int.
    """
    ds = checks.call(dataset_class, n_per_class, seed)
    checks.expect(len(ds) == 2 * n_per_class, f"len(SpiralDataset({n_per_class})) is {len(ds)}, expected "
                  f"{2 * n_per_class} (two classes of {n_per_class}).")
    rng_state = torch.get_rng_state()
    check_spiral_items(ds, n_per_class, positions)
    checks.expect(torch.equal(rng_state, torch.get_rng_state()),
                  "reading items changed torch's global random generator: a torch.manual_seed (or a torch.randn "
                  "without generator=) inside __getitem__ reseeds or advances the stream that shuffling, dropout and "
                  "initialization draw from. Draw the noise from your own torch.Generator.")
    k = positions[1]
    point, label = checks.dataset_item(ds, k)
    index_hint = {r"integer is required|expected a long|[Tt]ensor": (
        "torch.Generator.manual_seed accepts a Python int only. A DataLoader passes ints, but code that "
        "indexes a dataset by hand often holds NumPy integers (np.random.permutation) or 0-dimensional tensors "
        "(torch.randperm): turn the index into an int first (operator.index(i) accepts all three).")}
    for index, shown in ((np.int64(k), f"np.int64({k})"), (torch.tensor(k), f"torch.tensor({k})")):
        name = f"SpiralDataset({n_per_class})[{shown}]"
        other_point, other_label = checks.dataset_item(ds, index, name, hints=index_hint)
        checks.expect(torch.is_tensor(other_point) and torch.equal(other_point, point)
                      and torch.is_tensor(other_label) and other_label.dtype == label.dtype
                      and other_label.shape == label.shape and torch.equal(other_label, label),
                      f"{name} is not the item SpiralDataset({n_per_class})[{k}] returns ({checks.describe(point)}, "
                      f"{checks.describe(label)}): an index that is a NumPy integer or a 0-dimensional tensor "
                      "must give the same point and label as the equal Python int.")


# ---------------------------------------------------------------- visible checks of make_loaders

def _epoch_order(loader) -> list[int]:
    return [int(v) for batch in loader for v in batch[0]]


def epoch_faults(epochs: list[list[int]], n_items: int) -> tuple[int, int]:
    """(epochs that are not a permutation of the items, epochs in the same order as the epoch before)."""
    return (sum(sorted(e) != list(range(n_items)) for e in epochs),
            sum(a == b for a, b in zip(epochs, epochs[1:])))


def moved_epochs(loader, count: int = 3, val_loader=None) -> list[list[int]]:
    """``count`` epochs of a loader, with other code drawing from torch's global generator before each, and
    ``val_loader`` (if given) walked in full before each, as a run that evaluates after every epoch."""
    epochs = []
    for k in range(count):
        torch.randn(k + 3)
        if val_loader is not None:
            _epoch_order(val_loader)
        epochs.append(_epoch_order(loader))
    return epochs


def check_make_loaders(make_loaders) -> None:
    """Visible checks of lesson 03's ``make_loaders`` on 100 training and 50 validation items, batches of 8.

    Invariants only: two DataLoaders with that batch size; validation in dataset order; each training
    epoch a new permutation; the training epochs the same for loaders made with one seed, whatever
    drew from torch's global generator and however often the validation loader was walked, and other
    ones for another seed.
    """
    from torch.utils.data import DataLoader, TensorDataset

    def make(seed, n=100):
        return checks.call(make_loaders, TensorDataset(torch.arange(n)), TensorDataset(torch.arange(50)), 8, seed=seed)

    loaders = make(0)
    checks.check_type(loaders, tuple, "make_loaders(...)",
                      hint="return the two loaders as a tuple: (train_loader, val_loader).")
    checks.expect(len(loaders) == 2,
                  f"make_loaders returned {len(loaders)} items, expected (train_loader, val_loader).")
    train_dl, val_dl = loaders
    checks.check_type(train_dl, DataLoader, "train_loader")
    checks.check_type(val_dl, DataLoader, "val_loader")
    checks.expect(train_dl.batch_size == 8 and val_dl.batch_size == 8,
                  f"batch sizes are {train_dl.batch_size} (train) and {val_dl.batch_size} (val), expected 8 for both.")
    checks.expect(_epoch_order(val_dl) == list(range(50)),
                  "the validation loader does not return the examples in dataset order: do not shuffle evaluation "
                  "data (predictions must line up with the dataset's rows, and shuffling buys nothing for an average).")
    torch.manual_seed(1)
    train_dl = make(0)[0]    # a pair whose validation loader nothing has walked yet
    epochs = [_epoch_order(train_dl) for _ in range(3)]
    not_perm, repeats = epoch_faults(epochs, 100)
    checks.expect(not_perm == 0, f"a training epoch returned {sorted(map(len, epochs))} examples or repeated some, "
                  "expected each of the 100 exactly once (no drop_last, no sampling with replacement).")
    checks.expect(epochs[0] != list(range(100)),
                  "the training loader returns the examples in dataset order: it must shuffle, so each batch is a "
                  "fair sample.")
    checks.expect(repeats == 0, "two training epochs in a row came in the same order: the order must change every "
                  "epoch, not be one permutation fixed when the loader was made.")
    torch.manual_seed(2)
    torch.randn(41)
    again = moved_epochs(make(0)[0])
    checks.expect(again == epochs,
                  "two training loaders made with seed 0 gave other epochs once other code had drawn from torch's "
                  "global generator before or between the epochs: the order follows the global stream, so adding a "
                  "layer or a sanity check elsewhere changes your data order.")
    train_dl, val_dl = make(0)
    checks.expect(moved_epochs(train_dl, val_loader=val_dl) == epochs,
                  "two training loaders made with seed 0 gave other epochs when the validation loader was walked "
                  "before each epoch, as a run that evaluates after every epoch does: walking the validation "
                  "loader moves the training order, so how often you evaluate changes what you train on.")
    checks.expect(moved_epochs(make(1)[0]) != epochs,
                  "seeds 0 and 1 gave the same training epochs: the order must follow the `seed` argument.")


# ---------------------------------------------------------------- visible checks of seed_worker

def scrambled_seeds(worker_id: int) -> None:
    """Another state than :func:`constant_seeds` leaves, the same in every worker."""
    np.random.seed(20240601)
    random.seed(987)


def shared_draws(streams) -> tuple[int, int]:
    """(NumPy numbers, ``random`` numbers) that two different workers both drew."""
    counts = []
    for which in (0, 1):
        seen = [set(streams[w][which]) for w in sorted(streams)]
        counts.append(sum(len(a & b) for i, a in enumerate(seen) for b in seen[i + 1:]))
    return counts[0], counts[1]


def check_seed_worker(seed_worker) -> None:
    """Visible checks of lesson 03's ``seed_worker``, in simulated workers (:func:`as_worker`).

    A careless library has first seeded NumPy and ``random`` alike in every worker (:func:`constant_seeds`,
    :func:`scrambled_seeds`). The workers of one loader must then draw different numbers from both; the
    same loader seed must give the same numbers again, whatever state the workers found, and another
    loader seed other ones.
    """
    modulo_hint = {r"[Ss]eed must be between|out of bounds|too large|2\*\*32":
                   "np.random.seed only accepts seeds below 2**32, and a worker's torch seed is a 64-bit number."}

    def streams(seed, before=constant_seeds):
        return checks.call(simulated_worker_streams, seed_worker, seed=seed, num_workers=2, count=4,
                           before=before, hints=modulo_hint)

    with as_worker(0, 2, base_seed=2**40 + 7):   # a stub, or a seed NumPy refuses, is reported here
        checks.call(seed_worker, 0, hints=modulo_hint)
    first = streams(0)
    for which, generator in ((0, "NumPy's global generator (np.random)"), (1, "Python's random module")):
        checks.expect(first[0][which] != first[1][which],
                      f"in a loader with 2 workers, both workers drew the same numbers from {generator} after "
                      "seed_worker ran (a library had seeded it with a constant in every worker, as some do): "
                      "seed_worker must give every worker a stream of its own, from something that differs "
                      "between workers and is fixed by the loader's seed.")
    checks.expect(streams(0, before=scrambled_seeds) == first,
                  "two loaders seeded alike gave the workers different numbers once the workers had found their "
                  "generators in another state: seed_worker must set both generators itself, from the loader's "
                  "seed, whatever ran before it.")
    checks.expect(streams(0) == first,
                  "two loaders seeded alike gave the workers different numbers: the streams must be fixed by the "
                  "loader's seed (no clock, no os.urandom), or a run cannot be repeated.")
    for which, generator in ((0, "NumPy"), (1, "random")):
        checks.expect([s[which] for s in streams(1).values()] != [s[which] for s in first.values()],
                      f"loaders seeded 0 and 1 gave the workers the same {generator} numbers: the streams ignore the "
                      "loader's seed, so every epoch and every run repeats the same 'random' augmentations. Derive "
                      "them from something inside the worker that changes with the loader's seed and every epoch.")
