"""Data, a figure, a graph-size probe and the visible checks of lesson 09 (debugging training).

The lesson's data set is a pinwheel: ``num_classes`` spiral arms around the origin, one
class per arm, so the initial loss of an untrained classifier is about ``ln(num_classes)``
and a small MLP needs a curved boundary to separate the arms.
"""
from __future__ import annotations

import copy
import math
import warnings
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch
from torch import nn

from . import checks

__all__ = ["make_pinwheel", "kept_graph_nodes", "record_forward_modes", "plot_loss_curves",
           "show_anomaly_report", "check_initial_loss_check", "check_overfit_one_batch", "check_grad_norm",
           "check_find_nan_source"]


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


# ---------------------------------------------------------------- visible checks of the four exercises
# Each takes the student's function, builds its own seeded inputs and computes what it expects here, so that
# no expected value stands in the notebook's test cell.

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


def check_initial_loss_check(initial_loss_check: Callable) -> None:
    """Visible checks of exercise 1: the distance to ln C both ways, dropout off, no graph, a bool.

    Leaving no trace (the mode restored) is lesson 04's, named in the contract and not graded again."""
    torch.manual_seed(90)
    xb, yb = torch.randn(64, 5), torch.randint(0, 4, (64,))
    baseline_hint = ("the baseline is the loss of a prediction that gives each class probability 1/C, measured the "
                     "way cross-entropy measures it, with the natural log: -log(1/C) = ln C (not log10, not 1/C).")

    uniform = nn.Linear(5, 4)
    with torch.no_grad():
        uniform.weight.zero_()
        uniform.bias.zero_()
    got = checks.call(initial_loss_check, uniform, (xb, yb), 4, 0.05)
    checks.check_type(got, bool, "initial_loss_check(all-zero logits, C=4, tol=0.05)")
    checks.expect(got is True, "initial_loss_check returned False for a model whose logits are all zero: it gives "
                               "every class probability 1/4, so its loss is exactly the baseline and the check must "
                               "pass.\nLikely mistake: " + baseline_hint)

    confident = nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        confident.weight.copy_(10 * torch.eye(4))
    got = checks.call(initial_loss_check, confident, (nn.functional.one_hot(yb, 4).float(), yb), 4, 0.05)
    checks.check_type(got, bool, "initial_loss_check(a model that is right and sure, C=4)")
    checks.expect(got is False, "initial_loss_check returned True for a model whose loss is close to 0, far *below* "
                                "ln 4: a loss too low is as suspicious as one too high, so the distance counts in "
                                "both directions.")

    # In eval mode the two inputs cancel (all logits 0, loss ln 4); dropout in training mode breaks the balance.
    cancel = nn.Sequential(nn.Dropout(0.5), nn.Linear(2, 4, bias=False))
    with torch.no_grad():
        cancel[1].weight.copy_(torch.tensor([[3.0, -3.0], [-3.0, 3.0], [3.0, -3.0], [-3.0, 3.0]]))
    cancel.train()
    with record_forward_modes(cancel) as seen:
        got = checks.call(initial_loss_check, cancel, (torch.ones(64, 2), yb), 4, 0.05)
    checks.expect(len(seen) > 0, "initial_loss_check never called the model.")
    checks.expect(not any(training for training, _ in seen),
                  "the model ran in training mode, so dropout was active and changed the logits: the check must "
                  "see the model as it runs at evaluation.")
    checks.expect(not any(grad_on for _, grad_on in seen),
                  "the forward pass built an autograd graph: nothing here is ever differentiated, so autograd "
                  "should record nothing.")
    checks.check_type(got, bool, "initial_loss_check(dropout model, C=4)")
    checks.expect(got is True,
                  "in eval mode this model's logits are all zero, so its loss is ln 4 and the check must pass.")


def _overfit_reference(model: nn.Module, xb, yb, loss_fn, steps: int, lr: float, variant: str) -> float:
    """What ``overfit_one_batch`` returns on a copy of ``model`` (its ``.grad`` too): the contract (``"spec"``) or a
    known mistake."""
    copied = copy.deepcopy(model)   # deepcopy leaves .grad behind: carry it over
    for mine, theirs in zip(copied.parameters(), model.parameters()):
        mine.grad = None if theirs.grad is None else theirs.grad.clone()
    model = copied
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        if variant == "new optimizer":
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        if variant not in ("no zero_grad", "zero_grad after step"):
            optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        if variant == "zero_grad after step":
            optimizer.zero_grad()
    if variant == "recomputed":
        with torch.no_grad():
            loss = loss_fn(model(xb), yb)
    return loss.item()


_OVERFIT_MISTAKES = {
    "no zero_grad": "the gradients were never cleared: backward() adds into .grad, so step k used the sum of the "
                    "gradients of k steps, not the gradient of its own loss.",
    "zero_grad after step": "the first update followed the gradients the model arrived with, added to its own: the "
                            "gradients were cleared after each step instead of before each backward().",
    "new optimizer": "Adam's running averages started over on every step: that is what a new optimizer each step "
                     "does. The contract wants one optimizer whose state carries from step to step.",
    "recomputed": "that is the loss of the model after its last update, computed once more after the loop; the "
                  "contract asks for the loss the last update was computed from.",
}


