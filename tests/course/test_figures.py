"""Accessible figures: every figure has a title and labelled axes, and prose next to it.

Executing every solution here would be slow, so this checks the two places figures come from:

- the kernel helpers (``plot_*`` and ``_draw_*`` in ``autograder/kernel``) are called on small inputs and
  each figure they draw is audited (tests/support/browser_figures.py: a title, both axes labelled or
  self-explaining). A new helper must be added to HELPERS, or this test says so;
- each solution's code cells are read: a cell that draws with matplotlib itself (``ax.plot``,
  ``plt.imshow``, ...) must set a title and both axis labels in that cell; a cell that calls a helper
  which draws no title by default must pass ``title=`` or set one; and every cell that shows a figure
  has a markdown cell right before or after it (where the lesson says what to notice).

tests/e2e/test_browser.py and test_warm_kernels.py audit every figure a kernel renders as well (the same rules).
"""
from __future__ import annotations

import ast
import importlib
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import nn  # noqa: E402

from autograder import course  # noqa: E402

import coursekit as kit  # noqa: E402
from browser_figures import figure_problems  # noqa: E402

KERNEL = kit.REPO / "autograder" / "kernel" / "lessons"   # the lesson instruments, which draw the figures


def _ax():
    return plt.subplots()[1]


def _history(n=5):
    return {"epoch": list(range(1, n + 1)), "train_loss": [1.0 / k for k in range(1, n + 1)],
            "val_loss": [1.2 / k for k in range(1, n + 1)], "val_acc": [0.5 + 0.05 * k for k in range(n)]}


def _spiral_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))


# module.function -> a call on small inputs with the defaults a lesson gets when it passes nothing optional
HELPERS = {
    "explorers.plot_memory_order": lambda m: m.plot_memory_order(torch.arange(12).reshape(3, 4)),
    "explorers._draw_layout": lambda m: m._draw_layout((2, 3, 4), (0, 2, 1)),
    "explorers.plot_broadcast": lambda m: m.plot_broadcast((4, 1), (3,)),
    "modules_view.plot_module_counts": lambda m: m.plot_module_counts(
        nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))),
    "digits.plot_digit_grid": lambda m: m.plot_digit_grid(np.random.default_rng(0).random((6, 8, 8)),
                                                          [1, 2, 3, 4, 5, 6]),
    "digits._draw_batch": lambda m: m._batch_figure(   # the figure _draw_batch renders as PNG for the batch pager
        (torch.rand(6, 1, 8, 8), torch.arange(6)), 8, "epoch 1, batch 0"),
    "workers.plot_worker_timings": lambda m: m.plot_worker_timings(
        {("in memory", 0): 0.02, ("in memory", 2): 0.3, ("decoding", 0): 0.7, ("decoding", 2): 0.5}),
    "spirals.plot_decision_boundary": lambda m: m.plot_decision_boundary(
        _spiral_model(), torch.randn(20, 2), torch.randint(0, 2, (20,)), resolution=20),
    "spirals.plot_history": lambda m: m.plot_history(_history()),
    "spirals.plot_saliency": lambda m: m.plot_saliency(
        _spiral_model(), torch.randn(20, 2), torch.randint(0, 2, (20,)), torch.randn(20, 2), resolution=20),
    "checkpoints.plot_val_curves": lambda m: m.plot_val_curves(
        {"a": _history(), "b": _history()}, resume_epoch=3, zoom=(2, 4)),
    "repro.plot_seed_spread": lambda m: m.plot_seed_spread({"recipe": {0: 0.9, 1: 0.8, 2: 0.85}}),
    "repro.plot_random_tape": lambda m: m.plot_random_tape({"run": m.random_tape(4, decoupled=True)}),
    "amp.plot_format_ranges": lambda m: m.plot_format_ranges(_ax()),
    "amp.plot_gradient_magnitudes": lambda m: m.plot_gradient_magnitudes(torch.randn(200) * 1e-6, 2.0 ** 16, _ax()),
    "amp.plot_scale_history": lambda m: m.plot_scale_history(*m.scale_history(6, {3}), _ax(), init_scale=2.0 ** 10),
    "debugging.plot_loss_curves": lambda m: m.plot_loss_curves({"lr 0.1": [2.0, 1.5, 1.0]}, title="a title"),
}
DRAWING_HELPER = re.compile(r"^(plot_\w+|_draw_\w+)$")


def _figure_of(result) -> Figure:
    if isinstance(result, Figure):
        return result
    for candidate in (result, *(result if isinstance(result, (list, tuple, np.ndarray)) else [])):
        if hasattr(candidate, "figure") and isinstance(candidate.figure, Figure):
            return candidate.figure
    return plt.gcf()


def helper_problems(name: str) -> list[str]:
    module_name, _ = name.split(".")
    module = importlib.import_module(f"autograder.kernel.lessons.{module_name}")
    plt.close("all")
    try:
        return figure_problems(_figure_of(HELPERS[name](module)))
    finally:
        plt.close("all")


