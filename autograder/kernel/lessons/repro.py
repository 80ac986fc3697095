"""Helpers for lesson 07 (reproducibility): datasets that show worker RNGs, the random tape and seed-spread
figures, and the visible checks of the lesson's exercises.

``WorkerDraws`` and ``JitterDataset`` live here, not in the notebook, because DataLoader workers started
with ``spawn`` (macOS, Windows) or ``forkserver`` import the dataset class by name and cannot see anything
defined in a notebook. The same holds for any ``worker_init_fn``.

The visible checks of the lesson's exercises live in :mod:`autograder.kernel.lessons.repro_checks`.
"""
from __future__ import annotations

import os
import random
from typing import Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

__all__ = ["WorkerDraws", "worker_draws", "JitterDataset", "NoisyPoints", "distinct_worker_seeds", "random_tape",
           "plot_random_tape", "plot_seed_spread"]


class WorkerDraws(Dataset):
    """Item ``i`` is ``(i, worker id, one draw)``; the worker id is -1 in the main process.

    The draw (``torch.rand``, ``np.random.random`` with ``source="numpy"``, ``random.random`` with
    ``source="python"``) stands for a random
    augmentation: it comes from whichever process fetches the item, so it shows which generator a loader's
    workers (or the main process) draw from.
    """

    def __init__(self, length: int = 8, source: str = "torch"):
        if length < 1:
            raise ValueError(f"length must be positive, got {length}")
        if source not in ("torch", "numpy", "python"):
            raise ValueError(f"source must be 'torch', 'numpy' or 'python', got {source!r}")
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
        if self.source == "python":
            return i, worker, torch.tensor(random.random(), dtype=torch.float64)
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


class NoisyPoints(Dataset):
    """Item ``i`` is ``(i, X[i] + noise, y[i])``: Gaussian noise of standard deviation ``scale``, drawn anew at every
    fetch with ``torch.randn`` from torch's global generator (in whichever process fetches the item), as an
    augmentation would. Lesson 07's ``coupled_run`` trains on it."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, scale: float = 0.1):
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
        self.X, self.y, self.scale = X, y, scale

    def __len__(self) -> int:
        return len(self.X)

    def __getitem__(self, i: int):
        return i, self.X[i] + self.scale * torch.randn(self.X.shape[1:]), self.y[i]


def distinct_worker_seeds(worker_id: int) -> None:
    """A ``worker_init_fn`` from a script in the wild: it gives each worker NumPy and ``random`` streams of their own
    by seeding them from the worker's process id (lesson 07's script to repair starts its loader with it)."""
    pid = os.getpid()
    np.random.seed(pid % 2**32)
    random.seed(pid)


# ---------------------------------------------------------------- the random tape


def random_tape(width: int, *, decoupled: bool, in_features: int = 4, n_items: int = 256, batch_size: int = 16,
                num_epochs: int = 2) -> list[dict]:
    """What a run of lesson 07's ``coupled_run`` (or a decoupled version of it) draws, in program order.

    Each entry is ``{"stream", "consumer", "count"}``: ``stream`` is ``"global"`` (torch's global generator) or
    ``"data"`` (a generator of the data's own); ``count`` is how many 64-bit values the consumer takes (building the
    model: one per parameter; a shuffle without ``generator=``: two seeds, one for the workers and one for a fresh
    generator that then draws the order; ``NoisyPoints``'s jitter: one per noise value, ``in_features`` per item;
    dropout: one per element of each hidden activation in training). Jitter and masks alternate batch by batch; a
    tape gives each epoch's in one block. On the data's own generator ``count`` is ``None``: how much it takes
    does not move the global stream. tests/unit/test_repro.py checks the global counts against the generator.
    """
    tape = [{"stream": "global", "consumer": "initialization",
             "count": in_features * width + width + width * 2 + 2}]
    stream = "data" if decoupled else "global"
    for epoch in range(1, num_epochs + 1):
        tape.append({"stream": stream, "consumer": f"shuffle, epoch {epoch}", "count": None if decoupled else 2})
        tape.append({"stream": stream, "consumer": f"jitter, epoch {epoch}",
                     "count": None if decoupled else n_items * in_features})
        tape.append({"stream": "global", "consumer": f"dropout masks, epoch {epoch}", "count": n_items * width})
    return tape


_TAPE_COLOURS = {"initialization": "tab:blue", "shuffle": "tab:orange", "jitter": "tab:purple",
                 "dropout masks": "tab:green"}


def plot_random_tape(runs: Mapping[str, Sequence[dict]], ax=None, *, title: str | None = None):
    """Draw runs as tapes: one row per run and stream, one block per consumer, in the order it draws.

    ``runs`` maps a run's label to its :func:`random_tape`. A block's length grows with the logarithm of the
    number of values it takes (a shuffle's two seeds would not show next to thousands of dropout values); the
    count is written on it. A run whose data has a generator of its own gets a second row for it. Each row
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
        if any(e["stream"] == "data" for e in tape):
            rows.append((f"{label}\n(a generator of its own)", list(tape), "data"))
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
                count = "its own numbers"
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
              bbox_to_anchor=(1.0, 1.25), ncol=4)
    if title:
        ax.set_title(title, loc="left")
    return ax
