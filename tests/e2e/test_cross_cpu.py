"""The same figures and the same grades on another CPU, proved on this one by emulating it.

Another x86-64 CPU runs other vector code, and so rounds differently (``torch.randn`` already
differs in its last bits). Here every solution is executed again with the vector code of an
older CPU: torch's dispatch forced to its portable code (``ATEN_CPU_CAPABILITY=default``), MKL
held to SSE4.2 and oneDNN to SSE4.1. Then:

- nbval passes against the stored outputs (what CI and a student's Validate compare);
- the judge (``autograder/grading/judge.py``, as the grading command uses it) accepts the
  emulated run's observations against the stored reference, test cell by test cell, and the
  stored observations against the emulated run's, so a release recorded on either CPU grades
  the other's solution with full marks.

Thread count is the other thing a student's laptop changes (nbgrader_config.py pins one
thread for grading, a laptop's JupyterLab uses them all): nbval also passes with 4 threads and with 3.
The round trip (test_autograde.py) grades a whole course under the emulated CPU with both
graders.

Emulating CPUs one by one cannot prove "any CPU": no machine here runs AVX-512 code, and the emulated
mode itself takes other MKL paths on Intel than on AMD. test_rounding_jitter.py tests the property
itself, with nbval under a deterministic rounding jitter (the same ``run_nbval`` as here).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from autograder import course
from autograder.grading import judge

from nbvalkit import copy_lessons, nbval_passed, run_nbval

LESSONS = course.lessons()
EMULATED_CPU = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}
# a laptop's thread count; passive waiting keeps 4 threads on a busy 2-core machine from spinning (it changes
# no result, only how idle threads wait)
LAPTOP_THREADS = {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4", "OMP_WAIT_POLICY": "PASSIVE"}
ODD_THREADS = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "OMP_WAIT_POLICY": "PASSIVE"}
MODES = {"emulated-cpu": EMULATED_CPU, "laptop-threads": LAPTOP_THREADS, "three-threads": ODD_THREADS}


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """lesson -> the reference observations its solution records under the emulated CPU."""
    root = copy_lessons(tmp_path_factory.mktemp("emulated-cpu"))
    found = {}
    for lesson in LESSONS:
        path = root / lesson / f"{lesson}.ipynb"
        course.execute_in_place(path, lesson=lesson, env=EMULATED_CPU)
        found[lesson] = json.loads((root / lesson / course.REFERENCE_FILE).read_text())["cells"]
    return found


def test_the_emulation_changes_the_vector_code():
    """Without this, every test below could pass on a machine where the settings do nothing."""
    probe = ("import torch; print(torch.backends.cpu.get_cpu_capability()); "
             "torch.manual_seed(0); print(repr(torch.randn(64).sum().item()))")
    native = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            env={k: v for k, v in os.environ.items() if k not in EMULATED_CPU}).stdout.split()
    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                           env=dict(os.environ, **EMULATED_CPU)).stdout.split()
    assert other[0] == "DEFAULT", f"ATEN_CPU_CAPABILITY=default gave {other[0]}"
    if native[0] != "DEFAULT":   # a CPU with vector code: the emulated run must round differently
        assert native[1] != other[1], "torch.randn rounds the same with and without the emulation"


def judge_all(reference: dict[str, list[dict]], observed: dict[str, list[dict]]) -> dict[str, str]:
    """test cell -> why the judge rejects ``observed`` against ``reference`` (empty when it accepts all)."""
    rejected = {}
    for test, entries in reference.items():
        payloads = [{"value": entry["value"]} for entry in observed.get(test, [])]
        verdict = judge.judge_cell(entries, payloads, finished=True)
        if not verdict.passed:
            rejected[test] = verdict.reason
    return rejected


@pytest.mark.parametrize("lesson", LESSONS)
def test_judge_accepts_the_other_cpus_observations(emulated, lesson):
    stored = judge.load_reference(course.REPO_ROOT / "solutions", lesson)
    assert set(emulated[lesson]) == set(stored)
    assert judge_all(stored, emulated[lesson]) == {}, "released here, graded on the other CPU"
    assert judge_all(emulated[lesson], stored) == {}, "released on the other CPU, graded here"


@pytest.mark.parametrize("mode", MODES)
def test_nbval_passes_against_the_stored_outputs(tmp_path, mode):
    """nbval on every solution (hidden checks included, against the stored reference) on the other machine."""
    nbval_passed(run_nbval(copy_lessons(tmp_path), MODES[mode]), mode)
