"""Lesson 06 (reading errors): provoke real errors, trace shapes, describe batches, browse broken snippets.

Nothing here answers an exercise. Test cells use :func:`caught` to provoke genuine torch
errors, and :func:`outcome`, :func:`refusal` and :func:`batch_layout` to turn what a student's
function did into plain values a hidden check can observe. The demos use :func:`recorded_warnings`,
:func:`shape_trace` and the gallery of broken snippets (:func:`print_gallery`,
:func:`error_gallery`).
"""
from __future__ import annotations

import warnings
from functools import partial
from typing import Any, Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "caught", "error_line", "recorded_warnings", "mentions_shapes", "outcome", "refusal", "batch_layout",
    "shape_trace", "GALLERY", "run_snippet", "print_gallery", "error_gallery",
    "check_checked_mse", "check_move_batch", "check_gated_residual", "check_classify_error", "INPLACE_HINTS",
]


def caught(fn: Callable[[], Any]) -> Exception:
    """Run ``fn()`` and return the exception it raised: a real one, with its traceback.

    If ``fn`` returns normally the lesson itself is wrong (the snippet no longer fails with this
    torch version), so that raises ``RuntimeError`` naming the snippet.
    """
    try:
        fn()
    except Exception as exc:  # the exception is the product we want
        return exc
    raise RuntimeError(f"{getattr(fn, '__qualname__', fn)} was expected to raise, but it returned normally")


