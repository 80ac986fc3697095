"""The module tree and the params/buffers chart count what a model really holds (lesson 02's 'Look')."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from torch import nn

from autograder import modules_view as mv


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.features(x))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10)
        self.out.weight = self.emb.weight


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_rows_credit_each_module_with_what_it_registers():
    rows = {r.name: r for r in mv.module_rows(SmallNet())}
    assert list(rows) == ["", "features", "features.0", "features.1", "features.2", "features.3", "head"]
    assert (rows[""].params, rows[""].buffers, rows[""].depth, rows[""].is_leaf) == (0, 0, 0, False)
    assert (rows["features.0"].params, rows["features.0"].buffers) == (4 * 8 + 8, 0)
    assert (rows["features.1"].params, rows["features.1"].buffers) == (2 * 8, 2 * 8 + 1)
    assert rows["features.1"].kind == "BatchNorm1d" and rows["features.1"].depth == 2
    assert (rows["features.2"].params, rows["features.3"].params) == (0, 0)
    assert rows["features.3"].is_leaf and not rows["features"].is_leaf


@pytest.mark.parametrize("make", [SmallNet, Tied, lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.LayerNorm(4))])
def test_rows_add_up_to_parameters_and_buffers(make):
    model = make()
    rows = mv.module_rows(model)
    assert sum(r.params for r in rows) == sum(p.numel() for p in model.parameters())
    assert sum(r.buffers for r in rows) == sum(b.numel() for b in model.buffers())
    assert mv.subtree_totals(rows, "") == (sum(r.params for r in rows), sum(r.buffers for r in rows))


def test_tied_weight_counted_once_and_reported_shared():
    rows = {r.name: r for r in mv.module_rows(Tied())}
    assert rows["emb"].params == 40 and rows["emb"].shared == 0
    assert rows["out"].params == 10 and rows["out"].shared == 40
    assert "40 shared" in mv.module_tree(Tied())


def test_frozen_parameters_are_counted_but_not_trainable():
    model = SmallNet()
    model.features[0].requires_grad_(False)
    rows = {r.name: r for r in mv.module_rows(model)}
    assert (rows["features.0"].params, rows["features.0"].trainable) == (40, 0)
    assert rows["head"].trainable == rows["head"].params == 27
    assert "(40 frozen)" in mv.module_tree(model)


def test_subtree_totals_do_not_mix_similar_names():
    model = nn.Sequential(*[nn.Linear(1, 1) for _ in range(11)])
    rows = mv.module_rows(model)
    assert mv.subtree_totals(rows, "1") == (2, 0)  # not also "10"


def test_tree_lists_every_module_with_subtree_totals():
    text = mv.module_tree(SmallNet())
    lines = text.splitlines()
    assert len(lines) == 7
    assert lines[0].startswith("(model): SmallNet") and "params     83" in lines[0] and "buffers    17" in lines[0]
    assert lines[1].startswith("  features: Sequential") and "params     56" in lines[1]
    assert lines[3].startswith("    1: BatchNorm1d") and "params     16  buffers    17" in lines[3]
    assert lines[-1].startswith("  head: Linear") and "params     27" in lines[-1]


def test_plot_has_two_bars_per_leaf_with_counts():
    ax = mv.plot_module_counts(SmallNet())
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["features.0 (Linear)", "features.1 (BatchNorm1d)", "features.2 (ReLU)",
                      "features.3 (Dropout)", "head (Linear)"]  # top to bottom
    assert [round(t) for t in ax.get_yticks()] == [4, 3, 2, 1, 0]
    params, buffers = ax.containers
    assert [b.get_width() for b in params] == [40, 16, 0, 0, 27]
    assert [b.get_width() for b in buffers] == [0, 17, 0, 0, 0]
    assert ax.get_legend() is not None and "SmallNet" in ax.get_title()
    assert not any(b.get_hatch() for b in params)


def test_plot_marks_frozen_parameters():
    model = SmallNet()
    model.features[0].requires_grad_(False)
    ax = mv.plot_module_counts(model)
    params, _ = ax.containers
    assert [bool(b.get_hatch()) for b in params] == [True, False, False, False, False]
    assert "40 (frozen)" in [t.get_text() for t in ax.texts]


def test_plot_includes_a_container_with_its_own_parameter():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(nn.Linear(1, 3).bias.detach().clone())
            self.body = nn.Linear(2, 3)

    _, ax = plt.subplots()
    assert mv.plot_module_counts(Scaled(), ax=ax, title="t") is ax
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "(model) (Scaled)" in labels and ax.get_title() == "t"
