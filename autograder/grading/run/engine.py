"""Scheduling: every submission executed and judged in a pool of worker processes, each on a CPU set of its
own, with nbgrader's recording overlapping the run.

Every submission is queued behind the references from the start: a worker free before its assignment's
reference is ready executes a submission and waits for the reference only to judge it (the engine writes each
reference to a file, :attr:`Job.reference_file`, and sets the assignment's Event, on which such a worker
blocks). A reference the cache holds for what decides its numbers now is read here, before the pool starts, and
runs nothing; the pool has no more workers than tasks that run a kernel (each worker starts a warm template). nbgrader
records them in batches while the rest run (:func:`recording.next_batch`).

The pool is pebble's :class:`pebble.ProcessPool`: a worker that dies (the OOM killer, a crash) costs only the
submission it was grading, which is graded again alone (:meth:`Engine.grade_again`), and pebble starts another
worker; a task that runs past its bound (:func:`task_timeout`) has its worker stopped. A timeout beside other
submissions is graded again alone too (:func:`rerun_alone`).
"""
from __future__ import annotations

import concurrent.futures as futures
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

# pebble: a process pool that replaces a worker that died, failing only that worker's task (ProcessExpired), and
# stops a task's process at its timeout; concurrent.futures' pool breaks for good when one worker dies
import pebble

from autograder.grading.isolate import sandbox
from autograder.grading.messages import NotebookResult
from autograder.grading.plan.job import Job
from autograder.grading.plan.planning import Plan
from autograder.grading.plan.settings import KERNEL_STARTUP_S, TASK_GRACE_S
from autograder.grading.record import recording
from autograder.grading.report.reporting import Progress, report_references
from autograder.grading.run import reference, runner, worker
from autograder.grading.status import Status
from autograder.kernel.vocabulary import protocol

POOL_CHECK_S = 5.0   # with nothing finished for this long, the engine checks that the pool still runs


