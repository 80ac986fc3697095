"""Is a matplotlib figure accessible: a title, and every axis labelled? Shared by test_figures, test_browser and
lesson_outputs, with what the last two share: the lessons the browser walks and a widget's text repr.

A figure passes when it has a title (``fig.suptitle`` or a title on every panel) and every visible
axes has both axes labelled. An axis counts as labelled when it has a label, when it shows no tick
labels at all, or when its tick labels are words (categories such as module names); image panels
with their axis turned off and colorbars need nothing.

``STARTUP`` is an IPython startup file: in a kernel it records every figure rendered to an image
(the inline backend, ``savefig`` to PNG for an image widget) that fails the audit, as a JSON line
in ``$PTE_FIGURE_AUDIT``, with the notebook (``$JPY_SESSION_NAME``) and the execution count. It first writes
one line saying it is installed (``"installed": true``), so that an audit that never ran cannot pass.
"""
from __future__ import annotations

import re

from autograder.kernel.private_apis import COLORBAR, SUPTITLE, get

# The lessons test_browser.py walks in JupyterLab: together they show every kind of widget the course has (01: the
# dropdowns, HTML and image of the stride explorer; 03: the batch pager's slider, button, label and image, and a
# progress bar; 06: the error gallery's dropdown and Output), figures inline and in image widgets. Every other
# lesson is test_warm_kernels.py's; test_browser.py::test_the_walked_lessons_show_every_widget_kind guards this.
WALKED = ("01_tensors_and_views", "03_data_loading", "06_reading_errors")
# a widget shown as something other than itself: JupyterLab's placeholders, or a widget's text repr
WIDGET_FALLBACK = re.compile(r"Loading widget\.\.\.|Error displaying widget|"
                             r"^(VBox|HBox|Box|Output|IntSlider|FloatSlider|Dropdown|Button|Image|Label)"
                             r"\((children|value|description|layout|options|outputs)=", re.M)
NUMBER = re.compile(r"^[\s−\-+]*[\d.,]+(e[−\-+]?\d+)?\s*%?$|^\$.*\$$|^$", re.I)


def _axis_labelled(ax, which: str) -> bool:
    axis = ax.xaxis if which == "x" else ax.yaxis
    if axis.get_label().get_text().strip() or not axis.get_visible():
        return True
    shown = [t.get_text().strip() for t in axis.get_ticklabels() if t.get_visible()]
    shown = [t for t in shown if t]
    if not shown:
        return True     # no tick labels shown: nothing to explain (an image grid, set_xticks([]))
    return any(not NUMBER.match(t) for t in shown)   # category names (module names, formats) label themselves


def figure_problems(fig) -> list[str]:
    """What a reader misses in ``fig`` (empty when it is accessible)."""
    try:
        fig.draw_without_rendering()   # tick labels exist only after a draw
    except Exception:  # an audit never breaks the figure it looks at
        pass
    axes = [ax for ax in fig.get_axes() if ax.axison and not _is_colorbar(ax)]
    panels = [ax for ax in fig.get_axes() if not _is_colorbar(ax)]
    problems = []
    suptitle = get(SUPTITLE, fig, None).get_text().strip() if get(SUPTITLE, fig, None) else ""
    untitled = [i for i, ax in enumerate(panels) if not _title(ax)]
    if panels and not suptitle and untitled:
        problems.append("no title" if len(panels) == 1 else f"no figure title (suptitle) and panel(s) "
                        f"{[i + 1 for i in untitled]} of {len(panels)} have none")
    for ax in axes:
        where = "axes"
        if len(panels) > 1:
            where = f"panel {panels.index(ax) + 1}" + (f" '{_title(ax)}'" if _title(ax) else "")
        missing = [w for w in ("x", "y") if not _axis_labelled(ax, w)]
        if missing:
            problems.append(f"{where}: no {' or '.join(m + ' label' for m in missing)}")
    return problems


def _title(ax) -> str:
    return " ".join(ax.get_title(loc).strip() for loc in ("left", "center", "right")).strip()


def _is_colorbar(ax) -> bool:
    return get(COLORBAR, ax, None) is not None or ax.get_label() == "<colorbar>"


STARTUP = r'''
# Installed by tests/e2e/test_browser.py for its own JupyterLab: audit every figure a student sees.
def _pte_install_figure_audit():
    import json
    import os
    import sys
    import traceback

    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return
    sys.path.insert(0, {tests!r})
    try:
        from browser_figures import figure_problems
    finally:
        sys.path.pop(0)
    original = FigureCanvasBase.print_figure

    def print_figure(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            problems = figure_problems(self.figure)
            if problems:
                from IPython import get_ipython

                helpers = [f"autograder/kernel/lessons/{{os.path.basename(f.filename)}}:{{f.name}}"
                           for f in traceback.extract_stack()
                           if "autograder" in f.filename and "kernel" in f.filename]
                entry = {{"notebook": os.environ.get("JPY_SESSION_NAME", ""), "pid": os.getpid(),
                         "drawn_by": helpers[-1] if helpers else None,
                         "execution_count": getattr(get_ipython(), "execution_count", None),
                         "titles": [t for t in (ax.get_title() for ax in self.figure.get_axes()) if t],
                         "problems": problems}}
                with open(os.environ["PTE_FIGURE_AUDIT"], "a") as log:
                    log.write(json.dumps(entry) + "\n")
        except Exception:  # the audit never breaks the figure it looks at
            pass
        return result

    if os.environ.get("PTE_FIGURE_AUDIT"):
        FigureCanvasBase.print_figure = print_figure
        with open(os.environ["PTE_FIGURE_AUDIT"], "a") as log:
            log.write(json.dumps({{"installed": True, "notebook": os.environ.get("JPY_SESSION_NAME", ""),
                                  "pid": os.getpid()}}) + "\n")


_pte_install_figure_audit()
del _pte_install_figure_audit
'''
