"""The visible checks of lesson 09's two graded exercises: ``diagnose_run`` and ``find_nan_source``.

Each check builds its own seeded runs whose fault is known by construction (a head that caps the logits, inputs
that cannot be told apart, a ``log`` of a ReLU's zeros, a square root at 0), so what it expects is never computed
by an answer of its own: the verdicts and the module names below are what the construction guarantees.
"""
from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Callable

import torch
from torch import nn

from .. import checks, private_apis

__all__ = ["count_hooks", "check_diagnose_run", "check_find_nan_source"]


def count_hooks(model: nn.Module) -> int:
    """How many hooks are registered on ``model``: on its modules (forward, forward-pre, backward, backward-pre),
    on its parameters, and globally on every module (``nn.modules.module.register_module_*_hook``)."""
    found = 0
    for module in model.modules():
        found += sum(len(private_apis.get(entry, module) or {}) for entry in private_apis.MODULE_HOOKS)
    for p in model.parameters():
        found += len(private_apis.get(private_apis.TENSOR_BACKWARD_HOOKS, p) or {})
    return found + sum(len(private_apis.get(entry)) for entry in private_apis.GLOBAL_HOOKS)


class _Log(nn.Module):
    """``log`` of its input: -inf where the input is exactly 0 (after a ReLU, say)."""

    def forward(self, x):
        return x.log()


class _WithRadius(nn.Module):
    """Appends each row's Euclidean length, written by hand: finite forward, NaN gradient at a zero row."""

    def forward(self, x):
        return torch.cat([x, x.pow(2).sum(dim=1, keepdim=True).sqrt()], dim=1)


def _mlp(d_in: int, classes: int, width: int = 32) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, classes))


# ---------------------------------------------------------------------------------------------- diagnose_run

def _verdict(diagnose_run: Callable, label: str, model: nn.Module, batch, classes: int, steps: int, lr: float):
    got = checks.call(diagnose_run, model, batch, classes, steps, lr)
    checks.check_type(got, str, f"diagnose_run({label})")
    checks.expect(got in ("non-finite", "initial loss", "cannot fit", "ok"),
                  f"diagnose_run({label}) returned {got!r}: the verdict is one of 'non-finite', 'initial loss', "
                  "'cannot fit' and 'ok'.")
    return got


def _check_healthy_and_untouched(diagnose_run: Callable, xb: torch.Tensor, yb: torch.Tensor) -> None:
    """A healthy MLP is 'ok', and comes back as it arrived: parameters, .grad, eval mode."""
    healthy = _mlp(5, 4)
    healthy.eval()                                            # arrives as after an evaluation
    nn.functional.cross_entropy(healthy(xb), yb).backward()   # and with gradients from an earlier backward pass
    before = [p.detach().clone() for p in healthy.parameters()]
    grads = [p.grad.clone() for p in healthy.parameters()]
    got = _verdict(diagnose_run, "a healthy MLP 5-32-32-4, 32 examples, 100 steps, lr=0.01", healthy, (xb, yb),
                   4, 100, 0.01)
    hints = {
        "initial loss": "its first loss is 1.37, within 0.03 of ln 4 = 1.386, the loss of uniform predictions. "
                        "Likely mistake: a baseline other than -log(1/C) in the natural log (log10, or 1/C).",
        "cannot fit": "a healthy MLP memorizes 32 examples in 100 Adam steps (its loss falls below 0.003). Likely "
                      "mistakes: gradients never cleared (backward() adds into .grad, so each update follows the "
                      "sum of all earlier gradients), or an optimizer that holds the parameters of another model "
                      "than the one being trained.",
        "non-finite": "nothing in this run is NaN or infinite.",
    }
    checks.expect(got == "ok", f"diagnose_run(a healthy MLP) returned {got!r}, expected 'ok': {hints.get(got, '')}")
    for i, (old, p, g) in enumerate(zip(before, healthy.parameters(), grads)):
        checks.check_tensor(p.detach(), old, f"the caller's parameter {i} after diagnose_run",
                            hints={"values": "diagnose_run trained the caller's model: the fit is a test, and the "
                                             "model must come back as it arrived (train something else than the "
                                             "caller's parameters)."})
        checks.check_tensor(p.grad, g, f"the caller's .grad of parameter {i} after diagnose_run",
                            hints={"values": "the caller's .grad changed: leave every gradient as it arrived."})
    checks.expect(healthy.training is False, "the caller's model arrived in eval mode and left in training mode: "
                                             "its mode must be as it arrived.")



