"""The launcher's side of warm templates: one per key in this process, and the kernels they fork.

A ``Template`` is one ``python -m autograder.warm.template`` process and its socket (the protocol is in that
module's docstring). Templates are kept per key: the Python, the venv, this process's CPU affinity and every
variable of the kernel's environment that an import reads (``KEY_PREFIXES``, ``KEY_NAMES``: torch, MKL,
oneDNN, OpenMP, OpenBLAS, NumPy, Python, matplotlib, IPython, traitlets, the locale); a template runs with
only those and ``PATH``. A template found dead is replaced by a new one (logged). Each template ends when
this process closes its socket: ``close_templates()``, at exit, or when this process dies.

A grading run shares one template between its workers: the grading command starts it with a listening socket
(:func:`share`) and each worker connects (:func:`attach`), a ``Template`` on a connection of its own whose process
is not its child; the template protocol (``autograder.warm.template``) says what each connection gets.

A ``ForkedProcess`` is what LocalProvisioner needs of a ``Popen`` for a kernel that is the template's child,
not ours: a pidfd says when it has ended and carries signals (immune to pid reuse); its exit status is the
one the template reports.
"""
import asyncio
import atexit
import contextlib
import hashlib
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from autograder.grading.messages import (
    TEMPLATE_SAYS,
    ChildExited,
    Forked,
    ForkRequest,
    MessageError,
    StartCold,
    TemplateReady,
    decode_one_of,
)

KEY_PREFIXES = ("OMP_", "MKL_", "KMP_", "GOMP_", "ONEDNN_", "DNNL_", "ATEN_", "TORCH", "PYTORCH_", "CUDA_", "NVIDIA_",
                "TRITON_", "LD_", "PYTHON", "OPENBLAS_", "NUMPY_", "NPY_", "MPL", "IPYTHON", "TRAITLETS_", "LC_",
                "XDG_", "PTE_WARM_TEST_")
KEY_NAMES = ("HOME", "TMPDIR", "LANG", "LANGUAGE", "MATPLOTLIBRC")
READY_TIMEOUT_S = 300.0   # a template imports torch: seconds on an idle machine, a minute on a loaded one
REPLY_TIMEOUT_S = 30.0

_templates: dict[str, "Template"] = {}
_registry_lock = threading.Lock()


class TemplateGone(RuntimeError):
    """The template exited, closed its socket or sent what this launcher cannot read."""


