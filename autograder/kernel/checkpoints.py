"""Training, evaluation, a tripwire and a figure for the checkpointing lesson (lesson 05).

``train_spirals`` runs epochs of lesson 04's reference spiral recipe and records the
validation loss after every epoch. That per-epoch evaluation runs on the validation
tensors directly, not through a ``DataLoader``, so it draws no random numbers: the
global generator sees exactly the draws of the reference run (the training shuffles,
dropout, and one seed per started validation loader every ``log_every`` epochs).

``Tripwire`` is a harmless stand-in for a malicious pickle payload: unpickling it calls
a function of this module that only appends to a list, so a check can tell whether a
loader ran code chosen by the file's author. ``torch.load(..., weights_only=True)``
refuses it.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import torch
from torch import nn

__all__ = ["train_spirals", "evaluate_spirals", "Tripwire", "tripwire_log", "plot_val_curves"]


@torch.no_grad()
def evaluate_spirals(model: nn.Module, loader) -> tuple[float, float]:
    """(mean cross-entropy per sample, accuracy) of ``model`` on ``loader``, in eval mode without a graph.

    Iterating ``loader`` draws a seed from its generator (the global one unless the
    loader was given its own), exactly as lesson 04's evaluation did.
    """
    model.train(False)
    summed, hits, seen = 0.0, 0, 0
    for inputs, targets in loader:
        scores = model(inputs)
        summed += nn.functional.cross_entropy(scores, targets, reduction="sum").item()
        hits += int((scores.argmax(dim=1) == targets).sum())
        seen += targets.numel()
    return summed / seen, hits / seen


@torch.no_grad()
def _val_loss_without_draws(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    model.train(False)
    return nn.functional.cross_entropy(model(X), y).item()


def _one_epoch(model: nn.Module, opt: torch.optim.Optimizer, batches) -> float:
    model.train(True)
    summed, seen = 0.0, 0
    for inputs, targets in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        opt.step()
        summed += loss.item() * targets.numel()
        seen += targets.numel()
    return summed / seen


def train_spirals(model: nn.Module, optimizer: torch.optim.Optimizer, train_loader, val_loader,
                  epochs: Iterable[int], *, log_every: int | None = 30) -> dict[str, list]:
    """Train ``model`` for the given epoch numbers (e.g. ``range(76, 151)``) and return their history.

    Each epoch is lesson 04's: ``model.train()``, then zero_grad / forward / backward / step
    per batch with cross-entropy, logging the mean training loss per sample. After every
    epoch the validation loss is computed on ``val_loader.dataset.tensors`` in one pass
    (eval mode, no graph, no random draws). On epochs divisible by ``log_every`` the run
    also evaluates through ``val_loader``, as lesson 04's reference run did, and prints
    ``epoch  30: train ... | val ... | acc ...``; ``log_every=None`` prints nothing.

    Returns ``{"epoch": [...], "train_loss": [...], "val_loss": [...]}``, one entry per epoch.
    """
    X_val, y_val = val_loader.dataset.tensors
    record: dict[str, list] = {"epoch": [], "train_loss": [], "val_loss": []}
    for epoch in epochs:
        train_loss = _one_epoch(model, optimizer, train_loader)
        record["epoch"].append(epoch)
        record["train_loss"].append(train_loss)
        record["val_loss"].append(_val_loss_without_draws(model, X_val, y_val))
        if log_every and epoch % log_every == 0:
            val_loss, val_acc = evaluate_spirals(model, val_loader)
            print(f"epoch {epoch:3d}: train {train_loss:.4f} | val {val_loss:.4f} | acc {val_acc:.3f}")
    return record


_TRIPWIRE_LOG: list[str] = []


def _tripwire_fired(label: str) -> str:
    """What unpickling a ``Tripwire`` calls: it records ``label`` and returns it, nothing else."""
    _TRIPWIRE_LOG.append(label)
    return label


class Tripwire:
    """A harmless pickle payload: unpickling it appends ``label`` to :func:`tripwire_log`.

    A real attacker's ``__reduce__`` would return ``os.system`` and a shell command; this
    one returns a function of this module, so a loader that runs it leaves a trace and
    nothing else. ``torch.load(..., weights_only=True)`` refuses to call it.
    """

    def __init__(self, label: str = "tripwire"):
        self.label = label

    def __reduce__(self):
        return (_tripwire_fired, (self.label,))


def tripwire_log() -> list[str]:
    """The labels of every ``Tripwire`` unpickled in this process so far, oldest first (a copy)."""
    return list(_TRIPWIRE_LOG)


def plot_val_curves(runs: Mapping[str, Mapping[str, list]], *, resume_epoch: int | None = None,
                    zoom: tuple[int, int] | None = None, axes=None):
    """Overlay the validation-loss curves of several runs (histories from :func:`train_spirals`).

    The first run is drawn as a wide pale line and the others on top of it, so a run that
    retraces it exactly disappears into it. ``resume_epoch`` adds a vertical line;
    ``zoom=(first, last)`` adds a second panel with those epochs on a linear scale.
    Returns the axes.
    """
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("plot_val_curves needs at least one run")
    panels = 2 if zoom else 1
    if axes is None:
        _, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.6), squeeze=False)
        axes = list(axes[0])
    styles = [dict(linewidth=6, alpha=0.3, color="tab:blue"),
              dict(linewidth=1.6, linestyle="--", color="tab:orange"),
              dict(linewidth=1.2, color="tab:green"),
              dict(linewidth=1.2, color="tab:red"),
              dict(linewidth=1.2, color="tab:purple")]
    for ax_index, ax in enumerate(axes):
        zoomed = zoom is not None and ax_index == 1
        for (label, history), style in zip(runs.items(), styles):
            pairs = [(e, v) for e, v in zip(history["epoch"], history["val_loss"])
                     if not zoomed or zoom[0] <= e <= zoom[1]]
            if pairs:
                epochs, values = zip(*pairs)
                ax.plot(epochs, values, label=label, **style)
        if resume_epoch is not None:
            ax.axvline(resume_epoch, color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("epoch")
        if zoomed:
            ax.set_xlim(*zoom)
            ax.set_ylabel("validation loss")
            ax.set_title(f"epochs {zoom[0]}-{zoom[1]}, around the restart")
        else:
            ax.set_yscale("log")
            ax.set_ylabel("validation loss (log scale)")
            ax.set_title("validation loss, one run vs. stopped and resumed")
        ax.legend(fontsize=8)
    return axes