def check_diagnose_run(diagnose_run: Callable) -> None:
    """Visible checks of exercise 2: a healthy run, a leak, a run only eval mode sees right, a NaN, an untouched
    model."""
    torch.manual_seed(96)
    xb, yb = torch.randn(32, 5), torch.randint(0, 4, (32,))
    _check_healthy_and_untouched(diagnose_run, xb, yb)

    torch.manual_seed(97)
    leaked = _mlp(5, 4)
    optimizer = torch.optim.Adam(leaked.parameters(), lr=0.01)
    for _ in range(150):   # trained on this very batch before: its first loss is near 0
        optimizer.zero_grad()
        nn.functional.cross_entropy(leaked(xb), yb).backward()
        optimizer.step()
    got = _verdict(diagnose_run, "a model already trained on this batch", leaked, (xb, yb), 4, 100, 0.01)
    checks.expect(got == "initial loss",
                  f"diagnose_run(a model already trained on this batch) returned {got!r}, expected 'initial loss': "
                  "its first loss is near 0, 1.39 *below* ln 4. A loss that low before training means the model "
                  "knows the labels already (a leak, or it was trained before): the distance counts both ways.")

    # In eval mode the two equal inputs cancel (all logits 0, loss exactly ln 4); dropout breaks the balance. The
    # inputs are all equal and the labels are not, so no model can fit them.
    cancel = nn.Sequential(nn.Dropout(0.5), nn.Linear(2, 4, bias=False))
    with torch.no_grad():
        cancel[1].weight.copy_(torch.tensor([[3.0, -3.0], [-3.0, 3.0], [3.0, -3.0], [-3.0, 3.0]]))
    got = _verdict(diagnose_run, "equal inputs, a dropout model whose logits are 0 at evaluation", cancel,
                   (torch.ones(32, 2), yb), 4, 50, 0.01)
    hints = {"initial loss": "At evaluation, dropout off, this model's logits are all 0 and its loss is exactly "
                             "ln 4: the first loss must be measured as the model runs at evaluation. ",
             "ok": "Every input is the same and the labels are not: no model fits this batch. "}
    checks.expect(got == "cannot fit", f"diagnose_run(equal inputs, four labels) returned {got!r}, expected "
                                       f"'cannot fit'. {hints.get(got, '')}")

    torch.manual_seed(98)
    logged = nn.Sequential(OrderedDict(fc=nn.Linear(5, 8), act=nn.ReLU(), log=_Log(), head=nn.Linear(8, 4)))
    got = _verdict(diagnose_run, "a model that takes the log of its ReLU's zeros", logged, (xb, yb), 4, 100, 0.01)
    checks.expect(got == "non-finite",
                  f"diagnose_run(a model whose first loss is NaN) returned {got!r}, expected 'non-finite'. Every "
                  "comparison with NaN is False (nan > 0.1 and abs(nan - ln 4) > 0.5 both are), so a NaN slips "
                  "past tests written for numbers: test for it first.")

    torch.manual_seed(99)
    radius = nn.Sequential(OrderedDict(fc=nn.Linear(5, 8), radius=_WithRadius(), head=nn.Linear(9, 4)))
    with torch.no_grad():
        radius.fc.bias.zero_()
    zero_row = xb.clone()
    zero_row[3] = 0.0      # its embedding is 0: the hand-written length has an infinite derivative there
    got = _verdict(diagnose_run, "one update, a finite loss whose gradient is NaN", radius, (zero_row, yb), 4, 1,
                   0.01)
    checks.expect(got == "non-finite",
                  f"diagnose_run(steps=1, a finite loss with NaN gradients) returned {got!r}, expected "
                  "'non-finite': the loss of the only update is finite, but the backward pass made NaN gradients "
                  "(the square root of a sum of squares at 0). Test the gradients too, not only the loss.")

    with torch.no_grad():
        radius.head.weight.mul_(30)        # now the first loss is far from ln 4 as well
    got = _verdict(diagnose_run, "a loud last layer, and NaN gradients in the fit", radius, (zero_row, yb), 4, 3,
                   0.01)
    checks.expect(got == "non-finite",
                  f"diagnose_run(a first loss far from ln 4, NaN gradients in the fit) returned {got!r}, expected "
                  "'non-finite': both faults are there, and 'non-finite' comes first. Run the fit before deciding "
                  "that the first loss is the verdict.")


# ---------------------------------------------------------------------------------------------- find_nan_source

def _source(find_nan_source: Callable, label: str, model: nn.Module, batch, loss_fn, want):
    grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    got = checks.call(find_nan_source, model, batch, loss_fn)
    if want is None:
        checks.expect(got is None, f"find_nan_source({label}) returned {got!r}, expected None: nothing in either "
                                   "pass is NaN or infinite." + (" None, not the empty string: '' is the name "
                                                                 "named_modules() gives the model itself."
                                                                 if got == "" else ""))
    else:
        checks.check_type(got, str, f"find_nan_source({label})")
    left = count_hooks(model)
    checks.expect(left == 0, f"after find_nan_source({label}) {left} hook(s) are still registered: every hook the "
                             "tool adds must be removed before it returns, or it runs in every later pass.")
    for i, (old, p) in enumerate(zip(grads, model.parameters())):
        changed = (old is None) != (p.grad is None) or (old is not None and not torch.equal(old, p.grad))
        checks.expect(not changed, f"after find_nan_source({label}) the .grad of parameter {i} is not as it "
                                   "arrived: the probe's backward pass adds into .grad; leave every gradient as it "
                                   "was (None stays None).")
    return got