def error_line(exc: BaseException, width: int | None = None) -> str:
    """``"TypeName: first line of the message"``, cut to ``width`` characters if given."""
    text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if width is not None and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def recorded_warnings(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Call ``fn()`` and return ``(its result, the messages of every warning it issued)``.

    Warnings are recorded instead of printed: printed, they carry a file path that differs from
    machine to machine, and Python shows each one only once per line of code.
    """
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(record.message) for record in records]


def _shape_forms(shape: Iterable[int]) -> set[str]:
    dims = [int(d) for d in shape]
    return {str(tuple(dims)).replace(" ", ""), str(dims).replace(" ", "")}


def mentions_shapes(message: str, *shapes: Iterable[int]) -> bool:
    """Does ``message`` name every one of ``shapes``, written as a tuple ``(8, 1)`` or ``torch.Size([8, 1])``?"""
    text = message.replace(" ", "")
    return all(any(form in text for form in _shape_forms(shape)) for shape in shapes)


def outcome(fn: Callable[[], Any]) -> str:
    """Run ``fn()``: ``"ok"`` if it returned, else the name of the exception type it raised.

    Hidden checks observe it, so that a failing step (a backward pass, say) is recorded and the
    observations after it are still made.
    """
    try:
        fn()
    except Exception as exc:  # which exception it was is the observation
        return type(exc).__name__
    return "ok"


def refusal(fn: Callable[..., Any], *tensors: torch.Tensor) -> str:
    """How ``fn(*tensors)`` reacted to arguments it should refuse, as a short verdict.

    One of ``"ValueError naming every shape"``, ``"ValueError without the shapes"``,
    ``"returned without raising"`` or the name of another exception type.
    """
    try:
        fn(*tensors)
    except ValueError as exc:
        if mentions_shapes(str(exc), *(t.shape for t in tensors)):
            return "ValueError naming every shape"
        return "ValueError without the shapes"
    except Exception as exc:  # which exception it was is the observation
        return type(exc).__name__
    return "returned without raising"


def batch_layout(batch: Any) -> Any:
    """``batch`` with every tensor replaced by a line naming its device, dtype and shape.

    Lists, tuples and dicts keep their type and nesting, so two layouts compare equal exactly
    when the structure, devices, dtypes and shapes agree. It never reads tensor values, so it
    works for tensors on the ``meta`` device, which have none.
    """
    if torch.is_tensor(batch):
        return f"Tensor(device={batch.device}, dtype={batch.dtype}, shape={tuple(batch.shape)})"
    if type(batch) in (list, tuple):
        return type(batch)(batch_layout(item) for item in batch)
    if type(batch) is dict:
        return {str(key): batch_layout(value) for key, value in batch.items()}
    if batch is None or type(batch) in (bool, int, float, str):
        return batch
    return f"<{type(batch).__name__}>"


# ---------------------------------------------------------------- printing shapes

def _shapes(values: Any) -> str:
    if isinstance(values, torch.Tensor):
        return str(tuple(values.shape))
    if isinstance(values, (tuple, list)):
        return ", ".join(_shapes(v) for v in values)
    return type(values).__name__


def _announce(name: str, width: int, module: nn.Module, args: tuple) -> None:
    print(f"{name:>3}  {str(module):<{width}}  input {_shapes(args)}", end="")


def _report(name: str, module: nn.Module, args: tuple, output: Any) -> None:
    print(f"  ->  output {_shapes(output)}")


def shape_trace(model: nn.Module, x: torch.Tensor) -> Any:
    """Run ``model(x)``, printing each innermost module with the shapes it receives and returns.

    A module's line is printed before it runs, so when one fails, the last line shows the
    shapes that made it fail. The hooks are removed afterwards, whatever happens.
    """
    leaves = [(name or type(module).__name__, module) for name, module in model.named_modules()
              if next(module.children(), None) is None]
    width = max((len(str(module)) for _, module in leaves), default=0)
    handles = []
    for name, module in leaves:
        handles.append(module.register_forward_pre_hook(partial(_announce, name, width)))
        handles.append(module.register_forward_hook(partial(_report, name)))
    try:
        return model(x)
    finally:
        for handle in handles:
            handle.remove()


# ---------------------------------------------------------------- the gallery

# (title, code, how to read the message). Every snippet fails for real when run.
GALLERY: list[tuple[str, str, str]] = [
    ("Linear layer fed the wrong number of features",
     "layer = nn.Linear(10, 3)\nlayer(torch.zeros(4, 8))",
     "mat1 is the input (4 rows of 8 features), mat2 the weight transposed (10 x 3). "
     "The inner numbers, 8 and 10, must agree: the layer wants 10 features."),
    ("two tensors that do not broadcast",
     "torch.zeros(2, 5) + torch.zeros(2, 3)",
     "Broadcasting lines sizes up from the right. In dimension 1 they are 5 and 3: "
     "neither equal nor 1. A shape error that never says 'shape'."),
    ("view into a shape that does not fit",
     "torch.zeros(3, 4).view(5, -1)",
     "12 elements cannot be cut into rows of 5."),
    ("cross_entropy: more logits than labels",
     "F.cross_entropy(torch.zeros(4, 3), torch.tensor([0, 2, 1]))",
     "4 rows of logits, 3 labels: one label per example. Note the type: a ValueError."),
    ("cat of tensors whose other sizes differ",
     "torch.cat([torch.zeros(2, 3), torch.zeros(2, 4)])",
     "cat along dimension 0 needs every other dimension equal: 3 and 4 are not."),
    ("grayscale images into an RGB convolution",
     "conv = nn.Conv2d(3, 8, kernel_size=3)\nconv(torch.zeros(2, 1, 28, 28))",
     "The weight [8, 3, 3, 3] wants 3 input channels; the batch [2, 1, 28, 28] has 1."),
    ("cross_entropy with float labels",
     "F.cross_entropy(torch.zeros(4, 3), torch.tensor([0., 2., 1., 1.]))",
     "Class indices must be integers: Long is torch.long (int64). Fix: labels.long()."),
    ("float64 NumPy data into a float32 layer",
     "layer = nn.Linear(2, 1)\nlayer(torch.from_numpy(np.ones((4, 2))))",
     "Double is float64, NumPy's default, kept by from_numpy; the layer is float32. Fix: .float()."),
    ("integer tensor times a float tensor",
     "torch.arange(6).reshape(2, 3) @ torch.ones(3, 2)",
     "'long int' is torch.int64, what arange makes from integers. Matrix products need one dtype."),
    ("float ids into an embedding",
     "emb = nn.Embedding(10, 4)\nemb(torch.tensor([1., 3.]))",
     "'Scalar type' is another name for dtype: the ids must be Long or Int, not a FloatTensor."),
    ("batched product of float32 and float64",
     "torch.bmm(torch.ones(2, 3, 4), torch.ones(2, 4, 5, dtype=torch.float64))",
     "'expected scalar type Float but found Double': float32 meets float64."),
    ("module on one device, input on another",
     "layer = nn.Linear(3, 2).to('meta')\nlayer(torch.zeros(4, 3))",
     "The meta device stands in for a GPU here. On CUDA the message reads "
     "'Expected all tensors to be on the same device ...'. Move the input: x = x.to(device)."),
    ("NumPy from a tensor that is not on the CPU",
     "torch.zeros(3, device='meta').numpy()",
     "NumPy arrays live in CPU memory. A CUDA tensor says 'cuda:0 device type'. Fix: .cpu() first."),
    ("in-place change of a value autograd saved",
     "x = torch.ones(3, requires_grad=True)\ny = x.sigmoid()\ny.mul_(2)\ny.sum().backward()",
     "sigmoid's backward needs its own output; mul_ overwrote it (version 1, expected 0)."),
    ("in-place update of a leaf that requires grad",
     "w = torch.ones(3, requires_grad=True)\nw -= 0.1",
     "Parameters are updated inside torch.no_grad(), as optimizers do."),
    ("ReLU(inplace=True) after a sigmoid",
     "net = nn.Sequential(nn.Linear(3, 2), nn.Sigmoid(), nn.ReLU(inplace=True))\n"
     "net(torch.ones(1, 3)).sum().backward()",
     "The in-place ReLU overwrote the sigmoid output that SigmoidBackward saved."),
    ("backward through the same graph twice",
     "x = torch.ones(3, requires_grad=True)\nloss = (x * x).sum()\nloss.backward()\nloss.backward()",
     "backward frees what the graph saved. Recompute the loss, or pass retain_graph=True."),
    ("backward from a tensor without a graph",
     "loss = torch.ones(3).sum()\nloss.backward()",
     "Nothing requires grad: no parameter was involved, or it ran under torch.no_grad()."),
    ("a label outside the classes",
     "F.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 3]))",
     "3 classes means labels 0, 1 and 2."),
    ("if on a tensor of several values",
     "if torch.tensor([1, -1]) > 0:\n    pass",
     "Say which you mean: (t > 0).all() or (t > 0).any()."),
]


def run_snippet(code: str) -> Exception:
    """Execute one gallery snippet and return the exception it raises.

    The snippet sees ``torch``, ``nn``, ``F`` and ``np``. Random draws inside it (layer
    initializations) use a forked generator, so the notebook's own random stream is untouched.
    """
    namespace = {"torch": torch, "nn": nn, "F": F, "np": np}
    with torch.random.fork_rng(devices=[]):
        return caught(lambda: exec(code, namespace))  # noqa: S102 - the course's own snippets


def _entry_text(index: int) -> str:
    title, code, reading = GALLERY[index]
    code_lines = "\n".join("    " + line for line in code.splitlines())
    return (f"{title}\n\n{code_lines}\n\nraises  {error_line(run_snippet(code))}\n\n"
            f"reading it: {reading}\n")


def print_gallery(width: int = 118) -> None:
    """Print every snippet's title and the first line of the error it raises (cut to ``width``)."""
    for index, (title, code, _) in enumerate(GALLERY, start=1):
        print(f"{index:2d}. {title}")
        print(f"    {error_line(run_snippet(code), width - 4)}")


def error_gallery():
    """A dropdown of the broken snippets; the panel below shows the code, its error and how to read it."""
    import ipywidgets as widgets

    choice = widgets.Dropdown(options=[(title, i) for i, (title, _, _) in enumerate(GALLERY)],
                              value=0, description="snippet", layout=widgets.Layout(width="36em"))
    panel = widgets.Output()

    def show(index: int) -> None:
        panel.outputs = ()
        panel.append_stdout(_entry_text(index))

    choice.observe(lambda change: show(change["new"]), names="value")
    show(0)
    return widgets.VBox([choice, panel])


# ---------------------------------------------------------------- visible checks of the lesson's exercises

def check_checked_mse(fn) -> None:
    """Visible checks of exercise 1: one equal-shape loss with its graph, three pairs of shapes that must be refused."""
    from autograder.kernel import checks

    broadcast_hint = ("shapes like (8,) and (8, 1) broadcast to (8, 8) without any error: compare pred.shape with "
                      "target.shape and raise the ValueError before computing anything.")
    torch.manual_seed(60)
    p, t = torch.randn(8, requires_grad=True), torch.randn(8)
    loss = checks.call(fn, p, t)
    checks.check_tensor(loss, F.mse_loss(p, t), "checked_mse(pred (8,), target (8,))")
    checks.expect(loss.requires_grad,
                  "checked_mse(...) is not attached to the autograd graph: compute it with tensor "
                  "operations (no .item(), no torch.tensor(...)), so that loss.backward() reaches pred.")
    for a, b in [(torch.randn(8), torch.randn(8, 1)), (torch.randn(8, 1), torch.randn(8)),
                 (torch.randn(4, 2), torch.randn(2, 4))]:
        err = checks.expect_raises(fn, ValueError, broadcast_hint, a, b)
        checks.expect(mentions_shapes(str(err), a.shape, b.shape),
                      f"the ValueError says {str(err)!r}: name both shapes, {tuple(a.shape)} and {tuple(b.shape)}, "
                      "so that whoever reads it knows what to fix.")


def check_move_batch(fn) -> None:
    """Visible checks of exercise 2: a tuple and a nested dict moved to the meta device (and to CUDA if present)."""
    from autograder.kernel import checks

    unused_hint = ("Tensor.to returns a new tensor and leaves the original where it was: build the result from what "
                   ".to(device) returns (t = t.to(device)); a bare t.to(device) changes nothing.")
    torch.manual_seed(61)
    xb, yb = torch.randn(4, 3), torch.randint(0, 2, (4,))
    moved = checks.call(fn, (xb, yb), "meta")
    checks.check_type(moved, tuple, "move_batch((xb, yb), 'meta')",
                      hint="a tuple in, a tuple out: keep the container's type.")
    checks.expect(len(moved) == 2, f"move_batch((xb, yb), 'meta') returned {len(moved)} items, expected 2.")
    for name, got, source in [("xb", moved[0], xb), ("yb", moved[1], yb)]:
        checks.check_type(got, torch.Tensor, f"move_batch((xb, yb), 'meta'): {name}")
        checks.expect(got.device.type == "meta", f"{name} is still on {got.device}, expected meta. {unused_hint}")
        checks.expect(got.dtype == source.dtype and got.shape == source.shape,
                      f"{name} came back as {checks.describe(got)}; expected dtype {source.dtype} and shape "
                      f"{tuple(source.shape)}: .to(device) alone keeps the dtype.")
    nested = {"inputs": [xb, xb * 2], "target": {"labels": yb, "weight": 0.5}, "name": "batch-0"}
    got = batch_layout(checks.call(fn, nested, torch.device("meta")))
    want = {"inputs": ["Tensor(device=meta, dtype=torch.float32, shape=(4, 3))"] * 2,
            "target": {"labels": "Tensor(device=meta, dtype=torch.int64, shape=(4,))", "weight": 0.5},
            "name": "batch-0"}
    checks.expect(got == want, f"move_batch(nested dict, torch.device('meta')) gave\n  {got}\nexpected\n  {want}\n"
                               "Apply the same rule to every item of every container, keep lists as lists and dicts as "
                               f"dicts, and leave non-tensors alone. {unused_hint}")
    if torch.cuda.is_available():
        on_gpu = checks.call(fn, [xb, yb], "cuda")
        checks.expect(type(on_gpu) is list and all(isinstance(v, torch.Tensor) and v.is_cuda for v in on_gpu),
                      f"move_batch([xb, yb], 'cuda') gave {batch_layout(on_gpu)}: every tensor should be on the GPU.")


# An exception of a backward pass broken by an in-place update, mapped to the mistake behind it.
INPLACE_HINTS = {r"inplace|in-place": "an in-place update (h.mul_(...), h *= ..., out=...) still overwrites a tensor "
                                      "that autograd saved for backward: build a new tensor instead (h = h * g)."}


def check_gated_residual(fn, reference: Callable) -> None:
    """Visible checks of exercise 3: the values of ``reference`` (the in-place version, run without a graph), a
    backward pass, and gradients that agree with finite differences."""
    from autograder.kernel import checks

    torch.manual_seed(62)
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 3, requires_grad=True)
    with torch.no_grad():
        want = reference(x, w)
    out = checks.call(fn, x, w, hints=INPLACE_HINTS)
    checks.check_tensor(out, want, "gated_residual(x (4, 3), w (3, 3))")
    checks.expect(out.requires_grad, "gated_residual(...) carries no autograd graph: was it computed under "
                                     "torch.no_grad() or from detached tensors?")
    checks.call(out.sum().backward, hints=INPLACE_HINTS)
    checks.expect(x.grad is not None and w.grad is not None,
                  "after backward, x.grad or w.grad is None: the result must depend on both through autograd.")
    x64 = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    w64 = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    checks.expect(torch.autograd.gradcheck(fn, (x64, w64), raise_exception=False),
                  "the gradients of gated_residual disagree with finite differences: part of the computation is hidden "
                  "from autograd (.data, .detach(), torch.no_grad()), so backward runs but computes the wrong thing.")


