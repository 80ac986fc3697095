"""A warm kernel is a cold one to the notebook: the same outputs and the same observations, bit for bit, here on
another machine (the emulated CPU with 3 threads), where nbval and the judge pass the cold one against the stored
ones; and the warm run shows every figure and widget of the lessons the browser does not walk whole.

``make test`` runs nbval (on solutions/, and in tests/support/nbvalkit.py) and the pitfall kernels
(tests/course/test_pitfalls.py) on the ``pte-warm`` kernelspec: each kernel is forked from a template that
has already imported torch, matplotlib and ipykernel (autograder/warm). That is sound only if no lesson can
tell. Here every lesson's solution runs twice, as ``make release`` runs it (``PTE_OBSERVE=record``, so the hidden
checks publish their observations), each in copies of the lesson folders of its own, both in one environment:
the other machine of test_cross_cpu.py (``EMULATED_CPU`` and ``ODD_THREADS``). Cold, under nbval in cold kernels
(``python3``); warm, with nbclient in warm kernels, the widget state stored and the figure audit of
tests/support/browser_figures.py installed (tests/support/lesson_outputs.py; the comparison proves that neither
changes an output). Every code cell must print the same
outputs (the cells tagged ``nbval-ignore-output`` print timings and are left out, as nbval leaves them out), images
included, and every test cell must publish the same observations, compared as JSON, so to the last bit of every
float. The cells tagged ``requires-cuda`` that nbval skips without CUDA run on the warm side only (each says
it skips) and are compared with nothing.

The cold run is also test_cross_cpu's claim (so, through the comparison, the warm one too): nbval passes against
the stored outputs (what CI and a student's Validate compare; every cell, the reading's reference figures of
``jitter.REFERENCE_CELLS`` exact), its plugin ``nbval_keep`` (tests/support) shows nbval the outputs without the
observations and has the grading command's judge decide every test cell's observations against the stored
reference (full marks for every solution on the other machine, each label as the reference names it). That the
kernel's own compare mode (plain nbgrader, Validate) passes the solutions under the emulated CPU is
test_autograde.py's (its "wrong" submissions keep the solution's answers in all exercises but two), and under
the rounding jitter with 4 threads test_rounding_jitter.py's.

The warm run of every lesson the browser does not walk (``browser_figures.WALKED``; test_browser.py walks the
others) is also what tests/support/lesson_outputs.py's docstring lists: every cell run, whole figures, widget
views of models the kernel sent and no control, progress bars at their end, every figure titled and labelled.

What differs between any two kernels is made equal first: the kernel's pid in IPython's cell file names,
the copy's folder, a widget's model id, an execution count (a traceback's ``In[3]`` too, which nbval
numbers otherwise), where a stream's text was cut into messages.
"""
from __future__ import annotations

import json
import re

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError
from test_cross_cpu import EMULATED_CPU, ODD_THREADS

from autograder import course, warm
from autograder.kernel.vocabulary import protocol

from browser_figures import WALKED
from lesson_outputs import audit_problems, execute, install_audit, output_problems
from nbvalkit import KEEP_ENV, copy_lessons, finished, nbval_passed, start_nbval

LESSONS = course.lessons()
IGNORE_OUTPUT = "nbval-ignore-output"
WIDGET = "application/vnd.jupyter.widget-view+json"
OTHER_MACHINE = {**EMULATED_CPU, **ODD_THREADS}
KERNELS = {"cold": "python3", "warm": warm.KERNEL_NAME}


def run_warm(root, env: dict[str, str], lesson: str) -> dict:
    """One lesson's warm run (:func:`lesson_outputs.execute`): its cells' outputs as nbval_keep keeps the cold
    side's, the executed notebook, the audit, forked or not."""
    path = root / lesson / f"{lesson}.ipynb"
    try:
        nb, audit, forked = execute(path, env, root / f"{lesson}-figures.jsonl")
    except CellExecutionError as error:
        return {"error": str(error)[-3000:]}
    cells = {cell.get("id"): json.loads(json.dumps(cell.get("outputs", []))) for cell in nb.cells
             if cell.cell_type == "code"}
    return {"forked": forked, "cells": cells, "nb": nb, "audit": audit}


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """side -> (its copy of the lessons, lesson -> its kept outputs): nbval's cold run (passed) and the warm one,
    both at once."""
    root = tmp_path_factory.mktemp("warm-and-cold")
    env = {**OTHER_MACHINE, "PTE_OBSERVE": "record"}
    cold = start_nbval(copy_lessons(root / "cold"), {**env, KEEP_ENV: str(root / "cold.json")}, "nbval_keep",
                       kernel=KERNELS["cold"])
    try:
        env.update(install_audit(root))
        copy_lessons(root / "warm")
        hot = {lesson: run_warm(root / "warm", env, lesson) for lesson in LESSONS}
    finally:
        done = finished(cold)
    nbval_passed(done, f"the emulated CPU and 3 threads, cold kernels ({KERNELS['cold']})")
    return {"cold": (root / "cold", json.loads((root / "cold.json").read_text())), "warm": (root / "warm", hot)}


