"""A grading process that dies costs only the submission that killed it; and the judge's verdict is the recorded
score (one grading run proves both: its claims do not meet).

The stand-in for the OOM killer: one submission's kernel leaves a flag file in its runtime
folder (the only host folder it shares with the grader) and sleeps; a watcher thread in this
test then SIGKILLs the grading worker process that runs that kernel, every time the flag
appears. A dead worker breaks the process pool: the grader must replace it, grade every
submission that was on the broken pool again alone, keep the honest ones' exact scores, and
give the culprit (which kills its worker again when graded alone) the status `worker-died`.
`grade()` must finish and write `grades.csv`.

The judge's verdict is the recorded score. The grader decides each test cell (``judge.settle``) and nbgrader, in
the recording process, turns the cells into scores in the gradebook. A course's ``nbgrader_config.py`` may add
preprocessors to that step; the course here adds one that changes what nbgrader reads (it drops the error outputs
that carry the judge's failures: ``GENEROUS``), which would change grades unseen. Each notebook's result carries the
judge's points per grade id, and after recording each ``auto_score`` is checked against them: the untouched
release (every test failed) becomes ``error`` with a reason naming the grades, never a silent change of grade; the
correct submissions, which have no error output to drop, keep their scores. One score everywhere: that notebook's
grades are then the judge's in the gradebook too, so the formgrader, nbgrader's own export, ``grades.csv`` and the
LMS exports all show the judge's verdict; an LMS export refuses a row in ``error`` unless told otherwise
(tests/e2e/test_verdict_recorded.py tests ``verdict_mismatches`` itself).
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbgrader.api import Gradebook

from autograder import course
from autograder.grading.isolate import cgroups

import coursekit as kit
from test_grading import FULL, LESSON, ensure_bubblewrap

FLAG = "kill-my-grading-worker"
KILLER = ("def linear_forward(x, weight, bias):\n"
          "    import pathlib, sys, time\n"
          "    runtime = pathlib.Path(sys.argv[sys.argv.index('-f') + 1]).parent\n"
          f"    (runtime / {FLAG!r}).write_text('')\n"
          "    time.sleep(60)\n"
          "    return x @ weight.T + bias\n")


GENEROUS = '''

# A course preprocessor that changes what nbgrader reads: every error output is dropped, so every test cell
# looks passed to nbgrader whatever the judge decided.
from nbgrader.converters import Autograde as _Autograde
from nbgrader.preprocessors import NbGraderPreprocessor as _Base


class Generous(_Base):
    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if o.get("output_type") != "error"]
        return nb, resources


_steps = list(_Autograde.class_traits()["autograde_preprocessors"].default())
_at = next(i for i, step in enumerate(_steps) if step.__name__ == "Execute") + 1
c.Autograde.autograde_preprocessors = _steps[:_at] + [Generous] + _steps[_at:]
'''


def worker_of(kernel: psutil.Process) -> psutil.Process | None:
    """The grading worker a kernel runs for: the grader names each kernel's groups ``pte-grading/<worker
    pid>-...`` (a warm kernel is not the worker's descendant: the run's one template forks every worker's)."""
    try:
        groups = Path(f"/proc/{kernel.pid}/cgroup").read_text()
    except OSError:
        return None
    found = re.search(rf"/{cgroups.PARENT}/(\d+)-", groups)
    try:
        return psutil.Process(int(found.group(1))) if found else None
    except psutil.Error:
        return None


def binds_under(proc: psutil.Process, runtime: Path) -> bool:
    """Is ``proc`` the kernel of this runtime folder: a cold one (``ipykernel_launcher``) or a warm one (its
    command line is its template's), whose ZMQ sockets are bound there?"""
    line = " ".join(proc.info["cmdline"] or [])
    if "ipykernel_launcher" not in line and "autograder.warm.template" not in line:
        return False
    try:
        return any(str(c.laddr).startswith(str(runtime) + "/") for c in proc.net_connections("unix"))
    except psutil.Error:
        return False


def watch(scratch: Path, stop: threading.Event, kills: list) -> None:
    while not stop.wait(0.2):
        for flag in scratch.glob(f"*/nb-*/run/{FLAG}"):
            for proc in psutil.process_iter(["cmdline"]):
                if binds_under(proc, flag.parent):
                    worker = worker_of(proc)
                    if worker is not None:
                        os.kill(worker.pid, signal.SIGKILL)
                        kills.append(worker.pid)
            flag.unlink(missing_ok=True)


# honest-a's answer cell also tries to leave this file in the test's folder on the host, which no sandbox shows
HOST_MARK = "student-code-ran-outside-the-sandbox"


def marking(solution: str, host_folder: Path) -> str:
    return (kit.solution_body(solution) + f"\n\ntry:\n    open({str(host_folder / HOST_MARK)!r}, 'w').close()\n"
            "except OSError:\n    pass\n")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    assert ensure_bubblewrap(), "bubblewrap must work here"
    base = tmp_path_factory.mktemp("dead-worker")
    root = kit.make_scratch_course(base / "course", [LESSON])
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(GENEROUS)
    release_nb = kit.release_notebook(root, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    kit.submit(root, "honest-a", LESSON, kit.fill_answers(release_nb, solution_nb, {
        "shares_storage": marking(kit.exercises(solution_nb)["shares_storage"]["solution"].source, base)}))
    kit.submit(root, "honest-b", LESSON, kit.fill_answers(release_nb, solution_nb))
    kit.submit(root, "kills-its-worker", LESSON, kit.fill_answers(release_nb, solution_nb,
                                                                  {"linear_forward": KILLER}))
    kit.submit(root, "untouched", LESSON, release_nb)
    scratch = Path(tempfile.mkdtemp(prefix="pte-dead-worker-"))   # short: the kernels' sockets lie under it
    stop, kills = threading.Event(), []
    watcher = threading.Thread(target=watch, args=(scratch, stop, kills), daemon=True)
    watcher.start()
    try:
        # output to files: the test waits for the grader itself, not for whoever holds its pipes
        with open(base / "out.txt", "w+") as out, open(base / "err.txt", "w+") as err:
            proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(root), "--jobs",
                                   "2", "--timeout-s", "200", "--cell-timeout-s", "90"], stdout=out, stderr=err,
                                  text=True, timeout=600, env=dict(os.environ, PTE_SCRATCH=str(scratch)))
            err.seek(0)
            proc.stderr = err.read()
    finally:
        stop.set()
        watcher.join()
    time.sleep(0.1)
    report = json.loads((root / "grading-report.json").read_text())
    with open("/proc/self/mounts") as mounts:
        left = [line.split()[1] for line in mounts if str(scratch) in line]
    if not left:
        shutil.rmtree(scratch, ignore_errors=True)
    return root, proc, {s["student"]: s for s in report["submissions"]}, kills, left, kernels_left(kills)


