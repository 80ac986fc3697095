"""What the GPU machine has and what every process of a run sees: the Python, torch, CUDA and GPUs it runs
with, which modules import, the offline wheels of ``.whl/`` installed for the run, and the environment
variables the notebooks' processes inherit. Standard library only at the top (torch is imported to print
its versions)."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from .settings import ROOT, Settings

RUNNER_MODULES = ("pytest", "nbval", "nbclient", "ipykernel")   # what .whl/ is for


def have(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def environment() -> bool:
    """Print Python, torch, CUDA, cuDNN, each GPU and the driver; return whether CUDA is available."""
    import torch

    cuda = torch.cuda.is_available()
    print("python  ", sys.version.split()[0], sys.executable)
    print("torch   ", torch.__version__, "| CUDA (build)", torch.version.cuda,
          "| cuDNN", torch.backends.cudnn.version() if cuda else None)
    if cuda:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            print(f"GPU {i}   ", props.name, f"| {props.total_memory / 2**30:.0f} GiB",
                  f"| compute capability {props.major}.{props.minor}")
    else:
        print("GPU     ", "none: torch.cuda.is_available() is False")
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if smi.returncode == 0:
            print("driver  ", smi.stdout.strip().replace("\n", ", "))
    except (OSError, subprocess.SubprocessError):
        pass
    return cuda


def install_wheels(work: Path, wheels: Path = ROOT / ".whl") -> Path | None:
    """Install ``.whl/*.whl`` offline into ``work/site`` when a runner module is missing; the folder, or None."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found or have(*RUNNER_MODULES):
        return None
    site = work / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--target", str(site), *map(str, found)])
    if done.returncode != 0:
        print(f"wheels   could not install {len(found)} wheel(s) from {wheels} (pip exit {done.returncode})")
        return None
    print(f"wheels   {len(found)} from {wheels}, installed offline for this run")
    return site


def prepare(settings: Settings, work: Path) -> None:
    """What every process of the run sees: the course on the path, unbuffered output, CUDA expected."""
    site = install_wheels(work)
    front = [str(ROOT), str(ROOT / "tests")] + ([str(site)] if site else [])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(front + ([old] if old else []))
    if site:
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
    os.environ["PYTHONUNBUFFERED"] = "1"   # no MPLBACKEND: kernels use the inline backend the figures came from
    if not settings.allow_cpu:
        os.environ["PTE_EXPECT_CUDA"] = "1"   # tests/conftest.py: a requires-cuda cell that did not run fails
