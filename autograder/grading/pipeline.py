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

from . import canonical, collect, judge, reference, runner, sandbox

STATUSES = ("graded", "timeout", "kernel-died", "memory-limit", "output-limit", "corrupt", "missing", "refused",
            "tampered", "worker-died", "error")
GRADING_DIR = ".grading"


class UsageError(Exception):
    """Bad arguments: exit code 2."""


@dataclass
class NotebookResult:
    student: str
    assignment: str
    notebook: str
    status: str = "graded"
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    execution_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass
class Options:
    course: Path
    assignments: list[str] | None = None
    students: list[str] | None = None
    jobs: int = os.cpu_count() or 1
    timeout_s: float = 600.0
    cell_timeout_s: float | None = None
    memory_mb: int = 3072
    output_mb: float = 2.0
    sandbox: str = "auto"          # auto | bwrap | none
    shard: tuple[int, int] | None = None
    feedback: bool = True
    phase2_timeout_s: float = 900.0


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


def discover(coursedir, options: Options, layout: dict) -> list[tuple[str, str]]:
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

def grade_submission(coursedir_paths: dict, student: str, assignment: str,
                     notebooks: dict[str, float], tests: dict[str, dict[str, str]], limits: runner.Limits,
                     staged_root: str, scratch_root: str, cpu_slots=None,
                     judged_with: dict[str, list[dict]] | None = None) -> list[dict]:
    """Check, rebuild, execute and judge one student's assignment against ``judged_with`` (the
    assignment's reference observations); stage the results. Never raises."""
    slot = cpu_slots.get() if cpu_slots is not None else None
    try:
        if slot is not None:
            limits = dataclasses.replace(limits, cpus=slot)
        return _grade_submission(coursedir_paths, student, assignment, notebooks, tests, limits,
                                 staged_root, scratch_root, judged_with)
    finally:
        if slot is not None:
            cpu_slots.put(slot)


def _grade_submission(coursedir_paths, student, assignment, notebooks, tests, limits, staged_root, scratch_root,
                      judged_with):
    results = []
    source_dir = Path(coursedir_paths["submitted"]) / student / assignment
    release_dir = Path(coursedir_paths["release"]) / assignment
    staged_dir = Path(staged_root) / student / assignment
    try:   # root never follows a link a student planted: the folder must be a real one
        collect.check_folder(source_dir, Path(coursedir_paths["submitted"]))
        present, refusal = collect.regular_notebooks(source_dir), None
    except canonical.SubmissionError as exc:
        present, refusal = [], exc
    for name, max_score in notebooks.items():
        start = time.monotonic()
        result = NotebookResult(student, assignment, name, max_score=max_score)
        path = source_dir / f"{name}.ipynb"
        try:
            if refusal is not None:
                raise refusal
            if f"{name}.ipynb" not in present:
                others = [p for p in present if p != f"{name}.ipynb"]
                hint = f"; found {', '.join(others)} (renamed?)" if others else ""
                raise canonical.SubmissionError("missing", f"{name}.ipynb was not submitted{hint}")
            submitted = canonical.read_submission(path, collect.read_regular(path, source_dir,
                                                                             collect.MAX_NOTEBOOK_BYTES))
            release = nbformat.read(release_dir / f"{name}.ipynb", as_version=4)
            reference = judged_with or judge.load_reference(Path(coursedir_paths["source"]), assignment)
            built = canonical.build(release, submitted, tests[name])
            result.notes = built.notes
            scratch = Path(tempfile.mkdtemp(prefix="nb-", dir=scratch_root))
            try:
                outcome = runner.execute(built.nb, limits, scratch, built.deleted_tests, reference)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            result.notes += outcome.notes
            findings = built.findings + outcome.findings
            result.status, result.reason = outcome.status, outcome.reason
            if result.status == "graded" and findings:
                result.status, result.reason = "tampered", "; ".join(findings)
            elif findings:
                result.notes = findings + result.notes
            result.execution_seconds = outcome.execution_seconds
            staged_dir.mkdir(parents=True, exist_ok=True)
            try:   # nbgrader's late-penalty input: only a small regular file is copied
                stamp = collect.read_regular(source_dir / "timestamp.txt", source_dir, collect.MAX_TIMESTAMP_BYTES)
                (staged_dir / "timestamp.txt").write_bytes(stamp)
            except canonical.SubmissionError as exc:
                if exc.status != "missing":
                    result.notes.append(f"timestamp.txt ignored: {exc.reason}")
            nbformat.write(outcome.nb, staged_dir / f"{name}.ipynb")
        except canonical.SubmissionError as exc:
            result.status, result.reason = exc.status, exc.reason
        except judge.ReferenceMissing as exc:
            result.status, result.reason = "error", f"grader error: {exc}"
        except Exception as exc:  # a grader fault on one notebook must not stop the class
            result.status, result.reason = "error", f"grader error: {type(exc).__name__}: {exc}"[:300]
        result.seconds = time.monotonic() - start
        results.append(asdict(result))
    return results


