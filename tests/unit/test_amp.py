"""Unit tests of autograder.kernel.lessons.amp and amp_checks (lesson 08), and lesson 08's CUDA assertions.

Tests named ``test_cuda_*`` need a CUDA GPU and are skipped elsewhere. The GPU runner
(``.ci/gpu-test.sh``) runs them with pytest, or, where pytest is missing, as
``python tests/unit/test_amp.py``, which runs every ``test_cuda_*`` function and prints a
``RESULT passed=.. failed=.. skipped=..`` line.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch
from torch import nn

try:
    import pytest
except ImportError:  # the GPU runner may have no pytest: see __main__ below
    pytest = None

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autograder.kernel import checks  # noqa: E402
from autograder.kernel.lessons import amp, amp_checks  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = (pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU") if pytest is not None else (lambda fn: fn))


def _step_parts(seed: int = 0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    return net, x, y, torch.optim.SGD(net.parameters(), lr=0.1)


def _loss(net, x, y, dtype=torch.bfloat16, device_type="cpu"):
    with torch.autocast(device_type, dtype=dtype):
        return nn.functional.cross_entropy(net(x), y)


# ---------------------------------------------------------------- formats

def test_smallest_subnormal_of_each_format():
    assert amp.smallest_subnormal(torch.float16) == 2.0 ** -24
    assert amp.smallest_subnormal(torch.bfloat16) == 2.0 ** -133
    assert amp.smallest_subnormal(torch.float32) == 2.0 ** -149
    assert torch.tensor(2.0 ** -24).half().item() == 2.0 ** -24
    assert torch.tensor(2.0 ** -26).half().item() == 0.0


# ---------------------------------------------------------------- RecordingScaler

def test_recording_scaler_records_a_correct_step_and_unscales_exactly():
    net, x, y, opt = _step_parts()
    twin = copy.deepcopy(net)
    spy = amp.RecordingScaler("cpu", init_scale=2.0 ** 10)
    opt.zero_grad()
    loss = _loss(net, x, y)
    scaled = spy.scale(loss)
    assert scaled.item() == loss.item() * 2 ** 10
    scaled.backward()
    spy.step(opt)
    spy.update()
    assert spy.calls == ["scale", "backward", "step", "update"]
    assert spy.get_scale() == 2.0 ** 10 and spy.is_enabled()
    _loss(twin, x, y).backward()
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.equal(p.grad, q.grad)  # scaling by a power of two and back is exact


def test_backward_on_the_unscaled_loss_is_not_recorded():
    net, x, y, opt = _step_parts()
    spy = amp.RecordingScaler("cpu")
    loss = _loss(net, x, y)
    spy.scale(loss)
    loss.backward()
    assert spy.calls == ["scale"]


def test_unscale_is_recorded_between_backward_and_step():
    net, x, y, opt = _step_parts()
    spy = amp.RecordingScaler("cpu")
    spy.scale(_loss(net, x, y)).backward()
    spy.unscale_(opt)
    spy.step(opt)
    spy.update()
    assert spy.calls == ["scale", "backward", "unscale_", "step", "update"]


def test_injected_inf_skips_the_step_and_halves_the_scale():
    net, x, y, opt = _step_parts()
    before = [p.detach().clone() for p in net.parameters()]
    spy = amp.RecordingScaler("cpu", init_scale=2.0 ** 10, inject_inf=True)
    spy.scale(_loss(net, x, y)).backward()
    spy.step(opt)
    spy.update()
    assert all(torch.equal(b, p) for b, p in zip(before, net.parameters()))
    assert spy.get_scale() == 2.0 ** 9


def test_optimizer_step_then_update_raises_like_the_real_scaler():
    net, x, y, opt = _step_parts()
    spy = amp.RecordingScaler("cpu")
    spy.scale(_loss(net, x, y)).backward()
    opt.step()
    try:
        spy.update()
    except AssertionError as exc:
        assert "No inf checks" in str(exc)
    else:
        raise AssertionError("update() without step() should raise, as GradScaler does")
    assert spy.calls == ["scale", "backward", "update"]


def test_disabled_scaler_passes_through_and_delegates():
    net, x, y, opt = _step_parts()
    spy = amp.RecordingScaler("cpu", enabled=False)
    loss = _loss(net, x, y)
    assert spy.scale(loss) is loss and not spy.is_enabled()
    assert copy.copy(spy).calls == ["scale"]
    assert amp.RecordingScaler("cpu").get_growth_factor() == 2.0  # the real scaler's own method
    assert "calls=['scale']" in repr(spy)


# ---------------------------------------------------------------- autocast and hooks

def test_watch_autocast_records_state_per_forward():
    net, x, _, _ = _step_parts()
    seen = amp.watch_autocast(net, "cpu")
    net(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        net(x)
    with torch.autocast("cpu", dtype=torch.float16):
        net(x)
    assert seen == [(False, seen[0][1]), (True, torch.bfloat16), (True, torch.float16)]
    assert amp.autocast_state("cpu")[0] is False


def test_forward_hook_count_sees_module_and_global_hooks():
    net, x, _, _ = _step_parts()
    assert amp.forward_hook_count(net) == 0
    handles = [m.register_forward_hook(lambda *args: None) for m in net]
    assert amp.forward_hook_count(net) == 3
    global_handle = nn.modules.module.register_module_forward_hook(lambda *args: None)
    assert amp.forward_hook_count(net) == 4
    global_handle.remove()
    for handle in handles:
        handle.remove()
    assert amp.forward_hook_count(net) == 0


def test_left_attached_names_hooks_and_instance_forwards():
    net, x, _, _ = _step_parts()
    assert amp.left_attached(net) == []
    handles = [m.register_forward_hook(lambda *args: None) for m in net]
    net[2].forward = lambda t: t
    assert amp.left_attached(net) == ["3 forward hooks", "a forward set on the module '2'"]
    del net[2].forward
    for handle in handles[1:]:
        handle.remove()
    assert amp.left_attached(net) == ["1 forward hook"]
    handles[0].remove()
    assert amp.left_attached(net) == []


def test_skip_message_of_cuda_or_skip(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert amp.cuda_or_skip("the speed test") is False
    assert "skipped on this machine: the speed test needs a CUDA GPU" in capsys.readouterr().out


# ---------------------------------------------------------------- figures, timing, models

def test_figures_have_titles_and_labelled_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    amp.plot_format_ranges(axes[0])
    grads = torch.logspace(-10, -5, 200)
    amp.plot_gradient_magnitudes(grads, 2.0 ** 16, axes[1])
    for ax in axes:
        assert ax.get_title() and ax.get_xlabel()
    assert axes[1].get_ylabel()
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["float16", "bfloat16", "float32"]
    plt.close(fig)


def test_scale_history_halves_at_each_overflow_and_grows_back():
    scales, skipped = amp.scale_history(16, {4, 5, 11}, init_scale=2.0 ** 10, growth_interval=3)
    assert amp.scale_history(3, set(), init_scale=2.0 ** 10, growth_interval=1) == ([2048.0, 4096.0, 8192.0],
                                                                                   [False, False, False])
    assert [int(s) for s in scales] == [1024, 1024, 2048, 1024, 512, 512, 512, 1024, 1024, 1024, 512, 512, 512,
                                        1024, 1024, 1024]
    assert [k for k, s in enumerate(skipped, 1) if s] == [4, 5, 11]


def test_plot_scale_history_marks_the_skipped_steps():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    amp.plot_scale_history([1024.0, 512.0, 1024.0], [False, True, False], ax, init_scale=1024.0)
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_yscale() == "log"
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [2]
    plt.close(fig)


def _answer(table: str, exercise: str, name: str):
    import coursekit as kit  # tests/support, on pytest's path (the GPU runner's run without pytest never calls this)

    return kit.answer_from_table("08_mixed_precision", table, exercise, name)


WRONG_STEPS = [   # the pitfall table's answer -> what the visible check must say about it
    ("PITFALLS", "the draft as handed over (three lines wrong)", "whatever the scale did"),
    ("PITFALLS", "the draft with its result fixed, still clipping the scaled gradients and stepping through "
                 "overflows", "off by a factor of S"),
    ("PLAUSIBLE", "the draft with its clip and its step fixed, its result still 'the scale did not change'",
     "yet the call returned False"),
    ("PLAUSIBLE", "unscale_ then optimizer.step(): a finite step is right, an overflowing one writes inf into the "
                  "weights", "gradients were inf"),
    ("PITFALLS", "clips before scaler.unscale_ (max_norm meets scaled gradients)", "off by a factor of S"),
    ("PITFALLS", "always returns True (a skipped step reported as taken)", "report a skipped step as False"),
    ("PITFALLS", "backward on the unscaled loss", "backward ran on the unscaled loss"),
    ("PITFALLS", "optimizer.step() instead of scaler.step(optimizer)", "stepped directly"),
    ("PITFALLS", "no scaler.update()", "never updated its scale"),
    ("PLAUSIBLE", "ignores max_norm (no clipping)", "not the true gradients clipped"),
    ("PLAUSIBLE", "unscale_ twice when clipping (before the clip and again by hand): the update is divided by S twice",
     "off by a factor of S"),
]


def test_visible_checks_name_the_wrong_steps():
    for table, name, message in WRONG_STEPS:
        with pytest.raises(checks.CheckFailed, match=message):
            amp_checks.check_scaled_update(_answer(table, "scaled_update", name))


def test_visible_checks_pass_the_right_answers_and_the_solution_alike():
    import coursekit as kit

    for exercise, check in (("scaled_update", amp_checks.check_scaled_update),
                            ("autocast_output_dtypes", amp_checks.check_autocast_output_dtypes)):
        for name in kit.load_pitfall_module("08_mixed_precision").RIGHT_ANSWERS[exercise]:
            check(_answer("RIGHT_ANSWERS", exercise, name))


def test_the_draft_in_the_lesson_is_the_pitfall_table_s():
    """The lesson's scaled_update_draft (the code exercise 2 starts from) is the table's DRAFT, word for word but
    for the name: the pitfall tests then prove that the code the student is handed fails the visible checks."""
    import re

    import nbformat

    from autograder import course

    import coursekit as kit

    nb = nbformat.read(course.solution_path("08_mixed_precision"), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def scaled_update_draft(" in c.source)
    assert cell.metadata["pte"]["starting_point_of"] == ["ex-scaled-update"]
    given = cell.source.split("\n\n\n")[0].replace("def scaled_update_draft(", "def scaled_update(")
    given = re.sub(r'\n    """.*?"""', "", given, count=1, flags=re.S)
    assert given.strip() == kit.load_pitfall_module("08_mixed_precision").DRAFT.strip()


def test_a_first_group_only_clip_passes_the_visible_checks():
    """The hidden-only answer (clips param_groups[0] alone) meets every visible check: the visible optimizers have
    one group, and the hidden test's two-group optimizer is what tells it apart."""
    name = "clips the first parameter group only (the visible checks' optimizers have one)"
    amp_checks.check_scaled_update(_answer("HIDDEN_ONLY", "scaled_update", name))


