"""A warm kernel is a cold one to the notebook: the same outputs and the same observations, bit for bit, here on
another machine (the emulated CPU with 3 threads), where nbval and the judge pass both against the stored ones.

``make test`` runs nbval (on solutions/, and in tests/support/nbvalkit.py) and the pitfall kernels
(tests/course/test_pitfalls.py) on the ``pte-warm`` kernelspec: each kernel is forked from a template that
has already imported torch, matplotlib and ipykernel (autograder/warm). That is sound only if no lesson can
tell. Here every lesson's solution runs twice under nbval, as ``make release`` runs it (``PTE_OBSERVE=record``, so
the hidden checks publish their observations): once in cold kernels (``python3``) and once in warm ones, each in
copies of the lesson folders of its own, both in one environment: the other machine of test_cross_cpu.py
(``EMULATED_CPU`` and ``ODD_THREADS``). Every code cell must print the same outputs (the cells tagged
``nbval-ignore-output`` print timings and are left out, as nbval leaves them out), images included, and every
test cell must publish the same observations, compared as JSON, so to the last bit of every float.

Each of the two runs is also test_cross_cpu's claim, proven twice over: nbval passes against the stored outputs
(what CI and a student's Validate compare; every cell, the reading's reference figures of
``jitter.REFERENCE_CELLS`` exact), its plugin ``nbval_keep`` (tests/support) shows nbval the outputs without the
observations and has the grading command's judge decide every test cell's observations against the stored
reference (full marks for every solution on the other machine, each label as the reference names it). That the
kernel's own compare mode (plain nbgrader, Validate) passes the solutions under the emulated CPU is
test_autograde.py's (its "wrong" submissions keep the solution's answers in all exercises but two), and under
the rounding jitter with 4 threads test_rounding_jitter.py's.

What differs between any two kernels is made equal first: the kernel's pid in IPython's cell file names,
the copy's folder, a widget's model id, an execution count, where a stream's text was cut into messages.
"""
from __future__ import annotations

import json
import re

import nbformat
import pytest
from test_cross_cpu import EMULATED_CPU, ODD_THREADS

from autograder import course, warm
from autograder.kernel.vocabulary import protocol

from nbvalkit import KEEP_ENV, copy_lessons, finished, nbval_passed, start_nbval

LESSONS = course.lessons()
IGNORE_OUTPUT = "nbval-ignore-output"
WIDGET = "application/vnd.jupyter.widget-view+json"
OTHER_MACHINE = {**EMULATED_CPU, **ODD_THREADS}
KERNELS = {"cold": "python3", "warm": warm.KERNEL_NAME}


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """side -> the kept outputs of nbval's run on that side (both run at once), after each passed."""
    root = tmp_path_factory.mktemp("warm-and-cold")
    runs = {side: start_nbval(copy_lessons(root / side),
                              {**OTHER_MACHINE, "PTE_OBSERVE": "record", KEEP_ENV: str(root / f"{side}.json")},
                              "nbval_keep", kernel=kernel)
            for side, kernel in KERNELS.items()}
    done = {side: finished(proc) for side, proc in runs.items()}
    for side, proc in done.items():
        nbval_passed(proc, f"the emulated CPU and 3 threads, {side} kernels ({KERNELS[side]})")
    return {side: (root / side, json.loads((root / f"{side}.json").read_text())) for side in KERNELS}


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


def comparable(kept_cells: dict, root, lesson: str) -> dict[str, object]:
    """cell id -> what must match: the outputs without observations, and the observations apart."""
    text = json.dumps(kept_cells, sort_keys=True)
    text = re.sub(r"ipykernel_\d+", "ipykernel_PID", text.replace(str(root), "ROOT"))
    tags = {cell.get("id"): protocol.tags(cell)
            for cell in nbformat.read(course.solution_path(lesson), as_version=4).cells}
    found = {}
    for cell_id, outputs in json.loads(text).items():
        for output in outputs:
            output.get("data", {}).get(WIDGET, {}).pop("model_id", None)
            output.pop("execution_count", None)
        shown = coalesced(protocol.without_observations(outputs))
        found[cell_id] = {
            "outputs": None if IGNORE_OUTPUT in tags.get(cell_id, []) else shown,
            "observations": [output for output in outputs if protocol.is_observation(output)],
        }
    return found


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_warm_kernel_runs_the_solution_as_a_cold_one(kept, lesson):
    (cold_root, cold), (warm_root, hot) = kept["cold"], kept["warm"]
    assert hot[lesson]["forked"] and cold[lesson]["forked"] is False, \
        f"{lesson}: the pte-warm kernel started cold, or the python3 one warm (the kernel's log says why)"
    cold_cells = comparable(cold[lesson]["cells"], cold_root, lesson)
    warm_cells = comparable(hot[lesson]["cells"], warm_root, lesson)
    assert list(cold_cells) == list(warm_cells)
    observed = sum(len(cell["observations"]) for cell in cold_cells.values())
    assert observed > 0, f"{lesson}: no observation was recorded: PTE_OBSERVE=record did not reach the kernel"
    differ = [cell_id for cell_id in cold_cells if cold_cells[cell_id] != warm_cells[cell_id]]
    first = differ[0] if differ else None
    assert not differ, (f"{lesson}: warm and cold kernels differ in cells {differ}; the first:\n"
                        f"cold {json.dumps(cold_cells[first])[:1500]}\nwarm {json.dumps(warm_cells[first])[:1500]}")
