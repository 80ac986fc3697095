"""Lesson 03 with worker processes started by `spawn`, as on Windows (its only start method) and macOS.

A ``sitecustomize`` module on ``PYTHONPATH`` makes every Python process these tests start
(the notebook kernel, nbgrader, the DataLoader workers) behave like Windows: `spawn` is the
start method and `fork` and `forkserver` do not exist. Under it, lesson 03 must run top to
bottom and every test cell must pass, the hidden ones compared with the reference in the
kernel exactly as plain `nbgrader autograde` compares them (``PTE_OBSERVE=compare``), so the
solution would get full marks from nbgrader under spawn too.
"""
from __future__ import annotations

import os
import textwrap

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import course

import coursekit as kit

LESSON = "03_data_loading"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(LESSON not in course.lessons(), reason=f"{LESSON} is not among the lessons")]

SITECUSTOMIZE = textwrap.dedent('''\
    """Make this process (and its children) start processes the way Windows does: spawn only."""
    import multiprocessing
    import multiprocessing.context

    from autograder.grading.private_apis import CONCRETE_CONTEXTS, DEFAULT_CONTEXT, get

    for _name in ("fork", "forkserver"):
        get(CONCRETE_CONTEXTS).pop(_name, None)
    multiprocessing.get_all_start_methods = get(DEFAULT_CONTEXT).get_all_start_methods = (
        lambda: ["spawn"])
    multiprocessing.set_start_method("spawn", force=True)
''')
REPORT = "import multiprocessing\nprint(multiprocessing.get_start_method(), multiprocessing.get_all_start_methods())"


@pytest.fixture(scope="module")
def spawn_only(tmp_path_factory):
    """Environment variables under which every new Python process has only `spawn`."""
    folder = tmp_path_factory.mktemp("spawn-only")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "MPLBACKEND": "agg"}


def test_solution_runs_and_passes_every_check_under_spawn(spawn_only):
    path = course.solution_path(LESSON)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(REPORT))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True, record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=dict(os.environ, PTE_OBSERVE="compare", **spawn_only))
    failed = {cell.get("id"): [f"{o.ename}: {o.evalue}"[:300] for o in cell.outputs if o.output_type == "error"]
              for cell in nb.cells if cell.cell_type == "code"
              and any(o.output_type == "error" for o in cell.outputs)}
    assert not failed, f"{LESSON} fails under spawn: {failed}"
    assert kit.output_text(nb, nb.cells[-1].id).strip() == "spawn ['spawn']", "the kernel did not run spawn-only"
    for name in kit.exercises(nb):
        assert "All checks passed" in kit.output_text(nb, f"test_{name}"), name
