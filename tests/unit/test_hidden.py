"""autograder.kernel.hidden: where an instructor's kernel finds the reference, what it says when an observation
differs, and what a grading kernel publishes instead (it records, it never compares)."""
from __future__ import annotations

import pytest
import torch

from autograder.kernel.checks import CheckFailed
from autograder.kernel.hidden import HiddenTests, _find_reference
from autograder.kernel.vocabulary import observations, protocol

LESSON = "07_example"


def _record(monkeypatch, observe) -> list[dict]:
    """What ``observe(hidden)`` publishes in a grading kernel (``PTE_OBSERVE=record``): the payloads, in order."""
    published = []
    monkeypatch.setenv("PTE_OBSERVE", "record")
    monkeypatch.setattr("IPython.display.display", lambda data, raw: published.append((data, raw)))
    hidden = HiddenTests(LESSON, "test_scale")
    observe(hidden)
    hidden.done()
    assert all(raw is True and list(data) == [observations.MIME] for data, raw in published)
    return [data[observations.MIME] for data, _ in published]


def _solution(hidden):
    hidden.observe("scale(ones(2), 3)", torch.full((2,), 3.0), hint="multiply every element")
    hidden.observe("count", 2)


def _course(tmp_path, monkeypatch, payloads) -> None:
    """A course folder whose solutions/LESSON holds ``payloads`` as test_scale's reference; the kernel runs in it."""
    folder = tmp_path / "course" / "solutions" / LESSON
    folder.mkdir(parents=True)
    protocol.Reference(LESSON, {"test_scale": protocol.Reference.entries(payloads)}).write(
        folder / protocol.REFERENCE_FILE)
    monkeypatch.delenv("PTE_OBSERVE", raising=False)
    monkeypatch.delenv("PTE_REFERENCE_ROOT", raising=False)
    monkeypatch.chdir(tmp_path / "course")


def test_a_grading_kernel_publishes_each_observation_and_never_reads_a_reference(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)   # no reference anywhere: recording needs none
    payloads = _record(monkeypatch, _solution)
    assert [(p["test"], p["index"], p["label"], p["hint"]) for p in payloads] == [
        ("test_scale", 0, "scale(ones(2), 3)", "multiply every element"), ("test_scale", 1, "count", None)]
    assert payloads[0]["value"] == observations.encode(torch.full((2,), 3.0))


def test_an_observation_too_large_to_send_is_published_as_such(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    payloads = _record(monkeypatch, lambda h: h.observe("big", torch.zeros(observations.MAX_ELEMENTS + 1)))
    assert payloads[0]["value"]["type"] == "too-large"


def test_the_instructor_side_passes_the_solution_and_explains_a_difference(monkeypatch, tmp_path):
    payloads = _record(monkeypatch, _solution)
    _course(tmp_path, monkeypatch, payloads)
    hidden = HiddenTests(LESSON, "test_scale")
    _solution(hidden)
    hidden.done()

    wrong = HiddenTests(LESSON, "test_scale")
    with pytest.raises(CheckFailed, match=r"scale\(ones\(2\), 3\) \(hidden test\): .*\nLikely mistake: multiply every"):
        wrong.observe("scale(ones(2), 3)", torch.full((2,), 2.0))


def test_the_instructor_side_says_when_the_reference_is_stale(monkeypatch, tmp_path):
    _course(tmp_path, monkeypatch, _record(monkeypatch, _solution))
    renamed = HiddenTests(LESSON, "test_scale")
    with pytest.raises(CheckFailed, match="is 'other' but the reference has 'scale"):
        renamed.observe("other", torch.full((2,), 3.0))
    short = HiddenTests(LESSON, "test_scale")
    short.observe("scale(ones(2), 3)", torch.full((2,), 3.0))
    with pytest.raises(CheckFailed, match="1 hidden observations, the reference holds 2"):
        short.done()
    extra = HiddenTests(LESSON, "test_scale")
    _solution(extra)
    with pytest.raises(CheckFailed, match="more hidden observations than the reference holds"):
        extra.observe("one more", 1)
    with pytest.raises(CheckFailed, match="test_other: no reference observations in"):
        HiddenTests(LESSON, "test_other")


def test_without_a_reference_the_instructor_side_says_how_to_make_one(monkeypatch, tmp_path):
    monkeypatch.delenv("PTE_OBSERVE", raising=False)
    monkeypatch.delenv("PTE_REFERENCE_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckFailed, match=r"solutions/07_example/reference_observations.json\); run `make release`"):
        HiddenTests(LESSON, "test_scale")


def test_the_reference_is_found_where_each_instructor_tool_runs(monkeypatch, tmp_path):
    monkeypatch.delenv("PTE_REFERENCE_ROOT", raising=False)
    in_solutions = tmp_path / "course" / "solutions" / LESSON
    in_solutions.mkdir(parents=True)
    (in_solutions / protocol.REFERENCE_FILE).write_text("{}")
    monkeypatch.chdir(in_solutions)                        # Validate or nbval on the solution: its own folder
    assert _find_reference(LESSON) == in_solutions / protocol.REFERENCE_FILE
    autograded = tmp_path / "course" / "autograded" / "ann" / LESSON
    autograded.mkdir(parents=True)
    monkeypatch.chdir(autograded)                          # nbgrader autograde: the course root above
    assert _find_reference(LESSON) == in_solutions / protocol.REFERENCE_FILE
    elsewhere = tmp_path / "elsewhere" / LESSON
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    assert _find_reference(LESSON) is None
    monkeypatch.setenv("PTE_REFERENCE_ROOT", str(tmp_path / "course"))   # a course folder named outright
    assert _find_reference(LESSON) == in_solutions / protocol.REFERENCE_FILE


def test_what_a_grading_kernel_publishes_is_the_typed_observation_message(monkeypatch, tmp_path):
    """Each published bundle reads back as messages.Observation (kind, version and field types checked), and
    hidden.py builds it as one: no display of a bundle it put together by hand."""
    import ast
    from pathlib import Path

    from autograder.kernel import hidden as hidden_module
    from autograder.kernel.vocabulary.messages import Observation

    monkeypatch.chdir(tmp_path)
    payloads = _record(monkeypatch, _solution)
    read = [Observation.from_display(observations.MIME, payload) for payload in payloads]
    assert [(o.test, o.index, o.label) for o in read] == [("test_scale", 0, "scale(ones(2), 3)"),
                                                         ("test_scale", 1, "count")]
    tree = ast.parse(Path(hidden_module.__file__).read_text())
    by_hand = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", getattr(node.func, "attr", "")) == "display"
               and node.args and isinstance(node.args[0], ast.Dict)]
    assert by_hand == [], f"hidden.py displays a hand-built bundle at lines {by_hand}"
