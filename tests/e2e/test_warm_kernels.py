"""A warm kernel is a cold one to the notebook: the same outputs and the same observations, bit for bit.

``make test`` runs nbval (on solutions/, and in tests/support/nbvalkit.py) and the pitfall kernels
(tests/course/test_pitfalls.py) on the ``pte-warm`` kernelspec: each kernel is forked from a template that
has already imported torch, matplotlib and ipykernel (autograder/warm). That is sound only if no lesson can
tell. Here every lesson's solution runs twice, as ``make release`` runs it (``PTE_OBSERVE=record``, so the
hidden checks publish their observations): once in a cold kernel (``python3``) and once in a warm one, each in
a copy of the lesson folder of its own. Every code cell must print the same outputs (the cells tagged
``nbval-ignore-output`` print timings and are left out, as nbval leaves them out), and every test cell must
record the same observations, compared as JSON, so to the last bit of every float.

What differs between any two kernels is made equal first: the kernel's pid in IPython's cell file names,
the copy's folder, a widget's model id, where a stream's text was cut into messages.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import course, warm
from autograder.kernel.vocabulary import protocol
from autograder.warm.pool import ForkedProcess

LESSONS = course.lessons()
IGNORE_OUTPUT = "nbval-ignore-output"
WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(folder: Path, lesson: str, kernel_name: str) -> tuple[nbformat.NotebookNode, bool]:
    """Run a copy of the lesson's solution: the executed notebook, and whether its kernel was forked."""
    shutil.copytree(course.solution_path(lesson).parent, folder)
    nb = nbformat.read(folder / f"{lesson}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name=kernel_name, record_timing=False,
                            resources={"metadata": {"path": str(folder)}})
    forked = []

    def started(notebook):   # nbclient's hook, once the kernel is up: what started it
        forked.append(isinstance(client.km.provisioner.process, ForkedProcess))

    client.on_notebook_start = started
    client.execute(env=dict(os.environ, PTE_OBSERVE="record"))
    return nb, forked == [True]


def coalesced(outputs: list[dict]) -> list[dict]:
    """Consecutive writes to one stream as one output: where the kernel cut them depends on timing (nbval
    joins them the same way)."""
    joined: list[dict] = []
    for output in outputs:
        last = joined[-1] if joined else None
        if last and output.get("output_type") == last.get("output_type") == "stream" and \
                output.get("name") == last.get("name"):
            last["text"] += output.get("text", "")
        else:
            joined.append(dict(output))
    return joined


def comparable(nb, folder: Path) -> dict[str, object]:
    """cell id -> what must match: the outputs without observations, and the observations apart."""
    text = json.dumps([cell.get("outputs", []) for cell in nb.cells if cell.cell_type == "code"])
    text = re.sub(r"ipykernel_\d+", "ipykernel_PID", text.replace(str(folder), "LESSON"))
    found = {}
    for cell, outputs in zip([c for c in nb.cells if c.cell_type == "code"], json.loads(text)):
        for output in outputs:
            output.get("data", {}).get(WIDGET, {}).pop("model_id", None)
            output.pop("execution_count", None)
        shown = coalesced(protocol.without_observations(outputs))
        found[cell.get("id")] = {
            "outputs": None if IGNORE_OUTPUT in protocol.tags(cell) else shown,
            "observations": protocol.observations_in(outputs),
        }
    return found


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_warm_kernel_runs_the_solution_as_a_cold_one(tmp_path, lesson):
    cold, forked_cold = execute(tmp_path / "cold", lesson, "python3")
    hot, forked = execute(tmp_path / "warm", lesson, warm.KERNEL_NAME)
    assert forked and not forked_cold, f"{lesson}: the pte-warm kernel started cold (its log says why)"
    cold_cells, warm_cells = comparable(cold, tmp_path / "cold"), comparable(hot, tmp_path / "warm")
    assert list(cold_cells) == list(warm_cells)
    observed = sum(len(cell["observations"]) for cell in cold_cells.values())
    assert observed > 0, f"{lesson}: no observation was recorded: PTE_OBSERVE=record did not reach the kernel"
    differ = [cell_id for cell_id in cold_cells if cold_cells[cell_id] != warm_cells[cell_id]]
    first = differ[0] if differ else None
    assert not differ, (f"{lesson}: warm and cold kernels differ in cells {differ}; the first:\n"
                        f"cold {json.dumps(cold_cells[first])[:1500]}\nwarm {json.dumps(warm_cells[first])[:1500]}")