WRONG_TABLES = [   # exercise 1's wrong answers -> what the visible check must say about each
    ("PITFALLS", "removes the hooks only when the forward pass succeeds (no finally)",
     "after a call whose forward pass raised, still attached to the model: 3 forward hooks"),
    ("PITFALLS", "records output.dtype without checking that the output is a tensor", "returns a tuple, not a tensor"),
    ("PITFALLS", "one name for every entry: the recorder reads the loop's variable after the loop has ended",
     "every entry went under one name"),
    ("PITFALLS", "direct children only (named_children): nested modules are missing", "a nested one too"),
    ("PITFALLS", "forgets to remove the hooks", "after the call, still attached to the model: 3 forward hooks"),
]


def test_visible_checks_name_the_wrong_inspections():
    for table, name, message in WRONG_TABLES:
        with pytest.raises(checks.CheckFailed, match=message):
            amp_checks.check_autocast_output_dtypes(_answer(table, "autocast_output_dtypes", name))


def test_an_inspection_that_swallows_the_forward_error_is_named():
    def swallowing(model, x, device_type, dtype):
        found = {}
        handles = [m.register_forward_hook(lambda mod, args, out, n=n: found.__setitem__(n, out.dtype)
                                           if torch.is_tensor(out) else None)
                   for n, m in model.named_modules() if n]
        try:
            with torch.autocast(device_type, dtype=dtype):
                model(x)
        except RuntimeError:
            pass
        finally:
            for handle in handles:
                handle.remove()
        return found

    with pytest.raises(checks.CheckFailed, match="must reach the caller"):
        amp_checks.check_autocast_output_dtypes(swallowing)


