"""The instructor's grading command: a whole class, in parallel, each submission on its own.

Phase 1 (parallel, one process per job): each submission is checked (missing, corrupt,
renamed), rebuilt into the canonical notebook, and executed in its own sandboxed kernel
under limits. Phase 2 (serial per assignment, in a subprocess): nbgrader records the
executed notebooks in the gradebook and writes ``autograded/`` and ``feedback/``.
Then ``grades.csv`` and ``grading-report.json`` are written from the gradebook.
"""
from __future__ import annotations

import concurrent.futures as futures
from concurrent.futures.process import BrokenProcessPool
import csv
import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from . import canonical, cgroups, collect, judge, reference, runner, sandbox
from .settings import Settings
from .status import Status

GRADING_DIR = ".grading"


class UsageError(Exception):
    """Bad arguments: exit code 2."""


@dataclass
class NotebookResult:
    student: str
    assignment: str
    notebook: str
    status: Status = Status.GRADED
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    execution_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.status = Status(self.status)   # from a worker's dict, the status comes back as its text


# ---------------------------------------------------------------- course and gradebook

def load_coursedir(course: Path):
    """nbgrader's CourseDirectory as the course's own nbgrader_config.py sets it."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config_file = course / "nbgrader_config.py"
    if not config_file.is_file():
        raise UsageError(f"{course} has no nbgrader_config.py: is it an nbgrader course?")
    config = PyFileConfigLoader(config_file.name, path=str(course)).load_config()
    coursedir = CourseDirectory(config=config)
    coursedir.root = str(course.resolve())
    return coursedir


def course_layout(coursedir) -> dict[str, dict]:
    """assignment -> {'notebooks': {name: max_score}, 'tests': {name: {grade id: source}}} from the gradebook.

    The test sources are the instructor's, as ``generate_assignment`` saved them: hidden tests included.
    """
    from nbgrader.api import Gradebook

    layout = {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for assignment in gb.assignments:
            layout[assignment.name] = {
                "notebooks": {nb.name: nb.max_score for nb in assignment.notebooks},
                "tests": {nb.name: {cell.name: cell.source for cell in nb.source_cells
                                    if cell.name in {g.name for g in nb.grade_cells} and cell.cell_type == "code"}
                          for nb in assignment.notebooks},
            }
    return layout


def backup_gradebook(coursedir, course: Path) -> str | None:
    url = coursedir.db_url
    if not url.startswith("sqlite:///"):
        return None  # a server database is backed up by its own tools (pg_dump)
    db = Path(url[len("sqlite:///"):])
    if not db.exists():
        return None
    folder = course / "backups"
    folder.mkdir(exist_ok=True)
    target = folder / f"gradebook-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%fZ')}.db"
    import sqlite3

    with sqlite3.connect(db) as source, sqlite3.connect(target) as dest:
        source.backup(dest)  # a consistent copy even if another process is reading
    return str(target)


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    index, count = shard
    digest = int(hashlib.sha256(student.encode()).hexdigest(), 16)
    return digest % count == index


def discover(coursedir, options: Settings, layout: dict) -> list[tuple[str, str]]:
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, ".", ".")).resolve()
    if not submitted.is_dir():
        raise UsageError(f"no submissions folder at {submitted}")
    assignments = options.assignments or sorted(layout)
    unknown = [a for a in assignments if a not in layout]
    if unknown:
        raise UsageError(f"unknown assignment(s) {', '.join(unknown)}; the gradebook has: {', '.join(sorted(layout))}"
                         " (run `nbgrader generate_assignment` first)")
    students = sorted(p.name for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))
    if options.students:
        missing = [s for s in options.students if s not in students]
        if missing:
            raise UsageError(f"no submissions folder for student(s): {', '.join(missing)}")
        students = [s for s in students if s in options.students]
    tasks = []
    for student in students:
        if not in_shard(student, options.shard):
            continue
        for assignment in assignments:
            if (submitted / student / assignment).is_dir():
                tasks.append((student, assignment))
    return tasks


# ---------------------------------------------------------------- phase 1: one submission

@dataclass(frozen=True)
class Paths:
    """The folders a grading run reads and writes (strings: a Job crosses into worker processes)."""
    submitted: str
    release: str
    source: str
    grading: str      # .grading/: the reference cache, matplotlib's font cache
    staged: str       # executed notebooks waiting for nbgrader's recording step
    scratch: str      # per-kernel work folders


@dataclass(frozen=True)
class Job:
    """One student's assignment, with everything needed to grade it in a worker process."""
    student: str
    assignment: str
    notebooks: dict[str, float]            # notebook name -> max score
    tests: dict[str, dict[str, str]]       # notebook name -> grade id -> the instructor's test source
    paths: Paths
    limits: runner.Limits
    reference: dict[str, list[dict]] = field(default_factory=dict)   # grade id -> observations to judge with

    def results(self, status: Status, reason: str) -> list[NotebookResult]:
        """The same status for every notebook of this job."""
        return [NotebookResult(self.student, self.assignment, name, status=status, max_score=max_score,
                               reason=reason[:300]) for name, max_score in self.notebooks.items()]


