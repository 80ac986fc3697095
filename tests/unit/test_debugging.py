"""The pinwheel data, the graph-size probe, the forward-mode recorder and the loss-curve figure of lesson 09."""
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from autograder.kernel import checks, debugging


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


def test_record_forward_modes_sees_training_flag_and_grad_mode():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    with debugging.record_forward_modes(net) as seen:
        net(torch.ones(1, 2))
        net.eval()
        with torch.no_grad():
            net(torch.ones(1, 2))
    assert seen[:3] == [(True, True)] * 3          # Linear, Dropout, then the Sequential itself
    assert seen[3:] == [(False, False)] * 3
    net(torch.ones(1, 2))
    assert len(seen) == 6, "the hooks must be removed when the block ends"


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


# ---------------------------------------------------------------- the visible checks of the four exercises

def _initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            loss = nn.functional.cross_entropy(model(xb), yb).item()
    finally:
        model.train(was_training)
    return abs(loss - math.log(num_classes)) <= tol


def _overfit_one_batch(model, batch, loss_fn, steps, lr, *, clear="before"):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        if clear == "before":
            optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        if clear == "after":
            optimizer.zero_grad()
    return loss.item()


def _find_nan_source(fn):
    import re
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autograd.detect_anomaly():
                fn().backward()
        except RuntimeError as err:
            found = re.search(r"Function '(\w+)' returned nan values", str(err))
            if found is None:
                raise
            return found.group(1)
    return ""


def test_exercise_checks_pass_correct_answers():
    debugging.check_initial_loss_check(_initial_loss_check)
    debugging.check_overfit_one_batch(_overfit_one_batch)
    debugging.check_grad_norm(
        lambda model: nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None]).item())
    debugging.check_find_nan_source(_find_nan_source)
    assert not torch.is_anomaly_enabled()


def test_initial_loss_check_check_names_a_one_sided_comparison():
    def one_sided(model, batch, num_classes, tol):
        xb, yb = batch
        was_training = model.training
        model.eval()
        with torch.no_grad():
            loss = nn.functional.cross_entropy(model(xb), yb).item()
        model.train(was_training)
        return loss - math.log(num_classes) <= tol

    with pytest.raises(checks.CheckFailed, match="both directions"):
        debugging.check_initial_loss_check(one_sided)


def test_overfit_check_computes_its_reference_and_names_missing_zero_grad():
    """The expected loss comes from the helper's own run on a copy: the model it hands over is not touched by it."""
    with pytest.raises(checks.CheckFailed, match="never cleared"):
        debugging.check_overfit_one_batch(lambda *args: _overfit_one_batch(*args, clear=None))


def test_overfit_check_names_gradients_cleared_after_the_step():
    """The model arrives with gradients in .grad: clearing after each step lets them reach the first update."""
    with pytest.raises(checks.CheckFailed, match="cleared after each step instead of before each backward"):
        debugging.check_overfit_one_batch(lambda *args: _overfit_one_batch(*args, clear="after"))


def test_initial_loss_check_check_leaves_no_trace_to_lesson_04():
    """Leaving the model in eval mode is lesson 04's to grade: the visible checks here accept it."""
    def left_in_eval(model, batch, num_classes, tol):
        xb, yb = batch
        model.eval()
        with torch.no_grad():
            loss = nn.functional.cross_entropy(model(xb), yb).item()
        return abs(loss - math.log(num_classes)) <= tol

    debugging.check_initial_loss_check(left_in_eval)


def test_grad_norm_check_catches_clip_grad_norm_with_inf_max_norm():
    """clip_grad_norm_(..., inf) returns the right norm but multiplies every gradient by inf / inf = NaN."""
    with pytest.raises(checks.CheckFailed, match="NaN"):
        debugging.check_grad_norm(lambda model: nn.utils.clip_grad_norm_(model.parameters(), math.inf).item())
    with pytest.raises(checks.CheckFailed, match="changed the gradients"):
        debugging.check_grad_norm(lambda model: nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())


def test_find_nan_source_check_names_the_forward_operation_mistake():
    def forward_name(fn):
        found = _find_nan_source(fn)
        return found.replace("Backward0", "").lower()

    with pytest.raises(checks.CheckFailed, match="forward operation"):
        debugging.check_find_nan_source(forward_name)


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
