"""What an ``nn.Module`` holds, for lesson 02: a text tree, a bar chart, and the test cells' helpers.

Counts are numbers of *elements* (``numel``), not numbers of tensors. Each module is
credited only with what it registers itself (``recurse=False``); a tensor registered on
two modules (a tied weight) is credited to the first one in ``named_modules()`` order
and reported as *shared* on the others, so the rows add up to exactly what
``model.parameters()`` and ``model.buffers()`` yield.

The ``check_*`` helpers keep the lesson's visible test cells short: no expected value stands in a
test cell. They test what the exercises' specs mean (behaviour), not one way of writing them, and each failure names
the misconception it points at.
"""
from __future__ import annotations

import io
import pdb
import re
from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn
from torch.nn import functional as F

from autograder.kernel import checks

__all__ = ["ModuleRow", "module_rows", "subtree_totals", "module_tree", "plot_module_counts",
           "tied_model", "linear_layers", "fill_linear_layers", "check_linear_layers", "check_logits",
           "check_dropout", "check_buffers", "check_running_call", "check_update_not_recorded",
           "check_count_answers", "check_running_mean_answers", "ScriptedDebugger"]


@dataclass(frozen=True)
class ModuleRow:
    """One entry of ``model.named_modules()`` and what it registers itself."""

    name: str       # qualified name, "" for the model itself
    kind: str       # class name, e.g. "Linear"
    depth: int      # 0 for the model, 1 for its children, ...
    params: int     # parameter elements registered here (first owner only)
    trainable: int  # the part of ``params`` with requires_grad=True
    shared: int     # parameter elements registered here that an earlier module already owns
    buffers: int    # buffer elements registered here (first owner only)
    is_leaf: bool   # has no child modules


def module_rows(model: nn.Module) -> list[ModuleRow]:
    """One :class:`ModuleRow` per module, in ``named_modules()`` order (the model first)."""
    seen_params: set[int] = set()
    seen_buffers: set[int] = set()
    rows = []
    for name, module in model.named_modules():
        params = trainable = shared = buffers = 0
        for p in module.parameters(recurse=False):
            if id(p) in seen_params:
                shared += p.numel()
                continue
            seen_params.add(id(p))
            params += p.numel()
            if p.requires_grad:
                trainable += p.numel()
        for b in module.buffers(recurse=False):
            if id(b) not in seen_buffers:
                seen_buffers.add(id(b))
                buffers += b.numel()
        rows.append(ModuleRow(
            name=name, kind=type(module).__name__, depth=name.count(".") + 1 if name else 0,
            params=params, trainable=trainable, shared=shared, buffers=buffers,
            is_leaf=next(module.children(), None) is None,
        ))
    return rows


def subtree_totals(rows: list[ModuleRow], name: str) -> tuple[int, int]:
    """(parameter elements, buffer elements) of module ``name`` and everything below it."""
    inside = [r for r in rows if name == "" or r.name == name or r.name.startswith(name + ".")]
    return sum(r.params for r in inside), sum(r.buffers for r in inside)


def module_tree(model: nn.Module) -> str:
    """An indented listing of the modules with parameter and buffer counts.

    Each line shows the totals of that module's whole subtree; a ``frozen`` note says
    how many of its own parameter elements have ``requires_grad=False`` and a
    ``shared`` note how many it registers that another module already owns.
    """
    rows = module_rows(model)
    labels = []
    for r in rows:
        label = r.name.rsplit(".", 1)[-1] if r.name else "(model)"
        labels.append("  " * r.depth + f"{label}: {r.kind}")
    width = max(len(label) for label in labels)
    lines = []
    for label, r in zip(labels, rows):
        params, buffers = subtree_totals(rows, r.name)
        line = f"{label:<{width}}  params {params:>6}  buffers {buffers:>5}"
        notes = []
        if r.params != r.trainable:
            notes.append(f"{r.params - r.trainable} frozen")
        if r.shared:
            notes.append(f"{r.shared} shared")
        if notes:
            line += "  (" + ", ".join(notes) + ")"
        lines.append(line.rstrip())
    return "\n".join(lines)