def grade_submission(job: Job, cpu_slots=None) -> list[dict]:
    """Check, rebuild, execute and judge one student's assignment on a CPU slot of its own; stage the
    executed notebooks. Never raises."""
    slot = cpu_slots.get() if cpu_slots is not None else None
    try:
        limits = dataclasses.replace(job.limits, cpus=slot) if slot is not None else job.limits
        source_dir = Path(job.paths.submitted) / job.student / job.assignment
        try:   # root never follows a link a student planted: the folder must be a real one
            collect.check_folder(source_dir, Path(job.paths.submitted))
            present, refusal = collect.regular_notebooks(source_dir), None
        except canonical.SubmissionError as exc:
            present, refusal = [], exc
        return [asdict(grade_notebook(job, name, limits, present, refusal)) for name in job.notebooks]
    finally:
        if slot is not None:
            cpu_slots.put(slot)


def grade_notebook(job: Job, name: str, limits: runner.Limits, present: list[str],
                   refusal: Exception | None) -> NotebookResult:
    """One notebook of a job: its status says whose fault anything was."""
    start = time.monotonic()
    result = NotebookResult(job.student, job.assignment, name, max_score=job.notebooks[name])
    source_dir = Path(job.paths.submitted) / job.student / job.assignment
    try:
        if refusal is not None:
            raise refusal
        if f"{name}.ipynb" not in present:
            others = [p for p in present if p != f"{name}.ipynb"]
            hint = f"; found {', '.join(others)} (renamed?)" if others else ""
            raise canonical.SubmissionError(Status.MISSING, f"{name}.ipynb was not submitted{hint}")
        path = source_dir / f"{name}.ipynb"
        submitted = canonical.read_submission(path, collect.read_regular(path, source_dir,
                                                                         collect.MAX_NOTEBOOK_BYTES))
        release = nbformat.read(Path(job.paths.release) / job.assignment / f"{name}.ipynb", as_version=4)
        built = canonical.build(release, submitted, job.tests[name])
        scratch = Path(tempfile.mkdtemp(prefix="nb-", dir=job.paths.scratch))
        try:
            reference = job.reference or judge.load_reference(Path(job.paths.source), job.assignment)
            outcome = runner.execute(built.nb, limits, scratch, reference)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        result.notes = built.notes + outcome.notes
        findings = built.findings + outcome.findings
        result.status, result.reason = outcome.status, outcome.reason
        if result.status == Status.GRADED and findings:
            result.status, result.reason = Status.TAMPERED, "; ".join(findings)
        elif findings:
            result.notes = findings + result.notes
        result.execution_seconds = outcome.execution_seconds
        stage(job, name, outcome.nb, result)
    except canonical.SubmissionError as exc:
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
        stamp = collect.read_regular(source_dir / "timestamp.txt", source_dir, collect.MAX_TIMESTAMP_BYTES)
        (staged_dir / "timestamp.txt").write_bytes(stamp)
    except canonical.SubmissionError as exc:
        if exc.status != Status.MISSING:
            result.notes.append(f"timestamp.txt ignored: {exc.reason}")
    nbformat.write(executed, staged_dir / f"{name}.ipynb")