# ---------------------------------------------------------------- phase 2 and outputs

def record(course: Path, assignment: str, staged_root: Path, students: list[str],
           timeout_s: float = 900.0) -> str | None:
    """nbgrader autograde + feedback of the staged notebooks; returns an error text or None."""
    cmd = [sys.executable, "-m", "autograder.grading.phase2", str(course), assignment, str(staged_root)]
    if len(students) == 1:
        cmd.append(students[0])
    try:
        proc = subprocess.run(cmd, cwd=course, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"nbgrader's recording step ran longer than {timeout_s:g} s"
    if proc.returncode != 0:
        return (proc.stdout + proc.stderr).strip()[-2000:]
    return None


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
        worst = next((r.status for r in items if r.status != "graded"), "graded")
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


def matplotlib_cache(grading_dir: Path) -> Path:
    """Build matplotlib's font cache once so each sandbox does not rebuild it."""
    cache = grading_dir / "mplcache"
    if not any(cache.glob("fontlist-*.json")):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"],
                       env=dict(os.environ, MPLCONFIGDIR=str(cache)), check=False, capture_output=True)
    return cache


def reference_for(paths: dict, assignment: str, notebooks: list[str], limits: runner.Limits, scratch_root: str,
                  cache_root: str, cpu_slots=None) -> reference.HostReference:
    """The host's reference of one assignment, computed in a worker on its own CPU slot (as a student's run)."""
    slot = cpu_slots.get() if cpu_slots is not None else None
    try:
        if slot is not None:
            limits = dataclasses.replace(limits, cpus=slot)
        return reference.host_reference(Path(paths["source"]), assignment, notebooks, limits, Path(scratch_root),
                                        Path(cache_root))
    finally:
        if slot is not None:
            cpu_slots.put(slot)


def course_settings(coursedir) -> dict:
    """What the course's nbgrader_config.py says that the grading command must use as well."""
    config = coursedir.config
    execute = config.get("Execute", {})
    grading = config.get("PTEGrading", {})
    return {"cell_timeout_s": float(execute.get("timeout", 120) or 120),
            "threads": int(grading.get("kernel_threads", 1))}


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
    return jobs > 1 and graded_together > 1 and any(item.status == "timeout" for item in items)


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


