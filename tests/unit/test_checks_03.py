"""Unit tests of the check helpers added for lesson 03 (dataset_item, expect_raises), messages included."""
from __future__ import annotations

import pytest
import torch

from autograder.kernel import checks


class Pairs:
    def __len__(self):
        return 3

    def __getitem__(self, i):
        if i >= 3:
            raise IndexError("index out of range")
        return torch.tensor(float(i)), torch.tensor(i)


class Bare:
    def __getitem__(self, i):
        return torch.tensor(float(i))


class Stub:
    def __getitem__(self, i):
        raise NotImplementedError()


def test_dataset_item_returns_the_pair():
    x, y = checks.dataset_item(Pairs(), 2)
    assert float(x) == 2.0 and int(y) == 2


def test_dataset_item_list_becomes_tuple():
    class AsList(Pairs):
        def __getitem__(self, i):
            return list(super().__getitem__(i))
    assert isinstance(checks.dataset_item(AsList(), 0), tuple)


def test_dataset_item_not_a_pair():
    with pytest.raises(checks.CheckFailed) as info:
        checks.dataset_item(Bare(), 1)
    text = str(info.value)
    assert text.startswith("Bare[1]: returned Tensor(shape=()")
    assert "expected a tuple of 2 parts" in text and "return image, label" in text


def test_dataset_item_reports_the_exception_with_a_hint():
    with pytest.raises(checks.CheckFailed) as info:
        checks.dataset_item(Pairs(), 5, name="ds[5]", hints={"out of range": "only 3 items"})
    text = str(info.value)
    assert "ds[5]: raised IndexError: index out of range" in text and "Likely mistake: only 3 items" in text


def test_dataset_item_not_implemented():
    with pytest.raises(checks.CheckFailed, match=r"Stub\[0\]: __getitem__ is not implemented yet"):
        checks.dataset_item(Stub(), 0)


def test_expect_raises_returns_the_exception():
    def picky(split):
        raise ValueError(f"bad split {split}")
    exc = checks.expect_raises(picky, ValueError, "unknown splits must be refused", "test")
    assert str(exc) == "bad split test"


def test_expect_raises_fails_when_nothing_is_raised():
    def lenient(split):
        return split
    with pytest.raises(checks.CheckFailed) as info:
        checks.expect_raises(lenient, ValueError, "unknown splits must be refused", "test")
    text = str(info.value)
    assert text.startswith("lenient(str 'test'): returned without raising ValueError")
    assert "Likely mistake: unknown splits must be refused" in text


def test_expect_raises_names_the_wrong_exception():
    def wrong(split):
        raise KeyError(split)
    with pytest.raises(checks.CheckFailed) as info:
        checks.expect_raises(wrong, (ValueError, IndexError), "refuse with ValueError", "x")
    assert "raised KeyError: 'x', expected ValueError or IndexError" in str(info.value)


def test_expect_raises_not_implemented():
    def stub():
        raise NotImplementedError()
    with pytest.raises(checks.CheckFailed, match="stub is not implemented yet"):
        checks.expect_raises(stub, ValueError, "m")
