"""Figures and widgets that show what a tensor's layout looks like (lesson 01)."""
from __future__ import annotations

import itertools

import torch


def layout_report(shape: tuple[int, ...], perm: tuple[int, ...]) -> dict:
    """Facts about ``torch.arange(n).reshape(shape).permute(perm)``.

    Returns the permuted shape, its strides, whether it is contiguous, whether
    ``view(-1)`` works on it, and whether ``reshape(-1)`` had to copy.
    """
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape)
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
        "reshape(-1) copies": flat.untyped_storage().data_ptr() != base.untyped_storage().data_ptr(),
    }


def storage_offsets(t: torch.Tensor) -> torch.Tensor:
    """For each element of ``t`` (in logical order), its position in the underlying storage."""
    index = torch.zeros(t.shape, dtype=torch.long)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        view_shape = [1] * t.dim()
        view_shape[dim] = size
        index = index + (torch.arange(size) * stride).reshape(view_shape)
    return index + t.storage_offset()


def plot_memory_order(t: torch.Tensor, ax=None, title: str | None = None):
    """Draw a 1-D or 2-D tensor as a grid; each cell shows where it lives in storage.

    Reading the numbers left to right, top to bottom gives 0, 1, 2, ... exactly when
    the tensor is contiguous.
    """
    import matplotlib.pyplot as plt

    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2:
        raise ValueError(f"plot_memory_order draws 1-D or 2-D tensors, got {t.dim()}-D; index a slice first")
    offsets = storage_offsets(t)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * t.shape[1] + 1, 0.6 * t.shape[0] + 1))
    ax.imshow(offsets.numpy(), cmap="viridis")
    for (r, c), value in zip(itertools.product(range(t.shape[0]), range(t.shape[1])), offsets.flatten().tolist()):
        ax.text(c, r, str(value), ha="center", va="center", color="white", fontsize=10)
    ax.set_xticks(range(t.shape[1]))
    ax.set_yticks(range(t.shape[0]))
    ax.set_title(title or f"shape {tuple(t.shape)}, stride {t.stride()}", fontsize=10)
    return ax


SHAPES = [(3, 4), (2, 6), (2, 3, 4)]


def stride_explorer():
    """An ipywidgets explorer: pick a shape and a permutation, see strides and memory order."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    shape_pick = widgets.Dropdown(options=[(str(s), s) for s in SHAPES], description="shape")
    perm_pick = widgets.Dropdown(description="permute")
    out = widgets.Output()

    def refresh_perms(*_):
        dims = range(len(shape_pick.value))
        perm_pick.options = [(str(p), p) for p in itertools.permutations(dims)]
        perm_pick.value = tuple(dims)

    def redraw(*_):
        if perm_pick.value is None or len(perm_pick.value) != len(shape_pick.value):
            return
        report = layout_report(shape_pick.value, perm_pick.value)
        t = torch.arange(int(torch.tensor(shape_pick.value).prod())).reshape(shape_pick.value).permute(*perm_pick.value)
        with out:
            out.clear_output(wait=True)
            for key, value in report.items():
                print(f"{key:>20}: {value}")
            panels = t if t.dim() == 3 else t.unsqueeze(0)
            fig, axes = plt.subplots(1, panels.shape[0], figsize=(3.2 * panels.shape[0], 2.6), squeeze=False)
            for i, panel in enumerate(panels):
                plot_memory_order(panel, axes[0][i], title=f"[{i}]" if t.dim() == 3 else None)
            fig.suptitle("storage position of each element", fontsize=10)
            plt.show()

    shape_pick.observe(refresh_perms, names="value")
    perm_pick.observe(redraw, names="value")
    refresh_perms()
    redraw()
    return widgets.VBox([widgets.HBox([shape_pick, perm_pick]), out])