# ---------------------------------------------------------------- phase 2 and outputs

class Recorder:
    """nbgrader's recording step (:mod:`autograder.grading.phase2`) in one process for the whole run, fed
    one batch at a time: nbgrader and its templates load once, not once per batch. A batch that fails or
    runs too long is reported; a process that dies or hangs is replaced for the next batch. Its output goes
    to ``.grading/phase2.log``."""

    def __init__(self, course: Path, log: Path):
        self.course, self.log = course, log
        self.proc: subprocess.Popen | None = None
        log.write_bytes(b"")   # this run's alone

    def start(self) -> None:
        import queue
        import threading

        from .phase2 import RESULT

        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grading.phase2", "--serve",
                                          str(self.course)], cwd=self.course, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        self.answers: queue.Queue = queue.Queue()

        def read(stream, answers):
            for line in stream:
                if line.startswith(RESULT):
                    answers.put(line[len(RESULT):])
            answers.put(None)   # the process ended

        threading.Thread(target=read, args=(self.proc.stdout, self.answers), daemon=True).start()

    def record(self, assignment: str, staged_root: Path, students: list[str], timeout_s: float) -> str | None:
        """Autograde and feedback for ``students`` of ``assignment``; returns an error text or None."""
        import queue

        if self.proc is None or self.proc.poll() is not None:
            self.start()
        logged = self.log.stat().st_size
        request = {"assignment": assignment, "staged": str(staged_root), "students": students}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            answer = self.answers.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            return f"nbgrader's recording step ran longer than {timeout_s:g} s"
        except OSError:   # the process is gone
            answer = None
        if answer is None:
            self.stop()
            with open(self.log, "rb") as log:
                log.seek(logged)
                return "nbgrader's recording process ended: " + log.read().decode(errors="replace")[-2000:]
        error = json.loads(answer)["error"]
        if error:
            with open(self.log, "rb") as log:
                log.seek(logged)
                error = (log.read().decode(errors="replace") + error).strip()[-2000:]
        return error

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def read_scores(coursedir, pairs: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], float]:
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for student, assignment, notebook in pairs:
            try:
                scores[(student, assignment, notebook)] = gb.find_submission_notebook(
                    notebook, assignment, student).score
            except MissingEntry:
                scores[(student, assignment, notebook)] = 0.0
    return scores


def write_outputs(course: Path, results: list[NotebookResult], meta: dict) -> None:
    per_submission: dict[tuple[str, str], list[NotebookResult]] = {}
    for r in results:
        per_submission.setdefault((r.student, r.assignment), []).append(r)
    rows = []
    for (student, assignment), items in sorted(per_submission.items()):
        worst = next((r.status for r in items if r.status != Status.GRADED), Status.GRADED)
        rows.append({"student_id": student, "assignment": assignment,
                     "score": round(sum(r.score for r in items), 4),
                     "max_score": round(sum(r.max_score for r in items), 4), "status": worst,
                     "reason": " | ".join(f"{r.notebook}: {r.reason}" for r in items if r.reason)})
    previous = {}
    csv_path = course / "grades.csv"
    if csv_path.exists() and meta.get("partial"):
        with open(csv_path, newline="") as handle:
            previous = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
    merged = dict(previous)
    merged.update({(r["student_id"], r["assignment"]): r for r in rows})
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle,
                                fieldnames=["student_id", "assignment", "score", "max_score", "status", "reason"])
        writer.writeheader()
        for key in sorted(merged):
            writer.writerow(merged[key])
    ordered = sorted(results, key=lambda r: (r.student, r.assignment, r.notebook))
    report = dict(meta, submissions=[asdict(r) for r in ordered])
    (course / "grading-report.json").write_text(json.dumps(report, indent=2) + "\n")


class Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.tty = stream.isatty()

    def update(self, result: NotebookResult) -> None:
        self.done += 1
        if self.tty:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                              f"{result.student}/{result.assignment}: {result.status:<12}")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"graded {self.done}/{self.total} {result.student} {result.assignment}/"
                              f"{result.notebook}: {result.status} ({result.seconds:.1f} s)"
                              f"{' - ' + result.reason if result.reason else ''}\n")
        self.stream.flush()

    def log(self, text: str) -> None:
        if self.tty:
            self.stream.write("\n")
        self.stream.write(text + "\n")
        self.stream.flush()


def matplotlib_cache(grading_dir: Path) -> subprocess.Popen | None:
    """Start building matplotlib's font cache, once, so that each sandbox does not rebuild it (the folder is
    ``grading_dir / "mplcache"``; wait for the process before a kernel starts)."""
    cache = grading_dir / "mplcache"
    if any(cache.glob("fontlist-*.json")):
        return None
    cache.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", "import matplotlib.font_manager"],
                            env=dict(os.environ, MPLCONFIGDIR=str(cache)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def reference_for(job: Job, cpu_slots=None) -> reference.HostReference:
    """The host's reference of one assignment (``job.student`` unused), computed in a worker on its own CPU
    slot, as a student's run is."""
    slot = cpu_slots.get() if cpu_slots is not None else None
    try:
        limits = dataclasses.replace(job.limits, cpus=slot) if slot is not None else job.limits
        return reference.host_reference(Path(job.paths.source), job.assignment, list(job.notebooks), limits,
                                        Path(job.paths.scratch), Path(job.paths.grading))
    finally:
        if slot is not None:
            cpu_slots.put(slot)


def report_references(references: dict[str, reference.HostReference], progress) -> None:
    for assignment, ref in sorted(references.items()):
        if ref.problem:
            progress.log(f"warning: {assignment}: {ref.problem}"
                         + ("; judging with the stored reference observations" if ref.source == "stored" else ""))
        for diff in ref.differences:
            where = f"observation {diff['index']} ('{diff['label']}')" if diff["index"] else "its observations"
            progress.log(f"warning: {assignment}/{diff['test']}: {where} differ(s) on this host from the stored "
                         f"reference: {diff['problem']}. The host's reference is used, so no student loses points; "
                         "a check that depends on the machine is a course bug to fix.")


def rerun_alone(items: list[NotebookResult], jobs: int, graded_together: int) -> bool:
    """The retry policy: a timeout is confirmed alone when other submissions ran beside it.

    A neighbour that hogs the cores can starve a kernel even on its own CPU set (memory bandwidth,
    the grader's own threads), so a timeout beside others only counts once it repeats alone."""
    return jobs > 1 and graded_together > 1 and any(item.status == Status.TIMEOUT for item in items)


class Workers:
    """The grading processes. A worker that dies (the OOM killer, a crash) breaks a ProcessPoolExecutor
    for good: here the pool is replaced, the CPU slots of the dead workers are handed out again, and the
    submissions that were on the broken pool are graded again, one at a time."""

    def __init__(self, jobs: int, context, cpu_slots, slots: list[str]):
        self.jobs, self.context, self.cpu_slots, self.slots = jobs, context, cpu_slots, slots
        self.pool = self._new()
        self.replaced = 0

    def _new(self):
        return futures.ProcessPoolExecutor(max_workers=self.jobs, mp_context=self.context)

    def replace(self) -> None:
        self.replaced += 1
        survivors = list(getattr(self.pool, "_processes", {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for process in survivors:   # a survivor may wait forever on a lock the dead worker held
            try:
                process.kill()
            except Exception:  # already gone
                pass
        import queue

        while True:   # the dead workers never gave their slots back
            try:
                self.cpu_slots.get_nowait()
            except queue.Empty:
                break
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



def reap_children() -> None:
    """Stop whatever multiprocessing left behind. After a worker is killed, a process forked beside it can
    wait forever on a lock the dead one held; left alone it would outlive the grader and keep its output
    pipes open. Every result is in by now."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass


def cpu_sets(jobs: int) -> list[str]:
    """One taskset list per job: the usable cores shared out, so each kernel keeps to its own."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if jobs >= len(cores):
        return [str(cores[i % len(cores)]) for i in range(jobs)]
    share = len(cores) // jobs
    return [",".join(str(c) for c in cores[i * share:(i + 1) * share]) for i in range(jobs)]


# ---------------------------------------------------------------- plan -> run -> record -> report

@dataclass
class Plan:
    """What one grading run will do, decided before any submission runs."""
    settings: Settings
    coursedir: object
    layout: dict[str, dict]
    tasks: list[tuple[str, str]]          # (student, assignment), in grading order
    paths: Paths
    limits: runner.Limits
    cgroups: str                          # v2, v1 or none
    backup: str | None

    def job(self, student: str, assignment: str, reference_cells: dict | None = None) -> Job:
        layout = self.layout[assignment]
        return Job(student, assignment, layout["notebooks"], layout["tests"], self.paths, self.limits,
                   reference_cells or {})


def plan(course: Path, overrides: dict | None = None, progress: Progress | None = None) -> Plan:
    """Read the course and its config, check the host, find the submissions, prepare the folders."""
    course = Path(course).resolve()
    if not course.is_dir():
        raise UsageError(f"course folder {course} does not exist")
    fonts = matplotlib_cache(course / GRADING_DIR) if (course / "nbgrader_config.py").is_file() else None
    try:   # the font cache builds while nbgrader loads the course
        return checked_plan(course, overrides, progress)
    finally:
        if fonts is not None:
            fonts.wait()


def checked_plan(course: Path, overrides: dict | None, progress: Progress | None) -> Plan:
    coursedir = load_coursedir(course)
    try:
        settings = Settings.resolve(course, coursedir.config, overrides)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if settings.problems():
        raise UsageError("; ".join(settings.problems()))
    layout = course_layout(coursedir)
    tasks = sorted(discover(coursedir, settings, layout), key=lambda t: (t[1], t[0]))
    use_bwrap = settings.sandbox != "none"
    if use_bwrap and not sandbox.sandbox_available():
        raise UsageError("bubblewrap is missing or cannot create namespaces on this host, so submissions could "
                         "read the course (solutions, reference observations, the gradebook). Install it "
                         "(Debian: apt-get install bubblewrap), or pass --sandbox none to grade without "
                         "isolation, knowingly.")
    kind, why = cgroups.available() if use_bwrap else (None, "")
    progress = progress or Progress(0)
    if use_bwrap and kind is None:
        progress.log(f"warning: no per-kernel cgroups ({why}); CPU, memory and process limits fall back to "
                     "taskset and prlimit, which a submission can widen or share")
    if not use_bwrap:
        progress.log("warning: grading WITHOUT the bubblewrap sandbox (--sandbox none): submissions can read "
                     "the course files, including the reference observations")
    return Plan(settings, coursedir, layout, tasks, prepare_folders(course, coursedir), settings.limits(),
                kind or "none", backup_gradebook(coursedir, course))


def prepare_folders(course: Path, coursedir) -> Paths:
    grading_dir = course / GRADING_DIR
    staged = grading_dir / "staged"
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix="pte-grading-", dir=os.environ.get("PTE_SCRATCH") or None))
    os.chmod(scratch, 0o711)
    os.environ["PTE_MPL_CACHE"] = str(grading_dir / "mplcache")

    def folder(name: str) -> str:
        return str(Path(coursedir.format_path(getattr(coursedir, name), ".", ".")).resolve())

    return Paths(folder("submitted_directory"), folder("release_directory"), folder("source_directory"),
                 str(grading_dir), str(staged), str(scratch))


BATCH = 8   # students recorded together once that many of one assignment are waiting


class Engine:
    """Phase 1 (every submission executed and judged in the worker pool) with phase 2 overlapping.

    An assignment's submissions start as soon as its own reference is ready. nbgrader records them in
    batches while the rest run: an assignment whose submissions are all in, any :data:`BATCH` of them, and
    at the end of the run (when every submission left is already running) whatever is waiting. So the
    recording that cannot overlap anything is one small batch."""

    def __init__(self, run: Plan, progress: Progress):
        self.plan, self.progress = run, progress
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])   # imported once, in the server every worker forks from
        self.manager = context.Manager()
        self.cpu_slots = self.manager.Queue()
        slots = cpu_sets(run.settings.jobs)
        for slot in slots:
            self.cpu_slots.put(slot)
        self.pool = Workers(run.settings.jobs, context, self.cpu_slots, slots)
        self.results: list[NotebookResult] = []
        self.references: dict[str, reference.HostReference] = {}
        self.unsettled = {a: sum(1 for _, b in run.tasks if b == a) for _, a in run.tasks}
        self.waiting: dict[str, list[str]] = {}    # assignment -> students graded, not yet recorded
        self.recording: futures.Future | None = None
        self.failed: set[tuple[str, str]] = set()
        self.phase2 = Recorder(run.settings.course, Path(run.paths.grading) / "phase2.log")
        self.phase2.start()   # nbgrader loads while the references run

    def run(self) -> set[tuple[str, str]]:
        """Grade every task; returns the (student, assignment) pairs nbgrader could not record."""
        with futures.ThreadPoolExecutor(max_workers=1) as recorder:
            self.recorder = recorder
            pending = {self.pool.submit(reference_for, self.plan.job("", a), self.cpu_slots): ("reference", a, 1)
                       for a in sorted(self.unsettled)}
            starved, broken = [], []
            while pending:
                watch = set(pending) | ({self.recording} if self.recording else set())
                done, _ = futures.wait(watch, return_when=futures.FIRST_COMPLETED)
                for future in done:
                    if future is self.recording:
                        self.record_next()
                        continue
                    kind, what, tries = pending.pop(future)
                    if kind == "reference":
                        self.reference_ready(future, what, tries, pending)
                        continue
                    try:
                        items = self.outcome_of(future, what)
                    except BrokenProcessPool:
                        broken.append(what)   # on a pool whose worker died: graded again below
                        continue
                    if rerun_alone(items, self.plan.settings.jobs, len(self.plan.tasks)):
                        starved.append(what)   # decided below, once nothing else runs
                        continue
                    self.settle(what, items)
            self.grade_again(broken, starved)
            self.record_next()
            while self.recording is not None:   # what is still waiting, batch after batch
                futures.wait([self.recording])
                self.record_next()
        return self.failed

    def reference_ready(self, future: futures.Future, assignment: str, tries: int, pending: dict) -> None:
        """The reference of one assignment is in (the solution run on this host, in the sandbox; cached), or
        the stored record if that run fails: its submissions can start."""
        try:
            self.references[assignment] = future.result()
        except BrokenProcessPool:
            if tries == 1:   # a worker died beside it: run it once more, on a new pool
                pending[self.pool.submit(reference_for, self.plan.job("", assignment), self.cpu_slots)] = (
                    "reference", assignment, 2)
                return
            self.references[assignment] = self.stored_reference(assignment, "its grading process died twice")
        except Exception as exc:
            self.references[assignment] = self.stored_reference(assignment, f"{type(exc).__name__}: {exc}")
        report_references({assignment: self.references[assignment]}, self.progress)
        cells = self.references[assignment].cells
        for student, other in self.plan.tasks:
            if other == assignment:
                job = self.plan.job(student, assignment, cells)
                pending[self.pool.submit(grade_submission, job, self.cpu_slots)] = ("job", job, 1)

    def stored_reference(self, assignment: str, why: str) -> reference.HostReference:
        stored = reference.load_stored(Path(self.plan.paths.source), assignment) or {}
        return reference.HostReference(assignment, stored, "stored", problem=f"the reference run failed: {why}")

    def outcome_of(self, done: futures.Future, job: Job) -> list[NotebookResult]:
        try:
            return [NotebookResult(**r) for r in done.result()]
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
            return self.outcome_of(self.pool.submit(grade_submission, job, self.cpu_slots), job)
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

    def next_batch(self) -> tuple[str, list[str]] | None:
        """The students nbgrader records next (see the class docstring), or None to wait for more."""
        ending = sum(self.unsettled.values()) <= self.plan.settings.jobs
        for assignment, students in sorted(self.waiting.items(), key=lambda item: self.unsettled[item[0]]):
            if students and (ending or not self.unsettled[assignment] or len(students) >= BATCH):
                self.waiting[assignment] = []
                return assignment, students
        return None

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
        batch = self.next_batch()
        if batch:
            self.recording_batch = batch
            self.recording = self.recorder.submit(record_batch, self.plan, self.phase2, *batch)

    def close(self) -> None:
        self.phase2.stop()
        self.pool.shutdown()
        sandbox.release_mounts_under(Path(self.plan.paths.scratch))   # left by a worker that was killed
        shutil.rmtree(self.plan.paths.scratch, ignore_errors=True)
        self.manager.shutdown()
        reap_children()


