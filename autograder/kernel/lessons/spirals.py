"""The two-spirals problem, its reference model and the figures that show training (lesson 04).

The course's reference experiment is, in this order: ``torch.manual_seed(0)``;
``make_spirals(400)`` (class-0 noise, class-1 noise, one permutation);
``spiral_model()`` (its initialization); the training loader's shuffles; and after
training a second, fresh ``spiral_model()``.

The second half holds the instruments that lesson 04's test cells use to watch a
training loop from outside: which mode the model ran in, whether gradients were
cleared, whether batch graphs stay alive, which device a batch went to, and how ``fit``
calls its two helpers. None of them trains or evaluates anything itself. The checks that
use them are in :mod:`autograder.kernel.lessons.loop_checks`.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["make_spirals", "spiral_model", "graph_size", "plot_decision_boundary", "plot_history",
           "LossProbe", "RecordingSGD", "record_modes", "decoy_device", "table_model", "accuracy_hint",
           "FitSpy", "plot_saliency"]


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


def graph_size(tensors) -> int:
    """How many distinct autograd nodes one tensor, or an iterable of them, keeps alive through ``grad_fn``
    (shared nodes once; numbers and tensors without history count for nothing). Lessons 04 and 09."""
    if torch.is_tensor(tensors) or not isinstance(tensors, Iterable):
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
    ax.contourf(xx.numpy(), yy.numpy(), prob.numpy(), levels=20, cmap="RdBu_r", vmin=-0.25, vmax=1.25, alpha=0.5)
    ax.contour(xx.numpy(), yy.numpy(), prob.numpy(), levels=[0.5], colors="k", linewidths=1.0)
    # White-edged dark markers of two shapes stay visible on both shades, and without colour.
    for label, color, marker in ((0, "#08306b", "o"), (1, "#67000d", "^")):
        mask = y == label
        ax.scatter(X[mask, 0].numpy(), X[mask, 1].numpy(), s=16, c=color, marker=marker, edgecolors="white",
                   linewidths=0.5, label=f"class {label}")
    ax.set_aspect("equal")
    ax.set_xlabel("$x_1$ (first feature)")
    ax.set_ylabel("$x_2$ (second feature)")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    if title:
        ax.set_title(title)
    return ax


def plot_history(history: dict, axes=None, *, label: str | None = None):
    """Loss curves (train and validation) and validation accuracy, per epoch.

    ``history`` has the lists ``"train_loss"``, ``"val_loss"`` and ``"val_acc"``, one
    value per epoch, as ``fit`` returns them. Pass ``axes`` (two of them) to overlay runs.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

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
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("cross-entropy (log scale)")
    loss_ax.legend(fontsize=8)
    acc_ax.plot(epochs, history["val_acc"], color=train_line.get_color(), label=prefix + "validation accuracy")
    acc_ax.set_xlabel("epoch")
    acc_ax.set_ylabel("accuracy")
    acc_ax.set_ylim(0.4, 1.02)
    acc_ax.legend(fontsize=8, loc="lower right")
    return axes


def plot_saliency(model: nn.Module, X: torch.Tensor, y: torch.Tensor, grads: torch.Tensor, ax=None, *,
                  which=None, resolution: int = 100, title: str | None = None):
    """The decision boundary with ``X`` and ``y`` on it (:func:`plot_decision_boundary`), and an arrow along
    ``grads[k]`` at each point ``X[which[k]]`` (at every point of ``X`` when ``which`` is ``None``).

    ``grads`` holds one gradient with respect to the input per arrow, as a saliency computes it. Lengths are
    scaled together, so that the longest arrow is an eighth of the plot's width, and keep their ratios. Nothing
    is computed from the model but the shading; no random numbers are drawn.
    """
    X, y, grads = X.detach().cpu(), y.detach().cpu(), grads.detach().cpu()
    at = X if which is None else X[torch.as_tensor(which)]
    if grads.shape != at.shape:
        raise ValueError(f"grads must have the shape of the points the arrows start at {tuple(at.shape)}, "
                         f"got {tuple(grads.shape)}")
    ax = plot_decision_boundary(model, X, y, ax, resolution=resolution, title=title)
    width = float(X[:, 0].max() - X[:, 0].min()) + 0.6
    longest = float(grads.norm(dim=1).max())
    arrows = grads * (width / 8 / longest) if longest > 0 else grads
    ax.quiver(at[:, 0].numpy(), at[:, 1].numpy(), arrows[:, 0].numpy(), arrows[:, 1].numpy(), angles="xy",
              scale_units="xy", scale=1.0, width=0.007, color="#ffb000", edgecolor="black", linewidth=0.6,
              zorder=3, label="saliency")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return ax


