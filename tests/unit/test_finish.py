"""The finishing step's decisions (autograder/grading/report/finish.py), without a course: which reports make up
the class, a notebook graded twice counted once, and every submission no shard graded named with its shard.
tests/e2e/test_slurm.py and tests/e2e/test_grading_postgres.py run it on graded classes."""
from __future__ import annotations

import pytest

from autograder.grading.messages import GradingReport, NotebookResult
from autograder.grading.plan import shards
from autograder.grading.plan.planning import UsageError
from autograder.grading.report import finish

LESSON = "01_tensors_and_views"


def result(student, status="graded", score=0.0):
    return NotebookResult(student, LESSON, LESSON, status=status, score=score, max_score=10.0)


def report(submissions):
    return GradingReport(course="c", partial=False, submissions=submissions, settings={"assignments": None})


def write_report(folder, shard, submissions):
    path = folder / shards.output_names(shard)[1]
    report(submissions).write(path)
    return path


def test_reports_of_one_count(tmp_path):
    write_report(tmp_path, (0, 2), [])
    write_report(tmp_path, (1, 2), [])
    (tmp_path / "grading-report.json").write_text("{}")   # the class's own: not a shard's
    found = finish.shard_reports(tmp_path)
    assert sorted(found) == [(0, 2), (1, 2)]
    assert finish.choose_count(found, None) == 2
    write_report(tmp_path, (0, 3), [])
    with pytest.raises(UsageError, match="reports of 2, 3 shards"):
        finish.choose_count(finish.shard_reports(tmp_path), None)
    assert finish.choose_count(finish.shard_reports(tmp_path), 3) == 3
    with pytest.raises(UsageError, match="no shard reports"):
        finish.choose_count({}, None)


def test_graded_twice_counts_once_the_newer_report(tmp_path):
    """Reports come oldest first (finish sorts them by time): the newer result stands, once."""
    older = (tmp_path / "old.json", report([result("ann", "timeout")]))
    newer = (tmp_path / "new.json", report([result("ann", score=7.0), result("bob")]))
    merged, twice = finish.merge([older, newer])
    assert [(r.student, r.status) for r in merged] == [("ann", "graded"), ("bob", "graded")]
    assert twice == [f"ann/{LESSON}/{LESSON}"]


def test_every_missing_submission_is_named_with_its_shard(tmp_path):
    students = [f"s{i}" for i in range(12)]
    expected = [(s, LESSON) for s in students]
    shard_zero = [s for s in students if shards.shard_of(s, 2) == 0]
    late = shard_zero[-1]   # added after shard 0 ran
    found = {(0, 2): write_report(tmp_path, (0, 2), [result(s) for s in shard_zero if s != late])}
    merged, _ = finish.merge([(found[(0, 2)], finish.read_report(found[(0, 2)]))])
    missing = finish.not_graded(expected, merged, 2, found)
    assert sorted(m["student"] for m in missing) == sorted([late] + [s for s in students if s not in shard_zero])
    by_student = {m["student"]: m for m in missing}
    assert "does not hold it" in by_student[late]["why"] and by_student[late]["shard"] == 0
    other = next(s for s in students if s not in shard_zero)
    assert "wrote no report" in by_student[other]["why"] and by_student[other]["shard"] == 1
    assert finish.not_graded(expected, merged + [r for r in finish.merge([(None, report([
        result(s) for s in students]))])[0]], 2, found) == []