def plot_module_counts(model: nn.Module, ax=None, title: str | None = None):
    """Horizontal bars, two per leaf module: parameter elements and buffer elements.

    Only leaf modules are drawn (containers hold nothing themselves), plus any container
    that registers a parameter or buffer directly. Modules with nothing (ReLU,
    Dropout) still get a row, showing their zeros. A hatched, pale parameter bar marks
    a module with frozen (``requires_grad=False``) parameters. Returns the axes.
    """
    import matplotlib.pyplot as plt

    rows = [r for r in module_rows(model) if r.is_leaf or r.params or r.buffers or r.shared]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
    labels = [f"{r.name or '(model)'} ({r.kind})" for r in rows]
    positions = list(range(len(rows)))[::-1]
    height = 0.38
    param_bars = ax.barh([p + height / 2 for p in positions], [r.params for r in rows], height,
                         label="parameters", color="tab:blue")
    buffer_bars = ax.barh([p - height / 2 for p in positions], [r.buffers for r in rows], height,
                          label="buffers", color="tab:orange")
    for bar, r in zip(param_bars, rows):
        if r.trainable < r.params:
            bar.set_hatch("//")
            bar.set_facecolor("lightsteelblue")
    ax.bar_label(param_bars, padding=2, fontsize=8,
                 labels=[f"{r.params}" + (" (frozen)" if r.trainable == 0 and r.params else
                                          f" ({r.params - r.trainable} frozen)" if r.trainable < r.params else "")
                         for r in rows])
    ax.bar_label(buffer_bars, padding=2, fontsize=8)
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_xlabel("elements (numel)")
    ax.margins(x=0.15)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or f"{type(model).__name__}: what each module registers", fontsize=10)
    return ax


# ------------------------------------------------------------------ test-cell helpers

class TiedModel(nn.Module):
    """An embedding and an output layer that share one weight, as in many language models."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)
        self.out.weight = self.embed.weight


def tied_model(vocab: int, dim: int) -> nn.Module:
    """``Embedding(vocab, dim)`` and ``Linear(dim, vocab)`` with one shared weight: vocab·dim + vocab parameters."""
    return TiedModel(vocab, dim)


def linear_layers(model: nn.Module) -> list[nn.Linear]:
    """The ``nn.Linear`` layers registered in ``model``, in registration order (what an optimizer sees)."""
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def fill_linear_layers(model: nn.Module, seed: int) -> None:
    """Overwrite every registered Linear layer's weight and bias with values drawn from ``seed``.

    Hidden tests use it so that what they observe does not depend on the order in which a
    model happened to create its layers. The global random state is left alone.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for lin in linear_layers(model):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) / lin.in_features ** 0.5)
            if lin.bias is not None:
                lin.bias.copy_(0.1 * torch.randn(lin.bias.shape, generator=g))


def check_linear_layers(model, sizes: list[int], label: str) -> list[nn.Linear]:
    """``model`` is a module whose registered Linear layers are ``Linear(sizes[i], sizes[i+1])``, in order."""
    checks.check_type(model, nn.Module, label)
    linears = linear_layers(model)
    if not linears or not any(True for _ in model.parameters()):
        raise checks.CheckFailed(
            f"{label}: no nn.Linear is registered and model.parameters() is empty, so an optimizer would "
            "train nothing and state_dict() would save nothing.\nLikely mistake: layers kept in a plain Python "
            "list (or dict) are not registered: use nn.Sequential or nn.ModuleList.")
    got = [(lin.in_features, lin.out_features) for lin in linears]
    want = list(zip(sizes[:-1], sizes[1:]))
    missing = ("\nLikely mistake: a Linear the module cannot see, held in a plain Python list or dict: "
               "model.parameters() and state_dict() skip it." if len(got) < len(want) else "")
    checks.expect(got == want, f"{label}: the registered Linear layers are {got} (in, out), expected {want}, "
                               f"in this order.{missing}")
    return linears