def kernels_left(killed: list[int]) -> list[str]:
    """The processes still in a kernel's cgroup of one of the ``killed`` workers (the grader names each
    kernel's groups ``pte-grading/<worker pid>-...``) once the grader has returned. A warm kernel's sockets
    are in its own network namespace, so its cgroup, not its runtime folder, is what finds it."""
    marks = tuple(f"/{cgroups.PARENT}/{pid}-" for pid in killed)
    return kit.processes_left(lambda proc: any(mark in Path(f"/proc/{proc.pid}/cgroup").read_text()
                                               for mark in marks))


def test_a_killed_worker_leaves_no_mount_behind(graded):
    """The killed worker never unmounted its kernel's runtime tmpfs: the grader does it for it at the end."""
    *_, left, _ = graded
    assert not left, f"mounts left under the scratch folder: {left}"


def test_a_killed_worker_leaves_no_kernel_behind(graded):
    """The killed worker's kernel ends with it: for a warm one, its template, relay and PID 1 die in turn."""
    *_, kernels = graded
    assert not kernels, f"kernels still running after the grader returned: {kernels}"


def test_the_culprit_alone_gets_worker_died(graded):
    root, proc, results, kills, *_ = graded
    assert len(kills) >= 2, f"the worker was not killed twice: {kills}\n{proc.stderr}"
    assert results["kills-its-worker"]["status"] == "worker-died", proc.stderr
    assert proc.returncode == 3, proc.stderr


