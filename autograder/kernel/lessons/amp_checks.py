"""Visible checks of lesson 08's exercises (their test cells call them), and the hints for the scaler's errors.

- :func:`check_autocast_output_dtypes`: exercise 1, a small model's table under CPU autocast, a submodule with a
  tuple output, a forward pass that raises, and no trace left (nothing attached, the mode, ``.grad``,
  ``requires_grad`` and the input as they were);
- :func:`check_scaled_update`: exercise 2 (the draft made right), the scaler's decisions after a backward
  pass: a finite step as float32 would take it (clipped in true units when asked), reported as taken also when
  the scale grows after it, an overflow skipped and reported, a disabled scaler passing through;
- :data:`STEP_HINTS` maps the GradScaler's own errors to the mistake behind them.

The instruments they use (:class:`~autograder.kernel.lessons.amp.RecordingScaler`, ``left_attached``) live in
:mod:`autograder.kernel.lessons.amp`.
"""
from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Callable

import torch
from torch import nn

from autograder.kernel.lessons.amp import RecordingScaler, left_attached

__all__ = ["STEP_HINTS", "check_autocast_output_dtypes", "check_scaled_update"]


def _state(model: nn.Module) -> tuple:
    """What "leave no trace" covers on a model: every module's mode, every parameter's .grad and requires_grad."""
    return ([m.training for m in model.modules()],
            [(p.requires_grad, None if p.grad is None else p.grad.clone()) for p in model.parameters()])


def _same_state(a: tuple, b: tuple) -> bool:
    grads_equal = all(ra == rb and (ga is None) == (gb is None) and (ga is None or torch.equal(ga, gb))
                      for (ra, ga), (rb, gb) in zip(a[1], b[1]))
    return a[0] == b[0] and grads_equal


class _Pair(nn.Module):
    """A submodule whose output is a tuple (its linear layer's output and that output's sum), not a tensor."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)

    def forward(self, x):
        y = self.lin(x)
        return y, y.sum()


class _PairNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.pair = _Pair()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.pair(x)[0])


_TUPLE_HINTS = {r"'tuple' object has no attribute":
                "the submodule 'pair' returns a tuple, not a tensor: a submodule whose output is not a tensor gets "
                "no entry, and the call goes on."}


def _expect_nothing_attached(model: nn.Module, when: str) -> None:
    from autograder.kernel import checks

    left = left_attached(model)
    checks.expect(not left, f"{when}, still attached to the model: {', '.join(left)}. What the call attaches "
                            "stays until it is taken off (a hook until its handle's .remove() is called) and runs "
                            "again on every later forward pass; take it off on every path, also when model(x) raises.")


def _check_table(fn: Callable) -> None:
    """A small model's table under CPU autocast, both dtypes, and no trace left behind."""
    from autograder.kernel import checks

    torch.manual_seed(8)
    probe = nn.Sequential(OrderedDict(fc=nn.Linear(6, 4), act=nn.ReLU(), head=nn.Linear(4, 2)))
    x = torch.randn(3, 6)
    x_before = x.clone()
    probe.head.weight.grad = torch.full_like(probe.head.weight, 0.5)      # a gradient the caller accumulated
    state = _state(probe)
    label = "autocast_output_dtypes(probe, x, 'cpu', torch.bfloat16)"
    got = checks.call(fn, probe, x, "cpu", torch.bfloat16)
    checks.check_type(got, dict, label, hint="return a dict {submodule name: output dtype}.")
    names = [name for name, _ in probe.named_modules() if name]
    late = ("\nLikely mistake: every entry went under one name. A function defined in a loop reads the loop's "
            "variable when it runs, after the loop has ended, unless the value is bound when it is defined."
            if len(got) == 1 and len(names) > 1 else "")
    checks.expect(sorted(got) == sorted(names),
                  f"{label}: the keys are {sorted(got)}; expected the submodules' names as named_modules() spells "
                  f"them, without the model itself (its name is ''): {sorted(names)}.{late}")
    checks.expect(all(isinstance(v, torch.dtype) for v in got.values()),
                  f"{label}: the values should be torch dtypes (the outputs' .dtype), got {got}.")
    checks.expect(got["fc"] == torch.bfloat16,
                  f"{label}: the nn.Linear 'fc' produced {got['fc']}; under autocast on the CPU with bfloat16 a "
                  "linear layer computes in bfloat16, so the forward pass did not run under the autocast asked for.")
    _expect_nothing_attached(probe, "after the call")
    checks.expect(_same_state(state, _state(probe)),
                  f"{label} left a trace on the model: afterwards its modes (training: {_state(probe)[0]}, before: "
                  f"{state[0]}), a parameter's requires_grad or its .grad differ from before the call. Put back "
                  "whatever the inspection changed, also when the forward pass raises.")
    checks.expect(torch.equal(x, x_before), f"{label} changed the input x: leave the caller's tensors as they were.")
    got16 = checks.call(fn, probe, x, "cpu", torch.float16)
    checks.expect(isinstance(got16, dict) and got16.get("head") == torch.float16,
                  f"with dtype=torch.float16 the linear layers should produce torch.float16, got {got16}: autocast "
                  "must run with the dtype argument, not a fixed one.")


