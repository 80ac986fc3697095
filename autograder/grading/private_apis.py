"""The grader side's private names of other libraries, each declared once and looked up with
:func:`autograder.kernel.private_apis.get`, which fails loudly, naming the library and its installed version,
when one is gone or takes other parameters than declared. ``tests/unit/test_private_apis.py`` resolves every
entry, so an upgrade that breaks one fails there first, with that message; the pins in requirements.txt are
the only other guard.
"""
from __future__ import annotations

from autograder.kernel.private_apis import Private, PrivateAPIChanged, get

KERNEL_INFO_REPLY = Private(
    "jupyter_client", "jupyter_client.client:KernelClient", "_handle_kernel_info_reply", ("self", "msg"),
    "recording the kernel's protocol version once the grader's own wait for kernel_info (which also waits for "
    "IOPub) has its reply, as jupyter_client's wait_for_ready does")
HANDLE_TIMEOUT = Private(
    "nbclient", "nbclient.client:NotebookClient", "_async_handle_timeout", ("self", "timeout", "cell"),
    "stopping a kernel that ignores the interrupt after a cell's timeout (nbclient has no public hook there)",
    guards=True)
CREATE_ENVIRONMENT = Private(
    "nbconvert", "nbconvert.exporters.templateexporter:TemplateExporter", "_create_environment", ("self",),
    "compiling nbgrader's feedback templates once per recorder (a Jinja bytecode cache on each new environment)")
CONCRETE_CONTEXTS = Private(
    "python", "multiprocessing.context", "_concrete_contexts", None,
    "tests/course/test_spawn.py: removing fork and forkserver, so the lessons' workers run as on macOS and Windows")
DEFAULT_CONTEXT = Private(
    "python", "multiprocessing.context", "_default_context", None,
    "tests/course/test_spawn.py: reporting spawn as the only start method, as on macOS and Windows")
LAUNCH_KERNEL = Private(
    "jupyter_client", "jupyter_client.manager:KernelManager", "_async_launch_kernel", ("self", "kernel_cmd", "kw"),
    "the check, before a provisioner starts anything, that no kernel starts unsandboxed (kernel_client's "
    "SandboxedKernelManager overrides it: renamed, the override would never run)", guards=True)
ZMQ_INSTANCE = Private(
    "pyzmq", "zmq:Context", "_instance", None,
    "the warm template's check that no ZMQ context exists when it forks (its threads would not survive a fork)",
    guards=True)
BACKEND_MOD = Private(
    "matplotlib", "matplotlib.pyplot", "_backend_mod", None,
    "the warm template's check that no matplotlib backend was loaded before it forks", guards=True)
RUN_EXITFUNCS = Private(
    "python", "atexit", "_run_exitfuncs", None,
    "running what the interpreter's exit would run in a forked kernel that leaves with os._exit")

REGISTRY = (KERNEL_INFO_REPLY, HANDLE_TIMEOUT, CREATE_ENVIRONMENT, CONCRETE_CONTEXTS, DEFAULT_CONTEXT, LAUNCH_KERNEL,
            ZMQ_INSTANCE, BACKEND_MOD, RUN_EXITFUNCS)
__all__ = ["REGISTRY", "Private", "PrivateAPIChanged", "get"]
