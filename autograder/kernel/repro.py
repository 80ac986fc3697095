"""Helpers for lesson 07 (reproducibility): a dataset that shows worker RNGs, and the seed-spread figure.

``WorkerDraws`` lives here, not in the notebook, because DataLoader workers started with
``spawn`` (macOS, Windows) or ``forkserver`` import the dataset class by name and cannot
see anything defined in a notebook. The same holds for any ``worker_init_fn``.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import torch
from torch.utils.data import Dataset, get_worker_info

__all__ = ["WorkerDraws", "worker_draws", "plot_seed_spread"]


class WorkerDraws(Dataset):
    """Item ``i`` is ``(i, worker id, one torch.rand draw)``; the worker id is -1 in the main process.

    The draw stands for a random augmentation: it comes from whichever process fetches the
    item, so it shows which generator a loader's workers (or the main process) draw from.
    """

    def __init__(self, length: int = 8):
        if length < 1:
            raise ValueError(f"length must be positive, got {length}")
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        if not 0 <= i < self.length:
            raise IndexError(f"index {i} is out of range for {self.length} items")
        info = get_worker_info()
        worker = -1 if info is None else info.id
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
