"""What an ``nn.Module`` holds: a text tree and a bar chart of parameters and buffers (lesson 02).

Counts are numbers of *elements* (``numel``), not numbers of tensors. Each module is
credited only with what it registers itself (``recurse=False``); a tensor registered on
two modules (a tied weight) is credited to the first one in ``named_modules()`` order
and reported as *shared* on the others, so the rows add up to exactly what
``model.parameters()`` and ``model.buffers()`` yield.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

__all__ = ["ModuleRow", "module_rows", "subtree_totals", "module_tree", "plot_module_counts"]


@dataclass(frozen=True)
class ModuleRow:
    """One entry of ``model.named_modules()`` and what it registers itself."""

    name: str       # qualified name, "" for the model itself
    kind: str       # class name, e.g. "Linear"
    depth: int      # 0 for the model, 1 for its children, ...
    params: int     # parameter elements registered here (first owner only)
    trainable: int  # the part of ``params`` with requires_grad=True
    shared: int     # parameter elements registered here that an earlier module already owns
    buffers: int    # buffer elements registered here (first owner only)
    is_leaf: bool   # has no child modules


def module_rows(model: nn.Module) -> list[ModuleRow]:
    """One :class:`ModuleRow` per module, in ``named_modules()`` order (the model first)."""
    seen_params: set[int] = set()
    seen_buffers: set[int] = set()
    rows = []
    for name, module in model.named_modules():
        params = trainable = shared = buffers = 0
        for p in module.parameters(recurse=False):
            if id(p) in seen_params:
                shared += p.numel()
                continue
            seen_params.add(id(p))
            params += p.numel()
            if p.requires_grad:
                trainable += p.numel()
        for b in module.buffers(recurse=False):
            if id(b) not in seen_buffers:
                seen_buffers.add(id(b))
                buffers += b.numel()
        rows.append(ModuleRow(
            name=name, kind=type(module).__name__, depth=name.count(".") + 1 if name else 0,
            params=params, trainable=trainable, shared=shared, buffers=buffers,
            is_leaf=next(module.children(), None) is None,
        ))
    return rows


def subtree_totals(rows: list[ModuleRow], name: str) -> tuple[int, int]:
    """(parameter elements, buffer elements) of module ``name`` and everything below it."""
    inside = [r for r in rows if name == "" or r.name == name or r.name.startswith(name + ".")]
    return sum(r.params for r in inside), sum(r.buffers for r in inside)


def module_tree(model: nn.Module) -> str:
    """An indented listing of the modules with parameter and buffer counts.

    Each line shows the totals of that module's whole subtree; a ``frozen`` note says
    how many of its own parameter elements have ``requires_grad=False`` and a
    ``shared`` note how many it registers that another module already owns.
    """
    rows = module_rows(model)
    labels = []
    for r in rows:
        label = r.name.rsplit(".", 1)[-1] if r.name else "(model)"
        labels.append("  " * r.depth + f"{label}: {r.kind}")
    width = max(len(label) for label in labels)
    lines = []
    for label, r in zip(labels, rows):
        params, buffers = subtree_totals(rows, r.name)
        line = f"{label:<{width}}  params {params:>6}  buffers {buffers:>5}"
        notes = []
        if r.params != r.trainable:
            notes.append(f"{r.params - r.trainable} frozen")
        if r.shared:
            notes.append(f"{r.shared} shared")
        if notes:
            line += "  (" + ", ".join(notes) + ")"
        lines.append(line.rstrip())
    return "\n".join(lines)


def plot_module_counts(model: nn.Module, ax=None, title: str | None = None):
    """Horizontal bars, two per leaf module: parameter elements and buffer elements.

    Only leaf modules are drawn (containers hold nothing themselves), plus any container
    that registers a parameter or buffer directly. Modules with nothing (ReLU,
    Dropout) still get a row, showing their zeros. A hatched, pale parameter bar marks
    a module with frozen (``requires_grad=False``) parameters. Returns the axes.
    """
    import matplotlib.pyplot as plt

    rows = [r for r in module_rows(model) if r.is_leaf or r.params or r.buffers or r.shared]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
    labels = [f"{r.name or '(model)'} ({r.kind})" for r in rows]
    positions = list(range(len(rows)))[::-1]
    height = 0.38
    param_bars = ax.barh([p + height / 2 for p in positions], [r.params for r in rows], height,
                         label="parameters", color="tab:blue")
    buffer_bars = ax.barh([p - height / 2 for p in positions], [r.buffers for r in rows], height,
                          label="buffers", color="tab:orange")
    for bar, r in zip(param_bars, rows):
        if r.trainable < r.params:
            bar.set_hatch("//")
            bar.set_facecolor("lightsteelblue")
    ax.bar_label(param_bars, padding=2, fontsize=8,
                 labels=[f"{r.params}" + (" (frozen)" if r.trainable == 0 and r.params else
                                          f" ({r.params - r.trainable} frozen)" if r.trainable < r.params else "")
                         for r in rows])
    ax.bar_label(buffer_bars, padding=2, fontsize=8)
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_xlabel("elements (numel)")
    ax.margins(x=0.15)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or f"{type(model).__name__}: what each module registers", fontsize=10)
    return ax
