"""Lesson 01's figures (memory order, broadcasting), its stride explorer, and the checks of the course's conventions."""
from __future__ import annotations

import html
import io
import itertools
import math
from typing import Any, Callable

import torch

from autograder.kernel import checks, private_apis

__all__ = ["layout_report", "storage_offsets", "plot_memory_order", "stride_explorer", "SHAPES",
           "expect_answer", "broadcast_report", "plot_broadcast", "check_new_object"]


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
        "reshape(-1) copies": private_apis.get(private_apis.TENSOR_VIEW_BASE, flat) is None,  # a view keeps its base
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


# ---------------------------------------------------------------- broadcasting, drawn

def broadcast_report(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> dict:
    """How broadcasting lines up ``a_shape`` and ``b_shape``, dimension by dimension from the right.

    Returns ``a`` and ``b`` padded on the left with 1s to the same length, ``padded_a`` /
    ``padded_b`` (how many 1s each got), ``stretched_a`` / ``stretched_b`` (the positions, counted
    from the left of the padded shapes, where that operand's 1 is stretched), ``clash`` (positions
    where the sizes differ and neither is 1) and ``result`` (the broadcast shape, ``None`` on a clash).
    """
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    n = max(len(a_shape), len(b_shape))
    a = (1,) * (n - len(a_shape)) + a_shape
    b = (1,) * (n - len(b_shape)) + b_shape
    stretched_a = [i for i in range(n) if a[i] == 1 and b[i] != 1]
    stretched_b = [i for i in range(n) if b[i] == 1 and a[i] != 1]
    clash = [i for i in range(n) if a[i] != b[i] and 1 not in (a[i], b[i])]
    result = None if clash else tuple(max(x, y) if 1 in (x, y) else x for x, y in zip(a, b))
    return {"a": a, "b": b, "padded_a": n - len(a_shape), "padded_b": n - len(b_shape),
            "stretched_a": stretched_a, "stretched_b": stretched_b, "clash": clash, "result": result}


_STRETCHED = "#f5c77e"
_CLASH = "#f4a6a6"


def plot_broadcast(a_shape: tuple[int, ...], b_shape: tuple[int, ...], ax=None, title: str | None = None,
                   legend: bool = True):
    """Draw two shapes aligned from the right, one box per dimension, and the shape they broadcast to.

    A dimension a shape lacks is drawn dashed (it counts as 1); a size 1 that is stretched is
    shaded and shows what it stretches to; a column where the sizes differ and neither is 1 is
    red, and then there is no result. ``legend=False`` leaves the key out (for a panel beside another).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    report = broadcast_report(a_shape, b_shape)
    n = len(report["a"])
    if ax is None:
        _, ax = plt.subplots(figsize=(1.1 * n + 2.6, 2.6), layout="constrained")
    rows = [("a", report["a"], report["padded_a"], report["stretched_a"]),
            ("b", report["b"], report["padded_b"], report["stretched_b"])]
    for row, (_, sizes, padded, stretched) in enumerate(rows):
        for col, size in enumerate(sizes):
            implied, stretch = col < padded, col in stretched
            face = _CLASH if col in report["clash"] else _STRETCHED if stretch else "white"
            ax.add_patch(Rectangle((col - 0.42, row - 0.38), 0.84, 0.76, facecolor=face, edgecolor="black",
                                   linestyle="--" if implied else "-", linewidth=1.2))
            label = f"1→{max(report['a'][col], report['b'][col])}" if stretch else str(size)
            ax.text(col, row, label, ha="center", va="center", fontsize=11,
                    color="dimgray" if implied and not stretch else "black")
    for col in range(n):
        clash = col in report["clash"]
        ax.add_patch(Rectangle((col - 0.42, 2 - 0.38), 0.84, 0.76, facecolor=_CLASH if clash else "#dde8f5",
                               edgecolor="black", linewidth=1.2))
        size = max(report["a"][col], report["b"][col])
        ax.text(col, 2, "✗" if clash else str(size), ha="center", va="center", fontsize=11)
    ax.axhline(1.5, color="gray", linewidth=0.8)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(2.6, -0.6)
    ax.set_xticks(range(n), [str(col - n) for col in range(n)])
    ax.set_yticks(range(3), [f"a {tuple(a_shape)}", f"b {tuple(b_shape)}", "a + b"])
    ax.set_xlabel("dimension, counted from the right", fontsize=9)
    ax.set_ylabel("operand", fontsize=9)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    if title is None:
        outcome = (f"{report['result']}" if report["result"] is not None
                   else f"error at dimension {report['clash'][0] - n}")
        title = f"{tuple(a_shape)} + {tuple(b_shape)} → {outcome}"
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(handles=[Patch(facecolor="white", edgecolor="black", linestyle="--", label="missing: counts as 1"),
                           Patch(facecolor=_STRETCHED, edgecolor="black", label="size 1, stretched"),
                           Patch(facecolor=_CLASH, edgecolor="black", label="sizes clash")],
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return ax


# ---------------------------------------------------------------- the course's conventions, checked
# The visible checks of the exercises themselves are in tensor_checks.py.

def check_new_object(fn: Callable, args: tuple, label: str) -> None:
    """Two calls of ``fn(*args)`` must return two objects (and two tensors two storages): a result is built
    for its call, never kept and handed out again, because the caller may change it."""
    first, second = checks.call(fn, *args), checks.call(fn, *args)
    same = first is second or (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)
                                and first.numel() > 0 and checks.storage_id(first) == checks.storage_id(second))
    checks.expect(not same, f"{label}: two calls returned the same {'storage' if first is not second else 'object'}"
                            "\nLikely mistake: the result is kept and handed out again (a cache, a module-level "
                            "tensor): build it on every call, since a caller that changes one result changes the "
                            "other.")
