"""Counts kernel starts for ``make test``: put on ``PYTHONPATH`` by ``tests/support/kernel_tally.py``.

With ``TESTS_KERNEL_TALLY`` naming a file, every Python process of the run (pytest's workers, the grading
command, nbgrader, ``make check``) appends one line to it per kernel that jupyter_client launches: the test
that asked for it and how it started. The test is ``TESTS_KERNEL_TALLY_OWNER``, which ``kernel_tally.py``
sets around each test of the outer run; subprocesses inherit it, and a pytest run inside a test keeps its
parent's. Without ``TESTS_KERNEL_TALLY`` this file does nothing.
"""
import importlib.abc
import importlib.util
import os
import sys

TALLY_ENV = "TESTS_KERNEL_TALLY"   # not PTE_: the student-edition test drops those
OWNER_ENV = "TESTS_KERNEL_TALLY_OWNER"
TARGETS = {"jupyter_client.provisioning.local_provisioner": "LocalProvisioner",
           "autograder.warm.provisioner": "ForkingProvisioner"}


def record(how: str) -> None:
    path = os.environ.get(TALLY_ENV)
    if not path:
        return
    test = os.environ.get(OWNER_ENV) or "outside a test"
    line = f"{test}\t{how}\t{os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)   # one short O_APPEND write: lines from parallel processes never interleave
    finally:
        os.close(fd)


def patch(module) -> None:
    cls = getattr(module, TARGETS[module.__name__])
    if cls.__dict__.get("_pte_tallied", False):
        return
    if cls.__name__ == "ForkingProvisioner":   # a warm start: its _fork returned no reason to go cold
        fork = cls._fork

        async def _fork(self, *args, **kwargs):
            reason = await fork(self, *args, **kwargs)
            if reason is None:
                record("warm")
            return reason

        cls._fork = _fork
    else:   # every cold start, a warm provisioner's fallback included (it calls LocalProvisioner's)
        launch = cls.launch_kernel

        async def launch_kernel(self, cmd, **kwargs):
            record("cold")
            return await launch(self, cmd, **kwargs)

        cls.launch_kernel = launch_kernel
    cls._pte_tallied = True


class _Finder(importlib.abc.MetaPathFinder):
    """Patches a target module right after it is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in TARGETS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install() -> None:
    for name in TARGETS:
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


if os.environ.get(TALLY_ENV):
    install()
