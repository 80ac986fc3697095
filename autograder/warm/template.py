"""The warm-kernel template: a Python that has imported what every lesson imports, and forks kernels.

Started by ``autograder.warm.pool`` (never by hand) as ``python -m autograder.warm.template FD`` with
``cwd="/"``, its stdin on ``/dev/null`` and ``FD`` its end of an ``AF_UNIX``/``SOCK_SEQPACKET`` socket pair.
One message (``autograder.grading.messages``) per packet:

- template -> launcher, once imported: ``TemplateReady`` (its pid, its import time);
- launcher -> template: ``ForkRequest`` (the kernel's ``argv`` after the Python, ``env``, ``cwd``, ``umask``,
  and for a grading kernel its ``sandbox`` policy) with two file descriptors attached (``SCM_RIGHTS``): the
  kernel's stdout and stderr, the ones a cold kernel would inherit;
- template -> launcher: ``Forked`` (the kernel's pid) once the child is its own session leader, or
  ``StartCold`` (the reason) when forking is not safe now: the launcher then starts that kernel cold;
- template -> launcher: ``ChildExited`` (pid, ``Popen.returncode``'s convention) when a child ends.

At EOF on the socket (the launcher closed it or died) the template exits, and so it does on a request it cannot
read (another version's: the launcher then starts a new template).

A run's template (``pool.share``: ``... template FD LISTENER``) also listens in a folder only its owner may enter;
each grading process connects (``attach``; another user's connection is closed unanswered) and is a launcher of its
own: its messages, and its kernels' ends, on its connection alone; when it goes (EOF, a broken connection, a request
the template cannot read) its kernels are killed. The template ends with FD's launcher, the grading command.

It is single-threaded: one ``select`` over the sockets and a pidfd per child, no signal handler, no thread, no ZMQ
context, no tensor operation; ``unsafe_reason()`` checks that before every fork.

A child is a fresh kernel to the code it runs: its own session, working directory, umask, stdio,
``os.environ`` (replaced whole), ``sys.argv``/``sys.orig_argv``/``sys.path`` as ``python -m
ipykernel_launcher`` has them, ``/proc/self/comm``, and ``random``, NumPy's global generator and torch's
default generator in the state a fresh process has (see ``reseed``). What it shares with the template and
not with a fresh process: the string hash seed (``PYTHONHASHSEED``, part of the template's key; unset, every
template draws its own and all its children share it), the modules already imported with what they did at
import (``sitecustomize`` and ``.pth`` files ran with the template's environment, warnings already shown),
the process's ``/proc/<pid>/cmdline`` and ``environ`` blocks (the template's; ``os.environ`` is the kernel's),
and the template's objects frozen out of the garbage collector (``gc.freeze``, see ``fork_kernel``).

Forking needs a single-threaded template: with more than one thread for OpenBLAS (``OPENBLAS_NUM_THREADS``
or ``OMP_NUM_THREADS`` unset or above 1) NumPy's import starts a pool, and every request is answered cold.

Test hook: ``PTE_WARM_TEST_THREAD=1`` in the template's environment starts a thread at start-up, so that every
fork request is answered ``cold`` (tests/unit/test_warm.py).
"""
import gc
import importlib
import importlib.util
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path

from autograder.grading import private_apis
from autograder.grading.messages import (
    ChildExited,
    Forked,
    ForkRequest,
    Message,
    MessageError,
    SandboxFailed,
    SandboxReady,
    StartCold,
    TemplateReady,
    decode_one_of,
)

INLINE = "module://matplotlib_inline.backend_inline"
_STATE: dict = {}   # what main() saw at start-up, for the children


# What a kernel's start imports, ipykernel.kernelapp left out: its IPKernelApp class reads JPY_PARENT_PID and
# JPY_INTERRUPT_EVENT into trait defaults as it is defined, so the child imports it (milliseconds) with its own
# environment. matplotlib.pyplot resolves its backend only when first used; zmq: the module only, a Context
# is made by the kernel, in the child.
# ipykernel.debugger is left out too: importing debugpy sets PYDEVD_USE_FRAME_EVAL in os.environ and reads
# a dozen variables, so the child imports it (~0.1 s) with its own environment.
PRELOAD = ("IPython", "IPython.core.application", "IPython.core.completerlib", "IPython.core.debugger",
           "IPython.core.oinspect", "IPython.core.profiledir", "IPython.core.shellapp", "IPython.extensions.storemagic",
           "matplotlib", "matplotlib.pyplot", "numpy", "torch", "zmq", "zmq.eventloop.zmqstream",
           "tornado.gen", "tornado.ioloop", "tornado.locks", "tornado.platform.asyncio", "tornado.queues", "psutil",
           "sqlite3", "jupyter_client.connect", "jupyter_client.session", "jupyter_core.paths", "ipykernel.connect",
           "ipykernel.control", "ipykernel.heartbeat", "ipykernel.iostream", "ipykernel.ipkernel",
           "ipykernel.parentpoller", "ipykernel.shellchannel", "ipykernel.zmqshell")


