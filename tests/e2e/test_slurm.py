"""The Slurm recipe (deploy/slurm/) against a real Slurm: a single-node cluster on loopback, started from
Debian's packages (tests/support/slurmkit.py), and a PostgreSQL gradebook (tests/support/pgkit.py).

A class of four lesson-01 students (honest, untouched, a wrong answer, one broken notebook), two a shard, is
graded once on one machine, and once as a 2-task job array with its finishing job. Shard 0 holds the broken
notebook, so its task fails as the one-machine run does (exit status 3). Shard 1 grades its untouched student
(recorded in the gradebook) and, while it grades the wrong one, its task is cancelled: the finishing job must
name exactly shard 1's students, the one already recorded too. (Until issue 47 the class had six, three a
shard: a second honest student and a second wrong one were graded four times each and proved nothing the
first ones do not; a row that differs shows in any row.) The task is requeued, a new finishing job
runs, and the class's grades.csv must equal the one-machine run's, row for row. Where Slurm or PostgreSQL
cannot start, the test fails and says why.
"""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder import course
from autograder.grading.plan import shards

import coursekit as kit
import pgkit
import slurmkit

LESSON = "01_tensors_and_views"
SUBMIT = course.REPO_ROOT / "deploy" / "slurm" / "submit.py"
SHARDS = 2


def names_for(kinds: list[str], count: int) -> dict[str, str]:
    """A student id per kind, chosen so that the kinds take turns over the shards (ids hash, so three
    students a shard must be picked, not hoped for)."""
    chosen = {}
    for position, kind in enumerate(kinds):
        suffix = 0
        while shards.shard_of(f"{kind}-{suffix}", count) != position % count:
            suffix += 1
        chosen[f"{kind}-{suffix}"] = kind
    return chosen


def build_class(root: Path) -> dict[str, str]:
    """Four submissions in ``root`` (a scratch course with lesson 01 released); student -> kind."""
    release_nb = kit.release_notebook(root, LESSON)
    solution_nb = nbformat.read(course.solution_path(LESSON), as_version=4)
    pitfalls = kit.load_pitfalls(LESSON)
    wrong = {"flatten_features": next(iter(pitfalls["flatten_features"].values()))}
    # shard 0: honest, broken; shard 1: untouched, wrong-flatten (graded in that order: by name)
    kinds = ["honest", "untouched", "broken", "wrong-flatten"]
    students = names_for(kinds, SHARDS)
    for student, kind in students.items():
        if kind == "broken":
            folder = root / "submitted" / student / LESSON
            folder.mkdir(parents=True)
            (folder / f"{LESSON}.ipynb").write_text('{"cells": [ this is not JSON')
            continue
        nb = {"honest": kit.fill_answers(release_nb, solution_nb),
              "untouched": release_nb,
              "wrong-flatten": kit.fill_answers(release_nb, solution_nb, wrong)}[kind]
        kit.submit(root, student, LESSON, nb)
    return students


