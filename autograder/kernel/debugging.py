"""Data, a figure and a graph-size probe for lesson 09 (debugging training).

The lesson's data set is a pinwheel: ``num_classes`` spiral arms around the origin, one
class per arm, so the initial loss of an untrained classifier is about ``ln(num_classes)``
and a small MLP needs a curved boundary to separate the arms.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping, Sequence

import torch

__all__ = ["make_pinwheel", "kept_graph_nodes", "record_forward_modes", "plot_loss_curves"]


def make_pinwheel(
    n_per_class: int = 100,
    num_classes: int = 4,
    *,
    noise: float = 0.08,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``num_classes`` spiral arms, shuffled: ``(X, y)``.

    Arm ``c`` has ``n_per_class`` points at ``t`` evenly spaced from 0.1 to 1: radius ``t``,
    angle ``2π·c / num_classes + 3·t``, plus ``noise`` times standard normal noise (arm 0
    drawn first). One random permutation then shuffles all points.

    ``X`` is float32 of shape ``(n_per_class * num_classes, 2)``; ``y`` holds the arm of each
    point as ``torch.long``. With ``seed=None`` the draws come from the global generator; with a
    ``seed`` they come from a private generator and the global stream is untouched.
    """
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be positive, got {n_per_class}")
    if num_classes < 2:
        raise ValueError(f"a classification problem needs at least 2 classes, got {num_classes}")
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    t = torch.linspace(0.1, 1.0, n_per_class)
    points, labels = [], []
    for label in range(num_classes):
        angle = 2 * math.pi * label / num_classes + 3.0 * t
        clean = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1)
        points.append(clean + noise * torch.randn(n_per_class, 2, generator=generator))
        labels.append(torch.full((n_per_class,), label, dtype=torch.long))
    X, y = torch.cat(points), torch.cat(labels)
    order = torch.randperm(len(X), generator=generator)
    return X[order], y[order]


def kept_graph_nodes(tensors: torch.Tensor | Iterable) -> int:
    """How many distinct autograd nodes the given tensors keep alive through their ``grad_fn``.

    Pass one tensor or any iterable of them (a list of logged losses, say); Python numbers
    and tensors without history count for nothing. Nodes shared by several tensors are
    counted once, so the result is the size of the graph that stays in memory because of them.
    """
    if torch.is_tensor(tensors):
        tensors = [tensors]
    # Keep every visited node referenced: an id() is only unique while its object lives.
    seen: dict[int, object] = {}
    stack = [t.grad_fn for t in tensors if torch.is_tensor(t) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(child for child, _ in node.next_functions)
    return len(seen)


@contextmanager
def record_forward_modes(model: torch.nn.Module) -> Iterator[list[tuple[bool, bool]]]:
    """Watch how ``model`` is run: ``with record_forward_modes(model) as seen: ...``.

    Inside the block, every forward call of ``model`` or of one of its submodules appends
    ``(module.training, torch.is_grad_enabled())`` to ``seen``: whether the module ran in
    training mode, and whether autograd was recording. The hooks are removed on exit.
    """
    seen: list[tuple[bool, bool]] = []

    def hook(module, inputs, output):
        seen.append((module.training, torch.is_grad_enabled()))

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def plot_loss_curves(
    curves: Mapping[str, Sequence[float]],
    ax=None,
    *,
    title: str,
    xlabel: str = "step",
    ylabel: str = "training loss",
    baseline: float | None = None,
    baseline_label: str | None = None,
    log_y: bool = False,
):
    """One line per entry of ``curves`` (label -> loss per step) on one set of axes.

    ``baseline`` draws a dotted horizontal reference line (for example ``ln C``, the loss of
    uniform predictions). Returns the axes.
    """
    import matplotlib.pyplot as plt

    if not curves:
        raise ValueError("curves is empty: pass at least one label -> list of losses")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    for label, values in curves.items():
        values = [float(v) for v in values]
        ax.plot(range(1, len(values) + 1), values, label=label, linewidth=1.4)
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle=":", linewidth=1.2,
                   label=baseline_label or f"{baseline:.3f}")
    if log_y:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax
