"""The instructor's grading command: a whole class, in parallel, each submission on its own.

The stages, each a module: :mod:`.planning` (the course, its settings, the submissions, the folders),
:mod:`.engine` (the worker pool; each worker grades one submission in :mod:`.worker`: collect, rebuild,
run, judge, stage), :mod:`.recording` (nbgrader records the executed notebooks in batches while the
rest run) and :mod:`.reporting` (scores, ``grades.csv``, ``grading-report.json``). ``docs/grading.md``
maps a submission's route through them.
"""
from __future__ import annotations

import time
from pathlib import Path

from autograder.grading.messages import NotebookResult
from autograder.grading.plan.planning import UsageError, plan
from autograder.grading.report.reporting import Progress, report, score
from autograder.grading.run.engine import Engine


def grade(course: Path, overrides: dict | None = None) -> tuple[int, list[NotebookResult]]:
    """Grade the selected submissions of ``course`` (``overrides``: the command line's settings); return
    (exit code, results). Raises :class:`UsageError` for bad arguments."""
    started = time.monotonic()
    progress = Progress(0)
    run = plan(course, overrides, progress)
    progress.total = sum(len(run.layout[a]["notebooks"]) for _, a in run.tasks)
    engine = Engine(run, progress)
    try:
        failed = engine.run()
    finally:
        engine.close()
    score(run, engine.results, failed, progress)
    return report(run, engine.results, engine.references, time.monotonic() - started, progress), engine.results


__all__ = ["UsageError", "grade"]