def test_a_leaf_only_inspection_passes_the_visible_checks():
    """The hidden-only answer (leaf modules only) meets every visible check: only the hidden conv net has a
    container whose output is a tensor."""
    name = "records leaf modules only: a container whose output is a tensor gets no entry"
    amp_checks.check_autocast_output_dtypes(_answer("HIDDEN_ONLY", "autocast_output_dtypes", name))


def test_an_inspection_that_leaves_the_model_in_eval_mode_is_named():
    name = "switches the model to eval() for the inspection and leaves it there"
    with pytest.raises(checks.CheckFailed, match="left a trace on the model"):
        amp_checks.check_autocast_output_dtypes(_answer("PLAUSIBLE", "autocast_output_dtypes", name))


def test_seconds_per_step_runs_warmup_then_timed_steps():
    calls = []
    seconds = amp.seconds_per_step(lambda: calls.append(1), steps=5, warmup=2)
    assert len(calls) == 7 and seconds >= 0.0


def test_wide_mlp_layers_and_size():
    with torch.device("meta"):
        model = amp.wide_mlp(10, 32, 3, 4)
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU"] * 3 + ["Linear"]
    assert sum(p.numel() for p in model.parameters()) == (10 * 32 + 32) + 2 * (32 * 32 + 32) + (32 * 4 + 4)


# ---------------------------------------------------------------- CUDA assertions (GPU runner)

