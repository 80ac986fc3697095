"""Scheduling: every submission executed and judged in a pool of worker processes, each on a CPU set of its
own, with nbgrader's recording overlapping the run.

Every submission is queued behind the references from the start: a worker free before its assignment's
reference is ready executes a submission and waits for the reference only to judge it (the engine writes each
reference to a file, :attr:`Job.reference_file`, and sets the assignment's Event, on which such a worker
blocks). nbgrader records them in
batches while the rest run (:func:`recording.next_batch`). A worker that dies breaks the pool: the
pool is replaced and the submissions on it are graded again alone (:meth:`Engine.grade_again`); a
timeout beside other submissions is graded again alone too (:func:`rerun_alone`).
"""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import queue
import shutil
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.grading.isolate import sandbox
from autograder.grading.judging import reference
from autograder.grading.plan.planning import Plan
from autograder.grading.record import recording
from autograder.grading.report.reporting import Progress, report_references
from autograder.grading.run import runner, worker
from autograder.grading.run.worker import Job, NotebookResult
from autograder.grading.status import Status
from autograder.kernel import protocol


@dataclass(frozen=True)
class ReferenceRun:
    """The pool computes the host's reference of ``assignment`` (``tries``: 1, or 2 after a dead worker)."""
    assignment: str
    tries: int = 1


@dataclass(frozen=True)
class SubmissionRun:
    """The pool grades one student's assignment."""
    job: Job


Work = ReferenceRun | SubmissionRun


