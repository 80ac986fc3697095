"""The two-spirals data, reference model and figures of lesson 04."""
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from autograder.kernel.lessons import loop_checks, spirals


def test_make_spirals_shapes_dtypes_and_split():
    X_train, y_train, X_val, y_val = spirals.make_spirals(400, seed=0)
    assert X_train.shape == (640, 2) and X_val.shape == (160, 2)
    assert y_train.shape == (640,) and y_val.shape == (160,)
    assert X_train.dtype == torch.float32 and y_train.dtype == torch.long
    labels = torch.cat([y_train, y_val])
    assert torch.bincount(labels).tolist() == [400, 400]


def test_make_spirals_follows_the_recipe():
    """Undo the permutation by matching points to the noise-free spiral: the noise is 0.08·N(0, 1)."""
    n = 50
    X_train, y_train, X_val, y_val = spirals.make_spirals(n, seed=5, noise=0.0)
    X, y = torch.cat([X_train, X_val]), torch.cat([y_train, y_val])
    t = torch.linspace(0.5, 3 * math.pi, n)
    radius = t / (3 * math.pi) * 2.5
    for label in (0, 1):
        angle = t + label * math.pi
        clean = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
        got = X[y == label]
        order = torch.cdist(clean, got).argmin(dim=1)
        assert torch.allclose(got[order], clean, atol=1e-6)


def test_global_stream_and_private_seed_draw_the_same_data():
    torch.manual_seed(0)
    from_global = spirals.make_spirals(400)
    after_global = torch.rand(3)
    torch.manual_seed(123)
    from_seed = spirals.make_spirals(400, seed=0)
    after_private = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(after_private, torch.rand(3)), "seed= must leave the global generator untouched"
    for a, b in zip(from_global, from_seed):
        assert torch.equal(a, b)
    torch.manual_seed(0)
    spirals.make_spirals(400)
    assert torch.equal(torch.rand(3), after_global), "seed=None must draw from the global generator"


def test_reference_noise_and_permutation_order():
    """Class-0 noise, class-1 noise, then the permutation, all from one stream."""
    torch.manual_seed(0)
    noise0 = torch.randn(400, 2)
    noise1 = torch.randn(400, 2)
    perm = torch.randperm(800)
    t = torch.linspace(0.5, 3 * math.pi, 400)
    radius = t / (3 * math.pi) * 2.5
    clean = [torch.stack([radius * torch.cos(t + c * math.pi), radius * torch.sin(t + c * math.pi)], dim=1)
             for c in (0, 1)]
    X = torch.cat([clean[0] + 0.08 * noise0, clean[1] + 0.08 * noise1])[perm]
    X_train, _, X_val, _ = spirals.make_spirals(400, seed=0)
    assert torch.equal(torch.cat([X_train, X_val]), X)


@pytest.mark.parametrize("kwargs", [{"n_per_class": 0}, {"train_fraction": 1.0}, {"train_fraction": 0.0}])
def test_make_spirals_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        spirals.make_spirals(**kwargs)


def test_spiral_model_architecture():
    model = spirals.spiral_model()
    kinds = [type(m).__name__ for m in model]
    assert kinds == ["Linear", "ReLU", "Dropout", "Linear", "ReLU", "Dropout", "Linear"]
    assert [m.p for m in model if isinstance(m, nn.Dropout)] == [0.1, 0.1]
    assert sum(p.numel() for p in model.parameters()) == 2 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2
    assert model(torch.zeros(5, 2)).shape == (5, 2)


def test_graph_size_counts_kept_nodes():
    w = torch.ones(2, requires_grad=True)
    assert spirals.graph_size(torch.ones(2)) == 0
    assert spirals.graph_size(1.5) == 0
    one = (w * 2).sum()
    total = one + (w * 3).sum()
    assert spirals.graph_size(total) > spirals.graph_size(one) > 0
    assert spirals.graph_size(total.detach()) == 0


def test_plot_decision_boundary_restores_mode_and_draws_nothing_random():
    torch.manual_seed(0)
    model = spirals.spiral_model()
    X, y, _, _ = spirals.make_spirals(30, seed=1)
    model.train()
    state = torch.get_rng_state()
    ax = spirals.plot_decision_boundary(model, X, y, resolution=20, title="t")
    assert model.training
    assert torch.equal(state, torch.get_rng_state())
    assert ax.get_title() == "t" and len(ax.collections) >= 3
    plt.close("all")


