"""The two-spirals data, reference model and figures of lesson 04."""
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from autograder import spirals


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
