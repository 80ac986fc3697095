"""What a student sees of the lessons the browser does not walk, checked in a kernel: figures and widgets.

tests/e2e/test_browser.py walks in JupyterLab only the lessons whose widgets, together, are every kind of
widget the course shows (``browser_figures.WALKED``; test_browser.py::test_the_walked_lessons_show_every_widget_kind
fails when a lesson brings a kind they lack), and works every control there. How JupyterLab draws a kind of
widget, or a figure, is the same in every lesson; what is each lesson's own is what its kernel sends.
tests/e2e/test_warm_kernels.py runs every solution once in a warm kernel (``pte-warm``) with nbclient
(:func:`execute`: the widget state stored, the figure audit of tests/support/browser_figures.py installed as in
test_browser.py's JupyterLab) and proves its outputs a cold kernel's; for every lesson but the walked ones the
executed notebook must also show (:func:`output_problems`, :func:`audit_problems`):

1. every code cell run, and no error outside the cells tagged ``raises-exception`` (nbclient stops at one);
2. every figure as a PNG image of more than one colour, never only its text ``<Figure size ... with N Axes>``;
3. every widget as a widget view whose model the kernel sent (not a widget's text repr, nor a view of a model
   it never sent); no control at all (a lesson with one must be walked in the browser, where its controls are
   worked: WALKED says so);
4. every progress bar at its end: the bar full and its counter ``n/n``;
5. every figure the kernel rendered with a title and labelled axes (the audit).
"""
from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from PIL import Image

from autograder import warm
from autograder.warm.pool import ForkedProcess

from browser_figures import STARTUP, WIDGET_FALLBACK

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"
# what a widget of these lessons may hold: containers, what shows, progress bars; anything else is a control
SHOWN = {"HBoxModel", "VBoxModel", "BoxModel", "LabelModel", "HTMLModel", "ImageModel", "OutputModel",
         "IntProgressModel", "FloatProgressModel"}


def install_audit(home: Path) -> dict[str, str]:
    """The figure audit as an IPython startup file under ``home``: the environment that installs it in a kernel
    (each notebook also needs ``JPY_SESSION_NAME`` and its own ``PTE_FIGURE_AUDIT`` file)."""
    startup = home / "ipython" / "profile_default" / "startup" / "50-pte-figure-audit.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STARTUP.format(tests=str(Path(__file__).parent)))
    return {"IPYTHONDIR": str(home / "ipython")}


def execute(path: Path, env: dict[str, str], audit: Path) -> tuple[nbformat.NotebookNode, list[dict], bool]:
    """Run the notebook at ``path`` (in its folder) in a warm kernel with ``env`` (:func:`install_audit`'s
    included) and the widget state stored: the executed notebook, the audit's entries, and whether the kernel
    was forked from a warm template. nbclient raises ``CellExecutionError`` at an error outside
    ``raises-exception`` cells."""
    nb = nbformat.read(path, as_version=4)
    forked: list[bool] = []

    def started(cell, cell_index):
        if not forked:
            forked.append(isinstance(client.km.provisioner.process, ForkedProcess))

    client = NotebookClient(nb, timeout=600, kernel_name=warm.KERNEL_NAME, store_widget_state=True,
                            on_cell_execute=started, resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=dict(os.environ, **env, PTE_FIGURE_AUDIT=str(audit), JPY_SESSION_NAME=str(path)))
    entries = [json.loads(line) for line in audit.read_text().splitlines()] if audit.is_file() else []
    return nb, entries, bool(forked and forked[0])


def colours(png: str) -> int:
    """How many colours the base64 PNG has (2 stands for 'more than one')."""
    import base64

    picture = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGBA")
    return 1 if picture.getcolors(1) is not None else 2


def widget_problems(where: str, model_id: str, state: dict) -> list[str]:
    """A widget view's model tree: sent by the kernel, no control in it, its progress bars at the end."""
    model = state.get(model_id)
    if model is None:
        return [f"{where}: a widget view of model {model_id}, which the kernel never sent (it renders as an error)"]
    problems, name, values = [], model["model_name"], model["state"]
    if name not in SHOWN:
        problems.append(f"{where}: a control ({name}): walk this lesson in the browser (browser_figures.WALKED), "
                        "where its controls are worked")
    children = [c.removeprefix("IPY_MODEL_") for c in values.get("children", [])]
    bars = [state.get(c, {}) for c in children if state.get(c, {}).get("model_name", "").endswith("ProgressModel")]
    labels = [state.get(c, {}).get("state", {}).get("value", "") for c in children
              if state.get(c, {}).get("model_name") == "LabelModel"]
    for bar in bars:
        count = re.search(r"(\d+)/(\d+)", " ".join(labels))
        if bar["state"].get("value") != bar["state"].get("max") or not count or count[1] != count[2]:
            problems.append(f"{where}: its progress bar did not reach the end: {bar['state'].get('value')} of "
                            f"{bar['state'].get('max')}, {labels}")
    for child in children:
        problems += widget_problems(where, child, state)
    return problems


def output_problems(nb) -> list[str]:
    """1-4 of the module docstring, in the executed notebook."""
    state = nb.metadata.get("widgets", {}).get(STATE_MIME, {}).get("state", {})
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"cell {index} (id {cell.get('id')})"
        if cell.get("execution_count") is None:
            problems.append(f"{where} did not run")
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = out.get("text", "") + str(data.get("text/plain", ""))
            if "image/png" in data and colours(data["image/png"]) < 2:
                problems.append(f"{where}: a figure of one colour (blank)")
            if re.match(r"<Figure size .* with \d+ Axes>", text) and "image/png" not in data:
                problems.append(f"{where} shows a figure as text, not an image: {text[:60]}")
            if WIDGET_FALLBACK.search(text) and WIDGET_MIME not in data:
                problems.append(f"{where} shows a widget's text repr, not the widget: {text[:80]!r}")
            if WIDGET_MIME in data:
                problems += widget_problems(where, data[WIDGET_MIME]["model_id"], state)
    return problems


def audit_problems(nb, audit: list[dict]) -> list[str]:
    """5 of the module docstring: the audit was installed, and every figure it saw passed."""
    problems = []
    if not any(entry.get("installed") for entry in audit):
        problems.append("the figure audit was not installed in the kernel: no figure was audited")
    by_count = {cell.get("execution_count"): i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"}
    for entry in (entry for entry in audit if not entry.get("installed")):
        where = by_count.get(entry["execution_count"])
        problems.append(f"a figure drawn by {entry.get('drawn_by') or 'the cell'} in cell {where} "
                        f"({', '.join(map(repr, entry['titles'][:2])) or 'untitled'}): {'; '.join(entry['problems'])}")
    return problems
