"""The pinwheel data, the graph-size probe, the loss-curve figure and the warm-up's
checks of lesson 09 and the visible checks of its two graded exercises
(autograder/kernel/lessons/debugging_checks.py)."""
import copy
import math
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from autograder.kernel import checks
from autograder.kernel.lessons import debugging, debugging_checks


def test_make_pinwheel_shapes_dtypes_and_balance():
    X, y = debugging.make_pinwheel(30, 5, seed=0)
    assert X.shape == (150, 2) and X.dtype == torch.float32
    assert y.shape == (150,) and y.dtype == torch.long
    assert torch.bincount(y).tolist() == [30] * 5


def test_make_pinwheel_follows_the_recipe():
    """Without noise every point lies on its arm: radius t, angle 2πc/C + 3t, t from 0.1 to 1."""
    n, classes = 20, 3
    X, y = debugging.make_pinwheel(n, classes, noise=0.0, seed=4)
    t = torch.linspace(0.1, 1.0, n)
    for label in range(classes):
        angle = 2 * math.pi * label / classes + 3.0 * t
        clean = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1)
        got = X[y == label]
        order = torch.cdist(clean, got).argmin(dim=1)
        assert torch.allclose(got[order], clean, atol=1e-6)


def test_make_pinwheel_seed_is_private_and_global_stream_matches():
    torch.manual_seed(3)
    before = torch.get_rng_state()
    a = debugging.make_pinwheel(10, 4, seed=7)
    assert torch.equal(torch.get_rng_state(), before), "a seeded call must not touch the global generator"
    b = debugging.make_pinwheel(10, 4, seed=7)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    torch.manual_seed(7)
    c = debugging.make_pinwheel(10, 4)
    assert torch.equal(a[0], c[0]) and torch.equal(a[1], c[1])


@pytest.mark.parametrize("n, classes", [(0, 4), (10, 1)])
def test_make_pinwheel_rejects_bad_sizes(n, classes):
    with pytest.raises(ValueError):
        debugging.make_pinwheel(n, classes)


def test_kept_graph_nodes_counts_shared_nodes_once():
    w = torch.randn(3, requires_grad=True)
    a = (w * 2).sum()          # AccumulateGrad, MulBackward0, SumBackward0
    b = (w + 1).sum()          # shares AccumulateGrad: AddBackward0, SumBackward0
    assert debugging.kept_graph_nodes(a) == 3
    assert debugging.kept_graph_nodes([a, b]) == 5
    assert debugging.kept_graph_nodes([a.item(), b.detach(), 1.0]) == 0
    assert debugging.kept_graph_nodes([]) == 0


def test_kept_graph_nodes_grows_with_kept_losses():
    net = nn.Linear(2, 2)
    kept = [net(torch.randn(4, 2)).sum() for _ in range(3)]
    counts = [debugging.kept_graph_nodes(kept[:k]) for k in (1, 2, 3)]
    assert counts[1] - counts[0] == counts[2] - counts[1] > 0


def test_plot_loss_curves_labels_everything():
    fig, ax = plt.subplots()
    debugging.plot_loss_curves({"a": [3.0, 2.0, 1.0], "b": [2.0, 2.0]}, ax, title="T", xlabel="x", ylabel="y",
                               baseline=math.log(4), baseline_label="ln 4", log_y=True)
    assert ax.get_title() == "T" and ax.get_xlabel() == "x" and ax.get_ylabel() == "y"
    assert ax.get_yscale() == "log"
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["a", "b", "ln 4"]
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3]
    plt.close(fig)
    with pytest.raises(ValueError):
        debugging.plot_loss_curves({}, title="empty")


def test_total_grad_norm_is_one_vector_skips_none_and_writes_nothing():
    probe = nn.ModuleDict({"used": nn.Linear(2, 1), "frozen": nn.Linear(2, 2)})
    assert debugging.total_grad_norm(probe) == 0.0
    probe["used"].weight.grad = torch.tensor([[3.0, 0.0]])
    probe["used"].bias.grad = torch.tensor([4.0])
    assert debugging.total_grad_norm(probe) == 5.0
    probe["used"].bias.grad = torch.tensor([math.inf])
    assert debugging.total_grad_norm(probe) == math.inf
    assert probe["used"].weight.grad.tolist() == [[3.0, 0.0]] and probe["frozen"].weight.grad is None
    debugging.check_grad_norm(debugging.total_grad_norm)


def test_grad_norm_check_passes_get_total_norm():
    debugging.check_grad_norm(
        lambda model: nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None]).item())


def test_grad_norm_check_catches_clip_grad_norm_with_inf_max_norm():
    """clip_grad_norm_(..., inf) returns the right norm but multiplies every gradient by inf / inf = NaN."""
    with pytest.raises(checks.CheckFailed, match="NaN"):
        debugging.check_grad_norm(lambda model: nn.utils.clip_grad_norm_(model.parameters(), math.inf).item())
    with pytest.raises(checks.CheckFailed, match="changed the gradients"):
        debugging.check_grad_norm(lambda model: nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())