def check_classify_error(fn) -> None:
    """Visible checks of exercise 4: real errors of every family, an index out of range among them."""
    from autograder.kernel import checks

    torch.manual_seed(63)


    def sigmoid_then_mul_():
        a = torch.randn(3, requires_grad=True)
        s = a.sigmoid()
        s.mul_(2)
        s.sum().backward()


    def backward_twice():
        a = torch.randn(3, requires_grad=True)
        loss = (a * a).sum()
        loss.backward()
        loss.backward()


    leaf = torch.randn(3, requires_grad=True)
    family_hints = {
        "shape": "shape errors do not always say 'shape': broadcasting says 'The size of tensor a (5) must match the "
                 "size of tensor b (3)', cross_entropy speaks of 'batch_size'.",
        "dtype": "dtype errors say 'dtype' or 'scalar type'; 'mat1 and mat2 must have the same dtype' is about dtypes, "
                 "although it names the two matrices like a shape error.",
        "device": "device errors mention a device, but not always as 'same device': on the CPU a mismatch with the "
                  "meta device reads 'Tensor on device meta is not on the expected device cpu!'.",
        "inplace": "PyTorch writes both 'inplace' and 'in-place'.",
        "other": "only the four families count; anything else is 'other', an index out of range too, even when its "
             "message names a dimension and a size.",
    }
    cases = [
        ("Linear(10, 3) applied to (4, 8)", caught(lambda: nn.Linear(10, 3)(torch.randn(4, 8))), "shape"),
        ("(2, 5) + (2, 3)", caught(lambda: torch.randn(2, 5) + torch.randn(2, 3)), "shape"),
        ("cross_entropy with float labels",
         caught(lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([0., 2., 1., 1.]))), "dtype"),
        ("float64 input to a float32 Linear",
         caught(lambda: nn.Linear(2, 1)(torch.randn(4, 2, dtype=torch.float64))), "dtype"),
        ("float ids into nn.Embedding", caught(lambda: nn.Embedding(5, 2)(torch.tensor([1., 3.]))), "dtype"),
        ("cpu tensor + meta tensor", caught(lambda: torch.randn(3) + torch.zeros(3, device="meta")), "device"),
        ("sigmoid output changed by mul_", caught(sigmoid_then_mul_), "inplace"),
        ("add_ on a leaf that requires grad", caught(lambda: leaf.add_(1.0)), "inplace"),
        ("backward twice", caught(backward_twice), "other"),
        ("label 3 with 3 classes", caught(lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3]))), "other"),
    ]
    cases.append(("index 5 of a 3-element tensor", caught(lambda: torch.arange(3)[5]), "other"))
    if torch.cuda.is_available():
        cases.append(("CUDA layer, CPU input", caught(lambda: nn.Linear(3, 2).to("cuda")(torch.randn(4, 3))), "device"))
    for label, exc, want in cases:
        got = checks.call(fn, exc)
        checks.check_type(got, str, f"classify_error({label})")
        checks.expect(got in ("shape", "dtype", "device", "inplace", "other"),
                      f"classify_error({label}) returned {got!r}: "
                      "return one of 'shape', 'dtype', 'device', 'inplace', 'other'.")
        checks.expect(got == want, f"classify_error({label}) returned {got!r}, expected {want!r}. The message was\n"
                                   f"  {error_line(exc, 200)}\n{family_hints[want]}")
