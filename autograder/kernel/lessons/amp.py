"""Mixed precision (lesson 08): spies that make the AMP protocol visible, figures, timing.

- :class:`RecordingScaler` stands in for ``torch.amp.GradScaler``: it does the real
  scaler's work and records the calls a training step makes (``scale``, the backward
  pass through the scaled loss, ``unscale_``, ``step``, ``update``). It can also turn the
  gradients into ``inf``, so a test can watch the scaler skip a step.
- :func:`watch_autocast` records, on every forward call of a module, whether autocast
  was on and with which dtype.
- :func:`forward_hook_count` counts the forward hooks still attached to a model; :func:`left_attached` says what
  an inspection left on one (hooks, a ``forward`` set on a module instance).
- :func:`plot_format_ranges` and :func:`plot_gradient_magnitudes` draw the lesson's first figure;
  :func:`scale_history` feeds a GradScaler finite and overflowing gradients; :func:`plot_scale_history` draws
  its scale; :func:`grad_norms_scaled_and_unscaled` compares the gradients of a scaled loss with the true ones.
- the visible checks of the lesson's exercises are in :mod:`autograder.kernel.lessons.amp_checks`.
- :func:`seconds_per_step` times a training step (waiting for the GPU to finish).
- :func:`cuda_or_skip` guards the cells that need a CUDA GPU.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
from torch import nn

__all__ = [
    "FORMATS",
    "smallest_subnormal",
    "autocast_state",
    "cuda_or_skip",
    "RecordingScaler",
    "watch_autocast",
    "forward_hook_count",
    "left_attached",
    "plot_format_ranges",
    "plot_gradient_magnitudes",
    "seconds_per_step",
    "wide_mlp",
    "scale_history",
    "plot_scale_history",
    "grad_norms_scaled_and_unscaled",
]

FORMATS = (torch.float32, torch.bfloat16, torch.float16)
_COLORS = {torch.float32: "tab:blue", torch.bfloat16: "tab:green", torch.float16: "tab:orange"}


def smallest_subnormal(dtype: torch.dtype) -> float:
    """The smallest positive number ``dtype`` can hold (below it, values round to zero)."""
    info = torch.finfo(dtype)
    return info.smallest_normal * info.eps


def cuda_or_skip(what: str) -> bool:
    """``True`` when CUDA is available; otherwise print that ``what`` was skipped and return ``False``.

    Cells that need a GPU start with ``if cuda_or_skip("..."):`` so that on a machine
    without one they say so instead of failing.
    """
    if torch.cuda.is_available():
        return True
    print(f"skipped on this machine: {what} needs a CUDA GPU (torch.cuda.is_available() is False)")
    return False


def autocast_state(device_type: str) -> tuple[bool, torch.dtype]:
    """``(is autocast on for device_type, its dtype)`` right now."""
    try:
        return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
    except TypeError:  # torch < 2.4 has one function per device
        if device_type == "cuda":
            return torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        return torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()


class RecordingScaler:
    """A ``torch.amp.GradScaler`` that also records, in ``calls``, what a training step did with it.

    ``calls`` collects ``"scale"``, ``"backward"`` (the backward pass went through the
    tensor that ``scale`` returned), ``"unscale_"``, ``"step"`` and ``"update"`` in the order
    they happened. Everything else is the real scaler's behaviour, exceptions included.

    With ``inject_inf=True`` the backward pass through the scaled loss carries ``inf``
    instead of its gradient, as if float16 had overflowed: the real scaler then finds
    non-finite gradients, ``step`` leaves the parameters alone and ``update`` halves the scale.
    """

    def __init__(self, device_type: str = "cpu", *, init_scale: float = 2.0 ** 16, growth_interval: int = 2000,
                 inject_inf: bool = False, enabled: bool = True):
        self.scaler = torch.amp.GradScaler(device_type, init_scale=init_scale, growth_interval=growth_interval,
                                           enabled=enabled)
        self.inject_inf = inject_inf
        self.calls: list[str] = []

    def scale(self, outputs):
        self.calls.append("scale")
        scaled = self.scaler.scale(outputs)
        if torch.is_tensor(scaled) and scaled.requires_grad:
            scaled.register_hook(self._through_backward)
        return scaled

    def _through_backward(self, grad: torch.Tensor) -> torch.Tensor:
        self.calls.append("backward")
        return torch.full_like(grad, float("inf")) if self.inject_inf else grad

    def unscale_(self, optimizer) -> None:
        self.calls.append("unscale_")
        self.scaler.unscale_(optimizer)

    def step(self, optimizer, *args, **kwargs):
        self.calls.append("step")
        return self.scaler.step(optimizer, *args, **kwargs)

    def update(self, new_scale=None) -> None:
        self.calls.append("update")
        self.scaler.update(new_scale)

    def get_scale(self) -> float:
        return self.scaler.get_scale()

    def is_enabled(self) -> bool:
        return self.scaler.is_enabled()

    def __getattr__(self, name: str):
        # Anything else (state_dict, get_growth_factor, ...) is the real scaler's.
        scaler = self.__dict__.get("scaler")
        if scaler is None:
            raise AttributeError(name)
        return getattr(scaler, name)

    def __repr__(self) -> str:
        return f"RecordingScaler(scale={self.get_scale()}, calls={self.calls})"


def watch_autocast(module: nn.Module, device_type: str) -> list[tuple[bool, torch.dtype]]:
    """Record ``autocast_state(device_type)`` each time ``module`` runs forward; returns the (growing) list.

    The hook stays on ``module``; use it on a model built for the check.
    """
    seen: list[tuple[bool, torch.dtype]] = []
    module.register_forward_pre_hook(lambda mod, args: seen.append(autocast_state(device_type)))
    return seen


def forward_hook_count(model: nn.Module) -> int:
    """Forward hooks still attached to ``model``'s modules, plus global forward hooks."""
    from autograder.kernel import private_apis

    attached = sum(len(private_apis.get(private_apis.FORWARD_HOOKS, m)) for m in model.modules())
    return attached + len(private_apis.get(private_apis.GLOBAL_FORWARD_HOOKS))