def coalesced(outputs: list[dict]) -> list[dict]:
    """Consecutive writes to one stream as one output: where the kernel cut them depends on timing."""
    joined: list[dict] = []
    for output in outputs:
        last = joined[-1] if joined else None
        if last and output.get("output_type") == last.get("output_type") == "stream" and \
                output.get("name") == last.get("name"):
            last["text"] += output.get("text", "")
        else:
            joined.append(dict(output))
    return joined


def cell_tags(lesson: str) -> dict[str, list[str]]:
    cells = nbformat.read(course.solution_path(lesson), as_version=4).cells
    return {cell.get("id"): protocol.tags(cell) for cell in cells}


def comparable(kept_cells: dict, root, lesson: str) -> dict[str, object]:
    """cell id -> what must match: the outputs without observations, and the observations apart."""
    text = json.dumps(kept_cells, sort_keys=True)
    text = re.sub(r"ipykernel_\d+", "ipykernel_PID", text.replace(str(root), "ROOT"))
    tags = cell_tags(lesson)
    found = {}
    for cell_id, outputs in json.loads(text).items():
        for output in outputs:
            output.get("data", {}).get(WIDGET, {}).pop("model_id", None)
            output.pop("execution_count", None)
            if output.get("output_type") == "error":   # the execution count in "Cell In[3], line 1"
                output["traceback"] = [re.sub(r"In\[\d+\]", "In[N]", line) for line in output["traceback"]]
        shown = coalesced(protocol.without_observations(outputs))
        found[cell_id] = {
            "outputs": None if IGNORE_OUTPUT in tags.get(cell_id, []) else shown,
            "observations": [output for output in outputs if protocol.is_observation(output)],
        }
    return found


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_warm_kernel_runs_the_solution_as_a_cold_one(kept, lesson):
    (cold_root, cold), (warm_root, hot) = kept["cold"], kept["warm"]
    assert "error" not in hot[lesson], f"{lesson}: the warm run stopped at an error:\n{hot[lesson].get('error')}"
    assert hot[lesson]["forked"] and cold[lesson]["forked"] is False, \
        f"{lesson}: the pte-warm kernel started cold, or the python3 one warm (the kernel's log says why)"
    cold_cells = comparable(cold[lesson]["cells"], cold_root, lesson)
    skipped = {cell_id for cell_id, tags in cell_tags(lesson).items() if protocol.REQUIRES_CUDA in tags}
    skipped -= set(cold_cells)   # nbval skips them without CUDA
    warm_cells = comparable({cell_id: outputs for cell_id, outputs in hot[lesson]["cells"].items()
                             if cell_id not in skipped}, warm_root, lesson)
    assert list(cold_cells) == list(warm_cells)
    observed = sum(len(cell["observations"]) for cell in cold_cells.values())
    assert observed > 0, f"{lesson}: no observation was recorded: PTE_OBSERVE=record did not reach the kernel"
    differ = [cell_id for cell_id in cold_cells if cold_cells[cell_id] != warm_cells[cell_id]]
    first = differ[0] if differ else None
    assert not differ, (f"{lesson}: warm and cold kernels differ in cells {differ}; the first:\n"
                        f"cold {json.dumps(cold_cells[first])[:1500]}\nwarm {json.dumps(warm_cells[first])[:1500]}")


@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if lesson not in WALKED])
def test_the_kernel_sends_whole_figures_and_widgets(kept, lesson):
    run = kept["warm"][1][lesson]
    assert "error" not in run, f"{lesson}: the warm run stopped at an error:\n{run.get('error')}"
    problems = output_problems(run["nb"]) + audit_problems(run["nb"], run["audit"])
    assert not problems, f"{lesson}: {len(problems)} problem(s):\n  - " + "\n  - ".join(problems)