def test_plot_history_draws_three_curves_and_checks_keys():
    history = {"train_loss": [0.7, 0.5, 0.3], "val_loss": [0.6, 0.4, 0.35], "val_acc": [0.5, 0.8, 0.9]}
    loss_ax, acc_ax = spirals.plot_history(history, label="run")
    assert len(loss_ax.lines) == 2 and len(acc_ax.lines) == 1
    assert list(acc_ax.lines[0].get_ydata()) == [0.5, 0.8, 0.9]
    with pytest.raises(KeyError, match="val_acc"):
        spirals.plot_history({"train_loss": [1.0], "val_loss": [1.0]})
    plt.close("all")


def test_plot_decision_boundary_labels_its_axes():
    torch.manual_seed(0)
    X, y, _, _ = spirals.make_spirals(20, seed=1)
    ax = spirals.plot_decision_boundary(spirals.spiral_model(), X, y, resolution=10)
    assert "x_1" in ax.get_xlabel() and "x_2" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["class 0", "class 1"]
    plt.close("all")


# ---------------------------------------------------------------- instruments for lesson 04's checks

def _epoch(model, loss_fn, keep_tensors: bool, batches: int = 4) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    for _ in range(batches):
        xb, yb = torch.randn(4, 3), torch.randint(0, 2, (4,))
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total = total + (loss * 4 if keep_tensors else loss.item() * 4)
    return total.item() if torch.is_tensor(total) else total


def test_loss_probe_sees_kept_graphs():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    logging = spirals.LossProbe(nn.CrossEntropyLoss())
    _epoch(model, logging, keep_tensors=False)
    assert logging.calls == 4 and logging.max_kept == 1      # the previous batch's `loss`, until reassigned
    keeping = spirals.LossProbe(nn.CrossEntropyLoss())
    _epoch(model, keeping, keep_tensors=True)
    assert keeping.max_kept == 3
    with torch.no_grad():
        value = spirals.LossProbe(nn.CrossEntropyLoss())(model(torch.ones(2, 3)), torch.tensor([0, 1]))
    assert value.grad_fn is None


def test_loss_probe_returns_the_same_loss_and_gradients():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    x, y = torch.randn(5, 3), torch.randint(0, 2, (5,))
    plain = nn.functional.cross_entropy(model(x), y)
    (grad,) = torch.autograd.grad(plain, model.weight)
    probed = spirals.LossProbe(nn.CrossEntropyLoss())(model(x), y)
    assert torch.equal(probed, plain)
    assert torch.equal(torch.autograd.grad(probed, model.weight)[0], grad)


def test_recording_sgd_records_each_step():
    model = nn.Linear(2, 1)
    opt = spirals.RecordingSGD(model.parameters(), lr=0.0)
    x = torch.ones(3, 2)
    for clear in (True, True, False):
        if clear:
            opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    assert len(opt.grads_at_step) == 3
    assert opt.same_gradients(0, 1) and not opt.same_gradients(1, 2)
    assert torch.equal(opt.grads_at_step[2][0], 2 * opt.grads_at_step[1][0])


def test_record_modes_records_and_restores_grad_mode():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model.train()
    with spirals.record_modes(model) as seen:
        model(torch.ones(1, 2))
        model.eval()
        with torch.no_grad():
            model(torch.ones(1, 2))
        torch.set_grad_enabled(False)          # the leak a wrong evaluate would cause
    assert seen.training == [True, False] and seen.grad_enabled == [True, False]
    assert seen.grad_enabled_after is False and torch.is_grad_enabled()
    model(torch.ones(1, 2))
    assert len(seen.training) == 2, "the hook is removed after the block"


def test_decoy_device_points_the_global_elsewhere_and_restores_it():
    from autograder.kernel import checks

    namespace = {"device": torch.device("cpu")}
    with pytest.raises(checks.CheckFailed) as info:
        with spirals.decoy_device(namespace):
            assert namespace["device"].type == "meta"
            nn.Linear(2, 2)(torch.ones(1, 2).to(namespace["device"])).sum().item()
    message = str(info.value)
    assert "global `device` was the meta device" in message and "next(model.parameters()).device" in message
    assert "0x" not in message, "no memory addresses: the message must be the same on every run"
    assert namespace["device"] == torch.device("cpu")
    with pytest.raises(checks.CheckFailed, match="meta device, and the function raised RuntimeError"):
        with spirals.decoy_device(namespace):
            checks.call(lambda: torch.ones(1).to(namespace["device"]).item())
    with pytest.raises(ValueError, match="unrelated"):
        with spirals.decoy_device(namespace):
            raise ValueError("unrelated")
    empty = {}
    with spirals.decoy_device(empty):
        assert "device" in empty
    assert empty == {}


