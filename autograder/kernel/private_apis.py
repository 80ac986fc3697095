"""Private names of other libraries, each declared once and looked up through :func:`get`, which fails loudly
(naming the library and its installed version) when one is gone or takes other parameters.

An entry that ``guards`` a defence (a check that no kernel starts unsandboxed, that a fork is safe, that a
tensor is read through methods a student cannot patch) fails closed: it is never read with a default, so a
rename stops what it guards instead of silently disabling it. Any other entry may be read with a default where
the name is legitimately absent on some objects. ``tests/unit/test_private_apis.py`` finds every private name of
another library the code touches by walking its syntax trees, and fails on one that no registry declares.

This module is the mechanism and the kernel side's list (torch's, for ``autograder/kernel/lessons/workers.py``); the
grader side lists its own in ``autograder/grading/private_apis.py``. ``tests/unit/test_private_apis.py`` resolves
every entry of both, so an upgrade that breaks one fails there first, with that message.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from importlib import metadata


class PrivateAPIChanged(RuntimeError):
    """A private name the course relies on is gone or has another shape in the installed library."""


@dataclass(frozen=True)
class Private:
    library: str                 # the distribution, whose version the error names ("python" for the stdlib)
    owner: str                   # "module:Qualified.Name" of what holds it
    name: str                    # the attribute
    parameters: tuple[str, ...] | None   # the parameter names it takes (self included), None for a non-callable
    why: str
    guards: bool = False         # a defence rests on it: never read with a default (fails closed)
    example: str = ""            # "module:callable" that makes an object holding it (an attribute of instances)

    @property
    def where(self) -> str:
        return f"{self.owner.replace(':', '.')}.{self.name}"


def _version(library: str) -> str:
    if library == "python":
        import sys

        return sys.version.split()[0]
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def owner_of(entry: Private):
    module_name, _, qualified = entry.owner.partition(":")
    found = importlib.import_module(module_name)
    for part in filter(None, qualified.split(".")):
        found = getattr(found, part)
    return found


_NO_DEFAULT = object()


def _example(entry: Private):
    module_name, _, qualified = entry.example.partition(":")
    found = importlib.import_module(module_name)
    for part in qualified.split("."):
        found = getattr(found, part)
    return found()


def get(entry: Private, holder=None, default=_NO_DEFAULT):
    """``entry``'s object, from ``holder`` (an instance) or from its owner (or the object its ``example`` makes);
    PrivateAPIChanged when it is gone or takes other parameters than declared. ``default``: what a ``holder``
    without it gives instead, for an entry that guards nothing (TypeError for one that does)."""
    def where() -> str:   # the version is looked up only for the message
        return f"{entry.library} {_version(entry.library)}: {entry.where}"

    if default is not _NO_DEFAULT and entry.guards:
        raise TypeError(f"{entry.where} guards a defence: it is never read with a default")
    try:
        source = holder if holder is not None else _example(entry) if entry.example else owner_of(entry)
    except (ImportError, AttributeError) as exc:
        raise PrivateAPIChanged(f"{where()}: its owner is gone ({exc}); the course uses it for {entry.why}") from None
    if not hasattr(source, entry.name):
        if default is not _NO_DEFAULT and holder is not None:
            return default
        raise PrivateAPIChanged(f"{where()} is gone; the course uses it for {entry.why}")
    found = getattr(source, entry.name)
    if entry.parameters is not None:
        try:
            names = tuple(inspect.signature(getattr(owner_of(entry), entry.name)).parameters)
        except (TypeError, ValueError):
            names = None
        if names != entry.parameters:
            raise PrivateAPIChanged(f"{where()} takes {names}, the course expects {entry.parameters}; it uses it for "
                                    f"{entry.why}")
    return found


GENERATE_STATE = Private(
    "torch", "torch.utils.data._utils.worker", "_generate_state", ("base_seed", "worker_id"),
    "seeding NumPy as a DataLoader worker does, in the main process, for lesson 03's seed_worker demo and check")
WORKER_INFO = Private(
    "torch", "torch.utils.data._utils.worker", "_worker_info", None,
    "setting what get_worker_info() returns while a worker_init_fn is tried in the main process (lesson 03)")

FORWARD_HOOKS = Private(
    "torch", "torch.nn:Module", "_forward_hooks", None,
    "counting the forward hooks a student's code leaves on a model (lesson 08's hook check)", guards=True,
    example="torch.nn:Module")
GLOBAL_FORWARD_HOOKS = Private(
    "torch", "torch.nn.modules.module", "_global_forward_hooks", None,
    "counting the global forward hooks a student's code leaves registered (lesson 08's hook check)", guards=True)
FORWARD_PRE_HOOKS, BACKWARD_HOOKS, BACKWARD_PRE_HOOKS = (
    Private("torch", "torch.nn:Module", name, None, "counting the hooks a student's code leaves on a model (lesson "
            "09's hook check)", guards=True, example="torch.nn:Module")
    for name in ("_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"))
GLOBAL_FORWARD_PRE_HOOKS, GLOBAL_BACKWARD_HOOKS, GLOBAL_BACKWARD_PRE_HOOKS = (
    Private("torch", "torch.nn.modules.module", name, None, "counting the global hooks a student's code leaves "
            "registered (lesson 09's hook check)", guards=True)
    for name in ("_global_forward_pre_hooks", "_global_backward_hooks", "_global_backward_pre_hooks"))
TENSOR_BACKWARD_HOOKS = Private(
    "torch", "torch:Tensor", "_backward_hooks", None,
    "counting the hooks a student's code leaves on a parameter (lesson 09's hook check)", guards=True,
    example="torch.nn:Parameter")
MODULE_HOOKS = (FORWARD_HOOKS, FORWARD_PRE_HOOKS, BACKWARD_HOOKS, BACKWARD_PRE_HOOKS)
GLOBAL_HOOKS = (GLOBAL_FORWARD_HOOKS, GLOBAL_FORWARD_PRE_HOOKS, GLOBAL_BACKWARD_HOOKS, GLOBAL_BACKWARD_PRE_HOOKS)
TENSOR_BASE = Private(
    "torch", "torch._C", "TensorBase", None,
    "reading a tensor through the C base class's unbound methods, which a student's patch of torch.Tensor or an "
    "instance attribute cannot answer for (observations.encode)", guards=True)
TENSOR_VIEW_BASE = Private(
    "torch", "torch:Tensor", "_base", None,
    "showing whether reshape(-1) made a view or a copy (lesson 01's layout explorer)")
SUPTITLE = Private(
    "matplotlib", "matplotlib.figure:Figure", "_suptitle", None,
    "tests/support/browser_figures.py: reading a figure's suptitle (absent before one is set)",
    example="matplotlib.figure:Figure")
COLORBAR = Private(
    "matplotlib", "matplotlib.axes:Axes", "_colorbar", None,
    "tests/support/browser_figures.py: telling a colorbar's axes from a panel (absent on other axes)",
    example="autograder.kernel.private_apis:colorbar_axes")
DISABLE_TORCH_FUNCTION = Private(
    "torch", "torch._C", "DisableTorchFunction", None,
    "tests/support/jitter.py: nudging a result's last bits with torch-function dispatch off (the jitter's own "
    "mode included)")


def colorbar_axes():
    """The axes of a colorbar (COLORBAR's example), drawn on no screen."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.figure import Figure

    figure = Figure()
    return figure.colorbar(ScalarMappable(), ax=figure.subplots()).ax


REGISTRY = (GENERATE_STATE, WORKER_INFO, *MODULE_HOOKS, *GLOBAL_HOOKS, TENSOR_BACKWARD_HOOKS, TENSOR_BASE,
            TENSOR_VIEW_BASE, SUPTITLE, COLORBAR, DISABLE_TORCH_FUNCTION)