def _check_odd_models(fn: Callable) -> None:
    """A submodule whose output is a tuple, then a forward pass that raises."""
    from autograder.kernel import checks

    torch.manual_seed(9)
    net, x = _PairNet(), torch.randn(3, 6)
    label = "autocast_output_dtypes(a model whose submodule 'pair' returns a tuple, x, 'cpu', torch.bfloat16)"
    got = checks.call(fn, net, x, "cpu", torch.bfloat16, hints=_TUPLE_HINTS)
    checks.expect(isinstance(got, dict) and sorted(got) == ["head", "pair.lin"],
                  f"{label} returned {got}; expected entries for 'head' and 'pair.lin' only: every submodule "
                  "named_modules() yields whose output is a tensor, a nested one too ('pair.lin'), and none for a "
                  "submodule whose output is not a tensor ('pair').")
    _expect_nothing_attached(net, "after the call on a model with a tuple-valued submodule")

    state = _state(net)
    try:
        outcome = f"returned {fn(net, torch.randn(3, 5), 'cpu', torch.bfloat16)!r}"
    except RuntimeError:
        outcome = None
    except Exception as exc:  # what else the answer raised is part of the message
        outcome = f"raised {type(exc).__name__}: {exc}"
    checks.expect(outcome is None,
                  f"autocast_output_dtypes(the same model, x with 5 features where 'pair.lin' takes 6) {outcome}; "
                  "the model's forward pass raises a RuntimeError there, and that exception must reach the caller.")
    _expect_nothing_attached(net, "after a call whose forward pass raised")
    checks.expect(_same_state(state, _state(net)),
                  "after a call whose forward pass raised, the model's modes, a parameter's requires_grad or its "
                  ".grad differ from before the call: leave no trace on every path.")


def check_autocast_output_dtypes(fn: Callable) -> None:
    """Visible checks of exercise 1: a small model's table under CPU autocast, a submodule with a tuple output, a
    forward pass that raises, and no trace left behind."""
    _check_table(fn)
    _check_odd_models(fn)


STEP_HINTS = {
    r"No inf checks were recorded":
        "scaler.update() found no scaler.step(optimizer) before it: the optimizer was stepped directly, so nothing "
        "checked the gradients for inf or NaN before the weights moved.",
    r"_scale is None":
        "the scaler was asked to step, but no scaled loss went through backward in this step: backward ran on the "
        "unscaled loss, where small float16 gradients flush to zero.",
    r"step\(\) has already been called since the last update":
        "the scaler was stepped twice without an update in between: every step ends with the scaler updating "
        "its scale.",
    r"unscale_\(\) has already been called":
        "the gradients were unscaled twice in one step: unscale_ once, before whatever needs true gradients.",
}

LR, TRUE_NORM_CUT = 0.1, 0.05