def test_table_model_and_accuracy_hints():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.5, 0.5]])
    labels = torch.tensor([0, 1, 1])
    table = spirals.table_model(logits)
    assert torch.equal(table(torch.eye(3)), logits)
    assert "broadcasts to an (N, N) table" in spirals.accuracy_hint(1.5, logits, labels)
    float_scores = (logits.max(1).values == labels).float().mean().item()
    assert "float scores" in spirals.accuracy_hint(float_scores, logits, labels)
    assert spirals.accuracy_hint(torch.tensor(0.5), logits, labels).startswith("accuracy =")


def test_fit_spy_records_calls_and_restores_the_namespace():
    model = nn.Linear(2, 2)
    train_loader, val_loader, other = object(), object(), object()
    opt, loss_fn = torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss()
    spy = spirals.FitSpy(model, train_loader, val_loader, opt, loss_fn)
    namespace = {"train_one_epoch": "mine", "evaluate": "mine too"}
    with spy.installed(namespace):
        assert namespace["train_one_epoch"](model, train_loader, loss_fn, opt) == 1.01
        assert namespace["evaluate"](model, other, loss_fn) == (2.02, 0.52)
        namespace["evaluate"](nn.Linear(2, 2), val_loader, loss_fn)
    assert namespace == {"train_one_epoch": "mine", "evaluate": "mine too"}
    assert spy.calls == [("train_one_epoch", "train_loader", True), ("evaluate", "another loader", True),
                         ("evaluate", "val_loader", False)]


def test_plot_saliency_draws_one_arrow_per_point_and_restores_mode():
    torch.manual_seed(0)
    model = spirals.spiral_model().train()
    X, y, _, _ = spirals.make_spirals(10, seed=1)
    grads = torch.randn(len(X), 2)
    state = torch.get_rng_state()
    ax = spirals.plot_saliency(model, X, y, grads, resolution=20, title="saliency")
    assert model.training and torch.equal(state, torch.get_rng_state())
    quivers = [c for c in ax.collections if type(c).__name__ == "Quiver"]
    assert len(quivers) == 1 and len(quivers[0].U) == len(X)
    lengths = torch.tensor([math.hypot(u, v) for u, v in zip(quivers[0].U, quivers[0].V)])
    ratios = lengths / grads.norm(dim=1)
    assert torch.allclose(ratios, ratios[0].expand_as(ratios), rtol=1e-5), "arrows keep the gradients' ratios"
    assert ax.get_title() == "saliency" and ax.get_legend().get_texts()[-1].get_text() == "saliency"
    plt.close("all")
    ax = spirals.plot_saliency(model, X, y, grads[:3], which=[4, 0, 2], resolution=20)
    quiver = next(c for c in ax.collections if type(c).__name__ == "Quiver")
    assert torch.allclose(torch.tensor(quiver.get_offsets(), dtype=torch.float32), X[[4, 0, 2]])
    with pytest.raises(ValueError, match="shape of the points"):
        spirals.plot_saliency(model, X, y, grads[:3])
    plt.close("all")


# ---------------------------------------------------------------- lesson 04's visible checks

def _train_one_epoch(model, loader, loss_fn, optimizer, *, clear="before", train=True, summed_aware=True):
    device = next(model.parameters()).device
    summed = summed_aware and loss_fn.reduction == "sum"
    if train:
        model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        if clear == "before":
            optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        if clear == "between":
            optimizer.zero_grad()
        optimizer.step()
        if clear == "after":
            optimizer.zero_grad()
        total += loss.item() if summed else loss.item() * len(yb)
        count += len(yb)
    return total / count


def _evaluate(model, loader, loss_fn, *, eval_mode=True, summed_aware=True):
    device = next(model.parameters()).device
    summed = summed_aware and loss_fn.reduction == "sum"
    if eval_mode:
        model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            batch_loss = loss_fn(logits, yb).item()
            total += batch_loss if summed else batch_loss * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return total / count, correct / count