def _chain(linears: list[nn.Linear], x: torch.Tensor, p: float | None) -> torch.Tensor:
    """Linear, ReLU, (dropout p), ..., Linear with the model's own layers: what the spec describes."""
    h = x
    for i, lin in enumerate(linears):
        h = F.linear(h, lin.weight, lin.bias)
        if i < len(linears) - 1:
            h = torch.relu(h)
            if p is not None:
                h = F.dropout(h, p, training=True)
    return h


def check_logits(model: nn.Module, x: torch.Tensor, label: str) -> None:
    """In eval mode ``model(x)`` is Linear, ReLU, ..., Linear with its registered layers: raw logits."""
    linears = linear_layers(model)
    model.eval()
    with torch.no_grad():
        want = _chain(linears, x, None)
        got = checks.call(model, x)
        again = checks.call(model, x)
    hint = "in eval mode the output should be Linear, ReLU, ..., Linear applied in order, with the model's own layers."
    if isinstance(got, torch.Tensor) and got.shape == want.shape:
        n = got.shape[0]
        if isinstance(again, torch.Tensor) and not torch.equal(got, again):
            hint = ("two eval-mode calls on the same input gave different outputs: dropout stays on in eval mode. "
                    "Use nn.Dropout modules (they follow model.eval()), or F.dropout(x, p, self.training).")
        elif bool((got >= 0).all()) and torch.allclose(got.sum(-1), torch.ones(n), atol=1e-4):
            hint = "the outputs are probabilities (each row sums to 1): drop the softmax and return raw logits."
        elif torch.allclose(got.exp().sum(-1), torch.ones(n), atol=1e-4):
            hint = "the outputs are log-probabilities (log-softmax): return raw logits."
        elif bool((got >= 0).all()) and bool((want < 0).any()):
            hint = "no output is negative: a ReLU after the last Linear? Return the last layer's raw logits."
    checks.check_tensor(got, want, f"{label}(x {tuple(x.shape)}) in eval mode", hints={"values": hint})


def check_dropout(model: nn.Module, x: torch.Tensor, p: float, label: str, seed: int = 0) -> None:
    """In train mode ``model(x)`` applies dropout ``p`` after each hidden ReLU (compared under one seed).

    ReLU and dropout commute, so either order passes; so does ``F.dropout(x, p, self.training)``.
    """
    linears = linear_layers(model)
    model.train()
    with torch.no_grad():
        torch.manual_seed(seed)
        got = checks.call(model, x)
        torch.manual_seed(seed)
        want = _chain(linears, x, p)
        eval_out = _chain(linears, x, None)
    hint = (f"in train mode the output should be Linear, ReLU, Dropout(p={p}), ..., Linear: dropout after each "
            "hidden ReLU (not on the input, not on the logits), with p equal to the dropout argument.")
    if isinstance(got, torch.Tensor) and got.shape == want.shape:
        if p > 0 and len(linears) > 1 and torch.allclose(got, eval_out, atol=1e-5):
            hint = ("train mode gives the eval-mode output: dropout is not applied. Use nn.Dropout(dropout) modules "
                    "(they follow model.train()), or F.dropout(x, dropout, self.training).")
        elif bool((got == 0).any()) and not bool((want == 0).any()):
            hint = "some logits are exactly 0 in train mode: dropout after the last Linear? The logits come out raw."
    checks.check_tensor(got, want, f"{label}(x {tuple(x.shape)}) in train mode, seed {seed}",
                        hints={"values": hint})


