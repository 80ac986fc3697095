"""The two-spirals problem, its reference model and the figures that show training (lesson 04).

The course's reference experiment is, in this order: ``torch.manual_seed(0)``;
``make_spirals(400)`` (class-0 noise, class-1 noise, one permutation);
``spiral_model()`` (its initialization); the training loader's shuffles; and after
training a second, fresh ``spiral_model()``.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["make_spirals", "spiral_model", "graph_size", "plot_decision_boundary", "plot_history"]


def make_spirals(
    n_per_class: int = 400,
    seed: int | None = None,
    *,
    noise: float = 0.08,
    train_fraction: float = 0.8,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two interleaved spirals, shuffled and split: ``(X_train, y_train, X_val, y_val)``.

    Class ``c`` has ``n_per_class`` points at ``t`` evenly spaced from 0.5 to 3π:
    radius ``t / (3π) * 2.5``, angle ``t + c·π``, plus ``noise`` times standard normal
    noise (class 0 drawn first). One random permutation then puts the first
    ``train_fraction`` of the points in the training split.

    ``X`` is float32 of shape ``(N, 2)``; ``y`` is ``torch.long`` of shape ``(N,)``.
    With ``seed=None`` the draws come from the global generator, so whatever is drawn
    next (a model's initialization, a loader's shuffles) continues the same stream.
    With a ``seed`` they come from a private generator and the global stream is untouched.
    """
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be positive, got {n_per_class}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, got {train_fraction}")
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    t = torch.linspace(0.5, 3 * math.pi, n_per_class)
    radius = t / (3 * math.pi) * 2.5
    points, labels = [], []
    for label in (0, 1):
        angle = t + label * math.pi
        clean = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
        points.append(clean + noise * torch.randn(n_per_class, 2, generator=generator))
        labels.append(torch.full((n_per_class,), label, dtype=torch.long))
    X, y = torch.cat(points), torch.cat(labels)
    order = torch.randperm(len(X), generator=generator)
    X, y = X[order], y[order]
    n_train = int(train_fraction * len(X))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def spiral_model(hidden: int = 64, dropout: float = 0.1) -> nn.Sequential:
    """The reference classifier: Linear(2,h)-ReLU-Dropout-Linear(h,h)-ReLU-Dropout-Linear(h,2), raw logits."""
    return nn.Sequential(
        nn.Linear(2, hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, 2),
    )


def graph_size(t: torch.Tensor) -> int:
    """How many autograd nodes ``t`` keeps alive through its ``grad_fn`` (0 for a tensor without history)."""
    if not torch.is_tensor(t) or t.grad_fn is None:
        return 0
    # Keep every visited node referenced: an id() is only unique while its object lives.
    seen: dict[int, object] = {}
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(child for child, _ in node.next_functions)
    return len(seen)


@torch.no_grad()
def _predict_grid(model: nn.Module, xx: torch.Tensor, yy: torch.Tensor) -> torch.Tensor:
    device = next(model.parameters()).device
    grid = torch.stack([xx.flatten(), yy.flatten()], dim=1).to(device)
    return model(grid).softmax(dim=1)[:, 1].reshape(xx.shape).cpu()


def plot_decision_boundary(model: nn.Module, X: torch.Tensor, y: torch.Tensor, ax=None, *,
                           resolution: int = 200, title: str | None = None):
    """Shade the plane by the model's probability of class 1 and draw the points on top.

    The model is evaluated in eval mode without a graph; its train/eval mode is restored
    afterwards, and no random numbers are drawn.
    """
    import matplotlib.pyplot as plt

    X, y = X.detach().cpu(), y.detach().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4.5))
    margin = 0.3
    lo, hi = X.min(dim=0).values - margin, X.max(dim=0).values + margin
    xs = torch.linspace(float(lo[0]), float(hi[0]), resolution)
    ys = torch.linspace(float(lo[1]), float(hi[1]), resolution)
    xx, yy = torch.meshgrid(xs, ys, indexing="xy")
    was_training = model.training
    model.eval()
    try:
        prob = _predict_grid(model, xx, yy)
    finally:
        model.train(was_training)
    ax.contourf(xx.numpy(), yy.numpy(), prob.numpy(), levels=20, cmap="RdBu_r", vmin=0.0, vmax=1.0, alpha=0.6)
    ax.contour(xx.numpy(), yy.numpy(), prob.numpy(), levels=[0.5], colors="k", linewidths=1.0)
    for label, color in ((0, "tab:blue"), (1, "tab:red")):
        mask = y == label
        ax.scatter(X[mask, 0].numpy(), X[mask, 1].numpy(), s=8, c=color, edgecolors="white",
                   linewidths=0.3, label=f"class {label}")
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def plot_history(history: dict, axes=None, *, label: str | None = None):
    """Loss curves (train and validation) and validation accuracy, per epoch.

    ``history`` has the lists ``"train_loss"``, ``"val_loss"`` and ``"val_acc"``, one
    value per epoch, as ``fit`` returns them. Pass ``axes`` (two of them) to overlay runs.
    """
    import matplotlib.pyplot as plt

    missing = {"train_loss", "val_loss", "val_acc"} - set(history)
    if missing:
        raise KeyError(f"history lacks {sorted(missing)}; fit should return train_loss, val_loss and val_acc")
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    epochs = range(1, len(history["train_loss"]) + 1)
    prefix = f"{label}: " if label else ""
    loss_ax, acc_ax = axes
    train_line, = loss_ax.plot(epochs, history["train_loss"], label=prefix + "train loss")
    loss_ax.plot(epochs, history["val_loss"], linestyle="--", color=train_line.get_color(),
                 label=prefix + "validation loss")
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("cross-entropy (log scale)")
    loss_ax.legend(fontsize=8)
    acc_ax.plot(epochs, history["val_acc"], color=train_line.get_color(), label=prefix + "validation accuracy")
    acc_ax.set_xlabel("epoch")
    acc_ax.set_ylabel("accuracy")
    acc_ax.set_ylim(0.4, 1.02)
    acc_ax.legend(fontsize=8, loc="lower right")
    return axes
