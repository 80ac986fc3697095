"""Lesson 02's package code: the module tree and chart count what a model holds; the check helpers are fair."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from autograder.kernel.checks import CheckFailed
from autograder.kernel.lessons import modules_view as mv


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


# ------------------------------------------------------------------ test-cell helpers

def test_tied_model_shares_one_weight():
    model = mv.tied_model(10, 4)
    assert model.out.weight is model.embed.weight
    assert sum(p.numel() for p in model.parameters()) == 50


def test_fill_linear_layers_is_independent_of_creation_order_and_global_rng():
    a = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    torch.manual_seed(5)
    b = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.1), nn.ReLU(), nn.Linear(4, 2))
    state = torch.random.get_rng_state()
    mv.fill_linear_layers(a, 7)
    mv.fill_linear_layers(b, 7)
    assert torch.equal(torch.random.get_rng_state(), state)
    for la, lb in zip(mv.linear_layers(a), mv.linear_layers(b)):
        assert torch.equal(la.weight, lb.weight) and torch.equal(la.bias, lb.bias)


class Layers(nn.Module):
    """An MLP written several ways: ``order`` lists what follows each hidden Linear."""

    def __init__(self, sizes, p, order=("relu", "drop"), tail=(), in_list=False, functional_dropout=None):
        super().__init__()
        make = {"relu": nn.ReLU, "drop": lambda: nn.Dropout(p), "identity": nn.Identity,
                "softmax": lambda: nn.Softmax(dim=-1), "logsoftmax": lambda: nn.LogSoftmax(dim=-1)}
        layers = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers += [make[name]() for name in order]
        layers += [make[name]() for name in tail]
        self.layers = layers if in_list else nn.Sequential(*layers)
        self.functional_dropout, self.p = functional_dropout, p

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if self.functional_dropout is not None and isinstance(layer, nn.ReLU):
                x = F.dropout(x, self.p, self.training if self.functional_dropout == "mode" else True)
        return x


def run_mlp_checks(model, sizes, p):
    mv.check_linear_layers(model, sizes, "MLP")
    x = torch.randn(5, sizes[0])
    mv.check_logits(model, x, "MLP")
    mv.check_dropout(model, x, p, "MLP")


@pytest.mark.parametrize("kwargs", [
    {}, {"order": ("drop", "relu")}, {"tail": ("identity",)}, {"order": ("relu",), "functional_dropout": "mode"},
    {"order": ("relu", "identity", "drop")},
], ids=["relu-dropout", "dropout-relu", "trailing-identity", "functional-dropout", "identity-between"])
@pytest.mark.parametrize("sizes, p", [([4, 8, 3], 0.5), ([6, 3], 0.2), ([3, 5, 5, 2], 0.0)])
def test_mlp_checks_accept_correct_answers_written_other_ways(kwargs, sizes, p):
    torch.manual_seed(0)
    run_mlp_checks(Layers(sizes, p, **kwargs), sizes, p)


@pytest.mark.parametrize("kwargs, message", [
    ({"in_list": True}, "plain Python list"),
    ({"tail": ("softmax",)}, "probabilities"),
    ({"tail": ("logsoftmax",)}, "log-probabilities"),
    ({"tail": ("relu",)}, "ReLU after the last Linear"),
    ({"tail": ("drop",)}, "dropout after the last Linear"),
    ({"order": ("relu",)}, "dropout is not applied"),
    ({"order": ("relu",), "functional_dropout": "always"}, "dropout stays on in eval mode"),
], ids=["plain-list", "softmax", "log-softmax", "relu-at-end", "dropout-at-end", "no-dropout", "dropout-always-on"])
def test_mlp_checks_name_each_pitfall(kwargs, message):
    torch.manual_seed(0)
    with pytest.raises(CheckFailed, match=message):
        run_mlp_checks(Layers([4, 8, 3], 0.5, **kwargs), [4, 8, 3], 0.5)


def test_mlp_checks_reject_wrong_sizes_and_wrong_p():
    with pytest.raises(CheckFailed, match=r"registered Linear layers are \[\(4, 8\)\]"):
        mv.check_linear_layers(nn.Sequential(nn.Linear(4, 8)), [4, 8, 3], "MLP")
    model = Layers([4, 8, 3], 0.2)
    with pytest.raises(CheckFailed, match="p equal to the dropout argument"):
        mv.check_dropout(model, torch.randn(5, 4), 0.5, "MLP")


class Running(nn.Module):
    def __init__(self, n, kind="buffer", momentum=None, always=False, grad=False):
        super().__init__()
        mean, count = torch.zeros(n), torch.tensor(0)
        if kind == "buffer":
            self.register_buffer("mean", mean)
            self.register_buffer("count", count)
        elif kind == "parameter":
            self.mean, self.count = nn.Parameter(mean, requires_grad=False), nn.Parameter(count, requires_grad=False)
        elif kind == "plain":
            self.mean, self.count = mean, count
        elif kind == "float-count":
            self.register_buffer("mean", mean)
            self.register_buffer("count", torch.tensor(0.0))
        self.momentum, self.always, self.grad = momentum, always, grad

    def forward(self, x):
        if self.training or self.always:
            with torch.set_grad_enabled(self.grad):
                if self.momentum:
                    new_mean = (1 - self.momentum) * self.mean + self.momentum * x.mean(0)
                else:
                    new_mean = self.mean + (x.sum(0) - len(x) * self.mean) / (self.count + len(x))
            if self.grad:
                self.mean = new_mean
            else:
                self.mean.copy_(new_mean)
            self.count += len(x)
        return x - self.mean


def run_running_checks(module):
    mv.check_buffers(module, {"mean": torch.zeros(3), "count": torch.tensor(0)}, "RunningMean(3)")
    torch.manual_seed(0)
    first, second = torch.randn(4, 3), torch.randn(6, 3) + 2
    module.train()
    mv.check_running_call(module, first, [first])
    mv.check_running_call(module, second, [first, second])
    module.eval()
    mv.check_running_call(module, torch.randn(5, 3) + 10, [first, second])
    mv.check_update_not_recorded(module, torch.randn(2, 3, requires_grad=True))


def test_running_mean_checks_pass_a_correct_module():
    run_running_checks(Running(3))


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "parameter"}, "has parameters"),
    ({"kind": "plain"}, "plain tensor attribute"),
    ({"kind": "float-count"}, "count should start as torch.int64"),
    ({"momentum": 0.1}, "cumulative mean"),
    ({"always": True}, "changed in eval mode"),
], ids=["parameter", "plain", "float-count", "momentum", "eval-updates"])
def test_running_mean_checks_name_each_pitfall(kwargs, message):
    with pytest.raises(CheckFailed, match=message):
        run_running_checks(Running(3, **kwargs))


def test_update_recorded_by_autograd_is_named():
    with pytest.raises(CheckFailed, match="recorded by autograd"):
        mv.check_update_not_recorded(Running(3, grad=True), torch.randn(2, 3, requires_grad=True))


class BatchNormStyle(Running):
    """Updates the buffers outside autograd, but returns x minus a mean autograd saw computed from x."""

    def forward(self, x):
        if not self.training:
            return x - self.mean
        updated = self.mean + (x.sum(0) - len(x) * self.mean) / (self.count + len(x))
        with torch.no_grad():
            self.mean.copy_(updated)
            self.count += len(x)
        return x - updated


def test_a_mean_that_backpropagates_into_the_batch_is_named():
    """The contract says the running mean is a constant to autograd: a BatchNorm-style answer (hidden check 9 in
    the fifth edition, input gradient 0.786 against 1.0) now fails a visible check, with its message."""
    with pytest.raises(CheckFailed, match="The running mean is a constant to autograd"):
        run_running_checks(BatchNormStyle(3))


def test_a_non_persistent_buffer_is_named():
    module = Running(3)
    module.register_buffer("count", torch.tensor(0), persistent=False)
    with pytest.raises(CheckFailed, match="missing from state_dict"):
        mv.check_buffers(module, {"mean": torch.zeros(3), "count": torch.tensor(0)}, "RunningMean(3)")


def test_whole_running_mean_check_passes_a_correct_module_and_names_a_pitfall():
    torch.manual_seed(0)
    mv.check_running_mean_answers(Running)
    with pytest.raises(CheckFailed, match="changed in eval mode"):
        mv.check_running_mean_answers(lambda n: Running(n, always=True))


def _count(model, trainable_only=True):
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@pytest.mark.parametrize("wrong, message", [
    (lambda model, trainable_only=True: len(list(model.parameters())), "not parameter tensors"),
    (lambda model, trainable_only=True: _count(model, False), "frozen parameters"),
    (lambda model, trainable_only=True: sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False)
                                            if p.requires_grad or not trainable_only), "counted twice"),
    (lambda model, trainable_only=True: _count(model, trainable_only) + sum(b.numel() for b in model.buffers()),
     "buffers"),
    (lambda model, trainable_only=True: torch.tensor(_count(model, trainable_only)), "Python int"),
], ids=["tensors", "frozen", "tied-twice", "buffers", "tensor"])
def test_count_check_passes_a_correct_answer_and_names_each_pitfall(wrong, message):
    mv.check_count_answers(_count)
    with pytest.raises(CheckFailed, match=message):
        mv.check_count_answers(wrong)


def test_scripted_debugger_stops_inside_a_function_and_answers_each_command():
    def forward(x):
        h = x * 2
        debugger.set_trace()
        return h + 1

    debugger = mv.ScriptedDebugger(["p h", "p type(h).__name__", "c"])
    assert forward(torch.tensor(3)) == 7
    assert debugger.transcript() == ("stopped in forward()\n(Pdb) p h\ntensor(6)\n"
                                     "(Pdb) p type(h).__name__\n'Tensor'\n(Pdb) c")


# ---------------------------------------------------------------- the ungraded warm-up count_parameters

def _warm_up_answers(kind: str) -> list:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "course" / "pitfalls" / "02_modules.py"
    spec = importlib.util.spec_from_file_location("pitfalls_02_warm_up", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return sorted(module.WARM_UP[kind].items())


def _define(source: str):
    import numpy as np

    namespace = {"torch": torch, "nn": nn, "np": np}
    exec(source, namespace)  # noqa: S102 - the course's own table of answers
    return namespace["count_parameters"]


@pytest.mark.parametrize("description,source", _warm_up_answers("wrong") + _warm_up_answers("plausible"))
def test_warm_up_checks_catch_every_wrong_count(description, source):
    """count_parameters is ungraded now; its checks still catch every wrong answer of the old pitfall table."""
    torch.manual_seed(21)
    with pytest.raises(CheckFailed):
        mv.check_count_answers(_define(source))


@pytest.mark.parametrize("description,source", _warm_up_answers("right"))
def test_warm_up_checks_pass_right_counts(description, source):
    torch.manual_seed(21)
    mv.check_count_answers(_define(source))


def test_the_draft_in_the_lesson_is_the_pitfall_table_s():
    """The lesson's DraftMLP (the code exercise 1 starts from) is the table's DRAFT, word for word but for the name
    and docstring: the pitfall tests then prove that the code the student is handed fails the visible checks."""
    import re

    import nbformat

    from autograder import course

    import coursekit as kit

    nb = nbformat.read(course.solution_path("02_modules"), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "class DraftMLP(" in c.source)
    assert cell.metadata["pte"]["starting_point_of"] == ["ex-MLP"]
    given = cell.source.split("\n\n\n")[0].replace("class DraftMLP(", "class MLP(")
    given = re.sub(r'\n    """.*?"""\n', "", given, count=1, flags=re.S)
    assert given.strip() == kit.load_pitfall_module("02_modules").DRAFT.strip()


def test_check_linear_layers_names_a_partly_registered_model():
    """A model whose later layers sit in a plain list registers fewer Linears: the check says so."""
    class Partly(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(4, 8)
            self.rest = [nn.Linear(8, 3)]

    with pytest.raises(CheckFailed, match=r"(?s)\[\(4, 8\)\].*plain Python list"):
        mv.check_linear_layers(Partly(), [4, 8, 3], "MLP")
    with pytest.raises(CheckFailed) as info:   # the wrong sizes, all registered: no list to blame
        mv.check_linear_layers(nn.Sequential(nn.Linear(4, 7), nn.Linear(7, 3)), [4, 8, 3], "MLP")
    assert "plain Python list" not in str(info.value)