class Engine:
    """Grades the plan's tasks in the :class:`Workers` pool while :class:`recording.Recorder` records them."""

    def __init__(self, run: Plan, progress: Progress):
        self.plan, self.progress = run, progress
        context = multiprocessing.get_context("forkserver")
        # imported once, in the server every worker forks from
        context.set_forkserver_preload([worker.__name__, runner.__name__, reference.__name__])
        self.manager = context.Manager()
        self.cpu_slots = self.manager.Queue()
        slots = cpu_sets(run.settings.jobs)
        for slot in slots:
            self.cpu_slots.put(slot)
        self.unsettled = {a: sum(1 for _, b in run.tasks if b == a) for _, a in run.tasks}
        # assignment -> set once its reference is in reference_file(): a worker waiting to judge wakes then
        self.reference_events = {assignment: context.Event() for assignment in self.unsettled}
        self.pool = Workers(run.settings.jobs, context, self.cpu_slots, slots, self.manager.Queue(),
                            runner.template_env_for(run.limits), self.reference_events)
        self.results: list[NotebookResult] = []
        self.references: dict[str, reference.HostReference] = {}
        self.waiting: dict[str, list[str]] = {}    # assignment -> students graded, not yet recorded
        self.recording: futures.Future | None = None
        self.failed: set[tuple[str, str]] = set()
        self.phase2 = recording.Recorder(run.settings.course, Path(run.paths.staged).parent / "phase2.log")
        self.phase2.start()   # nbgrader loads while the references run

    def submit(self, work: Work, pending: dict[futures.Future, Work]) -> None:
        if isinstance(work, ReferenceRun):
            future = self.pool.submit(worker.reference_for, self.plan.job("", work.assignment), self.cpu_slots)
        else:
            future = self.pool.submit(worker.grade_submission, work.job, self.cpu_slots)
        pending[future] = work

    def run(self) -> set[tuple[str, str]]:
        """Grade every task; returns the (student, assignment) pairs nbgrader could not record."""
        with futures.ThreadPoolExecutor(max_workers=1) as recorder:
            self.recorder = recorder
            pending: dict[futures.Future, Work] = {}
            for assignment in sorted(self.unsettled):
                self.submit(ReferenceRun(assignment), pending)
            for student, assignment in self.plan.tasks:   # queued behind the references, judged once they are in
                job = replace(self.plan.job(student, assignment), reference_file=self.reference_file(assignment))
                self.submit(SubmissionRun(job), pending)
            starved, broken = [], []
            while pending:
                watch = set(pending) | ({self.recording} if self.recording else set())
                done, _ = futures.wait(watch, return_when=futures.FIRST_COMPLETED)
                for future in done:
                    if future is self.recording:
                        self.record_next()
                        continue
                    work = pending.pop(future)
                    if isinstance(work, ReferenceRun):
                        self.reference_ready(future, work, pending)
                        continue
                    try:
                        items = self.outcome_of(future, work.job)
                    except BrokenProcessPool:
                        broken.append(work.job)   # on a pool whose worker died: graded again below
                        continue
                    if rerun_alone(items, self.plan.settings.jobs, len(self.plan.tasks)):
                        starved.append(work.job)   # decided below, once nothing else runs
                        continue
                    self.settle(work.job, items)
            self.grade_again(broken, starved)
            self.record_next()
            while self.recording is not None:   # what is still waiting, batch after batch
                futures.wait([self.recording])
                self.record_next()
        return self.failed

    def reference_ready(self, future: futures.Future, work: ReferenceRun, pending: dict) -> None:
        """The reference of one assignment is in (the solution run on this host, in the sandbox; cached), or
        the stored record if that run fails: its submissions can be judged."""
        assignment = work.assignment
        try:
            self.references[assignment] = future.result()
        except BrokenProcessPool:
            if work.tries == 1:   # a worker died beside it: run it once more, on a new pool
                self.submit(ReferenceRun(assignment, 2), pending)
                return
            self.references[assignment] = self.stored_reference(assignment, "its grading process died twice")
        except Exception as exc:
            self.references[assignment] = self.stored_reference(assignment, f"{type(exc).__name__}: {exc}")
        report_references({assignment: self.references[assignment]}, self.progress)
        protocol.Reference(assignment, self.references[assignment].cells).write(Path(self.reference_file(assignment)))
        self.reference_events[assignment].set()

    def reference_file(self, assignment: str) -> str:
        """Where the workers read ``assignment``'s reference once its Event is set (the run's scratch folder)."""
        return str(Path(self.plan.paths.scratch) / f"reference-{assignment}.json")

    def stored_reference(self, assignment: str, why: str) -> reference.HostReference:
        stored = reference.load_stored(Path(self.plan.paths.source), assignment) or {}
        return reference.HostReference(assignment, stored, "stored", problem=f"the reference run failed: {why}")

    def outcome_of(self, done: futures.Future, job: Job) -> list[NotebookResult]:
        try:
            return [NotebookResult.from_dict(r) for r in done.result()]
        except BrokenProcessPool:
            raise
        except Exception as exc:  # a grader fault on this submission alone
            return job.results(Status.ERROR, f"grader worker failed: {type(exc).__name__}: {exc}")

    def grade_again(self, broken: list[Job], starved: list[Job]) -> None:
        """A worker died (the OOM killer, a crash): every submission still on that pool failed with it. Each
        is graded again alone in a new pool; only one that kills its worker again is at fault. A notebook
        that ran out of time beside other submissions may only have been starved by them: it is graded
        again with nothing else running, and that run counts."""
        if broken:
            self.pool.replace()
        for job in broken:
            self.progress.log(f"{job.student}/{job.assignment} was on a grading process that died; "
                              "grading it again alone")
            items = self.graded_alone(job)
            for item in items:
                item.notes.append("graded again alone: a grading process died while it was being graded")
            self.settle(job, items)
        for job in starved:
            self.progress.log(f"{job.student}/{job.assignment} timed out while other submissions ran; "
                              "grading it again alone")
            items = self.graded_alone(job)
            for item in items:
                item.notes.append("timed out again when graded alone" if item.status == Status.TIMEOUT else
                                  "timed out while graded beside other submissions; graded again alone")
            self.settle(job, items)

    def graded_alone(self, job: Job) -> list[NotebookResult]:
        try:
            return self.outcome_of(self.pool.submit(worker.grade_submission, job, self.cpu_slots), job)
        except BrokenProcessPool:   # it killed its worker again, alone: its own doing
            self.pool.replace()
            return job.results(Status.WORKER_DIED, "the grading process of this submission died twice, the "
                                                   "second time graded alone (for example killed for its memory use)")

    def settle(self, job: Job, items: list[NotebookResult]) -> None:
        for item in items:
            self.results.append(item)
            self.progress.update(item)
        self.unsettled[job.assignment] -= 1
        self.waiting.setdefault(job.assignment, []).append(job.student)
        if self.recording is None:
            self.record_next()

    def record_next(self) -> None:
        """Collect the recording that finished, if any, and start the next batch."""
        if self.recording is not None:
            if not self.recording.done():
                return
            try:
                self.failed |= self.recording.result()
            except Exception as exc:  # the grader's own fault: the batch is reported, grading goes on
                assignment, students = self.recording_batch
                self.progress.log(f"recording {assignment} failed: {type(exc).__name__}: {exc}")
                self.failed |= {(student, assignment) for student in students}
            self.recording = None
        batch = recording.next_batch(self.waiting, self.unsettled, self.plan.settings.jobs)
        if batch:
            self.recording_batch = batch
            self.recording = self.recorder.submit(recording.record_batch, self.plan, self.phase2, *batch)

    def close(self) -> None:
        self.phase2.stop()
        self.pool.shutdown()
        sandbox.release_mounts_under(Path(self.plan.paths.scratch))   # left by a worker that was killed
        shutil.rmtree(self.plan.paths.scratch, ignore_errors=True)
        self.manager.shutdown()
        reap_children()


