"""nbval over copies of the solutions, in a process of its own: what the cross-CPU and jitter tests share."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from autograder import course, warm

LESSONS = course.lessons()
KEEP_ENV = "PTE_NBVAL_KEEP"   # where the nbval_keep plugin writes every cell's outputs


def copy_lessons(target):
    """The solutions with their reference files, in a folder of their own (the lessons write files as they run)."""
    for lesson in LESSONS:
        shutil.copytree(course.REPO_ROOT / "solutions" / lesson, target / lesson)
    return target


def start_nbval(root, env: dict[str, str], *plugins: str, kernel: str = warm.KERNEL_NAME) -> subprocess.Popen:
    """nbval on every lesson under ``root`` with the repository's own settings, in a process of its own (started:
    :func:`finished` waits for it). Warm kernels unless ``kernel`` names another, as make test's own nbval run
    (tests/e2e/test_warm_kernels.py proves them the same)."""
    env = dict(os.environ, **env)
    # -p conftest (tests/conftest.py) skips the CUDA-only cells as `make test` does
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(course.REPO_ROOT / "tests"),
                                                      str(course.REPO_ROOT / "tests" / "support"),
                                                      env.get("PYTHONPATH")]))
    options = [item for plugin in ("conftest", *plugins) for item in ("-p", plugin)]
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:xdist", *options, "-q",
                             "--nbval-kernel-name", kernel,
                             "--rootdir", str(course.REPO_ROOT), "-c", str(course.REPO_ROOT / "pyproject.toml"),
                             str(root)], cwd=course.REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finished(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    """Wait for an nbval run of :func:`start_nbval` (killed after 25 minutes)."""
    try:
        out, err = proc.communicate(timeout=1500)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_nbval(root, env: dict[str, str], *plugins: str, kernel: str = warm.KERNEL_NAME) -> subprocess.CompletedProcess:
    """:func:`start_nbval`, waited for."""
    return finished(start_nbval(root, env, *plugins, kernel=kernel))


def nbval_passed(proc: subprocess.CompletedProcess, mode: str) -> int:
    """How many cells nbval compared; fails the test when nbval failed or compared too few."""
    assert proc.returncode == 0, f"nbval fails with {mode}:\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}"
    ran = re.search(r"(\d+) passed", proc.stdout)
    assert ran and int(ran.group(1)) > 20 * len(LESSONS), f"nbval compared too few cells:\n{proc.stdout[-2000:]}"
    return int(ran.group(1))
