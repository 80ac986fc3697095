"""Private names of other libraries, each declared once and looked up through :func:`get`, which fails loudly
(naming the library and its installed version) when one is gone or takes other parameters.

This module is the mechanism and the kernel side's list (torch's, for ``autograder/kernel/workers.py``); the grader
side lists its own in ``autograder/grading/private_apis.py``. ``tests/unit/test_private_apis.py`` resolves
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


def get(entry: Private, holder=None):
    """``entry``'s object, from ``holder`` (an instance) or from its owner; PrivateAPIChanged when it is gone or
    takes other parameters than declared."""
    def where() -> str:   # the version is looked up only for the message
        return f"{entry.library} {_version(entry.library)}: {entry.where}"

    try:
        source = owner_of(entry) if holder is None else holder
    except (ImportError, AttributeError) as exc:
        raise PrivateAPIChanged(f"{where()}: its owner is gone ({exc}); the course uses it for {entry.why}") from None
    if not hasattr(source, entry.name):
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

REGISTRY = (GENERATE_STATE, WORKER_INFO)