# ---------------------------------------------------------------- instruments for lesson 04's checks

class _Tagged(torch.autograd.Function):
    """The identity, as a graph node that can carry a token (the token dies with the node)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


class _Token:
    def __init__(self, alive: set, key: int):
        self.alive, self.key = alive, key
        alive.add(key)

    def __del__(self):
        self.alive.discard(self.key)


class LossProbe:
    """A loss function that watches how long each batch's autograd graph stays alive.

    Call it like the loss function it wraps. ``max_kept`` is the largest number of earlier
    batches whose graphs were still alive when a new batch's loss was computed. A loop
    that logs ``loss.item()`` keeps at most one (the previous batch's ``loss``, until the
    name is reused); ``total = total + loss`` or a list of loss tensors keeps them all.
    """

    def __init__(self, loss_fn):
        self.loss_fn = loss_fn
        self.calls = 0
        self.max_kept = 0
        self._alive: set[int] = set()

    @property
    def reduction(self) -> str:
        """How the wrapped loss reduces a batch (its ``reduction``; ``"mean"`` for a plain function)."""
        return getattr(self.loss_fn, "reduction", "mean")

    def __call__(self, *args, **kwargs):
        self.max_kept = max(self.max_kept, len(self._alive))
        loss = self.loss_fn(*args, **kwargs)
        if torch.is_tensor(loss) and loss.requires_grad:
            loss = _Tagged.apply(loss)
            loss.grad_fn.token = _Token(self._alive, self.calls)
        self.calls += 1
        return loss


class RecordingSGD(torch.optim.SGD):
    """Plain SGD that keeps a copy of every parameter's ``.grad`` each time ``step()`` runs."""

    def __init__(self, params, lr: float):
        super().__init__(params, lr=lr)
        self.grads_at_step: list[list[torch.Tensor | None]] = []

    def step(self, closure=None):
        self.grads_at_step.append([None if p.grad is None else p.grad.detach().clone()
                                   for group in self.param_groups for p in group["params"]])
        return super().step(closure)

    def same_gradients(self, i: int, j: int) -> bool:
        """Did steps ``i`` and ``j`` see the same gradients (all present, equal up to rounding)?"""
        a, b = self.grads_at_step[i], self.grads_at_step[j]
        return all(x is not None and y is not None and torch.allclose(x, y, rtol=1e-5, atol=1e-7)
                   for x, y in zip(a, b))


class ForwardRecord:
    """What :func:`record_modes` saw: per forward pass, the mode and the grad mode; grad mode at the end."""

    def __init__(self):
        self.training: list[bool] = []
        self.grad_enabled: list[bool] = []
        self.grad_enabled_after: bool | None = None


@contextmanager
def record_modes(model: nn.Module):
    """Record every forward pass of ``model`` inside the block: all layers in training mode? grad mode on?

    When the block ends it also records whether grad mode is still on (code that calls
    ``torch.set_grad_enabled(False)`` as a statement leaves it off), then puts grad mode
    back as it was when the block began.
    """
    record = ForwardRecord()

    def hook(module, inputs, output):
        record.training.append(all(m.training for m in module.modules()))
        record.grad_enabled.append(torch.is_grad_enabled())

    handle = model.register_forward_hook(hook)
    grad_before = torch.is_grad_enabled()
    try:
        yield record
    finally:
        handle.remove()
        record.grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(grad_before)