# Imported when a second kernel is asked for, before it is forked: an optimiser's first step imports torch._dynamo
# (about 1 s of CPU), which most lessons' kernels then need, but a template that forks one kernel only (a grading
# process with one notebook to grade, the feedback on one submission) would import it for nothing, and a kernel
# that steps an optimiser imports it itself, as a cold kernel does.
PRELOAD_AFTER_FIRST = ("torch._dynamo",)


def preload() -> None:
    """Import what every lesson's kernel imports, choosing nothing (no backend, no device, no thread)."""
    for name in PRELOAD:
        importlib.import_module(name)
    torch = sys.modules["torch"]
    # A fresh process seeds torch's default generator at start: to a fixed seed (67280421310721) on most
    # builds, from the OS on some (torch 2.13 here). Keep the fixed state to restore; None: seed from the OS.
    fixed = torch.default_generator.initial_seed() == torch.Generator().initial_seed()
    _STATE["torch_state"] = torch.default_generator.get_state() if fixed else None


def unsafe_reason() -> str | None:
    """Why forking now would not give a sound kernel, or None."""
    tasks = os.listdir("/proc/self/task")
    if len(tasks) != 1:   # e.g. OpenBLAS starts its pool as NumPy loads unless OPENBLAS/OMP_NUM_THREADS=1
        names = [Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in tasks]
        return f"the template has {len(tasks)} threads ({', '.join(names)})"
    zmq = sys.modules.get("zmq")
    if zmq is not None and private_apis.get(private_apis.ZMQ_INSTANCE) is not None:
        return "the template has a ZMQ context"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the template"
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None and private_apis.get(private_apis.BACKEND_MOD, pyplot) is not None:
        return "a matplotlib backend was loaded in the template"
    return None


def reseed() -> None:
    """Generators as a fresh process has them: ``random`` and NumPy from the OS, torch at its start state."""
    random.seed()   # os.urandom; CPython also reseeds it after fork, this keeps it explicit
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()   # None: OS entropy, as at NumPy's import
    torch = sys.modules.get("torch")
    if torch is not None:
        if _STATE["torch_state"] is not None:
            torch.default_generator.set_state(_STATE["torch_state"])
        else:
            torch.default_generator.seed()


def _become_kernel(request: ForkRequest, stdout: int, stderr: int) -> None:
    """In the child: turn into what ``python -m ipykernel_launcher ...`` would be, then run it."""
    stdin, closed = os.pipe()   # a cold kernel's stdin: a pipe whose writing end the launcher closed
    os.close(closed)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    for fd in {stdin, stdout, stderr} - {0, 1, 2}:
        os.close(fd)
    os.chdir(request.cwd)
    os.umask(request.umask)
    os.environ.clear()
    os.environ.update(request.env)
    reseed()
    Path("/proc/self/comm").write_text(os.path.basename(sys.executable)[:15])   # what exec sets: its name
    argv = request.argv
    sys.orig_argv = [sys.executable, *argv]
    sys.argv = [_STATE["launcher"], *argv[2:]]
    sys.path[:] = _STATE["path"]
    # matplotlib read MPLBACKEND at its import, in the template. A cold kernel imports it after
    # IPKernelApp.init_gui_pylab has set MPLBACKEND (to the inline backend when unset): do what that does,
    # then what matplotlib's import does with it.
    if not os.environ.get("MPLBACKEND"):
        os.environ["MPLBACKEND"] = INLINE
    sys.modules["matplotlib"].rcParams["backend"] = os.environ["MPLBACKEND"]
    from ipykernel import kernelapp as app

    app.launch_new_instance()


