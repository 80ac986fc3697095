"""Unit tests of the shared check helpers: they pass right answers and explain wrong ones."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.kernel import checks
from autograder.kernel.checks import CheckFailed


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_checkfailed_is_an_assertion_error():
    assert issubclass(CheckFailed, AssertionError)


def test_describe_reports_shape_dtype_device_and_graph():
    w = torch.ones(2, 3, requires_grad=True)
    text = checks.describe(w * 2)
    assert "shape=(2, 3)" in text and "dtype=torch.float32" in text and "device=cpu" in text
    assert "grad_fn=MulBackward0" in text and "requires_grad=True" in text
    assert checks.describe(np.zeros((2,), dtype=np.float64)) == "numpy.ndarray(shape=(2,), dtype=float64)"
    assert checks.describe(None).startswith("NoneType")


def test_storage_id_equal_for_offset_views():
    t = torch.arange(5.0)
    assert checks.storage_id(t[2:]) == checks.storage_id(t)
    assert t[2:].data_ptr() != t.data_ptr()
    assert checks.storage_id(t.clone()) != checks.storage_id(t)


def test_storage_id_asks_the_tensor_not_its_attributes(monkeypatch):
    """A returned tensor whose instance attribute (or a patched torch.Tensor) lies about its storage fools nothing."""
    t = torch.arange(5.0)
    copy = t.clone()
    copy.untyped_storage = t.untyped_storage
    assert checks.storage_id(copy) != checks.storage_id(t)
    shallow = t.detach()
    decoy = torch.zeros(6).untyped_storage()
    shallow.untyped_storage = lambda: decoy
    assert checks.storage_id(shallow) == checks.storage_id(t)
    assert "shares storage" in failure(checks.check_own_storage, shallow, t)
    monkeypatch.setattr(torch.Tensor, "untyped_storage", lambda self: decoy, raising=False)
    assert checks.storage_id(t[2:]) == checks.storage_id(t) != decoy.data_ptr()


def test_expect():
    checks.expect(True, "never shown")
    checks.expect(np.bool_(True), "never shown")
    checks.expect(torch.tensor(True), "never shown")
    assert failure(checks.expect, False, "labels must be long") == "labels must be long"
    assert "not a bool" in failure(checks.expect, torch.tensor([True, True]), "m")
    # a truthy non-bool is not accepted as passing
    assert failure(checks.expect, 1, "need a bool") == "need a bool"


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __bool__(self):
        return True


def test_expect_is_not_fooled_by_objects_claiming_truth():
    assert failure(checks.expect, AlwaysEqual(), "fake") == "fake"


def test_call_passes_results_through_and_explains_errors():
    assert checks.call(lambda a, b: a + b, 2, 3) == 5

    def todo(x):
        raise NotImplementedError()

    assert "todo is not implemented yet" in failure(checks.call, todo, 1)

    def bad_view(x):
        return x.view(-1)

    text = failure(checks.call, bad_view, torch.zeros(2, 3).t(), hints={"view size": "use reshape"})
    assert text.startswith("bad_view(Tensor(shape=(3, 2)")
    assert "raised RuntimeError: view size is not compatible" in text
    assert "Likely mistake: use reshape" in text


def test_check_type():
    checks.check_type(True, bool)
    assert "expected a bool, got Tensor" in failure(checks.check_type, torch.tensor(True), bool, "f()")
    assert "use `.item()`" in failure(checks.check_type, torch.tensor(1.5), float)
    assert "missing `return`" in failure(checks.check_type, None, int)
    assert "expected a int" in failure(checks.check_type, True, int)  # a bool is not an int here


def test_check_tensor_accepts_a_match():
    checks.check_tensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]))


@pytest.mark.parametrize("actual,fragment,hint", [
    (np.zeros(2), "expected a torch.Tensor, got numpy.ndarray", "torch.from_numpy"),
    (None, "expected a torch.Tensor, got NoneType", "missing `return`"),
    ([0.0, 0.0], "expected a torch.Tensor, got list", "Python value"),
])
def test_check_tensor_wrong_type(actual, fragment, hint):
    text = failure(checks.check_tensor, actual, torch.zeros(2), "f(x)")
    assert text.startswith("f(x): ") and fragment in text and hint in text


def test_check_tensor_shape_hints():
    assert "swapped" in failure(checks.check_tensor, torch.zeros(3, 2), torch.zeros(2, 3))
    assert "extra dimension of size 1" in failure(checks.check_tensor, torch.zeros(4, 1), torch.zeros(4))
    assert "including the batch dimension" in failure(checks.check_tensor, torch.zeros(12), torch.zeros(3, 4))
    text = failure(checks.check_tensor, torch.zeros(4), torch.zeros(3), hints={"shape": "custom"})
    assert "shape is (4,), expected (3,)" in text and "Likely mistake: custom" in text


def test_check_tensor_dtype_hints():
    text = failure(checks.check_tensor, torch.zeros(2, dtype=torch.float64), torch.zeros(2))
    assert "dtype is torch.float64, expected torch.float32" in text and "from_numpy keeps" in text
    text = failure(checks.check_tensor, torch.zeros(2), torch.zeros(2, dtype=torch.long))
    assert "CrossEntropyLoss" in text and ".long()" in text
    assert "int64" in failure(checks.check_tensor, torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.long))
    assert "raw image bytes" in failure(checks.check_tensor, torch.zeros(2, dtype=torch.uint8), torch.zeros(2))
    checks.check_tensor(torch.zeros(2, dtype=torch.float64), torch.zeros(2), check_dtype=False)


def test_check_tensor_values_report_worst_element():
    text = failure(checks.check_tensor, torch.tensor([[1.0, 2.0], [3.0, 9.0]]), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert "1 of 4 elements" in text and "max difference 5 at index (1, 1)" in text
    assert "got 9, expected 4" in text


def test_check_tensor_nan():
    text = failure(checks.check_tensor, torch.tensor([float("nan")]), torch.tensor([1.0]))
    assert "NaN" in text
    checks.check_tensor(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))


def test_check_tensor_ignores_autograd_for_values():
    w = torch.ones(2, requires_grad=True)
    checks.check_tensor(w * 1, torch.ones(2))


def test_check_number():
    checks.check_number(0.5, 0.5)
    checks.check_number(3, 3.0)
    text = failure(checks.check_number, torch.tensor(0.5), 0.5, "train_one_epoch()")
    assert "expected a Python float" in text and ".item()" in text
    assert "is 0.6, expected 0.5" in failure(checks.check_number, 0.6, 0.5, tol=1e-3)
    assert "expected 0.5" in failure(checks.check_number, float("nan"), 0.5)


def test_storage_checks():
    t = torch.arange(6.0)
    checks.check_shares_storage(t[1:], t)
    assert "is a copy" in failure(checks.check_shares_storage, t.clone(), t)
    checks.check_own_storage(t.clone(), t)
    assert ".detach()" in failure(checks.check_own_storage, t.detach(), t)


def test_no_autograd_history():
    w = torch.ones(2, requires_grad=True)
    checks.check_no_autograd_history(w.detach().clone())
    text = failure(checks.check_no_autograd_history, w.clone(), "copy")
    assert "still attached to the autograd graph" in text and "CloneBackward0" in text


def test_passed_prints(capsys):
    checks.passed("thing")
    assert capsys.readouterr().out == "All checks passed: thing\n"
