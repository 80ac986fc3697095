"""Every message the judge writes about a hidden check is built from the reference alone (issue 48): whatever
the kernel sends (field names, a label, a MIME type, a test name, a hint, a value), none of its words reach the
verdict's reason."""
from __future__ import annotations

import pytest

from autograder.grading.judging.judge import judge_cell
from autograder.kernel.vocabulary import observations, protocol

SECRET = "flatten_features((5, 2, 3, 4)) 77123.25"
REFERENCE = [{"label": "the reference's label", "value": observations.encode(3), "atol": 0.0, "rtol": 0.0,
              "hint": "the reference's hint."}]
GOOD = {"test": "t", "index": 0, "label": "l", "value": observations.encode(3), "atol": 0.0, "rtol": 0.0,
        "hint": None}


def _display(payload, mime=observations.MIME):
    return [{"output_type": "display_data", "metadata": {}, "data": {mime: payload}}]


SENT = {
    "unknown field names": _display({SECRET: 1}),
    "unknown fields beside the right ones": _display(dict(GOOD, **{SECRET: 0})),
    "envelope in the payload": _display(dict(GOOD, kind=SECRET, version=SECRET)),
    "wrong types holding text": _display(dict(GOOD, index=SECRET, atol=SECRET, hint=0)),
    "another format": _display({SECRET: 1}, mime="application/vnd.pte.observation.v7+json"),
    "not an object": _display([SECRET]),
    "label, test and hint forged": _display(dict(GOOD, label=SECRET, test=SECRET, hint=SECRET,
                                                 value=observations.encode(4))),
    "a value of another type": _display(dict(GOOD, value={"type": "dict", "items": {SECRET: 1}})),
    "a value with text for numbers": _display(dict(GOOD, value={"type": "int", "value": SECRET})),
    "a huge value": _display(dict(GOOD, value=SECRET * 20_000)),
}


@pytest.mark.parametrize("case", sorted(SENT))
def test_the_reason_holds_nothing_the_kernel_sent(case):
    observed = protocol.observations_in(SENT[case])
    assert observed, case
    verdict = judge_cell(REFERENCE, observed, finished=True)
    assert not verdict.passed
    for word in (SECRET, "flatten_features", "77123"):
        assert word not in verdict.reason, (case, verdict.reason)
    assert verdict.reason.startswith("hidden check 1 of 1"), verdict.reason


def test_a_failed_check_shows_the_reference_hint():
    verdict = judge_cell(REFERENCE, protocol.observations_in(SENT["label, test and hint forged"]), finished=True)
    assert verdict.reason.endswith("Hint: the reference's hint."), verdict.reason
    assert judge_cell(REFERENCE, protocol.observations_in(_display(GOOD)), finished=True).passed


def test_a_run_stopped_by_an_exception_keeps_its_message_in_the_log(capsys):
    """The reason feedback shows ("not run: ...") names the exception's type, never its message (which may carry
    what the kernel sent); the message goes to the grader's log."""
    from autograder.grading.run import runner

    run = runner.Run(nb=None)
    runner._stopped_by(run, ValueError(f"unrecognized output msg type: {SECRET!r}"))
    assert run.status == "error" and SECRET not in run.reason and "ValueError" in run.reason, run.reason
    assert SECRET in capsys.readouterr().err
