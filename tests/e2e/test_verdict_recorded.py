"""The judge's verdict is the recorded score: ``verdict_mismatches`` names each grade where nbgrader's recorded score
differs from the judge's points.

The end-to-end case (a course preprocessor that drops the judge's failures, the notebook then ``error`` with a
reason naming the grades, and one score everywhere: gradebook, nbgrader's export, ``grades.csv``, the LMS exports,
the feedback page) runs in tests/e2e/test_dead_worker.py's grading run
(``test_a_score_nbgrader_changed_is_a_grader_fault``): one run with more students instead of two.
"""
from __future__ import annotations

from autograder.grading.report.reporting import verdict_mismatches


def test_mismatches_name_each_grade():
    assert verdict_mismatches({"test_a": 2.0, "test_b": 0.0}, {"test_a": 2.0, "test_b": 0.0}) == []
    assert verdict_mismatches({"test_a": 2.0, "test_b": 0.0}, {"test_a": 2.0, "test_b": 3.0}) == [
        "test_b: the judge gave 0, nbgrader recorded 3"]
    assert verdict_mismatches({"test_a": 2.0}, {}) == ["test_a: the judge gave 2, nbgrader recorded nothing"]