def drawing_helpers() -> set[str]:
    found = set()
    for path in sorted(KERNEL.glob("*.py")):
        tree = ast.parse(path.read_text())
        found |= {f"{path.stem}.{node.name}" for node in tree.body
                  if isinstance(node, ast.FunctionDef) and DRAWING_HELPER.match(node.name)}
    return found


def test_audit_flags_what_is_missing():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    assert figure_problems(fig) == ["no title", "axes: no x label or y label"]
    ax.set(title="loss per epoch", xlabel="epoch", ylabel="loss")
    assert figure_problems(fig) == []
    fig, (image, bars) = plt.subplots(1, 2)
    image.imshow(np.eye(3))
    image.axis("off")                                        # an image needs no axis labels
    bars.barh([0, 1], [3, 4])
    bars.set_yticks([0, 1], ["Linear", "ReLU"])              # category names label their axis
    assert figure_problems(fig) == ["no figure title (suptitle) and panel(s) [1, 2] of 2 have none",
                                    "panel 2: no x label"]
    fig.suptitle("two panels")
    bars.set_xlabel("elements")
    assert figure_problems(fig) == []
    plt.close("all")


def test_every_drawing_helper_is_audited():
    missing = drawing_helpers() - set(HELPERS)
    assert not missing, (f"add these figure-drawing helpers to HELPERS in tests/course/test_figures.py (a call on "
                         f"small inputs) so their figures are checked for a title and axis labels: {sorted(missing)}")


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_helper_figures_have_labelled_axes(name):
    """Axis labels are the helper's job; a title may come from the caller (checked in the lessons' cells)."""
    if name.split(".")[0] not in {p.stem for p in KERNEL.glob("*.py")}:
        pytest.skip(f"autograder/kernel/lessons/{name.split('.')[0]}.py is not there")
    problems = [p for p in helper_problems(name) if "title" not in p]
    assert not problems, (f"autograder/kernel/lessons/{name.replace('.', '.py: ')}() draws axes a reader cannot read "
                          f"on their own: {problems}")


# ---------------------------------------------------------------- the lessons' own cells

DRAWS = re.compile(r"\b(plt|ax\w*|axes(\[[^\]]*\])+|\w+_ax)\.(plot|scatter|imshow|matshow|bar|barh|hist|hist2d|"
                   r"fill_between|errorbar|step|stem|pcolormesh|contourf?|boxplot|violinplot|pie|semilogy|loglog)\(")
TITLE = re.compile(r"set_title\(|plt\.title\(|suptitle\(|\btitle\s*=")
XLABEL = re.compile(r"set_xlabel\(|plt\.xlabel\(|\bxlabel\s*=")
YLABEL = re.compile(r"set_ylabel\(|plt\.ylabel\(|\bylabel\s*=")


def _untitled_helpers() -> set[str]:
    """Helpers (function names) whose figure has no title unless the caller gives one (``title=`` or a title call)."""
    return {name.split(".")[1] for name in HELPERS
            if name.split(".")[0] in {p.stem for p in KERNEL.glob("*.py")}
            and any("title" in problem for problem in helper_problems(name))}


def lesson_figure_problems(nb, untitled: set[str]) -> list[str]:
    problems = []
    cells = nb.cells
    for index, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        code = "\n".join(line.split("#", 1)[0] for line in cell.source.splitlines())
        label = f"cell {index} (id {cell.get('id')})"
        draws = bool(DRAWS.search(code))
        if draws:
            missing = [what for what, pattern in (("title", TITLE), ("x label", XLABEL), ("y label", YLABEL))
                       if not pattern.search(code)]
            if missing:
                problems.append(f"{label} draws with matplotlib but sets no {', no '.join(missing)}")
        for helper in sorted(untitled):
            for call in re.finditer(rf"\b{helper}\(", code):
                args = code[call.end():]
                depth, end = 1, 0
                for end, char in enumerate(args):  # noqa: B007  (end is read after the loop)
                    depth += {"(": 1, ")": -1}.get(char, 0)
                    if depth == 0:
                        break
                if not re.search(r"\btitle\s*=", args[:end]) and not TITLE.search(code):
                    problems.append(f"{label} calls {helper}() and gives its figure no title "
                                    "(pass title=..., or set_title / suptitle in the cell)")
        shows = draws or any(re.search(rf"\b{h.split('.')[1]}\(", code) for h in HELPERS) or any(
            "image/png" in out.get("data", {}) for out in cell.get("outputs", []))
        neighbours = [cells[i].cell_type for i in (index - 1, index + 1) if 0 <= i < len(cells)]
        if shows and "markdown" not in neighbours:
            problems.append(f"{label} shows a figure with no markdown right before or after it to say what to notice")
    return problems


@pytest.fixture(scope="module")
def untitled():
    return _untitled_helpers()


@pytest.mark.parametrize("lesson", course.lessons())
def test_lesson_figures_are_titled_labelled_and_explained(lesson, untitled):
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    problems = lesson_figure_problems(nb, untitled)
    assert not problems, f"{lesson}:\n  - " + "\n  - ".join(problems)