def test_honest_neighbours_keep_their_exact_scores(graded):
    root, proc, results, *_ = graded
    scores = kit.scores(root, LESSON)
    for student in ("honest-a", "honest-b"):
        assert results[student]["status"] == "graded", (results[student], proc.stderr)
        assert scores[student] == FULL, (student, scores[student])
    with open(root / "grades.csv", newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert set(rows) == {"honest-a", "honest-b", "kills-its-worker", "untouched"}
    assert rows["kills-its-worker"]["status"] == "worker-died" and float(rows["kills-its-worker"]["score"]) == 0.0


def test_the_recording_process_outlives_a_failed_batch_and_is_replaced_when_it_dies(graded):
    """nbgrader's recording step runs in one process, batch after batch. A batch nbgrader cannot record comes
    back as an error and the process goes on; a process that died is started again; and a batch records and
    returns feedback to its own students only."""
    from autograder.grading.record import recording

    root, *_ = graded
    staged = root / ".grading" / "staged"
    honest = ("honest-a", "honest-b")
    feedback = {s: root / "feedback" / s / LESSON / f"{LESSON}.html" for s in honest}
    before = {s: path.stat().st_mtime_ns for s, path in feedback.items()}
    recorder = recording.Recorder(root, root / ".grading" / "phase2-test.log")
    try:
        assert recorder.record("no-such-lesson", staged, ["honest-a"], 300), \
            "a batch nbgrader cannot record must come back as an error"
        first = recorder.proc.pid
        assert recorder.record(LESSON, staged, ["honest-a"], 300) is None
        assert recorder.proc.pid == first, "a failed batch must not cost the process"
        recorded = feedback["honest-a"].stat().st_mtime_ns
        recorder.proc.kill()
        recorder.proc.wait()
        assert recorder.record(LESSON, staged, ["honest-a"], 300) is None
        assert recorder.proc.pid != first
        assert feedback["honest-a"].stat().st_mtime_ns != recorded, "the new process did not record the batch"
    finally:
        recorder.stop()
    after = {s: path.stat().st_mtime_ns for s, path in feedback.items()}
    assert after["honest-a"] != before["honest-a"]
    assert after["honest-b"] == before["honest-b"], "a batch rewrote the feedback of a student outside it"
    scores = kit.scores(root, LESSON)
    assert all(scores[s] == FULL for s in honest), scores


def test_a_score_nbgrader_changed_is_a_grader_fault(graded):
    root, proc, results, *_ = graded
    honest, untouched = results["honest-a"], results["untouched"]
    assert honest["status"] == "graded" and honest["score"] == honest["max_score"], honest
    assert untouched["status"] == "error", (untouched, proc.stderr[-2000:])
    assert untouched["reason"].startswith("grader fault: the recorded grades differ from the judge's verdict"), (
        untouched["reason"])
    assert "the judge gave 0, nbgrader recorded" in untouched["reason"]
    assert proc.returncode == 3
    assert_one_score(root, {"honest-a": honest["max_score"], "untouched": 0.0})


def assert_one_score(root, judged: dict[str, float]) -> None:
    """The gradebook (what the formgrader shows), nbgrader's CSV export, grades.csv and the LMS export agree
    with the judge; the LMS export refuses the row in error unless allow_errors."""
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        recorded = {student: gb.find_submission(LESSON, student).score for student in judged}
    assert recorded == judged, recorded
    with open(root / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert {student: float(rows[student]["score"]) for student in judged} == judged, rows
    export = [sys.executable, "-m", "nbgrader", "export", "--log-level=ERROR"]
    subprocess.run(export + ["--to=nbgrader-grades.csv"], cwd=root, check=True, capture_output=True, timeout=300)
    with open(root / "nbgrader-grades.csv", newline="") as handle:
        theirs = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}
    assert {student: theirs.get(student) for student in judged} == judged, theirs
    (root / "lms-ids.csv").write_text("student_id,email\n" + "".join(f"{s},{s}@x\n" for s in rows))
    lms = export + ["--exporter=autograder.lms.MoodleExport", "--to=moodle.csv"]
    refused = subprocess.run(lms, cwd=root, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and "untouched/" in refused.stderr and not (root / "moodle.csv").exists(), (
        refused.stderr[-2000:])
    subprocess.run(lms + ["--MoodleExport.allow_errors=True"], cwd=root, check=True, capture_output=True,
                   timeout=300)
    with open(root / "moodle.csv", newline="") as handle:
        written = {row["Email address"]: float(row[LESSON]) for row in csv.DictReader(handle)}
    assert {s: written.get(f"{s}@x") for s in judged} == judged, written
    for student, points in judged.items():   # the feedback page, made again from the corrected gradebook
        page = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
        total = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", page)
        assert total and float(total.group(1)) == points, (student, total and total.group(0))


def test_the_recording_step_runs_no_student_code(graded):
    """This course's nbgrader_config.py lists autograde steps of its own (GENEROUS, nbgrader's Execute among them),
    which nbgrader loads over the grader's settings. The recording step reads the notebooks the grader ran in its
    sandbox and runs none again: a kernel there would run the student's code unconfined, as the grader. Until
    issue 47's 53rd stop it did, for every batch of such a course: honest-a's answer cell left its file on the
    host (the grading run's batches and the recorder test's above). A step that executes in another list stops
    the recording instead (test_grading_units.py)."""
    root, proc, *_ = graded
    assert not (root.parent / HOST_MARK).exists(), "a kernel outside the sandbox ran honest-a's answer cell"
