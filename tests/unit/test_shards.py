"""Which shard a grading run takes (autograder/grading/plan/shards.py): I/N, --shard auto under Slurm and
Kubernetes, and the files each shard writes alone. Pure functions: no course, no scheduler."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course import REPO_ROOT as REPO
from autograder.grading.plan import shards

STUDENTS = [f"student-{i:03d}" for i in range(300)] + ["Zoë", "o'brien", "a,b"]


def test_every_student_in_exactly_one_shard_whatever_the_listing_order():
    """The split depends on the ids and the count only: a shuffled listing gives the same shards."""
    split = {s: shards.shard_of(s, 4) for s in STUDENTS}
    shuffled = random.Random(0).sample(STUDENTS, len(STUDENTS))
    assert {s: shards.shard_of(s, 4) for s in shuffled} == split
    for student in STUDENTS:
        assert [i for i in range(4) if shards.in_shard(student, (i, 4))] == [split[student]]
    assert all(shards.in_shard(s, None) for s in STUDENTS)
    assert set(split.values()) == {0, 1, 2, 3}


@pytest.mark.parametrize("spec,expected", [("0/1", (0, 1)), ("2/3", (2, 3)), ("auto", "auto"), (" AUTO ", "auto")])
def test_parse(spec, expected):
    assert shards.parse(spec) == expected


@pytest.mark.parametrize("spec", ["3/2", "-1/2", "1", "a/b", "1/0", "", "0/2/3"])
def test_parse_refuses(spec):
    with pytest.raises(ValueError, match="I/N"):
        shards.parse(spec)


@pytest.mark.parametrize("env,expected", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"}, (0, 4)),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3",
      "SLURM_ARRAY_TASK_COUNT": "4"}, (3, 4)),
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "8"}, (4, 8)),   # 1-8
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6",
      "SLURM_ARRAY_TASK_STEP": "2"}, (2, 4)),   # --array=0-6:2
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, (1, 2)),   # no MIN/MAX
    ({"JOB_COMPLETION_INDEX": "2", "SHARDS": "x"}, (2, 5)),
])
def test_from_environment(env, expected):
    count = 5 if "JOB_COMPLETION_INDEX" in env else None
    assert shards.from_environment(env, count) == expected


def test_slurm_count_must_agree_with_a_given_count():
    env = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "1"}
    assert shards.from_environment(env, 2) == (1, 2)
    with pytest.raises(ValueError, match="array has 2 tasks but the shard count is 3"):
        shards.from_environment(env, 3)


@pytest.mark.parametrize("env,message", [
    ({}, "none is set"),
    ({"PATH": "/bin", "SLURM_JOB_ID": "7"}, "none is set"),   # a plain sbatch job is not an array
    ({"SLURM_ARRAY_TASK_ID": " "}, "none is set"),
    ({"JOB_COMPLETION_INDEX": "1"}, "--shard-count"),
    ({"SLURM_ARRAY_TASK_ID": "1"}, "cannot tell the size"),
    ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"}, "not a whole number"),
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "5",
      "SLURM_ARRAY_TASK_COUNT": "3"}, "one range"),   # --array=0,2,5
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "2"}, "outside"),
])
def test_from_environment_refuses(env, message):
    with pytest.raises(ValueError, match=message):
        shards.from_environment(env)


def test_kubernetes_index_outside_the_count():
    with pytest.raises(ValueError, match="outside 0..2"):
        shards.from_environment({"JOB_COMPLETION_INDEX": "3"}, 3)


def test_resolve():
    slurm = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}
    assert shards.resolve("auto", None, slurm) == (1, 2)
    assert shards.resolve((0, 2), None, {}) == (0, 2)
    assert shards.resolve([0, 2], 2, {}) == (0, 2)   # from nbgrader_config.py, a list
    assert shards.resolve(None, 4, {}) is None
    with pytest.raises(ValueError, match="disagree"):
        shards.resolve((0, 2), 3, {})


def test_each_shard_writes_files_of_its_own():
    """Two shards of one run, or the same shard of two counts, never share a file; the whole class keeps the
    names a one-machine run has always written."""
    assert shards.output_names(None) == ("grades.csv", "grading-report.json")
    assert shards.work_name(None) == "."
    names = [(*shards.output_names((i, n)), shards.work_name((i, n))) for n in (1, 2, 3) for i in range(n)]
    flat = [name for triple in names for name in triple]
    assert len(flat) == len(set(flat))
    assert shards.output_names((1, 3)) == ("grades.shard-1-of-3.csv", "grading-report.shard-1-of-3.json")


def test_report_names_round_trip():
    for shard in [(0, 1), (3, 4), (11, 12)]:
        assert shards.report_shard(shards.output_names(shard)[1]) == shard
    for name in ["grading-report.json", "grading-report.shard-2-of-2.json", "grades.shard-0-of-2.csv",
                 "grading-report.shard-0-of-2.json.tmp"]:
        assert shards.report_shard(name) is None


@pytest.fixture
def no_scheduler(monkeypatch):
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                 "SLURM_ARRAY_TASK_STEP", "JOB_COMPLETION_INDEX"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_settings_take_the_count_from_the_command_line_else_the_course_config(no_scheduler):
    from autograder.grading.plan.settings import Settings

    no_scheduler.setenv("JOB_COMPLETION_INDEX", "1")
    config = {"PTEGrading": {"shard_count": 3}}
    assert Settings.resolve(Path("."), config, {"shard": "auto"}).shard == (1, 3)
    assert Settings.resolve(Path("."), config, {"shard": "auto", "shard_count": 2}).shard == (1, 2)
    with pytest.raises(ValueError, match="--shard-count"):
        Settings.resolve(Path("."), {}, {"shard": "auto"})


def test_auto_outside_a_scheduler_is_a_usage_error(tmp_path, no_scheduler):
    """Exit 2 and a message that says what --shard auto looks for; nothing is graded."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JOB_COMPLETION"))}
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "--course", str(tmp_path), "--shard", "auto"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "SLURM_ARRAY_TASK_ID" in proc.stderr and "JOB_COMPLETION_INDEX" in proc.stderr
    assert "--shard I/N" in proc.stderr
    assert not (tmp_path / "grades.csv").exists()
