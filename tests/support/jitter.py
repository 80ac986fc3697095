"""Rounding jitter: the arithmetic of another CPU, on this one, without emulating any CPU in particular.

Another CPU's vector code rounds some results one unit in the last place (ulp) differently. This module
does that on purpose, in every kernel of a run, so that a printed figure or an observation that depends
on rounding shows itself here instead of on a student's laptop:

- after every optimizer step (a global post-hook), about a quarter of the floating-point parameters move
  by one ulp;
- the results of matrix products (``matmul``, ``mm``, ``bmm``, ``addmm``, ``F.linear``, ``@``) and of
  ``exp``, ``log``, ``softmax`` and ``log_softmax`` move the same way (a ``TorchFunctionMode`` that stays
  entered for the kernel's main thread).

Which elements move, and in which direction, is a function of each value's own bits and of the seed, never
of a random stream: a seeded run still repeats bitwise, a resumed run still equals the uninterrupted one,
and two computations that agree before the jitter still agree after it, as on any real CPU.

A kernel gets it through an IPython start-up file (:func:`write_startup`): point ``IPYTHONDIR`` at the
folder it returns and set ``PTE_JITTER_SEED``.
"""
from __future__ import annotations

import math
from pathlib import Path

from autograder.kernel import private_apis

SEED_ENV = "PTE_JITTER_SEED"
INT_OF = {2: "int16", 4: "int32", 8: "int64"}
_MASK32 = 0xFFFFFFFF


def _mix(bits, seed: int):
    """A 32-bit integer hash of each element of ``bits`` (an int64 tensor, overwritten), salted with ``seed``."""
    h = bits.bitwise_xor_(bits >> 32).bitwise_xor_(seed * 0x27D4EB2D).bitwise_and_(_MASK32)
    for _ in range(2):
        h.bitwise_xor_(h >> 16).mul_(0x45D9F3B).bitwise_and_(_MASK32)
    return h.bitwise_xor_(h >> 16)


def nudge(t, seed: int):
    """``t`` with about a quarter of its finite, nonzero elements moved one ulp up or down (a new tensor).

    It runs with torch-function dispatch off (the jitter's own mode included). A small tensor's cost is the
    number of operations dispatched, and the jitter nudges thousands of them a second: on the CPU the same
    integer arithmetic runs in NumPy (about a microsecond an operation instead of several), from a tensor of
    ``NUMPY_UP_TO`` elements on in torch; both give the same bits (test_rounding_jitter checks it)."""
    import torch

    if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()) or t.is_complex():
        return t
    with torch.no_grad(), private_apis.get(private_apis.DISABLE_TORCH_FUNCTION)():
        values = t.detach().contiguous()
        if values.device.type == "cpu" and values.numel() <= NUMPY_UP_TO and not values.is_neg():
            return _nudge_numpy(values, seed).view(t.shape)
        return _nudge_torch(values, seed).view(t.shape)


NUMPY_UP_TO = 1 << 14
_LOW: dict = {}   # dtype -> the mask of its lowest mantissa bits (see _nudge_torch)
_INF: dict = {}   # dtype -> the bits of +inf: the exponent's, all set in inf and NaN only