def check_buffers(module: nn.Module, expected: Mapping[str, torch.Tensor], label: str) -> None:
    """``module`` registers exactly ``expected``'s names as (persistent) buffers, with these initial values."""
    params = [name for name, _ in module.named_parameters()]
    checks.expect(not params, f"{label} has parameters {params}: an optimizer built from model.parameters() would "
                              "train them.\nLikely mistake: running statistics are buffers, not nn.Parameter: "
                              "use self.register_buffer(name, tensor).")
    buffers = dict(module.named_buffers())
    saved = set(module.state_dict())
    for name, value in expected.items():
        plain = isinstance(getattr(module, name, None), torch.Tensor) and name not in buffers
        checks.expect(not plain, f"{label}.{name} is a plain tensor attribute: state_dict() does not save it and "
                                 ".to() does not move it.\nLikely mistake: use self.register_buffer"
                                 f"('{name}', ...).")
        checks.expect(name in buffers, f"{label} has no buffer named '{name}'; registered buffers: {sorted(buffers)}.")
        checks.expect(name in saved, f"{label}.{name} is missing from state_dict(): register it as a persistent "
                                     "buffer (the default; not persistent=False).")
        checks.check_tensor(buffers[name], value, f"{label}.{name} after construction",
                            hints={"dtype": f"{name} should start as {value.dtype}, like "
                                            f"torch.{'tensor(0)' if value.dim() == 0 else 'zeros(n)'}."})


def check_running_call(module: nn.Module, x: torch.Tensor, seen: list[torch.Tensor]) -> None:
    """Call ``module(x)`` in its current mode; ``seen`` lists every batch it has met in train mode so far.

    Afterwards ``module.mean`` must be the mean of all rows in ``seen`` and ``module.count``
    their number, and the output must be ``x - mean``.
    """
    mode = "a train" if module.training else "an eval"
    rows = torch.cat(seen)
    out = checks.call(module, x)
    where = f"after {mode}-mode call on {x.shape[0]} rows ({rows.shape[0]} rows seen in train mode)"
    if module.training:
        mean_hint = ("the mean must be the cumulative mean of every row seen in train mode (weighted by rows), "
                     "not a momentum average or the average of the batch means.")
        count_hint = "count is the number of rows seen in train mode (a 0-dim torch.long tensor)."
        out_hint = "in train mode update the mean first, then return x - mean (the running mean, not the batch's)."
    else:
        mean_hint = ("the mean changed in eval mode: update it only when self.training is True "
                     "(model.eval() sets it to False on every submodule).")
        count_hint = "count changed in eval mode: update only when self.training is True."
        out_hint = "in eval mode return x - mean with the stored running mean."
    checks.check_tensor(module.mean, rows.mean(0), f"mean {where}", hints={"values": mean_hint})
    checks.check_tensor(module.count, torch.tensor(rows.shape[0]), f"count {where}",
                        hints={"values": count_hint, "dtype": count_hint})
    checks.check_tensor(out, x - rows.mean(0), f"output {where}", hints={"values": out_hint})


def check_update_not_recorded(module: nn.Module, x: torch.Tensor) -> None:
    """A train-mode call on ``x`` (which requires grad) leaves the buffers outside the autograd graph."""
    module.train()
    out = checks.call(module, x)
    checks.check_no_autograd_history(
        module.mean, "the mean buffer after a train-mode call on an input that requires grad",
        hint="the update was recorded by autograd, so the buffer drags a graph from batch to batch: "
             "update it under torch.no_grad() (or from x.detach()).")
    checks.expect(isinstance(out, torch.Tensor) and out.requires_grad,
                  "the output x - mean should stay differentiable with respect to x: compute it outside no_grad().")
    out.sum().backward()
    checks.check_tensor(x.grad, torch.ones_like(x), "the gradient of the output's sum with respect to x (train mode)",
                        atol=1e-6, rtol=0, hints={"values": (
                            "autograd saw the batch's share of the running mean being computed from x, as BatchNorm "
                            "does with its batch statistics. The running mean is a constant to autograd: subtract "
                            "the updated buffer, so that d(x - mean)/dx is the identity.")})


