"""One submission, in a grading process of its own: check it, rebuild it, run it, judge it, stage it.

What crosses into a worker is a :class:`~autograder.grading.plan.job.Job` (plain data, the plan's product); what
comes back is one :class:`~autograder.grading.messages.NotebookResult` message per notebook (``to_dict()``, which
the engine reads back with ``NotebookResult.from_dict``). The executed notebooks wait in ``.grading/staged/`` for
nbgrader's recording step (:mod:`autograder.grading.record.recording`). Nothing here raises to the engine: every fault
becomes a status.

The runner (and with it nbclient and jupyter_client) is imported where a notebook runs, not with this module:
the report and ``python -m autograder finish`` read :class:`NotebookResult` without a kernel in sight. The
engine preloads it into the process every worker forks from.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.grading.intake import canonical, collect, predictions
from autograder.grading.judging import judge, outcomes
from autograder.grading.messages import NotebookResult
from autograder.grading.plan.job import Job, expect_references
from autograder.grading.plan.settings import MAX_NOTEBOOK_BYTES, MAX_TIMESTAMP_BYTES, Limits
from autograder.grading.status import Status, SubmissionError


def _on_slot(job: Job, slot: str | None) -> Limits:
    """The job's limits on CPU slot ``slot`` (a taskset list the engine gave this task; None: unpinned)."""
    return dataclasses.replace(job.limits, cpus=slot) if slot is not None else job.limits


def grade_submission(job: Job, slot: str | None = None) -> list[dict]:
    """Check, rebuild, execute and judge one student's assignment on CPU slot ``slot``; stage the executed
    notebooks. Never raises."""
    limits = _on_slot(job, slot)
    source_dir = Path(job.paths.submitted) / job.student / job.assignment
    try:   # root never follows a link a student planted: the folder must be a real one
        collect.check_folder(source_dir, Path(job.paths.submitted))
        present, refusal = collect.regular_notebooks(source_dir), None
    except SubmissionError as exc:
        present, refusal = [], exc
    return [grade_notebook(job, name, limits, present, refusal).to_dict() for name in job.notebooks]


def reference_for(job: Job, slot: str | None = None):
    """The host's reference of one assignment (a :class:`reference.HostReference`; ``job.student`` unused),
    computed in a worker on CPU slot ``slot``, as a student's run is."""
    from autograder.grading.run import reference

    return reference.host_reference(Path(job.paths.source), job.assignment, list(job.notebooks),
                                    _on_slot(job, slot), Path(job.paths.scratch), Path(job.paths.grading))