def _child(request: ForkRequest, fds: list[int], close: list[int], ready_w: int) -> None:
    """Runs in the forked child and never returns into the template's loop. ``close``: every descriptor of the
    template's (its sockets, listening one included, and the pidfds of its other children)."""
    code = 1
    try:
        os.setsid()
        for fd in close:
            os.close(fd)
        if request.sandbox is not None:
            # the per-child step (autograder.warm.isolate): this process stays outside as the relay
            from autograder.warm import isolate

            isolate.launch(request.sandbox, ready_w, lambda: _sandboxed_kernel(request, fds))
        os.close(ready_w)   # the template waits for this: the child leads its own process group now
        _become_kernel(request, *fds)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            private_apis.get(private_apis.RUN_EXITFUNCS)()   # what the interpreter's exit would run (os._exit skips it)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _sandboxed_kernel(request: ForkRequest, fds: list[int]) -> None:
    """The kernel inside its sandbox (uid 65534, no capability): the font cache, then the kernel."""
    from autograder.warm import isolate

    isolate.copy_font_cache(request.sandbox, request.env.get("HOME", request.cwd))
    _become_kernel(request, *fds)


def _send(sock: socket.socket, message: Message) -> None:
    sock.send(message.encode())


def _sandbox_answer(raw: bytes) -> SandboxReady | SandboxFailed:
    """What the relay wrote on the child's pipe: the kernel's host pid, or why there is no sandbox."""
    if not raw:
        return SandboxFailed("the relay ended without an answer")
    try:
        return decode_one_of(raw, SandboxReady, SandboxFailed)
    except MessageError as error:
        return SandboxFailed(f"the relay's answer cannot be read: {error}")


class Launcher:
    """One launcher's connection and the children forked at its request."""

    def __init__(self, sock: socket.socket | None):
        self.sock = sock
        self.gone = False   # EOF, a broken connection or an unreadable request: serve() lets it go
        self.children: dict[int, int] = {}   # pid -> pidfd (readable once the child has ended)
        self.kernels: dict[int, int] = {}    # a sandboxed child's relay pid -> its kernel's pid


def fork_kernel(sock: socket.socket, request: ForkRequest, fds: list[int], children: dict[int, int],
                kernels: dict[int, int], close: list[int]) -> None:
    """Answer one request: fork a kernel, or say why it must start cold. ``close``: what the child closes."""
    reason = unsafe_reason()
    if reason is None and len(fds) != 2:
        reason = f"the request carried {len(fds)} file descriptors, not 2"
    if reason is not None:
        for fd in fds:
            os.close(fd)
        _send(sock, StartCold(request.id, reason))
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # The template's objects move to the permanent generation: a child's collections never walk torch's
    # millions of objects (tenths of a second each) nor copy their pages by touching them. The one trace a
    # kernel can see: gc.get_freeze_count() > 0, and gc.get_objects() leaves them out.
    gc.freeze()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        _child(request, fds, close, ready_w)
    os.close(ready_w)
    answer = b""   # EOF once the child has called setsid(): its pgid is its pid from here on
    while chunk := os.read(ready_r, 4096):   # a sandboxed child's relay says SandboxReady or SandboxFailed first
        answer += chunk
    os.close(ready_r)
    for fd in fds:
        os.close(fd)
    children[pid] = os.pidfd_open(pid)
    if request.sandbox is None:
        _send(sock, Forked(request.id, pid))
        return
    sandbox = _sandbox_answer(answer)
    if isinstance(sandbox, SandboxReady):
        kernels[pid] = sandbox.pid   # the relay's exit is reported as the kernel's
        _send(sock, Forked(request.id, sandbox.pid, sandboxed=True))
    else:
        _send(sock, StartCold(request.id, "the sandbox could not be made: " + sandbox.reason))


def reap(launchers: list[Launcher]) -> None:
    """Collect every child that has ended and report its status to the launcher that asked for it."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for launcher in launchers:
            if pid in launcher.children:
                os.close(launcher.children.pop(pid))
                kernel = launcher.kernels.pop(pid, pid)
                if launcher.sock is not None and not launcher.gone:
                    try:
                        _send(launcher.sock, ChildExited(kernel, os.waitstatus_to_exitcode(status)))
                    except (BrokenPipeError, ConnectionResetError):
                        launcher.gone = True
                break


def accept(listener: socket.socket, launchers: list[Launcher]) -> None:
    """A grading process of the same run connects: only a process of this template's user is served."""
    conn, _ = listener.accept()
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.getuid():
        print(f"pte-template: refused a connection from pid {pid} (uid {uid})", file=sys.stderr)
        conn.close()
        return
    launchers.append(launcher := Launcher(conn))
    try:
        _send(conn, TemplateReady(os.getpid(), _STATE["seconds"]))
    except (BrokenPipeError, ConnectionResetError):
        launcher.gone = True


