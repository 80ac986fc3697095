"""Lesson 01's figures, its stride explorer, and one small helper for its test cells."""
from __future__ import annotations

import html
import io
import itertools
import math
from typing import Any, Callable

import torch

from autograder.kernel import checks

__all__ = ["layout_report", "storage_offsets", "plot_memory_order", "stride_explorer", "SHAPES",
           "expect_answer"]


def layout_report(shape: tuple[int, ...], perm: tuple[int, ...]) -> dict:
    """Facts about ``torch.arange(n).reshape(shape).permute(perm)``.

    Returns the permuted shape, its strides, whether it is contiguous, whether
    ``view(-1)`` works on it, and whether ``reshape(-1)`` had to copy.
    """
    base = torch.arange(math.prod(shape)).reshape(shape)
    t = base.permute(*perm)
    try:
        t.view(-1)
        view_ok = True
    except RuntimeError:
        view_ok = False
    flat = t.reshape(-1)
    return {
        "shape": tuple(t.shape),
        "stride": t.stride(),
        "contiguous": t.is_contiguous(),
        "view(-1) works": view_ok,
        "reshape(-1) copies": flat._base is None,  # a view of base keeps it as its _base
    }


def storage_offsets(t: torch.Tensor) -> torch.Tensor:
    """For each element of ``t`` (in logical order), its position in the underlying storage."""
    index = torch.zeros(t.shape, dtype=torch.long)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        view_shape = [1] * t.dim()
        view_shape[dim] = size
        index = index + (torch.arange(size) * stride).reshape(view_shape)
    return index + t.storage_offset()


def plot_memory_order(t: torch.Tensor, ax=None, title: str | None = None,
                      dims: tuple[str, str] = ("dim 0", "dim 1")):
    """Draw a 1-D or 2-D tensor as a grid; each cell shows where it lives in storage.

    Reading the numbers left to right, top to bottom gives 0, 1, 2, ... exactly when
    the tensor is contiguous. ``dims`` names the dimensions drawn as rows and columns
    (for a slice ``t[i]`` of a 3-D tensor they are dims 1 and 2).
    """
    import matplotlib.pyplot as plt

    one_row = t.dim() == 1
    if one_row:
        t = t.unsqueeze(0)
    if t.dim() != 2:
        raise ValueError(f"plot_memory_order draws 1-D or 2-D tensors, got {t.dim()}-D; index a slice first")
    offsets = storage_offsets(t)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * t.shape[1] + 1.4, 0.6 * t.shape[0] + 1.4), layout="constrained")
    ax.imshow(offsets.numpy(), cmap="viridis")
    for (r, c), value in zip(itertools.product(range(t.shape[0]), range(t.shape[1])), offsets.flatten().tolist()):
        ax.text(c, r, str(value), ha="center", va="center", color="white", fontsize=10)
    ax.set_xticks(range(t.shape[1]))
    ax.set_yticks(range(t.shape[0]))
    if not one_row:
        ax.set_ylabel(f"index along {dims[0]}", fontsize=9)
    ax.set_xlabel(f"index along {dims[0] if one_row else dims[1]}", fontsize=9)
    ax.set_title(title or f"shape {tuple(t.shape)}, stride {t.stride()}", fontsize=10)
    return ax


SHAPES = [(3, 4), (2, 6), (2, 3, 4), (2, 1, 4)]


def _draw_layout(shape: tuple[int, ...], perm: tuple[int, ...]):
    """The explorer's picture: one grid for a 2-D result, one grid per ``t[i]`` for a 3-D one.

    Drawn on its own Agg canvas, outside pyplot: the explorer redraws from widget callbacks,
    where pyplot's figure list and the inline backend's end-of-cell hooks do not run.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = torch.arange(math.prod(shape)).reshape(shape).permute(*perm)
    panels = list(t) if t.dim() == 3 else [t]
    rows, cols = panels[0].shape if panels[0].dim() == 2 else (1, panels[0].shape[0])
    fig = Figure(figsize=(max(5.5, (0.55 * cols + 1.3) * len(panels)), 0.55 * rows + 2.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)
    for i, (ax, panel) in enumerate(zip(axes[0], panels)):
        if t.dim() == 3:
            plot_memory_order(panel, ax, title=f"t[{i}]", dims=("dim 1", "dim 2"))
        else:
            plot_memory_order(panel, ax, title="t")
    fig.suptitle(f"storage position of each element of\nt = arange({math.prod(shape)}).reshape{shape}"
                 f".permute{perm}\nshape {tuple(t.shape)}, stride {t.stride()}", fontsize=10)
    return fig


def _layout_png(shape: tuple[int, ...], perm: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    _draw_layout(shape, perm).savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()


def stride_explorer():
    """An ipywidgets explorer: pick a shape and a permutation, see strides and memory order."""
    import ipywidgets as widgets

    shape_pick = widgets.Dropdown(options=[(str(s), s) for s in SHAPES], description="shape")
    perm_pick = widgets.Dropdown(description="permute")
    report_view = widgets.HTML()
    # flex-start: shown at its own size; stretched to the column it looked blurred and oversized
    picture = widgets.Image(format="png", layout=widgets.Layout(align_self="flex-start"))
    state = {"refreshing": False}

    def redraw():
        report = layout_report(shape_pick.value, perm_pick.value)
        lines = "\n".join(f"{key:>20}: {value}" for key, value in report.items())
        report_view.value = f"<pre>{html.escape(lines)}</pre>"
        picture.value = _layout_png(shape_pick.value, perm_pick.value)

    def on_shape(_=None):
        # Replacing the options fires the permutation observer: draw once, after both are set.
        state["refreshing"] = True
        try:
            dims = tuple(range(len(shape_pick.value)))
            perm_pick.options = [(str(p), p) for p in itertools.permutations(dims)]
            perm_pick.value = dims
        finally:
            state["refreshing"] = False
        redraw()

    def on_perm(_):
        if not state["refreshing"]:
            redraw()

    shape_pick.observe(on_shape, names="value")
    perm_pick.observe(on_perm, names="value")
    on_shape()
    return widgets.VBox([widgets.HBox([shape_pick, perm_pick]), report_view, picture])


def expect_answer(fn: Callable, args: tuple, want: Any, label: str, hint: str | None = None) -> None:
    """``fn(*args)`` must return exactly ``want`` (a Python value of ``want``'s type).

    ``label`` names the call in the message; ``hint`` names the misconception a wrong
    answer on this input points at.
    """
    got = checks.call(fn, *args)
    checks.check_type(got, type(want), label)
    message = f"{label} returned {got!r}, expected {want!r}."
    if hint:
        message += f"\nLikely mistake: {hint}"
    checks.expect(got == want, message)