def grade_notebook(job: Job, name: str, limits: Limits, present: list[str],
                   refusal: Exception | None) -> NotebookResult:
    """One notebook of a job: its status says whose fault anything was."""
    from autograder.grading.run import runner

    start = time.monotonic()
    result = NotebookResult(job.student, job.assignment, name, max_score=job.notebooks[name])
    source_dir = Path(job.paths.submitted) / job.student / job.assignment
    try:
        if refusal is not None:
            raise refusal
        if f"{name}.ipynb" not in present:
            others = [p for p in present if p != f"{name}.ipynb"]
            hint = f"; found {', '.join(others)} (renamed?)" if others else ""
            raise SubmissionError(Status.MISSING, f"{name}.ipynb was not submitted{hint}")
        path = source_dir / f"{name}.ipynb"
        submitted = canonical.read_submission(path, collect.read_regular(path, source_dir, MAX_NOTEBOOK_BYTES))
        release = nbformat.read(Path(job.paths.release) / job.assignment / f"{name}.ipynb", as_version=4)
        built = canonical.build(release, submitted, job.tests[name])
        scratch = Path(tempfile.mkdtemp(prefix="nb-", dir=job.paths.scratch))
        try:
            run = runner.execute(built.nb, limits, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        waited = time.monotonic()
        reference = job.judged_with()
        run.timings["reference_wait"] = time.monotonic() - waited
        if not reference:   # the engine found neither the host's reference nor the stored one
            raise judge.ReferenceMissing(f"no reference observations for {job.assignment}: run `make release` "
                                         "(the run's report says why the host's could not be made)")
        checks = outcomes.of(run, reference)   # each check's outcome, before settle drops what it read
        judge.settle(run, reference)   # the verdict, written the way nbgrader reads it
        result.notes = built.notes + run.notes
        result.status, result.reason = run.status, run.reason
        if result.status == Status.GRADED and built.findings:
            result.status, result.reason = Status.TAMPERED, "; ".join(built.findings)
        elif built.findings:
            result.notes = built.findings + result.notes
        result.execution_seconds = run.execution_seconds
        result.verdicts = dict(run.verdicts)
        result.checks, result.predictions = checks, predictions.submitted(release.cells, submitted.cells)
        result.kernel_start = run.kernel_start
        result.timings = {key: round(value, 3) for key, value in run.timings.items()}
        stage(job, name, run.nb, result)
    except SubmissionError as exc:
        result.status, result.reason = Status(exc.status), exc.reason
    except judge.ReferenceMissing as exc:
        result.status, result.reason = Status.ERROR, f"grader error: {exc}"
    except Exception as exc:  # a grader fault on one notebook must not stop the class
        result.status, result.reason = Status.ERROR, f"grader error: {type(exc).__name__}: {exc}"[:300]
    result.seconds = time.monotonic() - start
    return result


def stage(job: Job, name: str, executed, result: NotebookResult) -> None:
    """The executed notebook, and the late-penalty input, where nbgrader's recording step reads them."""
    source_dir = Path(job.paths.submitted) / job.student / job.assignment
    staged_dir = Path(job.paths.staged) / job.student / job.assignment
    staged_dir.mkdir(parents=True, exist_ok=True)
    try:   # nbgrader's late-penalty input: only a small regular file is copied
        stamp = collect.read_regular(source_dir / "timestamp.txt", source_dir, MAX_TIMESTAMP_BYTES)
        (staged_dir / "timestamp.txt").write_bytes(stamp)
    except SubmissionError as exc:
        if exc.status != Status.MISSING:
            result.notes.append(f"timestamp.txt ignored: {exc.reason}")
    nbformat.write(executed, staged_dir / f"{name}.ipynb")


# what the process every grading worker forks from imports once: this module, the runner, the reference run, pebble
PRELOAD = [__name__, "autograder.grading.run.runner", "autograder.grading.run.reference", "pebble.pool.process"]


def forkserver():
    """The multiprocessing context of the grading workers, its forkserver started now (idempotent): the grading
    command starts it before its own imports (nbgrader's, 0.7 s), so that the server's imports overlap them
    instead of delaying the first worker, and with it the first warm template."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    multiprocessing.forkserver.ensure_running()
    return context


def start_worker(template_env: dict | None, reference_events: dict, shared: str | None = None) -> None:
    """A worker's initializer (the pool's public hook, run in each worker it starts, a replacement too): it
    takes the Events that say a reference is ready (:func:`expect_references`) and connects to the run's warm
    template (``shared``, the socket :func:`autograder.warm.pool.share` listens on: one template forks every
    worker's kernels), or starts its own, which imports while the first reference run goes on in another
    worker. It lives here, with what the
    forkserver preloads: in the engine's module, unpickling it imported the engine, the recorder's side and
    nbgrader into every worker, 1.4 s before its template could start.

    A worker dies with the forkserver it was forked from, which ends when the grading command does: a grading
    command that is killed (a cancelled Slurm task, the OOM killer) would otherwise leave its workers waiting
    on their task channel for ever, each with its template."""
    from autograder.warm.isolate import die_with_parent

    die_with_parent()
    if os.getppid() == 1:   # the forkserver ended before the signal was set
        os._exit(1)
    expect_references(reference_events)
    if template_env is not None:
        from autograder.warm import pool

        try:
            pool.attach(shared, template_env) if shared else pool.prestart(template_env)
        except OSError:   # the run's template is gone: this worker starts one of its own
            pool.prestart(template_env)
