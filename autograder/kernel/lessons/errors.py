"""Lesson 06 (reading errors): provoke real errors, trace shapes, describe batches, browse broken snippets.

Nothing here answers an exercise. Test cells use :func:`caught` to provoke genuine torch
errors, and :func:`outcome`, :func:`refusal` and :func:`batch_layout` to turn what a student's
function did into plain values a hidden check can observe. The demos use :func:`recorded_warnings`,
:func:`shape_trace` and the gallery of broken snippets (:func:`print_gallery`,
:func:`error_gallery`). The visible checks of the exercises are in :mod:`autograder.kernel.lessons.errors_checks`.
"""
from __future__ import annotations

import re
import warnings
from functools import partial
from typing import Any, Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "caught", "error_line", "recorded_warnings", "mentions_shapes", "mentions_dtypes", "mentions_value",
    "message_names", "outcome", "refusal", "batch_layout", "shape_trace", "GALLERY", "run_snippet", "print_gallery",
    "error_gallery",
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


def mentions_dtypes(message: str, *dtypes: torch.dtype) -> bool:
    """Does ``message`` name every one of ``dtypes``, written ``torch.float64`` or ``float64``?"""
    return all(re.search(rf"(?<![A-Za-z0-9]){re.escape(str(d).replace('torch.', ''))}(?![A-Za-z0-9])", message)
               for d in dtypes)


def mentions_value(message: str, value: int) -> bool:
    """Does ``message`` hold the integer ``value`` as a number of its own (``5`` in "class 5.", not in "15")?"""
    return re.search(rf"(?<![\w.\-]){re.escape(str(value))}(?!\w|\.\d)", message) is not None


def _out_of_range(scores: torch.Tensor, classes: torch.Tensor) -> list[int]:
    """The class indices in ``classes`` outside 0 .. C - 1, C being the last size of ``scores``."""
    wrong = classes[(classes < 0) | (classes >= scores.shape[-1])]
    return sorted({int(v) for v in wrong.tolist()})


def message_names(naming: str, message: str, tensors: list[torch.Tensor]) -> bool:
    """Does ``message`` name what ``naming`` says of ``tensors`` (see :func:`refusal`)?"""
    if naming == "shapes":
        return mentions_shapes(message, *(t.shape for t in tensors))
    if naming == "dtypes":
        return mentions_dtypes(message, *(t.dtype for t in tensors))
    if naming == "target dtype":
        return mentions_dtypes(message, tensors[-1].dtype)
    if naming == "class":
        return any(mentions_value(message, v) for v in _out_of_range(tensors[0], tensors[1]))
    raise ValueError(f"refusal: unknown naming {naming!r}")


def refusal(fn: Callable[..., Any], *args: Any, naming: str = "shapes") -> str:
    """How ``fn(*args)`` reacted to arguments it should refuse, as a short verdict.

    ``"<ExceptionType> naming the <naming>"``, ``"<ExceptionType> without the <naming>"`` or
    ``"returned without raising"``. ``naming`` is what the message should name: ``"shapes"`` (of every tensor
    argument), ``"dtypes"`` (of every tensor argument), ``"target dtype"`` (of the last tensor argument) or
    ``"class"`` (a class index of the second tensor outside 0 .. C - 1, C the last size of the first).
    """
    tensors = [a for a in args if torch.is_tensor(a)]
    try:
        fn(*args)
    except Exception as exc:  # which exception it was, and what it says, is the observation
        named = message_names(naming, str(exc), tensors)
        return f"{type(exc).__name__} {'naming' if named else 'without'} the {naming}"
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
     "mat1 is the input, mat2 comes from the layer's weight. The inner numbers must agree: "
     "which of them is the layer's in_features, which the batch's?"),
    ("two tensors that do not broadcast",
     "torch.zeros(2, 5) + torch.zeros(2, 3)",
     "Broadcasting lines sizes up from the right. In dimension 1 they are 5 and 3: "
     "neither equal nor 1."),
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
     "The ids index rows of the table: they must be integers, Long or Int, not a FloatTensor."),
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