@needs_cuda
def test_cuda_autocast_policy_float16():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 4), nn.Softmax(dim=1)).cuda()
    x = torch.randn(3, 8, device="cuda")
    outputs = []
    handles = [m.register_forward_hook(lambda mod, inp, out: outputs.append(out.dtype)) for m in model]
    with torch.autocast("cuda", dtype=torch.float16):
        y = model(x)
        loss = nn.functional.mse_loss(y, torch.zeros_like(y))
    for handle in handles:
        handle.remove()
    assert outputs == [torch.float16, torch.float32, torch.float16, torch.float32]
    assert loss.dtype == torch.float32
    loss.backward()
    assert model[0].weight.dtype == torch.float32 and model[0].weight.grad.dtype == torch.float32


@needs_cuda
def test_cuda_float16_gradients_underflow_without_scaling():
    torch.manual_seed(0)
    x = torch.randn(256, 32, device="cuda")
    near = nn.Linear(32, 16).cuda()
    with torch.no_grad():
        target = near(x) + 2e-4 * torch.randn(256, 16, device="cuda")
    lost = {}
    for factor in (1.0, 2.0 ** 16):
        with torch.autocast("cuda", dtype=torch.float16):
            out = near(x)
            out.retain_grad()
            loss = nn.functional.mse_loss(out, target)
        (loss * factor).backward()
        assert out.grad.dtype == torch.float16
        lost[factor] = (out.grad == 0).float().mean().item()
    assert lost[1.0] > 0.05 and lost[2.0 ** 16] == 0.0


@needs_cuda
def test_cuda_grad_scaler_protocol_and_skipped_step():
    net, x, y, opt = _step_parts()
    net.cuda()
    x, y = x.cuda(), y.cuda()
    spy = amp.RecordingScaler("cuda", init_scale=2.0 ** 10)
    opt.zero_grad()
    spy.scale(_loss(net, x, y, torch.float16, "cuda")).backward()
    spy.step(opt)
    spy.update()
    assert spy.calls == ["scale", "backward", "step", "update"] and spy.get_scale() == 2.0 ** 10
    before = [p.detach().clone() for p in net.parameters()]
    bad = amp.RecordingScaler("cuda", init_scale=2.0 ** 10, inject_inf=True)
    opt.zero_grad()
    bad.scale(_loss(net, x, y, torch.float16, "cuda")).backward()
    bad.step(opt)
    bad.update()
    assert all(torch.equal(b, p) for b, p in zip(before, net.parameters()))
    assert bad.get_scale() == 2.0 ** 9


@needs_cuda
def test_cuda_float16_step_is_faster_than_float32():
    torch.manual_seed(0)
    x = torch.randn(4096, 1024, device="cuda")
    y = torch.randint(0, 10, (4096,), device="cuda")
    times = {}
    for dtype in (torch.float32, torch.float16):
        model = amp.wide_mlp(1024, 4096, 4, 10).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)

        def step(opt=opt, dtype=dtype, model=model, scaler=scaler):
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16, enabled=dtype == torch.float16):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss.item()

        times[dtype] = amp.seconds_per_step(step, steps=10, device_type="cuda")
        model = opt = None   # free the first model's GPU memory before the second is built
    speedup = times[torch.float32] / times[torch.float16]
    print(f"float32 {times[torch.float32] * 1e3:.1f} ms, float16 {times[torch.float16] * 1e3:.1f} ms, "
          f"speed-up {speedup:.1f}x on {torch.cuda.get_device_name(0)}")
    assert speedup > 1.2, f"float16 + GradScaler should beat float32 on a 55M-parameter MLP, got {speedup:.2f}x"


if __name__ == "__main__":
    import traceback

    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name, fn in sorted(globals().items()):
        if not (name.startswith("test_cuda_") and callable(fn)):
            continue
        if not CUDA:
            counts["skipped"] += 1
            print(f"SKIPPED {name}: needs a CUDA GPU")
            continue
        try:
            fn()
        except Exception:  # report every failure and keep going
            counts["failed"] += 1
            print(f"FAILED {name}")
            traceback.print_exc()
        else:
            counts["passed"] += 1
            print(f"PASSED {name}")
    print("RESULT " + " ".join(f"{k}={v}" for k, v in counts.items()))
    sys.exit(1 if counts["failed"] else 0)


def test_grad_norms_scaled_and_unscaled_differ_by_exactly_the_scale():
    """Section 4's measurement: the norm after the scaled backward pass is S times the true gradients' norm."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    xb, yb = torch.randn(32, 8), torch.randint(0, 3, (32,))
    scaled, true = amp.grad_norms_scaled_and_unscaled(net, xb, yb, init_scale=2.0 ** 10)
    assert true > 0 and scaled / true == 2.0 ** 10
    assert nn.utils.get_total_norm([p.grad for p in net.parameters()]).item() == scaled   # the model keeps them