@contextmanager
def decoy_device(namespace: dict, decoy: str = "meta"):
    """Inside the block the notebook's global ``device`` names a device no test model lives on.

    A function that moves each batch to ``next(model.parameters()).device`` is unaffected.
    One that uses the global ``device`` fails with an error that mentions ``meta`` (on a
    CPU-only machine the two devices would otherwise be the same, and the mistake would only
    show on a GPU); the block turns that error into a ``CheckFailed`` that names the mistake.
    ``device`` is restored afterwards.
    """
    from autograder.kernel import checks

    missing = object()
    saved = namespace.get("device", missing)
    namespace["device"] = torch.device(decoy)
    try:
        yield
    except Exception as exc:  # an error about the decoy device is the finding we report
        cause = exc.__context__ if isinstance(exc, checks.CheckFailed) and exc.__context__ is not None else exc
        if decoy not in str(cause):
            raise
        raise checks.CheckFailed(
            f"while this test ran, the notebook's global `device` was the {decoy} device, and the function raised "
            f"{type(cause).__name__}: {cause}\nLikely mistake: the batch (or the model) went to the global "
            "`device`; the function must use the device of the model's parameters: "
            "`next(model.parameters()).device`.") from None
    finally:
        if saved is missing:
            namespace.pop("device", None)
        else:
            namespace["device"] = saved


def table_model(logits: torch.Tensor, dropout: float = 0.0) -> nn.Sequential:
    """A model whose output for one-hot input row i is ``logits[i]`` (after a dropout layer)."""
    layer = nn.Linear(len(logits), logits.shape[1], bias=False)
    with torch.no_grad():
        layer.weight.copy_(logits.T)
    return nn.Sequential(nn.Dropout(dropout), layer)


def accuracy_hint(got, logits: torch.Tensor, labels: torch.Tensor) -> str:
    """Name the mistake that turns ``logits`` and ``labels`` into the accuracy ``got``."""
    generic = "accuracy = (number of samples with logits.argmax(dim=1) == label) / number of samples."
    if type(got) not in (int, float):
        return generic
    preds = logits.argmax(1)
    scores = logits.max(1).values
    if got > 1.0:
        return ("accuracy above 1: predictions of shape (N,) were compared with labels of shape (N, 1) (or the "
                "reverse), which broadcasts to an (N, N) table of every pair. Compare two (N,) tensors.")
    if abs(got - (scores == labels).float().mean().item()) < 1e-9:
        return ("the predictions compared with the labels were float scores (logits.max(1).values or probabilities), "
                "not long class indices: 2.25 == 1 is simply False, with no error. Use logits.argmax(dim=1) "
                "(or logits.max(1).indices), which is torch.long like the labels.")
    if abs(got - (preds.view(-1, 1) == labels.view(1, -1)).sum().item() / len(labels)) < 1e-9:
        return "a broadcast comparison between (N,) and (N, 1) counted pairs, not samples."
    return generic


class FitSpy:
    """Stand-ins for ``train_one_epoch`` and ``evaluate`` that record how ``fit`` calls them.

    Each call is recorded in ``calls`` as ``(function name, which loader, same objects)``:
    the loader is ``"train_loader"``, ``"val_loader"`` or ``"another loader"``, and *same
    objects* says whether the model, loss function (and optimizer) are the ones given
    to ``fit``. The stand-ins return made-up numbers that change with every call:
    ``1 + n/100`` from training, ``(2 + n/100, 0.5 + n/100)`` from evaluation, where ``n``
    counts the calls so far (this one included).
    """

    def __init__(self, model, train_loader, val_loader, optimizer, loss_fn):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.loaders = {id(train_loader): "train_loader", id(val_loader): "val_loader"}
        self.calls: list[tuple[str, str, bool]] = []

    def _record(self, name, model, loader, loss_fn, optimizer=None) -> int:
        same = model is self.model and loss_fn is self.loss_fn and (optimizer is None or optimizer is self.optimizer)
        self.calls.append((name, self.loaders.get(id(loader), "another loader"), same))
        return len(self.calls)

    def train_one_epoch(self, model, loader, loss_fn, optimizer):
        return 1.0 + self._record("train_one_epoch", model, loader, loss_fn, optimizer) / 100

    def evaluate(self, model, loader, loss_fn):
        n = self._record("evaluate", model, loader, loss_fn)
        return 2.0 + n / 100, 0.5 + n / 100

    @contextmanager
    def installed(self, namespace: dict):
        """Inside the block, ``train_one_epoch`` and ``evaluate`` in ``namespace`` are the stand-ins."""
        saved = {name: namespace.get(name) for name in ("train_one_epoch", "evaluate")}
        namespace["train_one_epoch"], namespace["evaluate"] = self.train_one_epoch, self.evaluate
        try:
            yield self
        finally:
            namespace.update(saved)
