"""Runs inside the grading kernel, never in a student's own session.

``install()`` is executed by the grader before any submitted code and snapshots what a
submission could tamper with: IPython's input and AST transformers and error display,
``sys`` hooks, builtins, torch/NumPy comparison functions and the course's check
helpers. Before each graded test cell the grader calls ``restore(nonce)``, which puts
all of it back and prints a seal; each test cell ends with ``seal(nonce)``. A test cell
whose seal does not arrive did not run to its end, whatever its reply said.
"""
from __future__ import annotations

import builtins
import sys

_state: dict = {}

_COMPARISONS = {
    "torch": ["equal", "allclose", "isclose", "eq", "ne", "gt", "lt", "ge", "le", "any", "all", "isnan"],
    "numpy": ["allclose", "array_equal", "isclose"],
}
_TENSOR_METHODS = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "item",
                   "all", "any", "tolist", "numel", "detach", "to", "clone", "equal", "allclose"]
_SHELL_ATTRS = ["showtraceback", "showsyntaxerror", "showindentationerror", "run_cell", "run_cell_async",
                "_run_cell", "transform_cell", "run_ast_nodes", "run_code", "ex", "ev"]


def install() -> None:
    """Snapshot everything ``restore`` puts back. Called once, before any student code."""
    import numpy
    import torch
    from IPython import get_ipython

    from autograder import checks

    shell = get_ipython()
    _state["shell"] = shell
    _state["write"] = sys.__stdout__.write if sys.stdout is None else sys.stdout.write
    _state["stdout"], _state["stderr"] = sys.stdout, sys.stderr
    _state["hooks"] = {name: getattr(sys, name) for name in ("excepthook", "displayhook")}
    _state["builtins"] = dict(vars(builtins))
    _state["modules"] = {"torch": torch, "numpy": numpy}
    _state["functions"] = {
        (mod, name): getattr(_state["modules"][mod], name)
        for mod, names in _COMPARISONS.items() for name in names if hasattr(_state["modules"][mod], name)
    }
    _state["tensor"] = {name: vars(torch.Tensor).get(name, getattr(torch.Tensor, name)) for name in _TENSOR_METHODS}
    _state["checks"] = checks
    _state["checks_dict"] = dict(vars(checks))
    if shell is not None:
        _state["transformers"] = (list(shell.input_transformers_cleanup), list(shell.input_transformers_post),
                                  list(shell.ast_transformers))
        _state["shell_attrs"] = {name: vars(shell).get(name) for name in _SHELL_ATTRS}
        _state["events"] = {name: list(cbs) for name, cbs in shell.events.callbacks.items()}


def restore(nonce: str) -> None:
    """Undo whatever submitted code changed among the snapshotted objects, then print the seal."""
    if not _state:
        raise RuntimeError("grading guard was not installed")
    sys.stdout, sys.stderr = _state["stdout"], _state["stderr"]
    for name, hook in _state["hooks"].items():
        setattr(sys, name, hook)
    current = vars(builtins)
    for key in [k for k in current if k not in _state["builtins"]]:
        del current[key]
    current.update(_state["builtins"])
    for (mod, name), fn in _state["functions"].items():
        setattr(_state["modules"][mod], name, fn)
    tensor = _state["modules"]["torch"].Tensor
    for name, fn in _state["tensor"].items():
        setattr(tensor, name, fn)
    checks = _state["checks"]
    vars(checks).clear()
    vars(checks).update(_state["checks_dict"])
    sys.modules["autograder.checks"] = checks
    shell = _state.get("shell")
    if shell is not None:
        cleanup, post, ast_t = _state["transformers"]
        shell.input_transformers_cleanup[:] = cleanup
        shell.input_transformers_post[:] = post
        shell.ast_transformers[:] = ast_t
        for name, value in _state["shell_attrs"].items():
            if value is None:
                vars(shell).pop(name, None)
            else:
                vars(shell)[name] = value
        for name, callbacks in _state["events"].items():
            shell.events.callbacks[name][:] = callbacks
        if "checks" in shell.user_ns:
            shell.user_ns["checks"] = checks
    seal(nonce)


def seal(nonce: str) -> None:
    """Print the line the grader waits for, with the original stdout."""
    _state["write"](f"\nPTE-SEAL:{nonce}\n")
    _state["stdout"].flush()