def test_show_anomaly_report_names_the_node_and_the_forward_line(capsys):
    """Section 6's demo helper prints anomaly mode's report (the node, the forward line) and leaves the mode off."""
    def zero_over_zero():
        a = torch.zeros(3, requires_grad=True)
        return (a / a.sum()).sum()

    debugging.show_anomaly_report(zero_over_zero)
    out = capsys.readouterr().out
    assert "RuntimeError: Function 'DivBackward0' returned nan values" in out
    assert "the forward line that made it: return (a / a.sum()).sum()" in out
    assert not torch.is_anomaly_enabled()


# ---------------------------------------------------------------- the visible checks of the two graded exercises
# Answers written here with their parts swappable: each wrong answer changes one part of the right one.

def _find_nan_source(model, batch, loss_fn, *, finite=torch.isfinite, seen="input", pick=0, loss_case=True,
                     nothing=None, remove=True, clear=True):
    xb, yb = batch
    trouble = []

    def bad(tensors):
        return any(t is not None and not bool(finite(t).all()) for t in tensors)

    old = [p.grad for p in model.parameters()]
    if clear:
        for p in model.parameters():
            p.grad = None
    handles = []
    try:
        for name, module in model.named_modules():
            handles.append(module.register_forward_hook(
                lambda m, a, out, name=name: trouble.append(name) if bad((out,)) else None))
            handles.append(module.register_full_backward_hook(
                lambda m, gin, gout, name=name: trouble.append(name) if bad(gin if seen == "input" else gout)
                else None))
            handles += [p.register_hook(lambda g, name=name: trouble.append(name) if bad((g,)) else None)
                        for p in module.parameters(recurse=False)]
        output = model(xb)
        if trouble:
            return trouble[pick]
        if loss_case:
            output.register_hook(lambda g: trouble.append("loss") if bad((g,)) else None)
        loss = loss_fn(output, yb)
        if loss_case and bad((loss,)):
            return "loss"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss.backward()
        return trouble[pick] if trouble else nothing
    finally:
        if remove:
            for handle in handles:
                handle.remove()
        for p, g in zip(model.parameters(), old):
            p.grad = g


def _diagnose_run(model, batch, num_classes, steps, lr, *, baseline=math.log, both_ways=True, at_eval=True,
                  zero_grad=True, nan_tests=("loss", "grads"), own_copy=True, early_verdict=False):
    xb, yb = batch
    net = copy.deepcopy(model) if own_copy else model
    net.train(not at_eval)
    with torch.no_grad():
        first = nn.functional.cross_entropy(net(xb), yb).item()
    if nan_tests and not math.isfinite(first):
        return "non-finite"
    if early_verdict and abs(first - baseline(num_classes)) > 0.5:
        return "initial loss"
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(steps):
        if zero_grad:
            optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        grads_bad = any(not bool(torch.isfinite(p.grad).all()) for p in net.parameters() if p.grad is not None)
        if ("loss" in nan_tests and not torch.isfinite(loss)) or ("grads" in nan_tests and grads_bad):
            return "non-finite"
        optimizer.step()
    gap = first - baseline(num_classes)
    if (abs(gap) if both_ways else gap) > 0.5:
        return "initial loss"
    return "cannot fit" if loss.item() > 0.1 else "ok"


def test_visible_checks_pass_the_right_answers():
    debugging_checks.check_find_nan_source(_find_nan_source)
    debugging_checks.check_diagnose_run(_diagnose_run)
    assert debugging_checks.count_hooks(nn.Sequential(nn.Linear(2, 2), nn.ReLU())) == 0


@pytest.mark.parametrize("change, message", [
    (dict(pick=-1), "only passed on the non-finite values"),
    (dict(finite=lambda t: ~torch.isnan(t)), "torch.isnan misses -inf"),
    (dict(seen="output"), "received a NaN gradient from 'radius'"),
    (dict(loss_case=False), "no module made it"),
    (dict(nothing=""), "None, not the empty string"),
    (dict(remove=False), "still registered"),
    (dict(clear=False), "adds into .grad"),
])
def test_find_nan_source_check_names_each_mistake(change, message):
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        debugging_checks.check_find_nan_source(lambda *args: _find_nan_source(*args, **change))


@pytest.mark.parametrize("change, message", [
    (dict(baseline=math.log10), "a baseline other than -log(1/C)"),
    (dict(baseline=lambda c: 1 / c), "a baseline other than -log(1/C)"),
    (dict(both_ways=False), "the distance counts both ways"),
    (dict(at_eval=False), "At evaluation, dropout off"),
    (dict(zero_grad=False), "gradients never cleared"),
    (dict(nan_tests=()), "Every comparison with NaN is False"),
    (dict(nan_tests=("loss",)), "Test the gradients too"),
    (dict(own_copy=False), "trained the caller's model"),
    (dict(early_verdict=True), "'non-finite' comes first"),
])
def test_diagnose_run_check_names_each_mistake(change, message):
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        debugging_checks.check_diagnose_run(lambda *args: _diagnose_run(*args, **change))


def test_count_hooks_sees_module_parameter_and_global_hooks():
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    handles = [net[0].register_forward_hook(lambda *a: None), net.register_full_backward_hook(lambda *a: None),
               net[0].weight.register_hook(lambda g: g),
               nn.modules.module.register_module_forward_hook(lambda *a: None)]
    try:
        assert debugging_checks.count_hooks(net) == 4
    finally:
        for handle in handles:
            handle.remove()
    assert debugging_checks.count_hooks(net) == 0
