"""Observations and the judge: plain encoding, comparison by the reference's rules, hostile payloads."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from autograder.grading.judging import judge
from autograder.kernel.vocabulary import messages, protocol
from autograder.kernel.vocabulary import observations as obs


def ref(value, atol=0.0, rtol=0.0, label="x"):
    return {"label": label, "value": obs.encode(value), "atol": atol, "rtol": rtol, "hint": None}


def test_encoding_is_plain_json():
    value = {"t": torch.arange(6.0).reshape(2, 3).t(), "a": np.array([1, 2], dtype=np.int32), "n": [1, 2.5, True, None],
             "s": "text", "d": torch.float16, "size": torch.Size([2, 3]), "nan": float("nan")}
    encoded = obs.encode(value, strides=True)
    text = json.dumps(encoded, allow_nan=False)
    assert json.loads(text) == encoded
    assert encoded["items"]["t"]["strides"] == [1, 3] and encoded["items"]["t"]["shape"] == [3, 2]
    assert encoded["items"]["nan"] == {"type": "float", "value": "nan"}
    assert obs.encode(object()) == {"type": "object", "name": "object"}


def test_encoding_asks_the_tensor_not_its_attributes(monkeypatch):
    """Instance attributes of a returned tensor (or a patched torch.Tensor) do not change what is observed."""
    t = torch.arange(4.0)
    t.detach = lambda: torch.ones(4)
    t.stride = lambda: (7,)
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: torch.zeros(4), raising=False)
    encoded = obs.encode(t, strides=True)
    assert encoded["values"] == [0.0, 1.0, 2.0, 3.0] and encoded["strides"] == [1]


def test_tolerances_and_kinds_come_from_the_reference():
    reference = ref(torch.tensor([1.0, 2.0]), atol=1e-3)
    assert obs.compare(reference, obs.encode(torch.tensor([1.0005, 2.0]))) is None
    assert obs.compare(reference, obs.encode(torch.tensor([1.01, 2.0])))[0] == "values"
    assert obs.compare(reference, obs.encode(torch.tensor([1.0, 2.0], dtype=torch.float64)))[0] == "dtype"
    assert obs.compare(reference, obs.encode(torch.tensor([[1.0, 2.0]])))[0] == "shape"
    assert obs.compare(ref(True), obs.encode(1))[0] == "type", "a bool is not an int"
    assert obs.compare(ref(3), obs.encode(3.0))[0] == "type", "an int is not a float"
    assert obs.compare(ref(0.5, atol=1e-6), obs.encode(0.5 + 1e-7)) is None
    assert obs.compare(ref(float("nan")), obs.encode(float("nan"))) is None
    assert obs.compare(ref([1, 2]), obs.encode((1, 2)))[0] == "type", "a tuple is not a list"
    assert obs.compare(ref({"a": 1}), obs.encode({"a": 1, "b": 2}))[0] == "keys"


def test_strides_only_where_the_reference_asks():
    t = torch.arange(6.0).reshape(2, 3)
    reference = {"label": "x", "value": obs.encode(t, strides=True), "atol": 0, "rtol": 0}
    assert obs.compare(reference, obs.encode(t.t().contiguous().t(), strides=True))[0] == "strides"
    assert obs.compare(ref(t), obs.encode(t.t().contiguous().t())) is None


def test_too_large_values_are_refused():
    with pytest.raises(obs.TooLarge):
        obs.encode(torch.zeros(obs.MAX_ELEMENTS + 1))


def observed(value, index: int = 0) -> messages.Observation:
    """What a kernel's hidden check publishes for ``value`` (encoded), as the judge reads it."""
    return messages.Observation("test_x", index, "x", value, 1e-6, 1e-6, None)


def test_judge_needs_every_observation_in_order_and_a_finished_cell():
    reference = [ref(1, label="first"), ref(torch.tensor([0.5]), label="second")]
    good = [observed(obs.encode(1)), observed(obs.encode(torch.tensor([0.5])), 1)]
    assert judge.judge_cell(reference, good, finished=True).passed
    assert not judge.judge_cell(reference, good, finished=False).passed
    assert "never reached" in judge.judge_cell(reference, good[:1], True).reason
    assert "published 3" in judge.judge_cell(reference, good + good[:1], True).reason
    assert not judge.judge_cell(reference, list(reversed(good)), True).passed
    assert not judge.judge_cell([], [], True).passed, "a test without reference observations never passes"


@pytest.mark.parametrize("payload", [
    "not a dict", {"no": "value"}, {"value": {"type": "tensor"}}, {"value": {"type": "int", "value": [1]}},
    {"value": {"type": "tensor", "dtype": "torch.float32", "shape": [1], "values": ["x"]}},
    {"value": {"type": "float", "value": math.inf}}, {"value": {"type": "list", "items": "abc"}},
])
def test_judge_rejects_malformed_payloads_without_crashing(payload):
    reference = [ref(torch.tensor([0.5]))]
    if isinstance(payload, dict):   # the other fields as a kernel sends them
        payload = {"test": "test_x", "index": 0, "label": "x", "atol": 0, "rtol": 0, "hint": None, **payload}
    read = protocol.observations_in([{"output_type": "display_data", "data": {obs.MIME: payload}}])
    assert not judge.judge_cell(reference, read, True).passed


def test_judge_reason_never_shows_labels_or_expected_values():
    reference = [ref("EXPECTED-MARKER-7731", label="LABEL-MARKER-4412")]
    verdict = judge.judge_cell(reference, [observed(obs.encode("wrong"))], True)
    assert not verdict.passed
    assert "MARKER" not in verdict.reason