def check_overfit_one_batch(overfit_one_batch: Callable) -> None:
    """Visible checks of exercise 2: Adam's steps on one batch, gradients of each step alone, training mode."""
    torch.manual_seed(92)
    xb, yb = torch.randn(8, 3), torch.randint(0, 3, (8,))
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 3))
    loss_fn, steps, lr = nn.CrossEntropyLoss(), 30, 0.05
    (20 * net(xb).sum()).backward()   # gradients left in .grad by the caller's earlier backward pass
    want = {variant: _overfit_reference(net, xb, yb, loss_fn, steps, lr, variant)
            for variant in ("spec", *_OVERFIT_MISTAKES)}
    label = f"overfit_one_batch(MLP 3-16-3, 8 examples, {steps} steps, lr={lr})"
    got = checks.call(overfit_one_batch, net, (xb, yb), loss_fn, steps, lr)
    hint = ("the loss differs from that of the contract's run: one Adam optimizer with learning rate lr and default "
            "settings, exactly `steps` updates, each from the gradient of its own step's loss, and the loss the "
            "last update was computed from.")
    if isinstance(got, float):
        hint = next((text for variant, text in _OVERFIT_MISTAKES.items() if abs(got - want[variant]) < 1e-4), hint)
    checks.check_number(got, want["spec"], label, tol=1e-4, hint=hint)

    torch.manual_seed(93)
    dropper = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    dropper.eval()
    with record_forward_modes(dropper) as seen:
        checks.call(overfit_one_batch, dropper, (xb, yb), nn.CrossEntropyLoss(), 5, 0.01)
    checks.expect(len(seen) > 0, "overfit_one_batch never called the model.")
    checks.expect(all(training for training, _ in seen),
                  "the model ran in eval mode (it arrived that way, as it does after an evaluation): overfitting "
                  "tests the model as it trains, dropout on, whatever mode it arrives in.")


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


def check_find_nan_source(find_nan_source: Callable) -> None:
    """Visible checks of exercise 4: the backward node's name, "" without NaN, other errors through, anomaly off."""
    torch.autograd.set_detect_anomaly(False)

    def expect_name(label: str, fn: Callable, want: str) -> None:
        got = checks.call(find_nan_source, fn)
        left_on = torch.is_anomaly_enabled()
        torch.autograd.set_detect_anomaly(False)
        checks.check_type(got, str, f"find_nan_source({label})",
                          hint=("when backward finds no NaN, the answer is the empty string '' (not None)."
                                if got is None else None))
        hint = ""
        if "returned nan" in got:
            hint = " The answer is the node's name alone, the part between the quotes, not the whole message."
        elif got and "Backward" not in got:
            hint = (" That looks like the forward operation; the answer is the backward node that anomaly "
                    f"detection names, like {want!r}.")
        checks.expect(got == want, f"find_nan_source({label}) returned {got!r}, expected {want!r}.{hint}")
        checks.expect(not left_on, "anomaly detection is still on after find_nan_source returned: left on, it slows "
                                   "down every later backward pass. It must be off again on every path.")

    def zero_over_zero():
        a = torch.zeros(3, requires_grad=True)
        return (a / a.sum()).sum()

    def log_of_zero():  # cross-entropy by hand, with a probability of exactly 0: 0 * log(0) is NaN
        p = torch.tensor([[0.0, 0.7, 0.3]], requires_grad=True)
        return -(torch.tensor([[0.0, 1.0, 0.0]]) * torch.log(p)).sum()

    def sqrt_inside_where():  # the unused branch still gets a gradient: 0 / sqrt(-1) = NaN
        x = torch.tensor([-1.0, 4.0], requires_grad=True)
        return torch.where(x > 0, x.sqrt(), torch.zeros_like(x)).sum()

    def healthy():
        w = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
        return (w ** 2).sum()

    def shape_bug():
        return nn.Linear(3, 2)(torch.ones(4, 5)).sum()

    def find_nan_source_of_shape_bug():
        return find_nan_source(shape_bug)

    expect_name("0 / 0", zero_over_zero, "DivBackward0")
    expect_name("0 * log(0), already NaN in the forward pass", log_of_zero, "LogBackward0")
    expect_name("sqrt(-1) in the unused branch of torch.where", sqrt_inside_where, "SqrtBackward0")
    expect_name("a loss without NaN", healthy, "")
    checks.expect_raises(find_nan_source_of_shape_bug, RuntimeError,
                         "this fn fails with a RuntimeError that has nothing to do with NaN (a shape mismatch): "
                         "find_nan_source must let it through unchanged rather than return a name or hide it.")
    left_on = torch.is_anomaly_enabled()
    torch.autograd.set_detect_anomaly(False)
    checks.expect(not left_on, "anomaly detection is still on after an error passed through find_nan_source: it must "
                               "be off again on every path, also when an error passes through.")
