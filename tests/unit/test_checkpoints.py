"""The checkpointing lesson's helpers: training on the reference recipe, the tripwire, the figure."""
from __future__ import annotations

import io
import pickle

import matplotlib
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from autograder.kernel.lessons.checkpoints import (
    Tripwire,
    evaluate_spirals,
    plot_val_curves,
    train_spirals,
    tripwire_log,
)
from autograder.kernel.lessons.spirals import make_spirals, spiral_model

matplotlib.use("Agg")


def test_train_spirals_reproduces_the_reference_line(capsys):
    torch.manual_seed(0)
    X_train, y_train, X_val, y_val = make_spirals(400)
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=256)
    model = spiral_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    history = train_spirals(model, optimizer, train_loader, val_loader, range(1, 31))
    assert capsys.readouterr().out == "epoch  30: train 0.2941 | val 0.2381 | acc 0.956\n"
    assert history["epoch"] == list(range(1, 31))
    assert len(history["train_loss"]) == len(history["val_loss"]) == 30
    assert all(type(v) is float for v in history["train_loss"] + history["val_loss"])
    assert history["val_loss"][-1] == pytest.approx(evaluate_spirals(model, val_loader)[0], abs=1e-6)


def test_per_epoch_validation_draws_no_random_numbers():
    torch.manual_seed(1)
    X = torch.randn(32, 2)
    y = (X.sum(dim=1) > 0).long()
    batches = [(X[:16], y[:16]), (X[16:], y[16:])]          # a fixed batch order: no shuffling draws
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))   # no dropout
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    val_loader = DataLoader(TensorDataset(X, y), batch_size=8)
    before = torch.get_rng_state()
    history = train_spirals(model, optimizer, batches, val_loader, range(1, 4), log_every=None)
    assert torch.equal(before, torch.get_rng_state())
    assert history["epoch"] == [1, 2, 3]


def test_training_in_segments_equals_one_call():
    def run(segments):
        torch.manual_seed(3)
        X_train, y_train, X_val, y_val = make_spirals(30, seed=4)
        train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=16, shuffle=True)
        val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=64)
        model = spiral_model(hidden=8)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for epochs in segments:
            losses += train_spirals(model, optimizer, train_loader, val_loader, epochs, log_every=None)["val_loss"]
        return losses

    assert run([range(1, 7)]) == run([range(1, 4), range(4, 7)])


def test_evaluate_spirals_matches_a_direct_computation():
    torch.manual_seed(2)
    X, y = torch.randn(10, 2), torch.randint(0, 2, (10,))
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    loss, acc = evaluate_spirals(model, DataLoader(TensorDataset(X, y), batch_size=4))
    with torch.no_grad():
        logits = model.eval()(X)
    assert loss == pytest.approx(nn.functional.cross_entropy(logits, y).item(), abs=1e-6)
    assert acc == pytest.approx((logits.argmax(1) == y).float().mean().item())
    assert not model.training


def test_tripwire_records_when_unpickled_and_weights_only_refuses_it():
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(2), "payload": Tripwire("unit test")}, buffer)
    before = tripwire_log()
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(buffer, weights_only=True)
    assert tripwire_log() == before
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert loaded["payload"] == "unit test"
    assert tripwire_log() == before + ["unit test"]
    tripwire_log().clear()                      # a copy: clearing it changes nothing
    assert tripwire_log() == before + ["unit test"]


def test_plot_val_curves_labels_both_panels():
    runs = {"a": {"epoch": [1, 2, 3], "val_loss": [0.5, 0.4, 0.3]},
            "b": {"epoch": [2, 3], "val_loss": [0.45, 0.35]}}
    axes = plot_val_curves(runs, resume_epoch=2, zoom=(2, 3))
    assert len(axes) == 2
    for ax in axes:
        assert ax.get_title() and ax.get_xlabel() == "epoch" and ax.get_ylabel()
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    assert len(plot_val_curves(runs)) == 1
    with pytest.raises(ValueError):
        plot_val_curves({})
    import matplotlib.pyplot as plt
    plt.close("all")


# ---------------------------------------------------------------- the visible checks of the exercises

def _right_pair():
    def save(path, model, optimizer, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                    "rng_state": torch.get_rng_state()}, path)

    def load(path, model, optimizer):
        found = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(found["model"])
        optimizer.load_state_dict(found["optimizer"])
        torch.set_rng_state(found["rng_state"])
        return int(found["epoch"])

    return save, load


def test_visible_checks_pass_right_answers_and_catch_a_missing_generator_state():
    from autograder.kernel.checks import CheckFailed
    from autograder.kernel.lessons import checkpoints

    save, load = _right_pair()
    checkpoints.check_resume(save, load)

    def load_without_generator(path, model, optimizer):
        found = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(found["model"])
        optimizer.load_state_dict(found["optimizer"])
        return int(found["epoch"])

    with pytest.raises(CheckFailed, match="global random generator is not where it was"):
        checkpoints.check_resume(save, load_without_generator)