def plot_format_ranges(ax) -> None:
    """The positive numbers each format can hold, on a log scale: subnormal, normal, eps."""
    import math

    for row, dtype in enumerate(reversed(FORMATS)):
        info = torch.finfo(dtype)
        lo, tiny, hi = (math.log10(v) for v in (smallest_subnormal(dtype), info.smallest_normal, info.max))
        color = _COLORS[dtype]
        ax.barh(row, tiny - lo, left=lo, height=0.5, color=color, alpha=0.35)
        ax.barh(row, hi - tiny, left=tiny, height=0.5, color=color)
        ax.text(hi + 1, row, f"max {info.max:.3g}\neps {info.eps:.3g}", va="center", fontsize=8)
    ax.set_yticks(range(len(FORMATS)), [str(d).replace("torch.", "") for d in reversed(FORMATS)])
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlim(-48, 62)
    ax.set_xlabel("log10 of a positive value (pale: subnormal, fewer digits)")
    ax.set_title("Range of each format")


def plot_gradient_magnitudes(grads: torch.Tensor, scale: float, ax) -> None:
    """Histogram of log2 |gradient|, raw and multiplied by ``scale``, against float16's limits."""
    import math

    g = grads.detach().float().abs().flatten()
    g = g[g > 0]
    raw = torch.log2(g)
    scaled = raw + math.log2(scale)
    bins = torch.arange(math.floor(raw.min()) - 1, math.ceil(scaled.max()) + 2, 1.0)
    ax.hist(raw.numpy(), bins=bins.numpy(), color="tab:red", alpha=0.6, label="gradients")
    ax.hist(scaled.numpy(), bins=bins.numpy(), color="tab:blue", alpha=0.6, label=f"gradients x {scale:g}")
    fp16 = torch.finfo(torch.float16)
    ax.axvspan(bins[0].item(), math.log2(smallest_subnormal(torch.float16)) - 1, color="black", alpha=0.12)
    ax.axvline(math.log2(smallest_subnormal(torch.float16)) - 1, color="black", ls="--", lw=1,
               label="below: 0 in float16")
    ax.axvline(math.log2(fp16.smallest_normal), color="black", ls=":", lw=1, label="below: float16 subnormal")
    ax.set_xlabel("log2 |gradient of the loss w.r.t. the model output|")
    ax.set_ylabel("number of gradient entries")
    ax.set_title("Loss scaling lifts small gradients into float16's range")
    ax.legend(fontsize=8, loc="upper right")


def seconds_per_step(step: Callable[[], object], steps: int = 20, warmup: int = 3, device_type: str = "cpu") -> float:
    """Mean wall time of ``step()`` over ``steps`` calls after ``warmup`` calls (GPU work included)."""
    sync = torch.cuda.synchronize if device_type == "cuda" else (lambda: None)
    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - start) / steps