def rows(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    return [lines[0], *sorted(lines[1:])]


def submit(cluster, *args: str) -> dict:
    done = cluster.run(sys.executable, str(SUBMIT), *args, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def finished(cluster, job: str, timeout: float) -> tuple[str, str]:
    """Wait for a job to end; (state, exit code "N:signal")."""
    state = cluster.wait_until(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"},
                               timeout)
    shown = cluster.run("scontrol", "show", "job", "-o", job, check=False).stdout
    code = next((f.split("=", 1)[1] for f in shown.split() if f.startswith("ExitCode=")), "?")
    return state, code


@pytest.fixture(scope="module")
def gradebook_url():
    try:
        with pgkit.postgres_server() as url:
            yield url
    except pgkit.Unavailable as exc:
        pytest.fail(f"the Slurm test needs PostgreSQL for its shared gradebook: {exc}")


@pytest.fixture(scope="module")
def slurm():
    try:
        with slurmkit.cluster(cpus=SHARDS) as cluster:
            yield cluster
    except slurmkit.Unavailable as exc:
        pytest.fail(f"no Slurm cluster for the test: {exc}")


def test_job_array_grades_the_class_as_one_machine_does(tmp_path, gradebook_url, slurm):
    started = time.monotonic()
    one = kit.make_scratch_course(tmp_path / "one-machine", [LESSON])
    students = build_class(one)
    by_shard = {i: sorted(s for s in students if shards.shard_of(s, SHARDS) == i) for i in range(SHARDS)}
    assert all(len(group) == 2 for group in by_shard.values())
    assert [students[s] for s in by_shard[1]] == ["untouched", "wrong-flatten"], by_shard

    cluster_course = tmp_path / "cluster"
    shutil.copytree(one, cluster_course)   # the same class, before anything is graded
    (cluster_course / "gradebook.db").unlink()
    with open(cluster_course / "nbgrader_config.py", "a") as handle:
        handle.write(f"\nc.CourseDirectory.db_url = {gradebook_url!r}\n")
    subprocess.run(course.nbgrader_cmd("generate_assignment", LESSON, "--force", "--log-level=ERROR"),
                   cwd=cluster_course, check=True, capture_output=True, timeout=300)

    # one worker, as each task has (--jobs 1 below): one warm template, not one a worker
    alone = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(one), "--jobs", "1"],
                           capture_output=True, text=True, timeout=900)
    assert alone.returncode == 3, alone.stderr   # 3: the broken notebook needs attention
    one_machine_s = time.monotonic() - started
    for cache in ("reference-cache", "mplcache"):   # keyed by the host, as on a cluster's shared filesystem
        # (the test run's shared reference cache may be both folders already: tests/support/coursekit.py)
        shutil.copytree(one / ".grading" / cache, cluster_course / ".grading" / cache, dirs_exist_ok=True)

    # the array, with its finishing job; shard 1's task is cancelled while its second notebook runs (the first
    # is graded, perhaps recorded in the gradebook already, but the shard's report is never written)
    jobs = submit(slurm, "--course", str(cluster_course), "--shards", str(SHARDS), "--throttle", str(SHARDS),
                  "--jobs", "1")
    array, logs = jobs["array"], Path(jobs["logs"])
    task_log = logs / f"grade-{array}_1.out"
    deadline = time.monotonic() + 600
    while "graded 1/" not in (task_log.read_text() if task_log.exists() else "") and time.monotonic() < deadline:
        assert slurm.state(f"{array}_1") in ("PENDING", "RUNNING", "CONFIGURING"), slurm.state(f"{array}_1")
        time.sleep(0.2)
    slurm.run("scancel", f"{array}_1")
    assert slurm.wait_until(f"{array}_1", {"CANCELLED"}, 60) == "CANCELLED", task_log.read_text()
    assert "graded 2/" not in task_log.read_text(), "the task ended before it was cancelled"
    state, code = finished(slurm, jobs["finish"], 600)
    first_finish = (logs / f"finish-{jobs['finish']}.out").read_text()
    assert (state, code) == ("FAILED", "4:0"), first_finish   # 4: students no shard graded
    named = sorted(line.split()[2].split("/")[0] for line in first_finish.splitlines()
                   if line.startswith("not graded:"))
    assert named == by_shard[1], first_finish
    assert finished(slurm, f"{array}_0", 60) == ("FAILED", "3:0")   # shard 0: the broken notebook, as one machine
    fault_s = time.monotonic() - started - one_machine_s

    # the cancelled task again, then a new finishing job: the whole class
    slurm.run("scontrol", "requeue", f"{array}_1")
    slurm.run("scontrol", "update", f"jobid={array}_1", "StartTime=now")
    again = submit(slurm, "--course", str(cluster_course), "--shards", str(SHARDS), "--finish-after", array)
    state, code = finished(slurm, again["finish"], 600)
    final = (logs / f"finish-{again['finish']}.out").read_text()
    assert (state, code) == ("FAILED", "3:0"), final   # 3, as the one-machine run: the broken notebook
    assert "not graded" not in final, final
    assert "restart 1" in task_log.read_text()

    assert rows(cluster_course / "grades.csv") == rows(one / "grades.csv")
    graded = [line.split(",")[0] for line in rows(cluster_course / "grades.csv")[1:]]
    assert sorted(graded) == sorted(students), "every student once"
    report = json.loads((cluster_course / "grading-report.json").read_text())
    assert report["not_graded"] == [] and report["shard_count"] == SHARDS
    with open(cluster_course / "grades.csv", newline="") as handle:
        status = {row["student_id"]: row["status"] for row in csv.DictReader(handle)}
    assert [s for s, v in status.items() if v != "graded"] == [s for s, k in students.items() if k == "broken"]
    for i in range(SHARDS):   # each task wrote its own files, named after its shard
        assert sorted(r["student"] for r in json.loads(
            (cluster_course / f"grading-report.shard-{i}-of-{SHARDS}.json").read_text())["submissions"]) == by_shard[i]
    # every process of a task has the course as PTE_COURSE
    left = kit.processes_left(lambda proc: proc.environ().get("PTE_COURSE") == str(cluster_course))
    assert not left, f"processes of the graded course outlive every job (the cancelled task's, most likely): {left}"
    rest_s = time.monotonic() - started - one_machine_s - fault_s
    print(f"slurm e2e: one machine {one_machine_s:.0f} s; array of {SHARDS} tasks with a cancelled one and its "
          f"finishing job {fault_s:.0f} s; requeue and finish {rest_s:.0f} s")
