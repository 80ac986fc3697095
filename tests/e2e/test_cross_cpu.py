"""The same figures and the same grades on another CPU, proved on this one by emulating it.

Another x86-64 CPU runs other vector code, and so rounds differently (``torch.randn`` already
differs in its last bits). The other machine here is an older CPU's vector code: torch's dispatch forced to its
portable code (``ATEN_CPU_CAPABILITY=default``), MKL held to SSE4.2 and oneDNN to SSE4.1 (``EMULATED_CPU``).

Thread count is the other thing a student's laptop changes (nbgrader_config.py pins one
thread for grading, a laptop's JupyterLab uses them all): the other machine runs 3 threads
(``ODD_THREADS``; another machine changes both at once, so one run proves both), and the rounding jitter 4
(``LAPTOP_THREADS``, test_rounding_jitter.py).

Every solution runs on the other machine in test_warm_kernels.py, twice (cold kernels and warm ones, compared
bit for bit), and each run passes nbval against the stored outputs (what CI and a student's Validate compare;
the reading's reference figures exact) while the grading command's judge passes every hidden check's
observations against the stored reference (tests/support/nbval_keep.py). This file proves that the emulation
changes anything at all.

The round trip (test_autograde.py) grades a whole course under the emulated CPU with both
graders: plain nbgrader compares the hidden checks in the kernel with the stored reference, and the judge
(``autograder/grading/judging/judge.py``) accepts the grading command's own run of each solution under the
emulated CPU against the stored reference, and the other way round.

Emulating CPUs one by one cannot prove "any CPU": no machine here runs AVX-512 code, and the emulated
mode itself takes other MKL paths on Intel than on AMD. test_rounding_jitter.py tests the property
itself, with nbval under a deterministic rounding jitter (the same ``run_nbval``).
"""
from __future__ import annotations

import os
import subprocess
import sys

EMULATED_CPU = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}
# a laptop's thread count for torch; passive waiting keeps 4 threads on a busy 2-core machine from spinning (it
# changes no result, only how idle threads wait). NumPy's OpenBLAS keeps one thread: it would start its pool as
# NumPy loads, and a process with threads cannot be a warm template, so every kernel would start cold. No
# lesson computes with NumPy's BLAS (they use torch, NumPy for seeds and small arrays only).
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}
LAPTOP_THREADS = {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4", "OMP_WAIT_POLICY": "PASSIVE", **ONE_BLAS_THREAD}
ODD_THREADS = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "OMP_WAIT_POLICY": "PASSIVE", **ONE_BLAS_THREAD}


def test_the_emulation_changes_the_vector_code():
    """Without this, every run on the other machine (test_warm_kernels.py, test_autograde.py) could pass on a
    machine where the settings do nothing.

    The native side is this process (no variable of EMULATED_CPU is set here: checked), drawing from a generator of
    its own; the emulated side a process of its own (until issue 47 both were, one torch start-up more)."""
    import torch

    assert not set(EMULATED_CPU) & set(os.environ), "the test process runs with the emulated CPU's settings"
    generator = torch.Generator().manual_seed(0)
    native = [torch.backends.cpu.get_cpu_capability(), repr(torch.randn(64, generator=generator).sum().item())]
    probe = ("import torch; print(torch.backends.cpu.get_cpu_capability()); "
             "torch.manual_seed(0); print(repr(torch.randn(64).sum().item()))")
    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                           env=dict(os.environ, **EMULATED_CPU)).stdout.split()
    assert other[0] == "DEFAULT", f"ATEN_CPU_CAPABILITY=default gave {other[0]}"
    if native[0] != "DEFAULT":   # a CPU with vector code: the emulated run must round differently
        assert native[1] != other[1], "torch.randn rounds the same with and without the emulation"