def grade(options: Options) -> tuple[int, list[NotebookResult]]:
    """Grade the selected submissions; return (exit code, results)."""
    course = options.course.resolve()
    if not course.is_dir():
        raise UsageError(f"course folder {course} does not exist")
    if options.jobs < 1 or options.timeout_s <= 0 or options.memory_mb < 256:
        raise UsageError("--jobs must be >= 1, --timeout-s > 0 and --memory-mb >= 256")
    coursedir = load_coursedir(course)
    layout = course_layout(coursedir)
    tasks = discover(coursedir, options, layout)
    if options.sandbox in ("bwrap", "auto") and not sandbox.sandbox_available():
        raise UsageError("bubblewrap is missing or cannot create namespaces on this host, so submissions could "
                         "read the course (solutions, reference observations, the gradebook). Install it "
                         "(Debian: apt-get install bubblewrap), or pass --sandbox none to grade without "
                         "isolation, knowingly.")
    use_bwrap = options.sandbox != "none"
    from . import cgroups

    cgroup_kind, cgroup_problem = cgroups.available() if use_bwrap else (None, "")
    progress = Progress(sum(len(layout[a]["notebooks"]) for _, a in tasks))
    if use_bwrap and cgroup_kind is None:
        progress.log(f"warning: no per-kernel cgroups ({cgroup_problem}); CPU, memory and process limits fall "
                     "back to taskset and prlimit, which a submission can widen or share")
    if not use_bwrap:
        progress.log("warning: grading WITHOUT the bubblewrap sandbox (--sandbox none): submissions can read "
                     "the course files, including the reference observations")

    grading_dir = course / GRADING_DIR
    staged_root = grading_dir / "staged"
    shutil.rmtree(staged_root, ignore_errors=True)
    staged_root.mkdir(parents=True)
    scratch_root = Path(tempfile.mkdtemp(prefix="pte-grading-", dir=os.environ.get("PTE_SCRATCH") or None))
    os.chmod(scratch_root, 0o711)
    os.environ["PTE_MPL_CACHE"] = str(matplotlib_cache(grading_dir))
    backup = backup_gradebook(coursedir, course)

    settings = course_settings(coursedir)
    limits = runner.Limits(timeout_s=options.timeout_s, memory_mb=options.memory_mb, output_mb=options.output_mb,
                           cell_timeout_s=options.cell_timeout_s or min(settings["cell_timeout_s"], options.timeout_s),
                           threads=settings["threads"], sandbox=use_bwrap)
    paths = {"submitted": str(Path(coursedir.format_path(coursedir.submitted_directory, ".", ".")).resolve()),
             "release": str(Path(coursedir.format_path(coursedir.release_directory, ".", ".")).resolve()),
             "source": str(Path(coursedir.format_path(coursedir.source_directory, ".", ".")).resolve())}
    manager = multiprocessing.get_context("forkserver").Manager()
    cpu_slots = manager.Queue()
    slots = cpu_sets(options.jobs)
    for slot in slots:
        cpu_slots.put(slot)
    started = time.monotonic()
    results: list[NotebookResult] = []
    remaining: dict[str, int] = {}
    for _, assignment in tasks:
        remaining[assignment] = remaining.get(assignment, 0) + 1

    def record_assignment(assignment: str) -> list[str]:
        """Phase 2 for one assignment; returns the students nbgrader could not record."""
        students = sorted({s for s, a in tasks if a == assignment and (staged_root / s / a).is_dir()})
        if not students or not record(course, assignment, staged_root, students, options.phase2_timeout_s):
            return []
        if len(students) == 1:
            return students
        # find the submissions nbgrader chokes on without losing the others
        return [s for s in students if record(course, assignment, staged_root, [s], options.phase2_timeout_s)]

    context = multiprocessing.get_context("forkserver")
    recordings: dict[str, futures.Future] = {}
    references: dict[str, reference.HostReference] = {}
    # Phase 2 of a finished assignment (one writer to the gradebook at a time) overlaps
    # with phase 1 of the next one.
    pool = Workers(options.jobs, context, cpu_slots, slots)
    with futures.ThreadPoolExecutor(max_workers=1) as recorder:
        # The reference each assignment is judged with: the solution run here, in the sandbox (cached).
        wanted = sorted({assignment for _, assignment in tasks})
        computing = {assignment: pool.submit(reference_for, paths, assignment, list(layout[assignment]["notebooks"]),
                                             limits, str(scratch_root), str(grading_dir), cpu_slots)
                     for assignment in wanted}
        for assignment, job in computing.items():
            try:
                references[assignment] = job.result()
            except Exception as exc:  # the worker itself died: judge with the stored record
                stored = reference.load_stored(Path(paths["source"]), assignment) or {}
                references[assignment] = reference.HostReference(
                    assignment, stored, "stored", problem=f"the reference run failed: {type(exc).__name__}: {exc}")
        report_references(references, progress)
        if any("BrokenProcessPool" in ref.problem for ref in references.values()):
            pool.replace()
        pending = {
            pool.submit(grade_submission, paths, student, assignment, layout[assignment]["notebooks"],
                        layout[assignment]["tests"], limits, str(staged_root), str(scratch_root),
                        cpu_slots, references[assignment].cells): (student, assignment)
            for student, assignment in sorted(tasks, key=lambda t: (t[1], t[0]))
        }

        def outcome_of(job: futures.Future, student: str, assignment: str) -> list[NotebookResult]:
            try:
                return [NotebookResult(**r) for r in job.result()]
            except BrokenProcessPool:
                raise
            except Exception as exc:  # a grader fault on this submission alone
                return [NotebookResult(student, assignment, name, status="error", max_score=mx,
                                       reason=f"grader worker failed: {type(exc).__name__}: {exc}"[:300])
                        for name, mx in layout[assignment]["notebooks"].items()]

        def graded_alone(student: str, assignment: str) -> list[NotebookResult]:
            job = pool.submit(grade_submission, paths, student, assignment, layout[assignment]["notebooks"],
                              layout[assignment]["tests"], limits, str(staged_root), str(scratch_root), cpu_slots,
                              references[assignment].cells)
            try:
                return outcome_of(job, student, assignment)
            except BrokenProcessPool:   # it killed its worker again, alone: its own doing
                pool.replace()
                return [NotebookResult(student, assignment, name, status="worker-died", max_score=mx,
                                       reason="the grading process of this submission died twice, the second time "
                                              "graded alone (for example killed for its memory use)")
                        for name, mx in layout[assignment]["notebooks"].items()]

        def settle(assignment: str, items: list[NotebookResult]) -> None:
            for item in items:
                results.append(item)
                progress.update(item)
            remaining[assignment] -= 1
            if remaining[assignment] == 0:
                recordings[assignment] = recorder.submit(record_assignment, assignment)

        starved: list[tuple[str, str]] = []
        broken: list[tuple[str, str]] = []
        for done in futures.as_completed(pending):
            student, assignment = pending[done]
            try:
                items = outcome_of(done, student, assignment)
            except BrokenProcessPool:
                broken.append((student, assignment))   # on a pool whose worker died: graded again below
                continue
            if rerun_alone(items, options.jobs, len(pending)):
                starved.append((student, assignment))   # decided below, once nothing else runs
                continue
            settle(assignment, items)
        # A worker died (the OOM killer, a crash): every submission still on that pool failed with it.
        # Each is graded again alone in a new pool; only one that kills its worker again is at fault.
        if broken:
            pool.replace()
        for student, assignment in sorted(broken, key=lambda t: (t[1], t[0])):
            progress.log(f"{student}/{assignment} was on a grading process that died; grading it again alone")
            items = graded_alone(student, assignment)
            for item in items:
                item.notes.append("graded again alone: a grading process died while it was being graded")
            settle(assignment, items)
        # A notebook that ran out of time while other submissions were graded beside it may only
        # have been starved of CPU by them (a neighbour that hogs the cores). It is graded again
        # with nothing else running, and that run is the one that counts.
        for student, assignment in sorted(starved, key=lambda t: (t[1], t[0])):
            progress.log(f"{student}/{assignment} timed out while other submissions ran; grading it again alone")
            items = graded_alone(student, assignment)
            for item in items:
                item.notes.append("timed out again when graded alone" if item.status == "timeout" else
                                  "timed out while graded beside other submissions; graded again alone")
            settle(assignment, items)
        failed = {(student, assignment) for assignment, job in recordings.items() for student in job.result()}
    pool.shutdown()
    shutil.rmtree(scratch_root, ignore_errors=True)
    manager.shutdown()
    reap_children()
    for student, assignment in sorted(failed):
        progress.log(f"nbgrader could not record {student}/{assignment}")
        for r in results:
            if (r.student, r.assignment) == (student, assignment) and r.status not in ("corrupt", "missing", "refused"):
                r.status, r.reason = "error", "nbgrader failed to record this submission's grades"
    scores = read_scores(coursedir, [(r.student, r.assignment, r.notebook) for r in results])
    for r in results:
        r.score = float(scores.get((r.student, r.assignment, r.notebook)) or 0.0)
    meta = {"course": str(course), "jobs": options.jobs, "sandbox": "bwrap" if use_bwrap else "none",
            "cgroups": cgroup_kind or "none",
            "limits": asdict(limits), "gradebook_backup": backup,
            "references": {assignment: ref.summary() for assignment, ref in sorted(references.items())},
            "partial": bool(options.students or options.assignments or options.shard),
            "seconds": round(time.monotonic() - started, 2)}
    write_outputs(course, results, meta)
    bad = [r for r in results if r.status != "graded"]
    progress.log(f"{len(results) - len(bad)} of {len(results)} notebooks graded"
                 + (f"; {len(bad)} need attention (see grading-report.json)" if bad else ""))
    return (3 if bad else 0), results