def _low_bits(dtype) -> int:
    import torch

    if dtype not in _LOW:
        _LOW[dtype] = (1 << (round(-math.log2(torch.finfo(dtype).eps)) // 3)) - 1
    return _LOW[dtype]


def _nudge_torch(values, seed: int):
    """:func:`nudge` of a contiguous tensor, in torch (in place on its temporaries)."""
    import torch

    ints = values.view(getattr(torch, INT_OF[values.element_size()]))
    wide = ints.to(torch.int64, copy=True)
    # A result whose lowest mantissa bits are all zero is most likely exact (0.25, a sum of small dyadic
    # numbers), and an exact result rounds the same on every CPU: leave it.
    inexact = (wide & _low_bits(values.dtype)) != 0
    h = _mix(wide, seed)
    step = ((h >> 2) & 1).mul_(2).sub_(1).to(ints.dtype)   # bit 2 of the hash: one ulp up or down
    moved = (ints + step).view(values.dtype)
    chosen = ((h & 3) == 0).logical_and_(inexact).logical_and_(torch.isfinite(values))
    chosen.logical_and_(torch.isfinite(moved))
    return torch.where(chosen, moved, values)


def _nudge_numpy(values, seed: int):
    """:func:`nudge` of a contiguous CPU tensor: the arithmetic of :func:`_mix` and :func:`_nudge_torch` in NumPy
    (int64 throughout, as there: the products stay below 2**59), finiteness read from the exponent bits."""
    import numpy as np
    import torch

    dtype = values.dtype
    int_dtype = getattr(torch, INT_OF[values.element_size()])
    if dtype not in _INF:
        _INF[dtype] = int(torch.tensor(float("inf"), dtype=dtype).view(int_dtype).item())
    inf = _INF[dtype]
    ints = values.view(int_dtype).numpy()
    wide = ints.astype(np.int64)
    h = wide ^ (wide >> 32)
    h ^= seed * 0x27D4EB2D
    h &= _MASK32
    for _ in range(2):
        h ^= h >> 16
        h *= 0x45D9F3B
        h &= _MASK32
    h ^= h >> 16
    moved = ints + (((h >> 2) & 1) * 2 - 1).astype(ints.dtype)
    chosen = (h & 3) == 0
    chosen &= (wide & _low_bits(dtype)) != 0
    chosen &= (ints & inf) != inf
    chosen &= (moved & inf) != inf
    return torch.from_numpy(np.where(chosen, moved, ints)).view(dtype)


def _nudge_in_place(t, seed: int) -> None:
    """Replace ``t``'s values by :func:`nudge`'s, keeping its autograd graph and version counter."""
    t.data.copy_(nudge(t, seed))


def install(seed: int) -> None:
    """Jitter every optimizer step and the listed operations of this process, from now on."""
    import torch
    import torch.nn.functional as F
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.overrides import TorchFunctionMode

    def after_step(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for p in group["params"]:
                _nudge_in_place(p, seed)

    register_optimizer_step_post_hook(after_step)
    jittered = {torch.matmul, torch.mm, torch.bmm, torch.addmm, F.linear, torch.Tensor.__matmul__,
                torch.exp, torch.Tensor.exp, torch.log, torch.Tensor.log, torch.softmax, torch.log_softmax,
                F.softmax, F.log_softmax, torch.Tensor.softmax, torch.Tensor.log_softmax}

    class Jitter(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in jittered and "out" not in (kwargs or {}) and isinstance(out, torch.Tensor):
                if out.is_floating_point() and not any(out is a for a in args):
                    _nudge_in_place(out, seed)
            return out

    Jitter().__enter__()  # left entered: every later cell of the kernel runs inside it


STARTUP = """\
def _pte_jitter():
    import importlib.util, os
    spec = importlib.util.spec_from_file_location("_pte_jitter", {path!r})
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install(int(os.environ[{env!r}]))


if {env!r} in __import__("os").environ:
    _pte_jitter()
del _pte_jitter
"""


def write_startup(ipython_dir: Path) -> Path:
    """An IPython folder whose default profile installs the jitter at start-up (when ``PTE_JITTER_SEED`` is set)."""
    startup = Path(ipython_dir) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-pte-jitter.py").write_text(STARTUP.format(path=str(Path(__file__).resolve()), env=SEED_ENV))
    return Path(ipython_dir)


def environment(ipython_dir: Path, seed: int) -> dict[str, str]:
    """The variables a kernel needs to run with the jitter of ``seed``."""
    return {"IPYTHONDIR": str(write_startup(ipython_dir)), SEED_ENV: str(seed)}


# Cells whose output the jitter may move although no CPU measured so far moves it: they print the reading's
# reference figures, which every CPU (AMD AVX2, Intel AVX-512, the emulated default) prints exactly, and which
# the lessons keep. Under the jitter, nbval reports them apart instead of failing.
REFERENCE_CELLS = {
    ("01_tensors_and_views", "code-006"): "loss = 0.5846",
    ("04_training_loop", "code-026"): "the epoch table of the reference spiral run",
    ("04_training_loop", "code-028"): "a fresh model scores 0.481, the loaded one 1.000",
    ("05_checkpointing", "code-033"): "the epoch table of the reference spiral run",
    ("05_checkpointing", "code-035"): "a fresh model scores 0.481, the loaded one 1.000",
    ("05_checkpointing", "code-039"): "the resumed run's epoch table, 0.0120 at epoch 150",
    ("06_reading_errors", "code-021"): "the broadcast MSEs 3.5749 and 5.0210",
    ("06_reading_errors", "code-032"): "the squeezed MSE 5.0210",
    ("07_reproducibility", "code-006"): "0.6037580371 twice and 0.5568858385",
}
# Cells the jitter changes by being there, not by rounding: reported apart too, with the reason.
ARTIFACTS = {
    ("09_debugging_training", "code-042"): "anomaly mode records the innermost Python frame of the forward call, "
                                           "which under the jitter is the jitter's own",
}