def record_batch(run: Plan, recorder: Recorder, assignment: str, students: list[str]) -> set[tuple[str, str]]:
    """Phase 2 for some students of one assignment (one writer to the gradebook at a time); returns those
    nbgrader could not record, found one by one without losing the others."""
    staged = Path(run.paths.staged)
    students = sorted(s for s in students if (staged / s / assignment).is_dir())
    timeout = run.settings.phase2_timeout_s
    if not students or not recorder.record(assignment, staged, students, timeout):
        return set()
    if len(students) == 1:
        return {(students[0], assignment)}
    return {(s, assignment) for s in students if recorder.record(assignment, staged, [s], timeout)}


def score(run: Plan, results: list[NotebookResult], failed: set[tuple[str, str]], progress: Progress) -> None:
    """Each notebook's score, from the gradebook nbgrader wrote."""
    for student, assignment in sorted(failed):
        progress.log(f"nbgrader could not record {student}/{assignment}")
        for r in results:
            if (r.student, r.assignment) == (student, assignment) and r.status.scored_by_nbgrader:
                r.status, r.reason = Status.ERROR, "nbgrader failed to record this submission's grades"
    scores = read_scores(run.coursedir, [(r.student, r.assignment, r.notebook) for r in results])
    for r in results:
        r.score = float(scores.get((r.student, r.assignment, r.notebook)) or 0.0)


def report(run: Plan, results: list[NotebookResult], references: dict, seconds: float, progress: Progress) -> int:
    """grades.csv and grading-report.json; returns the exit code (3 when a notebook needs attention)."""
    settings = run.settings
    meta = {"course": str(settings.course), "jobs": settings.jobs,
            "sandbox": "bwrap" if run.limits.sandbox else "none", "cgroups": run.cgroups,
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(settings).items()},
            "limits": asdict(run.limits), "gradebook_backup": run.backup,
            "references": {assignment: ref.summary() for assignment, ref in sorted(references.items())},
            "partial": bool(settings.students or settings.assignments or settings.shard),
            "seconds": round(seconds, 2)}
    write_outputs(settings.course, results, meta)
    bad = [r for r in results if r.status != Status.GRADED]
    progress.log(f"{len(results) - len(bad)} of {len(results)} notebooks graded"
                 + (f"; {len(bad)} need attention (see grading-report.json)" if bad else ""))
    return 3 if bad else 0


def grade(course: Path, overrides: dict | None = None) -> tuple[int, list[NotebookResult]]:
    """Grade the selected submissions of ``course`` (``overrides``: the command line's settings); return
    (exit code, results)."""
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