# ---------------------------------------------------------------- the visible checks, whole

def check_count_answers(count_parameters) -> None:
    """The visible checks of ``count_parameters`` (the test cell seeds first): the expected counts live here."""
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2))
    checks.check_number(checks.call(count_parameters, net), 98, "count_parameters(Linear(3,16)-ReLU-Linear(16,2))",
                        kind=int, hint="count elements (each parameter's number of entries), not parameter tensors.")
    net[0].requires_grad_(False)
    checks.check_number(checks.call(count_parameters, net, trainable_only=True), 34,
                        "count_parameters(first layer frozen, trainable_only=True)", kind=int,
                        hint="frozen parameters (requires_grad=False) were counted: with trainable_only=True "
                             "skip them, training will not change them.")
    checks.check_number(checks.call(count_parameters, net, trainable_only=False), 98,
                        "count_parameters(first layer frozen, trainable_only=False)", kind=int,
                        hint="with trainable_only=False every parameter counts, frozen or not.")
    checks.check_number(checks.call(count_parameters, tied_model(10, 4)), 50,
                        "count_parameters(Embedding(10, 4) whose weight is tied to Linear(4, 10))", kind=int,
                        hint="the tied weight (one Parameter registered on two modules) was counted twice: "
                             "counting module by module, or the entries of state_dict(), meets it under both "
                             "names.")
    checks.check_number(checks.call(count_parameters, nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8))), 64,
                        "count_parameters(Linear(5,8)-BatchNorm1d(8))", kind=int,
                        hint="buffers (BatchNorm's running_mean, running_var, num_batches_tracked) were counted: "
                             "they are in state_dict() but they are not parameters.")


def check_running_mean_answers(running_mean_class) -> None:
    """The visible checks of ``RunningMean`` (the test cell seeds first)."""
    rm = checks.call(running_mean_class, 3)
    check_buffers(rm, {"mean": torch.zeros(3), "count": torch.tensor(0)}, "RunningMean(3)")
    first, second = torch.randn(4, 3), torch.randn(6, 3) + 2.0
    rm.train()
    check_running_call(rm, first, seen=[first])
    check_running_call(rm, second, seen=[first, second])
    rm.eval()
    check_running_call(rm, torch.randn(5, 3) + 10.0, seen=[first, second])
    check_update_not_recorded(checks.call(running_mean_class, 3), torch.randn(2, 3, requires_grad=True))


# ---------------------------------------------------------------- a debugger inside forward, scripted

class ScriptedDebugger(pdb.Pdb):
    """pdb reading its commands from a list instead of the keyboard, keeping what it answered.

    Lesson 02 stops it inside a ``forward`` (``debugger.set_trace()``, where your own code writes
    ``breakpoint()``) to show that define-by-run code can be debugged like any Python.
    """

    def __init__(self, commands: list[str]):
        self._answers = io.StringIO()
        super().__init__(stdin=io.StringIO("".join(f"{c}\n" for c in commands)), stdout=self._answers)
        self.use_rawinput = False
        self.given = list(commands)

    def transcript(self) -> str:
        """Where it stopped (the function, not the file, which differs between machines), then each command
        with its answer, after the prompt it showed (``ipdb>`` in a Jupyter kernel, ``(Pdb)`` elsewhere)."""
        text = re.sub(r"\x1b\[[0-9;]*m", "", self._answers.getvalue())
        where, *rest = re.split(r"(\(Pdb\) |ipdb> )", text)
        found = re.search(r"\(\d+\)(\w+)\(\)", where)
        lines = [f"stopped in {found.group(1) if found else '?'}()"]
        for command, prompt, answer in zip(self.given, rest[0::2], rest[1::2]):
            lines.append(f"{prompt}{command}")
            if answer.strip():
                lines.append(answer.rstrip("\n"))
        return "\n".join(lines)