@dataclass(frozen=True)
class ReferenceRun:
    """The pool computes the host's reference of ``assignment`` (``tries``: 1, or 2 after its worker died)."""
    assignment: str
    job: Job
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
        context = worker.forkserver()   # started already by the command line, before its own imports
        self.unsettled = {a: sum(1 for _, b in run.tasks if b == a) for _, a in run.tasks}
        # assignment -> set once its reference is in reference_file(): a worker waiting to judge wakes then
        self.reference_events = {assignment: context.Event() for assignment in self.unsettled}
        self.references: dict[str, reference.HostReference] = {}
        self.cached = {a: found for a in sorted(self.unsettled) if (found := reference.cached_reference(
            Path(run.paths.source), a, list(run.layout[a]["notebooks"]), run.limits, Path(run.paths.grading)))}
        # no more grading processes than tasks that run a kernel: each starts a warm template (torch imported)
        kernels = len(run.tasks) + len(self.unsettled) - len(self.cached)
        slots = cpu_sets(run.settings.jobs)[:max(1, min(run.settings.jobs, kernels))]
        template_env, self.shared = runner.template_env_for(run.limits), None
        if template_env is not None and len(slots) > 1:
            # one template for the run (torch imported once, 2-3 CPU-s and hundreds of MB a template): every
            # worker connects to it and has its kernels forked over a connection of its own
            from autograder.warm import pool

            try:
                self.shared = pool.share(template_env, Path(run.paths.scratch) / "template")
            except OSError as error:   # each worker starts its own, as with one worker
                progress.log(f"warning: one template for the run could not be started ({error}): one a worker")
        self.pool = Workers(len(slots), context, slots, template_env, self.reference_events, self.shared)
        self.results: list[NotebookResult] = []
        self.waiting: dict[str, list[str]] = {}    # assignment -> students graded, not yet recorded
        self.recording: futures.Future | None = None
        self.failed: set[tuple[str, str]] = set()
        self.phase2 = recording.Recorder(run.settings.course, Path(run.paths.staged).parent / "phase2.log")
        self.phase2.start()   # nbgrader loads while the references run

    def start(self, work: Work) -> futures.Future:
        if isinstance(work, ReferenceRun):
            return self.pool.submit(worker.reference_for, work.job, task_timeout(work.job, waits=False))
        return self.pool.submit(worker.grade_submission, work.job, task_timeout(work.job))

    def run(self) -> set[tuple[str, str]]:
        """Grade every task; returns the (student, assignment) pairs nbgrader could not record."""
        for assignment, found in self.cached.items():   # read from the cache: nothing to run
            self.publish(assignment, found)
        queued: list[Work] = [ReferenceRun(a, self.plan.job("", a)) for a in sorted(self.unsettled)
                              if a not in self.cached]
        for student, assignment in self.plan.tasks:   # queued behind the references, judged once they are in
            queued.append(SubmissionRun(replace(self.plan.job(student, assignment),
                                                reference_file=self.reference_file(assignment))))
        with futures.ThreadPoolExecutor(max_workers=1) as recorder:
            self.recorder = recorder
            running: dict[futures.Future, Work] = {}
            starved, broken = [], []
            while queued or running:
                while queued and self.pool.free_slots():   # one task per CPU slot: the pool never queues
                    work = queued.pop(0)
                    running[self.start(work)] = work
                for future in self.wait_any(running):
                    if future is self.recording:
                        self.record_next()
                        continue
                    work = running.pop(future)
                    if isinstance(work, ReferenceRun):
                        queued[:0] = self.reference_ready(future, work)
                        continue
                    try:
                        items = self.outcome_of(future, work.job)
                    except pebble.ProcessExpired:
                        broken.append(work.job)   # its worker died: graded again alone, below
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

    def wait_any(self, running: dict[futures.Future, Work], recording: bool = True) -> set[futures.Future]:
        """The tasks (or the recording) that have finished, their CPU slots given back. A pool that stopped
        running (pebble's, when a worker dies while no task runs) leaves its tasks unfinished: each then ends as
        if its worker had died, and a new pool takes the rest."""
        watch = set(running) | ({self.recording} if self.recording and recording else set())
        while True:
            done, _ = futures.wait(watch, timeout=POOL_CHECK_S, return_when=futures.FIRST_COMPLETED)
            if not done and running and not self.pool.runs():
                for future in running:
                    if not future.done():
                        future.set_exception(pebble.ProcessExpired("the grading pool stopped"))
                self.pool.replace()
                continue
            if done:
                for future in done:
                    self.pool.finished(future)
                return done

    def reference_ready(self, future: futures.Future, work: ReferenceRun) -> list[Work]:
        """The reference of one assignment is in (the solution run on this host, in the sandbox; cached), or
        the stored record if that run fails: its submissions can be judged. Returns the run to try again, if
        its worker died the first time."""
        assignment = work.assignment
        try:
            self.references[assignment] = future.result()
        except pebble.ProcessExpired:
            if work.tries == 1:   # its worker died: run it once more
                return [replace(work, tries=2)]
            self.references[assignment] = self.stored_reference(assignment, "its grading process died twice")
        except Exception as exc:
            self.references[assignment] = self.stored_reference(assignment, f"{type(exc).__name__}: {exc}")
        self.publish(assignment, self.references[assignment])
        return []

    def publish(self, assignment: str, found: reference.HostReference) -> None:
        """``assignment`` is judged with ``found``: written where the workers read it, and their Event set."""
        self.references[assignment] = found
        report_references({assignment: found}, self.progress)
        protocol.Reference(assignment, found.cells).write(Path(self.reference_file(assignment)))
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
        except pebble.ProcessExpired:
            raise
        except futures.TimeoutError:   # pebble stopped its worker
            return job.results(Status.TIMEOUT, f"its grading process ran past {task_timeout(job):.0f} s (the "
                                               "notebooks' caps and the wait for the reference) and was stopped")
        except Exception as exc:  # a grader fault on this submission alone
            return job.results(Status.ERROR, f"grader worker failed: {type(exc).__name__}: {exc}")

    def grade_again(self, broken: list[Job], starved: list[Job]) -> None:
        """A worker died (the OOM killer, a crash) under a submission: it is graded again alone; only one
        that kills its worker again is at fault. A notebook that ran out of time beside other submissions may
        only have been starved by them: it is graded again with nothing else running, and that run counts."""
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
        future = self.start(SubmissionRun(job))
        self.wait_any({future: SubmissionRun(job)}, recording=False)
        try:
            return self.outcome_of(future, job)
        except pebble.ProcessExpired:   # it killed its worker again, alone: its own doing
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
        if self.shared is not None:
            from autograder.warm import pool

            pool.close_templates()
        sandbox.release_mounts_under(Path(self.plan.paths.scratch))   # left by a worker that was killed
        shutil.rmtree(self.plan.paths.scratch, ignore_errors=True)
        reap_children()