class Template:
    """The launcher's side of one template process."""

    def __init__(self, env: dict[str, str], listener: socket.socket | None = None,
                 connected: socket.socket | None = None):
        """Start a template (``listener``: the listening socket other grading processes of the run connect to,
        see :func:`share`), or be one more launcher of a running one (``connected``: see :func:`attach`)."""
        self.started = time.perf_counter()
        if connected is not None:
            ours, self.proc = connected, None
        else:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            fds = [theirs.fileno()] + ([listener.fileno()] if listener is not None else [])
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.warm.template", *map(str, fds)],
                                         pass_fds=fds, stdin=subprocess.DEVNULL, env=env, cwd="/",
                                         start_new_session=True)
            theirs.close()
        ours.setblocking(False)
        self.sock, self.owner = ours, os.getpid()
        self.pid: int | None = self.proc.pid if self.proc is not None else None   # a shared one's: once ready
        self.ready: dict | None = None
        self.replies: dict[int, Forked | StartCold] = {}
        self.exits: dict[int, int] = {}
        self.eof = False
        self.unreadable = ""   # why the last message could not be read: the template is not used again
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def alive(self) -> bool:
        return not self.eof and (self.proc is None or self.proc.poll() is None)

    def exit_code(self) -> int | str | None:
        return self.proc.poll() if self.proc is not None else "its connection closed"

    def drain(self) -> None:
        """Read every message waiting on the socket."""
        with self._lock:
            while not self.eof:
                try:
                    data = self.sock.recv(1 << 16)
                except BlockingIOError:
                    return
                except OSError:
                    data = b""
                if not data:
                    self.eof = True
                    return
                try:
                    message = decode_one_of(data, *TEMPLATE_SAYS)
                except MessageError as error:   # another version's template: ended, and replaced when asked for
                    self.eof, self.unreadable = True, str(error)
                    if self.proc is not None:
                        self.proc.kill()
                    self.sock.close()
                    return
                if isinstance(message, TemplateReady):
                    self.pid = message.pid
                    self.ready = {"ready": message.pid, "seconds": message.seconds,
                                  "wall": round(time.perf_counter() - self.started, 3)}
                elif isinstance(message, ChildExited):
                    self.exits[message.pid] = message.status
                else:
                    self.replies[message.id] = message

    async def _until(self, get, timeout: float, pause: float):
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            value = get()
            if value is not None:
                return value
            if not self.alive():
                raise TemplateGone(f"template {self.pid} sent what this launcher cannot read: {self.unreadable}"
                                   if self.unreadable else f"template {self.pid} exited ({self.exit_code()})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"template {self.pid} did not answer in {timeout:.0f} s")
            await asyncio.sleep(pause)

    async def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict:
        return await self._until(lambda: self.ready, timeout, 0.01)

    async def fork(self, request: ForkRequest, fds: list[int]) -> Forked | StartCold:
        """Ask for one kernel (``request``'s id is set here): its pid, or why it must start cold."""
        await self.wait_ready()
        request.id = next(self._ids)
        socket.send_fds(self.sock, [request.encode()], fds)
        return await self._until(lambda: self.replies.pop(request.id, None), REPLY_TIMEOUT_S, 0.001)

    def exit_status(self, pid: int, wait_s: float) -> int | None:
        """The child's exit status as the template reported it; None when it cannot (the template is gone)."""
        deadline = time.monotonic() + wait_s
        while pid not in self.exits and self.alive() and time.monotonic() < deadline:
            select.select([self.sock], [], [], max(0.0, deadline - time.monotonic()))
            self.drain()
        return self.exits.pop(pid, None)

    def close(self, wait_s: float = 0.0) -> None:
        self.sock.close()   # EOF: the template exits (a shared one: it kills this launcher's kernels)
        if wait_s and self.proc is not None:
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                self.proc.terminate()


class ForkedProcess:
    """What LocalProvisioner needs of a Popen, for a kernel forked by a template (not this process's child)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, template: Template, args: list[str]):
        self.pid, self.args, self.returncode = pid, args, None
        self._template = template
        self._pidfd: int | None = os.pidfd_open(pid)   # readable once the process has ended; immune to pid reuse
        self._signalled = 0
        template.drain()
        if pid in template.exits:   # ended (and reaped) before the pidfd was opened: the pidfd may not be its
            self.returncode = template.exits.pop(pid)
            os.close(self._pidfd)
            self._pidfd = None

    def _settle(self) -> None:
        status = self._template.exit_status(self.pid, wait_s=2.0)
        self.returncode = status if status is not None else -self._signalled
        os.close(self._pidfd)
        self._pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self._settle()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._settle()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            self._signalled = signum
            signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __del__(self):
        if getattr(self, "_pidfd", None) is not None:
            os.close(self._pidfd)


def keyed(name: str) -> bool:
    """Does an import (torch, MKL, oneDNN, OpenMP, Python, matplotlib) read this variable?"""
    return name.startswith(KEY_PREFIXES) or name in KEY_NAMES


def template_key(env: dict[str, str]) -> str:
    parts = [sys.executable, sys.prefix, sorted(os.sched_getaffinity(0)), sorted(filter(keyed, env))]
    parts.append([env[name] for name in parts[-1]])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def get_template(env: dict[str, str], log=None) -> Template:
    """This process's template for ``env``'s key, started (importing in the background) if there is none."""
    key = template_key(env)
    with _registry_lock:
        template = _templates.get(key)
        if template is not None and not template.alive():
            if log is not None:
                log.warning("pte-warm: template %s ended (%s); starting a new one", template.pid, template.exit_code())
            template.close()
            template = None
        if template is None:
            template_env = {name: value for name, value in env.items() if keyed(name) or name == "PATH"}
            template = _templates[key] = Template(template_env)
        return template


def prestart(env: dict[str, str] | None = None) -> Template:
    """Start the template a kernel with ``env`` (default: this process's) will fork from; returns at once."""
    return get_template(dict(os.environ if env is None else env))


SHARED_NAME = "template.sock"


def share(env: dict[str, str], folder: Path) -> str:
    """Start this process's template for ``env`` with a listening socket, ``folder``/template.sock (``folder`` is
    made here, readable by its owner only), which the run's grading processes connect to (:func:`attach`), each a
    launcher of its own; return the socket's path. The template serves only processes of its own user."""
    folder.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        with _in_folder(folder) as short:
            listener.bind(short)
        listener.listen(64)
        template_env = {name: value for name, value in env.items() if keyed(name) or name == "PATH"}
        with _registry_lock:
            _templates[template_key(env)] = Template(template_env, listener=listener)
    finally:
        listener.close()   # the template's copy listens
    return str(folder / SHARED_NAME)


@contextlib.contextmanager
def _in_folder(folder: Path):
    """The socket's name in ``folder`` through a descriptor of the folder: a socket's path may not exceed 107
    bytes, and a run's scratch folder can be deep (pytest's, a cluster's)."""
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{SHARED_NAME}"
    finally:
        os.close(fd)


def connect(path: str) -> socket.socket:
    """A connection to the shared template at ``path`` (:func:`share`)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        with _in_folder(Path(path).parent) as short:
            conn.connect(short)
    except OSError:
        conn.close()
        raise
    return conn


def attach(path: str, env: dict[str, str]) -> Template:
    """Use the shared template at ``path`` (:func:`share`) for ``env``'s key in this process: its kernels are
    forked by it at this process's requests, on a connection of this process's own. A template that is gone
    is replaced by one of this process's own (:func:`get_template`)."""
    template = Template(env, connected=connect(path))
    with _registry_lock:
        _templates[template_key(env)] = template
    return template


def close_templates() -> None:
    """End this process's templates (at exit, or sooner to give their memory back); kernels forked from
    them end too (their parent poller sees the template go). A later kernel starts a new template."""
    with _registry_lock:
        for template in _templates.values():
            if template.owner == os.getpid():
                template.close(wait_s=1.0)
        _templates.clear()


def _forget_in_child() -> None:
    """A fork of this process must not share its templates' sockets: close its copies, keep the templates."""
    global _registry_lock
    _registry_lock = threading.Lock()
    for template in _templates.values():
        template.sock.close()
    _templates.clear()


atexit.register(close_templates)
os.register_at_fork(after_in_child=_forget_in_child)