def _where(names: list[str], got: str, want: str, stage: str) -> str:
    """Why ``got`` is not ``want`` when ``names`` are the modules in the order the ``stage`` pass reaches them."""
    if got == "loss":
        return "'loss' is for a NaN the loss makes; here the model made it."
    if got not in names:
        return "name a module as model.named_modules() names it."
    if names.index(got) > names.index(want):
        return (f"{got!r} only passed on the non-finite values that {want!r} made before it in the {stage} pass "
                "(a parent's hook fires after its children's): name the first module that made one.")
    return f"{want!r} is where the first non-finite value appears."


def check_find_nan_source(find_nan_source: Callable) -> None:
    """Visible checks of exercise 1: forward first, then backward, the loss, None, no hook and no .grad left."""
    torch.manual_seed(81)
    xb, yb = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 1, 0])
    ce = nn.CrossEntropyLoss()

    body = nn.Sequential(OrderedDict(fc=nn.Linear(3, 4), act=nn.ReLU(), log=_Log()))
    logged = nn.Sequential(OrderedDict(body=body, head=nn.Linear(4, 2)))
    with torch.no_grad():
        logged.body.fc.weight.copy_(torch.tensor([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, -1.0, 0]]))
        logged.body.fc.bias.zero_()
        logged.head.weight.copy_(torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]))
    got = _source(find_nan_source, "log of a ReLU's zeros", logged, (xb, yb), ce, "body.log")
    hint = _where(["body.fc", "body.act", "body.log", "body", "head", ""], got, "body.log", "forward")
    if got == "head" or got == "loss":
        hint = ("'body.log' returned -inf first (log of 0); an infinity is not finite either, so look for NaN and "
                "±inf alike (torch.isnan misses -inf).")
    checks.expect(got == "body.log", f"find_nan_source(log of a ReLU's zeros) returned {got!r}, expected "
                                     f"'body.log': {hint}")

    torch.manual_seed(82)
    radius = nn.Sequential(OrderedDict(embed=nn.Linear(3, 4), radius=_WithRadius(), head=nn.Linear(5, 2)))
    with torch.no_grad():
        radius.embed.bias.zero_()
    zero_row = xb.clone()
    zero_row[2] = 0.0
    radius(xb).sum().backward()      # the caller's gradients from an earlier pass: they must survive
    got = _source(find_nan_source, "a length at a zero row", radius, (zero_row, yb), ce, "radius")
    hint = _where(["head", "radius", "embed", ""], got, "radius", "backward")
    if got == "embed":
        hint = ("'embed' received a NaN gradient from 'radius', whose backward turned a finite gradient into a NaN "
                "one: name the module whose gradient for its input or its own parameters turns non-finite first, "
                "in the order the backward pass runs.")
    checks.expect(got == "radius", f"find_nan_source(a length at a zero row) returned {got!r}, expected 'radius': "
                                   f"{hint}")

    fit = nn.Sequential(OrderedDict(fc=nn.Linear(3, 2)))
    with torch.no_grad():
        fit.fc.weight.zero_()
        fit.fc.bias.zero_()
    got = _source(find_nan_source, "root of a squared error of 0", fit, (xb, torch.zeros(6, 2)),
                  lambda out, target: (out - target).pow(2).sum().sqrt(), "loss")
    checks.expect(got == "loss", f"find_nan_source(a loss that is the root of a squared error of 0) returned {got!r},"
                                 " expected 'loss': the model's output is finite and the gradient the loss sends "
                                 "back to it is already NaN, so no module made it.")

    torch.manual_seed(83)
    healthy = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    _source(find_nan_source, "a healthy model", healthy, (xb, yb), ce, None)

    def shape_bug():
        return find_nan_source(copy_of_healthy, (torch.ones(6, 5), yb), ce)

    copy_of_healthy = copy.deepcopy(healthy)
    checks.expect_raises(shape_bug, RuntimeError, "the forward pass fails with a shape error, which has nothing to do "
                                                  "with NaN: find_nan_source must let it reach the caller.")
    left = count_hooks(copy_of_healthy)
    checks.expect(left == 0, f"after a forward pass that raised, {left} hook(s) are still registered: remove them on "
                             "every path, also when the forward raises.")