def rerun_alone(items: list[NotebookResult], jobs: int, graded_together: int) -> bool:
    """The retry policy: a timeout is confirmed alone when other submissions ran beside it.

    A neighbour that hogs the cores can starve a kernel even on its own CPU set (memory bandwidth,
    the grader's own threads), so a timeout beside others only counts once it repeats alone."""
    return jobs > 1 and graded_together > 1 and any(item.status == Status.TIMEOUT for item in items)


def task_timeout(job: Job, waits: bool = True) -> float:
    """How long one task may keep its worker before the pool stops it: for each notebook its cap, two kernel
    starts (a warm one that fails, then a cold one) and the grader's own work; for a submission that may run
    before its reference, the longest wait for it too (:meth:`Job.reference_wait_s`). Past that, the worker is
    stuck, whatever the submission does: its kernel has its own clock."""
    notebooks = max(1, len(job.notebooks))
    return notebooks * (job.limits.timeout_s + 2 * KERNEL_STARTUP_S + TASK_GRACE_S) + (
        job.reference_wait_s() if waits else 0.0)


class Workers:
    """The grading processes (a :class:`pebble.ProcessPool` of ``jobs`` workers forked from the forkserver, each
    started by :func:`worker.start_worker`) and the CPU slots they run on. The engine starts a task only on a
    free slot, hands it the slot, and takes the slot back when the task's future is done, however it ended
    (a result, an error, its worker dead or stopped at its timeout): no slot is lost with a worker."""

    def __init__(self, jobs: int, context, slots: list[str], template_env: dict | None = None,
                 reference_events: dict | None = None, shared: str | None = None):
        self.jobs, self.context, self.free = jobs, context, list(slots)
        self.initargs = (template_env, reference_events or {}, shared)
        self.held: dict[futures.Future, str] = {}
        self.pool = self._new()
        self.replaced = 0

    def _new(self) -> pebble.ProcessPool:
        return pebble.ProcessPool(max_workers=self.jobs, initializer=worker.start_worker, initargs=self.initargs,
                                  context=self.context)

    def free_slots(self) -> int:
        return len(self.free)

    def submit(self, fn, job: Job, timeout: float | None = None) -> futures.Future:
        """Run ``fn(job, slot)`` on a free CPU slot (there must be one), stopped after ``timeout`` seconds."""
        if not self.runs():
            self.replace()
        slot = self.free.pop(0)
        future = self.pool.schedule(fn, args=(job, slot), timeout=timeout)
        self.held[future] = slot
        return future

    def finished(self, future: futures.Future) -> None:
        """``future`` is done: its CPU slot is free again."""
        slot = self.held.pop(future, None)
        if slot is not None:
            self.free.append(slot)

    def runs(self) -> bool:
        return self.pool.active

    def replace(self) -> None:
        """A new pool, for one that stopped running (its tasks are given up by the engine)."""
        self.replaced += 1
        self.pool.stop()
        self.pool.join()
        self.pool = self._new()

    def shutdown(self) -> None:
        self.pool.close()
        self.pool.join()


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