def rerun_alone(items: list[NotebookResult], jobs: int, graded_together: int) -> bool:
    """The retry policy: a timeout is confirmed alone when other submissions ran beside it.

    A neighbour that hogs the cores can starve a kernel even on its own CPU set (memory bandwidth,
    the grader's own threads), so a timeout beside others only counts once it repeats alone."""
    return jobs > 1 and graded_together > 1 and any(item.status == Status.TIMEOUT for item in items)


class Workers:
    """The grading processes. A worker that dies (the OOM killer, a crash) breaks a ProcessPoolExecutor
    for good: here the pool is replaced, its surviving workers are stopped, the CPU slots of the dead
    workers are handed out again, and the submissions that were on the broken pool are graded again, one
    at a time. Each worker reports its pid through the pool's initializer, so no private attribute of the
    executor is read."""

    def __init__(self, jobs: int, context, cpu_slots, slots: list[str], pids, template_env: dict | None = None,
                 reference_events: dict | None = None):
        self.jobs, self.context, self.cpu_slots, self.slots, self.pids = jobs, context, cpu_slots, slots, pids
        self.template_env, self.reference_events = template_env, reference_events or {}
        self.pool = self._new()
        self.replaced = 0

    def _new(self):
        return futures.ProcessPoolExecutor(max_workers=self.jobs, mp_context=self.context,
                                           initializer=worker.start_worker,
                                           initargs=(self.pids, self.template_env, self.reference_events))

    def replace(self) -> None:
        import psutil

        self.replaced += 1
        registered = set(_drain(self.pids))
        survivors = [p for p in psutil.Process().children(recursive=True) if p.pid in registered]   # no pid reused
        self.pool.shutdown(wait=False, cancel_futures=True)
        for process in survivors:   # a survivor may wait forever on a lock the dead worker held
            try:
                process.kill()
            except psutil.Error:  # already gone
                pass
        _drain(self.cpu_slots)   # the dead workers never gave their slots back
        for slot in self.slots:
            self.cpu_slots.put(slot)
        self.pool = self._new()

    def submit(self, fn, *args) -> futures.Future:
        try:
            return self.pool.submit(fn, *args)
        except BrokenProcessPool:
            self.replace()
            return self.pool.submit(fn, *args)

    def shutdown(self) -> None:
        self.pool.shutdown()


def _drain(shared) -> list:
    found = []
    while True:
        try:
            found.append(shared.get_nowait())
        except queue.Empty:
            return found


def reap_children() -> None:
    """Stop whatever multiprocessing left behind. After a worker is killed, a process forked beside it can
    wait forever on a lock the dead one held; left alone it would outlive the grader and keep its output
    pipes open. Every result is in by now. The resource tracker stays: it unregisters this process's
    semaphores (the references' Events) as they are freed, and ends with this process; killed, it is started
    again and prints a KeyError for each of them."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            if TRACKER not in " ".join(child.cmdline()):
                child.kill()
        except psutil.Error:
            pass


TRACKER = "multiprocessing.resource_tracker"   # in its command line


def cpu_sets(jobs: int) -> list[str]:
    """One taskset list per job: the usable cores shared out, so each kernel keeps to its own."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if jobs >= len(cores):
        return [str(cores[i % len(cores)]) for i in range(jobs)]
    share = len(cores) // jobs
    return [",".join(str(c) for c in cores[i * share:(i + 1) * share]) for i in range(jobs)]
