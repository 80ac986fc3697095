"""Data, a figure, a graph-size probe and the visible checks of lesson 09 (debugging training).

The lesson's data set is a pinwheel: ``num_classes`` spiral arms around the origin, one
class per arm, so the initial loss of an untrained classifier is about ``ln(num_classes)``
and a small MLP needs a curved boundary to separate the arms.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, Mapping, Sequence

import torch
from torch import nn

from .. import checks
from .spirals import graph_size as kept_graph_nodes  # one walk of the graph for lessons 04 and 09

__all__ = ["make_pinwheel", "kept_graph_nodes", "plot_loss_curves",
           "show_anomaly_report", "check_grad_norm", "total_grad_norm"]


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


def total_grad_norm(model: nn.Module) -> float:
    """The 2-norm of all of ``model``'s gradients taken as one vector, as a Python float; writes nothing.

    What section 3's ``train_steps`` logs at every step (``nn.utils.get_total_norm`` on the gradients that exist,
    ``0.0`` when there are none)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return nn.utils.get_total_norm(grads).item() if grads else 0.0


# ---------------------------------------------------------------- section 6's demo and the warm-up's checks
# The graded exercises' visible checks are in debugging_checks.py.

def show_anomaly_report(fn: Callable) -> None:
    """Section 6's demo: run ``fn()`` and its backward pass under anomaly detection and print what anomaly mode
    reports (its error's message, the first line of each warning and the forward line it points at)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly():
                fn().backward()
        except RuntimeError as err:
            print("RuntimeError:", err)
    for warning in caught:
        lines = str(warning.message).splitlines()
        print("warning:", lines[0])
        code_lines = [line.strip() for line in lines[1:] if line.startswith("    ")]
        if code_lines:
            print("   the forward line that made it:", code_lines[-1])


def _total_norm(model: nn.Module) -> float:
    """The 2-norm of every gradient of ``model`` taken as one vector, in float64 (0.0 without gradients)."""
    grads = [p.grad.detach().double().reshape(-1) for p in model.parameters() if p.grad is not None]
    return torch.cat(grads).norm().item() if grads else 0.0


def check_grad_norm(grad_norm: Callable) -> None:
    """Checks of the warm-up (not graded): one vector, None skipped, gradients untouched (an inf one too), a float."""
    none_hint = {r"NoneType|unsupported operand": "a parameter without a gradient has p.grad None (it is frozen, "
                                                  "or was not used in the last forward pass): skip it."}
    probe = nn.ModuleDict({"used": nn.Linear(2, 1), "frozen": nn.Linear(2, 2)})
    probe["frozen"].requires_grad_(False)
    probe["used"].weight.grad = torch.tensor([[3.0, 0.0]])
    probe["used"].bias.grad = torch.tensor([4.0])
    want = _total_norm(probe)
    got = checks.call(grad_norm, probe, hints=none_hint)
    hint = "the total norm treats all gradients as one vector: the square root of the sum of every entry squared."
    if isinstance(got, (int, float)) and abs(got - 7.0) < 1e-4:
        hint = ("7 = 3 + 4 adds the per-parameter norms. The total norm treats all gradients as one vector: "
                "sqrt(3² + 0² + 4²) = 5 (the 2-norm of the per-parameter norms, not their sum).")
    checks.check_number(got, want, "grad_norm(weight.grad [[3, 0]], bias.grad [4], plus a frozen layer)",
                        tol=1e-5, hint=hint)
    checks.check_tensor(probe["used"].weight.grad, torch.tensor([[3.0, 0.0]]), "weight.grad after grad_norm",
                        hints={"values": "grad_norm changed the gradients: clip_grad_norm_ with a finite max_norm "
                                         "scales them down in place (and returns the norm from before). Measure "
                                         "without writing to any .grad."})

    torch.manual_seed(95)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    nn.functional.cross_entropy(net(torch.randn(10, 4)), torch.randint(0, 3, (10,))).backward()
    want = _total_norm(net)
    checks.check_number(checks.call(grad_norm, net, hints=none_hint), want, "grad_norm(MLP 4-8-3 after one backward)",
                        tol=1e-5 * max(1.0, want))

    # The explosion the norm is logged for: one gradient entry is inf. The norm is inf; no gradient may change.
    exploded = nn.Linear(3, 2)
    exploded.weight.grad = torch.tensor([[1.0, -2.0, float("inf")], [0.5, 0.0, 1.0]])
    exploded.bias.grad = torch.tensor([2.0, -1.0])
    before = [p.grad.clone() for p in exploded.parameters()]
    got = checks.call(grad_norm, exploded, hints=none_hint)
    became_nan = any(bool(torch.isnan(p.grad).any()) for p in exploded.parameters())
    checks.expect(not became_nan,
                  "after grad_norm every gradient of a model with one inf entry is NaN: clip_grad_norm_ multiplies "
                  "every gradient in place by min(1, max_norm / (norm + 1e-6)), even with max_norm=inf, and "
                  "inf / inf is NaN. Measure without writing to any .grad.")
    for i, (old, p) in enumerate(zip(before, exploded.parameters())):
        checks.check_tensor(p.grad, old, f"gradient {i} after grad_norm on a model with an inf gradient",
                            hints={"values": "grad_norm must leave every gradient as it found it."})
    checks.check_type(got, float, "grad_norm(a model with one inf gradient entry)")
    checks.expect(got == math.inf, f"grad_norm(a model with one inf gradient entry) returned {got!r}: a vector with "
                                   "an infinite entry has an infinite 2-norm, and that inf is the alarm to log.")