def wide_mlp(features: int, width: int, depth: int, classes: int) -> nn.Sequential:
    """Linear-ReLU blocks ``depth`` deep and ``width`` wide, ending in ``Linear(width, classes)``."""
    layers: list[nn.Module] = []
    size = features
    for _ in range(depth):
        layers += [nn.Linear(size, width), nn.ReLU()]
        size = width
    layers.append(nn.Linear(size, classes))
    return nn.Sequential(*layers)


# ---------------------------------------------------------------- the scale over steps (section 4's figure)

def scale_history(steps: int, overflows, *, init_scale: float = 2.0 ** 10,
                  growth_interval: int = 3) -> tuple[list[float], list[bool]]:
    """A ``GradScaler``'s scale over ``steps`` steps whose gradients are finite except at ``overflows``.

    No model: each step hands the scaler one gradient tensor as a scaled backward pass would leave it,
    ``inf`` at the steps listed in ``overflows`` (counted from 1), as if float16 had overflowed there; the
    scaler checks it and sets its scale for the next step. Returns the scale after each step and, for each
    step, whether the scaler found ``inf`` or ``NaN`` (a step it would skip).
    """
    weight = torch.zeros(4, requires_grad=True)
    holder = torch.optim.SGD([weight], lr=0.0)      # unscale_ reads the gradients through an optimizer
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    scaler.scale(torch.ones(()))                     # the scaler creates its scale on first use
    overflows = set(overflows)
    scales, skipped = [], []
    for step in range(1, steps + 1):
        value = float("inf") if step in overflows else 1e-3 * scaler.get_scale()
        weight.grad = torch.full_like(weight, value)
        scaler.unscale_(holder)
        skipped.append(not bool(torch.isfinite(weight.grad).all()))
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, skipped


def plot_scale_history(scales, skipped, ax, *, init_scale: float | None = None) -> None:
    """The loss scale after each step on a log2 axis, the skipped (overflowing) steps marked."""
    import math

    start = [init_scale] if init_scale is not None else []
    values = start + list(scales)
    first = 0 if start else 1
    xs = list(range(first, first + len(values)))
    ax.step(xs, values, where="post", color="tab:blue", label="loss scale S")
    ax.plot(xs, values, "o", color="tab:blue", ms=3)
    bad = [k for k, s in enumerate(skipped, 1) if s]
    if bad:
        ax.plot(bad, [scales[k - 1] for k in bad], "x", color="tab:red", ms=9, mew=2,
                label="overflow: step skipped, S halved")
    ax.set_yscale("log", base=2)
    low, high = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    ax.set_yticks([2.0 ** k for k in range(low, high + 1)], [f"$2^{{{k}}}$" for k in range(low, high + 1)])
    ax.set_xticks(xs)
    ax.set_xlabel("training step (0: before the first)")
    ax.set_ylabel("loss scale S (log2 axis)")
    ax.set_title("GradScaler: halved at each overflow, doubled after a run of good steps")
    ax.legend(fontsize=8, loc="lower right")


def grad_norms_scaled_and_unscaled(model: nn.Module, xb, yb, *, init_scale: float = 2.0 ** 10) -> tuple[float, float]:
    """Section 4's measurement: the total norm of ``.grad`` after a backward pass through a fresh ``GradScaler``'s
    ``scale(loss)``, and the total norm of the gradients of ``loss`` itself (a plain backward pass on a copy of the
    model). Cross-entropy in float32, so that nothing underflows. The model keeps the scaled gradients."""
    import copy

    twin = copy.deepcopy(model)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    model.zero_grad()
    twin.zero_grad()
    nn.functional.cross_entropy(twin(xb), yb).backward()
    true = nn.utils.get_total_norm([p.grad for p in twin.parameters() if p.grad is not None]).item()
    scaled_loss = scaler.scale(nn.functional.cross_entropy(model(xb), yb))
    scaled_loss.backward()
    return nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None]).item(), true


def left_attached(model: nn.Module) -> list[str]:
    """What an inspection may have left on ``model``: forward hooks (its modules' and the global ones) and a
    ``forward`` set on a module instance, each as a phrase; an empty list when nothing is attached."""
    found = []
    hooks = forward_hook_count(model)
    if hooks:
        found.append(f"{hooks} forward hook{'s' if hooks > 1 else ''}")
    found += [f"a forward set on the module {name!r}" for name, m in model.named_modules() if "forward" in vars(m)]
    return found
