"""The whole GPU run and its command line (``python -m autograder.gpu_runner``): the machine described, the
run prepared, a runner chosen, each lesson run while the budget lasts, then the CUDA assertions and the
summary table; the exit status. Standard library only."""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from .machine import environment, have, prepare
from .report import is_bad, row, summary
from .runners import CUDA_ASSERTIONS, RUN, choose_runner, no_runner, run_cuda_assertions
from .settings import MIN_LEFT_S, ROOT, Budget, Run, Settings, find_lessons

NO_RUNNER = "(no notebook runner)"


def run_lessons(run: Run, runner: str, lessons: list[tuple[str, Path]]) -> list[dict]:
    """Each lesson with ``runner`` while the budget lasts, then the CUDA assertions; one row each."""
    rows = []
    for name, path in lessons:
        if run.budget.left() < MIN_LEFT_S:
            rows.append(row(name, status="NOT RUN (time budget)"))
            continue
        print(f"\n== {name} ({runner}) ==", flush=True)
        began = time.monotonic()
        result = RUN[runner](run, name, path)
        result["seconds"] = time.monotonic() - began
        for note in result["notes"]:
            print("  ", note)
        rows.append(result)
    if run.budget.left() < MIN_LEFT_S:
        rows.append(row(CUDA_ASSERTIONS, status="NOT RUN (time budget)"))
        return rows
    print("\n== lesson 08: CUDA assertions ==", flush=True)
    result = run_cuda_assertions(run)
    if result is not None:
        rows.append(result)
    return rows


def run_all(settings: Settings, work: Path, budget: Budget, available=have) -> int:
    """The whole run (``available`` says which modules import, after the offline wheels); the exit status."""
    print("== GPU test: environment ==")
    cuda = environment()
    prepare(settings, work)
    runner = choose_runner(settings.runner, available)
    print("runner  ", runner or "none", "| budget", f"{settings.budget_s:.0f} s", "| CUDA-only cells",
          "run" if cuda else "skipped (GPU_TEST_ALLOW_CPU=1)" if settings.allow_cpu else "-")
    if not cuda and not settings.allow_cpu:
        print("\ngpu-test: CUDA is not available, so nothing that needs it can be checked. This runner is for "
              "a CUDA machine (set GPU_TEST_ALLOW_CPU=1 for a dry run without one).")
        rows = [row("(no CUDA)", status="FAIL", notes=["torch.cuda.is_available() is False"])]
    elif runner is None:
        why = no_runner(settings.runner, available)
        print(f"\ngpu-test: {why}")
        rows = [row(NO_RUNNER, status="FAIL", notes=[why])]
    else:
        rows = run_lessons(Run(work, budget, cuda), runner, find_lessons(settings.solutions, settings.lessons))
    print("\n" + "\n".join(summary(rows, runner or "none", budget.elapsed())))
    return 1 if any(is_bad(r) for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    from autograder import gpu_runner

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(gpu_runner.__doc__)
        return 0
    if argv:
        print("usage: python -m autograder.gpu_runner   (settings: GPU_TEST_* environment variables, see --help)",
              file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env(os.environ)
    except ValueError as exc:
        print(f"gpu-test: {exc}", file=sys.stderr)
        return 2
    budget = Budget(settings.budget_s)
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="gpu-test.") as work:
        return run_all(settings, Path(work), budget)