def _probe(seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    return net, torch.optim.SGD(net.parameters(), lr=LR)


def _loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    with torch.autocast("cpu", dtype=dtype):
        return nn.functional.cross_entropy(net(x), y)


def _wanted_move(net: nn.Module, x, y, max_norm: float | None) -> torch.Tensor:
    """The parameter change of one SGD step on the same low-precision loss's true gradients (clipped if asked)."""
    twin = copy.deepcopy(net)
    _loss(twin, x, y).backward()
    if max_norm is not None:
        nn.utils.clip_grad_norm_(twin.parameters(), max_norm)
    return torch.cat([-LR * q.grad.flatten() for q in twin.parameters()])


def _run(fn: Callable, seed: int, x, y, scaler, max_norm: float | None = None):
    """One call as a training loop makes it: gradients cleared, the loss computed under autocast, then ``fn``."""
    from autograder.kernel import checks

    net, opt = _probe(seed)
    want = _wanted_move(net, x, y, max_norm)
    before = [p.detach().clone() for p in net.parameters()]
    opt.zero_grad()
    loss = _loss(net, x, y)
    args = (loss, opt, scaler) if max_norm is None else (loss, opt, scaler, max_norm)
    got = checks.call(fn, *args, hints=STEP_HINTS)
    moved = torch.cat([(p.detach() - b).flatten() for b, p in zip(before, net.parameters())])
    return got, moved, want


def _expect_true_move(moved: torch.Tensor, want: torch.Tensor, spy: RecordingScaler, what: str) -> None:
    from autograder.kernel import checks

    error = (moved - want).abs().max().item()
    if error < 1e-4:
        return
    if not bool(torch.isfinite(moved).all()):
        checks.expect(False, f"{what}: the parameters hold inf or NaN after the step (the scaler saw: {spy.calls}).")
    ratio = moved.norm().item() / want.norm().item()
    scale = spy.get_scale() if spy.is_enabled() else 1.0
    hint = None
    if spy.is_enabled() and "backward" not in spy.calls:
        hint = "backward did not go through the scaled loss, so the gradients were never multiplied by the scale."
    elif ratio > 10:
        hint = f"the step is about S = {scale:g} times the true one: the optimizer met gradients still multiplied by S."
    elif ratio < 0.1:
        hint = (f"the step is far smaller than the true one (the scale S is {scale:g}): what the optimizer used, or "
                "the norm that max_norm was compared with, was off by a factor of S.")
    elif "clipped" in what:
        hint = "the step is not the true gradients clipped to a total norm of max_norm."
    checks.expect(False, f"{what}: the parameters moved by {ratio:.3g} times what one optimizer step on the loss's "
                         f"true gradients gives (largest difference {error:.3g}; the scaler saw: {spy.calls})."
                         + (f"\nLikely mistake: {hint}" if hint else ""))


def check_scaled_update(fn: Callable) -> None:
    """Visible checks of exercise 2: a finite step, one after which the scale grows, a clipped one, an overflow,
    a disabled scaler."""
    from autograder.kernel import checks

    torch.manual_seed(22)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))

    spy = RecordingScaler("cpu", init_scale=2.0 ** 10)
    got, moved, want = _run(fn, 21, x, y, spy)
    checks.check_type(got, bool, "scaled_update(loss, optimizer, scaler)",
                      hint="return True when the optimizer stepped and False when the step was skipped.")
    _expect_true_move(moved, want, spy, "a step whose gradients were finite")
    checks.expect(got is True, f"the gradients were finite and the parameters moved, yet the call returned {got}.")
    checks.expect(spy.get_scale() == 2.0 ** 10,
                  f"after one good step the scale should still be 1024 (it grows only after growth_interval good "
                  f"steps); it is {spy.get_scale():g} (the scaler saw: {spy.calls}).")

    spy_g = RecordingScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)
    got_g, moved_g, want_g = _run(fn, 26, x, y, spy_g)
    _expect_true_move(moved_g, want_g, spy_g, "a finite step with growth_interval=1")
    checks.expect(spy_g.get_scale() == 2.0 ** 11,
                  f"with growth_interval=1 the scale should double after one good step, from 1024 to 2048; it is "
                  f"{spy_g.get_scale():g} (the scaler saw: {spy_g.calls})."
                  + ("\nLikely mistake: the scaler never updated its scale." if "update" not in spy_g.calls else ""))
    checks.expect(got_g is True,
                  f"with growth_interval=1, a finite step: the parameters moved as one optimizer step on the true "
                  f"gradients moves them and the scale then grew from 1024 to 2048, as its schedule says; yet the "
                  f"call returned {got_g!r}. A step that was taken is reported as True, whatever the scale did.")

    spy_c = RecordingScaler("cpu", init_scale=2.0 ** 10)
    checks.expect(_wanted_move(_probe(25)[0], x, y, None).norm().item() > 2 * LR * TRUE_NORM_CUT,
                  "internal: the clipping check needs gradients larger than max_norm")
    _, moved_c, want_c = _run(fn, 25, x, y, spy_c, TRUE_NORM_CUT)
    _expect_true_move(moved_c, want_c, spy_c, f"a step clipped to max_norm={TRUE_NORM_CUT}")

    spy_i = RecordingScaler("cpu", init_scale=2.0 ** 10, inject_inf=True)
    got_i, moved_i, _ = _run(fn, 23, x, y, spy_i)
    calls_i = f"(the scaler saw: {spy_i.calls})"
    checks.expect(bool((moved_i == 0).all()),
                  f"the gradients were inf (an overflow) and yet the parameters changed {calls_i}: an overflowing "
                  "step must leave every parameter as it was.")
    checks.expect(spy_i.get_scale() == 2.0 ** 9,
                  f"after an overflow the scale should go down from 1024 to 512 for the next step; it is "
                  f"{spy_i.get_scale():g} {calls_i}."
                  + ("\nLikely mistake: the scaler never updated its scale." if "update" not in spy_i.calls else ""))
    checks.expect(got_i is False, f"the step was skipped (an overflow: the parameters did not move), yet the call "
                                  f"returned {got_i!r}: report a skipped step as False.")

    off = RecordingScaler("cpu", enabled=False)
    got_o, moved_o, want_o = _run(fn, 24, x, y, off)
    _expect_true_move(moved_o, want_o, off, "a step with a disabled scaler (bfloat16)")
    checks.expect(got_o is True, f"with a disabled scaler the optimizer steps every time, yet the call returned "
                                 f"{got_o!r}.")