def test_compare_resume_tells_an_exact_resume_from_the_inherited_pair():
    """The lesson's demo helper: the right pair resumes bit for bit, a pair that copies parameters by hand and
    keeps no optimizer or generator state does not, and neither call leaves a file behind."""
    from autograder.kernel.lessons.checkpoints import compare_resume

    def inherited_save(path, model, optimizer, epoch):
        with torch.no_grad():
            weights = [p.clone() for p in model.parameters()]
        torch.save({"weights": weights, "epoch": epoch}, path)

    def inherited_load(path, model, optimizer):
        saved = torch.load(path, weights_only=False)
        with torch.no_grad():
            for param, value in zip(model.parameters(), saved["weights"]):
                param.copy_(value)
        return saved["epoch"]

    exact = compare_resume(*_right_pair())
    assert exact == {"epoch": 2, "equal": [True, True, True], "weights_equal": True}
    broken = compare_resume(inherited_save, inherited_load)
    assert broken["epoch"] == 2 and not any(broken["equal"]) and not broken["weights_equal"]


def test_visible_resume_check_refuses_a_load_that_runs_the_files_code():
    from autograder.kernel.checks import CheckFailed
    from autograder.kernel.lessons import checkpoints

    save, _ = _right_pair()

    def unsafe_load(path, model, optimizer):
        found = torch.load(path, map_location="cpu", weights_only=False)
        model.load_state_dict(found["model"])
        optimizer.load_state_dict(found["optimizer"])
        torch.set_rng_state(found["rng_state"])
        return int(found["epoch"])

    fired = len(tripwire_log())
    with pytest.raises(CheckFailed, match="ran code that its author chose"):
        checkpoints.check_resume(save, unsafe_load)
    assert len(tripwire_log()) == fired + 1


# ---------------------------------------------------------------- exercise 2: adapt_state_dict

def _adapt_right(model, state_dict):
    expected = model.state_dict()
    adapted, problems = {}, []
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        if name not in expected:
            problems.append(f"unexpected key {key}")
        elif name in adapted:
            problems.append(f"two entries for {name}")
        else:
            adapted[name] = tensor
            if tensor.shape != expected[name].shape:
                problems.append(f"shape mismatch for {name}")
    problems += [f"missing key {name}" for name in expected if name not in adapted]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted


def test_named_keys_reads_words_with_or_without_wrapper_prefixes():
    from autograder.kernel.lessons.state_dicts import named_keys

    keys = ["0.weight", "10.weight", "module.bias", "1.running_mean"]
    assert named_keys("missing key '_orig_mod.module.0.weight'. size (4, 3)", keys) == ["0.weight"]
    assert named_keys("the key module.bias of the model", keys) == ["module.bias"]
    assert named_keys("10.weight, 1.running_mean.", keys) == ["1.running_mean", "10.weight"]
    assert named_keys("weights and biases", keys) == []


def test_adapt_check_passes_a_right_answer_and_catches_a_single_strip():
    from autograder.kernel.checks import CheckFailed
    from autograder.kernel.lessons.state_dicts import check_adapt_state_dict

    check_adapt_state_dict(_adapt_right)

    def one_level(model, state_dict):
        return {key.removeprefix("module.").removeprefix("_orig_mod."): value for key, value in state_dict.items()}

    with pytest.raises(CheckFailed, match=r"keys under '_orig_mod\.module\.'"):
        check_adapt_state_dict(one_level)


def test_adapt_check_catches_a_missing_counter_a_duplicate_and_a_changed_dict():
    import copy

    from autograder.kernel.checks import CheckFailed
    from autograder.kernel.lessons.state_dicts import check_adapt_state_dict

    def strict_copy(model, state_dict):
        adapted = {}
        for key, value in state_dict.items():
            while key not in model.state_dict() and key.startswith(("module.", "_orig_mod.")):
                key = key.split(".", 1)[1]
            if key in adapted:
                raise ValueError(f"two entries for {key}")
            adapted[key] = value
        try:
            copy.deepcopy(model).load_state_dict(adapted)
        except RuntimeError as err:
            raise ValueError(str(err)) from None
        return adapted

    with pytest.raises(CheckFailed, match=r"without '1\.num_batches_tracked'.*returned instead of raising"):
        check_adapt_state_dict(strict_copy)

    def last_wins(model, state_dict):
        def strip(key):
            while key not in model.state_dict() and key.startswith(("module.", "_orig_mod.")):
                key = key.split(".", 1)[1]
            return key

        return _adapt_right(model, {strip(key): value for key, value in state_dict.items()})

    with pytest.raises(CheckFailed, match=r"'0\.weight' and 'module\.0\.weight'.*returned instead of raising"):
        check_adapt_state_dict(last_wins)

    def in_place(model, state_dict):
        result = _adapt_right(model, state_dict)
        for key in list(state_dict):
            state_dict.pop(key)
        return result

    with pytest.raises(CheckFailed, match="changed the dict it was given"):
        check_adapt_state_dict(in_place)