def _saliency(model, x, target, *, restore=True, wipe=False):
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            inputs = x.detach().clone().requires_grad_(True)
            score = model(inputs).gather(1, target.view(-1, 1)).sum()
            if wipe:   # backward() then zero_grad(): the caller's accumulated gradients go too
                score.backward()
                grad = inputs.grad
                model.zero_grad()
            else:
                (grad,) = torch.autograd.grad(score, inputs)
    finally:
        if restore:
            model.train(was_training)
    return grad


def test_visible_checks_pass_right_answers_and_name_wrong_ones():
    from autograder.kernel import checks

    namespace = {"device": torch.device("cpu")}
    loop_checks.check_train_one_epoch(_train_one_epoch, namespace)
    loop_checks.check_evaluate(_evaluate, namespace)
    loop_checks.check_saliency(_saliency)
    assert namespace == {"device": torch.device("cpu")}
    with pytest.raises(checks.CheckFailed, match="gradients were not cleared"):
        loop_checks.check_train_one_epoch(lambda *a: _train_one_epoch(*a, clear=None), namespace)
    # Cleared too early, every step sees no gradient; cleared after the step, the first sees what .grad held.
    with pytest.raises(checks.CheckFailed, match="cleared too early: zero_grad.. between backward.. and step"):
        loop_checks.check_train_one_epoch(lambda *a: _train_one_epoch(*a, clear="between"), namespace)
    with pytest.raises(checks.CheckFailed, match="cleared after each step instead of before each backward"):
        loop_checks.check_train_one_epoch(lambda *a: _train_one_epoch(*a, clear="after"), namespace)
    with pytest.raises(checks.CheckFailed, match="wiped the gradients the caller was accumulating"):
        loop_checks.check_saliency(lambda *a: _saliency(*a, wipe=True))
    with pytest.raises(checks.CheckFailed, match="eval mode during training"):
        loop_checks.check_train_one_epoch(lambda *a: _train_one_epoch(*a, train=False), namespace)
    with pytest.raises(checks.CheckFailed, match="training mode during evaluation"):
        loop_checks.check_evaluate(lambda *a: _evaluate(*a, eval_mode=False), namespace)
    with pytest.raises(checks.CheckFailed, match="left in eval mode"):
        loop_checks.check_saliency(lambda *a: _saliency(*a, restore=False))
    # A loss_fn that sums its batch (reduction='sum'): its value is the batch's total already.
    with pytest.raises(checks.CheckFailed, match=r"reduction='sum'.*already the batch's total"):
        loop_checks.check_train_one_epoch(lambda *a: _train_one_epoch(*a, summed_aware=False), namespace)
    with pytest.raises(checks.CheckFailed, match=r"reduction='sum'.*already the batch's total"):
        loop_checks.check_evaluate(lambda *a: _evaluate(*a, summed_aware=False), namespace)


def test_loss_probe_says_how_its_loss_reduces():
    assert spirals.LossProbe(nn.CrossEntropyLoss(reduction="sum")).reduction == "sum"
    assert spirals.LossProbe(nn.CrossEntropyLoss()).reduction == "mean"


def test_fit_check_uses_stand_ins_by_name():
    from autograder.kernel import checks

    namespace = {}

    def fit(model, train_loader, val_loader, epochs, optimizer, loss_fn):
        history = {"train_loss": [], "val_loss": [], "val_acc": []}
        for _ in range(epochs):
            history["train_loss"].append(namespace["train_one_epoch"](model, train_loader, loss_fn, optimizer))
            val_loss, val_acc = namespace["evaluate"](model, val_loader, loss_fn)
            history["val_loss"].append(val_loss)
            history["val_acc"].append(val_acc)
        return history

    def on_train_data(model, train_loader, val_loader, epochs, optimizer, loss_fn):
        return fit(model, train_loader, train_loader, epochs, optimizer, loss_fn)

    loop_checks.check_fit(fit, namespace)
    assert namespace == {"train_one_epoch": None, "evaluate": None}   # put back as they were (absent: None)
    with pytest.raises(checks.CheckFailed, match="evaluate must get val_loader"):
        loop_checks.check_fit(on_train_data, namespace)