def let_go(launcher: Launcher) -> None:
    """A launcher gone (closed or died): its kernels are killed, as with a template of its own, and reaped later."""
    for pidfd in launcher.children.values():
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
    launcher.sock.close()
    launcher.sock = None


def receive(ready: socket.socket) -> tuple[ForkRequest | None, list[int]]:
    """A launcher's next request and its descriptors; None at EOF or for another version's request."""
    try:
        message, fds, _flags, _addr = socket.recv_fds(ready, 1 << 20, 2)
    except ConnectionResetError:   # it closed with our answers unread
        return None, []
    if message:
        try:
            return ForkRequest.decode(message), list(fds)
        except MessageError as error:
            print(f"pte-template: {error}; dropping that launcher", file=sys.stderr)
    for fd in fds:
        os.close(fd)
    return None, []


def answer(launcher: Launcher, request: ForkRequest, fds: list[int], launchers: list[Launcher],
           listener: socket.socket | None) -> None:
    """Fork for ``launcher`` (the child closes every socket and pidfd of the template's); mark it gone if it went."""
    close = [other.sock.fileno() for other in launchers if other.sock is not None]
    close += [fd for other in launchers for fd in other.children.values()]
    try:
        fork_kernel(launcher.sock, request, fds, launcher.children, launcher.kernels,
                    close + ([listener.fileno()] if listener else []))
    except (BrokenPipeError, ConnectionResetError):
        launcher.gone = True


def serve(sock: socket.socket, listener: socket.socket | None = None) -> None:
    """Fork for ``sock``'s launcher, and for each grading process that connects to ``listener`` (a run's shared
    template): each launcher's requests are answered, and its children's ends reported, on its own connection.
    The template ends with ``sock``'s launcher (EOF, a request it cannot read, or its connection broken)."""
    launchers = [Launcher(sock)]
    requests = 0
    while True:
        by_socket = {launcher.sock: launcher for launcher in launchers if launcher.sock is not None}
        pidfds = [fd for launcher in launchers for fd in launcher.children.values()]
        readable, _, _ = select.select([*by_socket, *pidfds, *([listener] if listener else [])], [], [], 5.0)
        reap(launchers)
        if listener is not None and listener in readable:
            accept(listener, launchers)
        for ready in [s for s in readable if s in by_socket and not by_socket[s].gone]:
            request, fds = receive(ready)
            if request is None:
                by_socket[ready].gone = True
                continue
            requests += 1
            if requests == 2:
                for name in PRELOAD_AFTER_FIRST:
                    importlib.import_module(name)
            answer(by_socket[ready], request, fds, launchers, listener)
        for launcher in launchers:
            if launcher.gone and launcher.sock is not None:
                if launcher.sock is sock:
                    return
                let_go(launcher)
        launchers[:] = [launcher for launcher in launchers if launcher.sock is not None or launcher.children]


def main() -> None:
    started = time.perf_counter()
    sock = socket.socket(fileno=int(sys.argv[1]))
    listener = socket.socket(fileno=int(sys.argv[2])) if len(sys.argv) > 2 else None
    path = list(sys.path)   # before any import adds to it; then what ipykernel_launcher removes
    if path and (path[0] == "" or Path(path[0]) == Path.cwd()):
        del path[0]
    _STATE["path"] = path
    _STATE["launcher"] = importlib.util.find_spec("ipykernel_launcher").origin
    preload()
    Path("/proc/self/comm").write_text("pte-template")   # for ps and top; each child sets its own back
    if os.environ.get("PTE_WARM_TEST_THREAD") == "1":   # test hook, see the module's docstring
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    _STATE["seconds"] = round(time.perf_counter() - started, 3)
    try:
        _send(sock, TemplateReady(os.getpid(), _STATE["seconds"]))
        serve(sock, listener)
    except (BrokenPipeError, ConnectionResetError):
        pass   # the launcher is gone


if __name__ == "__main__":
    main()
