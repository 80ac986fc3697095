"""A grading run's shared template (``autograder.warm.pool.share`` and ``attach``): one template imports torch for the
run, and each grading process is a launcher of its own on it, with a connection of its own (issue 47, 53rd stop:
a run with --jobs 2 started two templates, 2-3 CPU-s and hundreds of MB each).

What one connection must never give another, channel by channel:
- the replies: a launcher reads the answers to its own requests and the ends of its own kernels only;
- the kernels: a launcher that goes (its grading process died, or closed the connection) takes its kernels with it,
  as a template of its own would, and leaves the others' running, even when it went between its request and the
  answer (the template's write then fails: until that was caught, the template died with every kernel it had);
- the descriptors: a forked kernel holds none of the template's sockets (the listening one, the launchers');
- the door: the listening socket lies in a folder of its owner's only, and the template serves a process of its
  own user only (``SO_PEERCRED``).
A grading run that shares it, its kernels forked for two workers, is test_dead_worker.py's and test_grading.py's.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.grading.messages import Forked, ForkRequest
from autograder.warm import pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm kernels fork: Linux only")


@pytest.fixture(scope="module")
def shared():
    """The run's template, in a folder others may pass through, as a run's scratch folder (0711) is, and deeper
    than a socket's path may be long (107 bytes), as pytest's and a cluster's scratch folders can be."""
    run = Path(tempfile.mkdtemp(prefix="pte-shared-"))
    run.chmod(0o711)
    (run / ("d" * 100)).mkdir(mode=0o711)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}   # a grading run's: a template
    path = pool.share(env, run / ("d" * 100) / "template")                   # with threads answers cold
    assert len(path.encode()) > 107
    yield path, env
    pool.close_templates()
    shutil.rmtree(run)


def connect(path: str, env: dict) -> pool.Template:
    template = pool.Template(env, connected=pool.connect(path))
    asyncio.run(template.wait_ready())
    return template


def fork(template: pool.Template, folder, name: str) -> int:
    """A kernel forked at ``template``'s request (no sandbox: what the channels carry is the same); its pid. It
    watches the template as a kernel from the pte-warm kernelspec does, so that none outlives a test that failed."""
    with open(folder / f"{name}.log", "wb") as log:
        request = ForkRequest(0, ["-m", "ipykernel_launcher", "-f", str(folder / f"{name}.json")],
                              {**os.environ, "JPY_PARENT_PID": str(template.pid)}, str(folder), 0o022)
        reply = asyncio.run(template.fork(request, [log.fileno(), log.fileno()]))
    assert isinstance(reply, Forked), reply
    return reply.pid


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_each_launcher_reads_its_own_replies_and_its_own_kernels_ends(shared, tmp_path):
    path, env = shared
    first, second = connect(path, env), connect(path, env)
    try:
        assert first.pid == second.pid, "both launchers are served by the run's one template"
        mine, theirs = fork(first, tmp_path, "first"), fork(second, tmp_path, "second")
        os.kill(theirs, signal.SIGKILL)
        assert second.exit_status(theirs, wait_s=30) == -signal.SIGKILL
        first.drain()
        assert theirs not in first.exits and not first.replies, "one launcher read another's messages"
        os.kill(mine, signal.SIGKILL)
        assert first.exit_status(mine, wait_s=30) == -signal.SIGKILL
        second.drain()
        assert mine not in second.exits
    finally:
        first.close()
        second.close()


def test_a_launcher_that_goes_takes_its_kernels_and_only_them(shared, tmp_path):
    path, env = shared
    going, staying = connect(path, env), connect(path, env)
    try:
        doomed, spared = fork(going, tmp_path, "going"), fork(staying, tmp_path, "staying")
        going.close()   # what its grading process's death does to the connection
        assert wait_gone(doomed), "a kernel outlived the launcher it was forked for"
        assert alive(spared), "a launcher's end killed another launcher's kernel"
        os.kill(spared, signal.SIGKILL)
        assert staying.exit_status(spared, wait_s=30) == -signal.SIGKILL
    finally:
        staying.close()


def test_a_kernel_holds_none_of_the_templates_sockets(shared, tmp_path):
    path, env = shared
    first, second = connect(path, env), connect(path, env)
    try:
        fork(second, tmp_path, "other")   # a pidfd and a connection more in the template
        pid = fork(first, tmp_path, "probe")
        kernel = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        template = {os.readlink(f"/proc/{first.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{first.pid}/fd")}
        held = {link for link in kernel & template if link.startswith(("socket:", "anon_inode:[pidfd]"))}
        assert not held, f"the kernel inherited the template's descriptors: {held}"
    finally:
        first.close()
        second.close()


def other_user_reads(path: str) -> bytes:
    """What a process of another user (nobody) reads first on a connection to ``path``: b"" if it is closed."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:   # nothing but the connection, then _exit
        answer = b"?"
        try:
            os.setgid(65534)
            os.setuid(65534)
            conn = pool.connect(path)
            conn.settimeout(30)
            answer = b"<" + conn.recv(1 << 16) + b">"
        except BaseException as error:
            answer = repr(error).encode()
        finally:
            os.write(write_end, answer)
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return text


def test_only_the_owner_may_connect(shared):
    path, env = shared
    folder = os.stat(os.path.dirname(path))   # the run's folder above it is 0711, as a run's scratch is
    assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid()
    if os.getuid() != 0:
        pytest.skip("a connection of another user needs root to make")
    assert other_user_reads(path).startswith(b"PermissionError"), "the folder let another user reach the socket"
    os.chmod(os.path.dirname(path), 0o755)   # as if the folder were open: the template itself must refuse
    os.chmod(path, 0o777)
    try:
        answer = other_user_reads(path)
    finally:
        os.chmod(os.path.dirname(path), 0o700)
    assert answer == b"<>", f"the template answered another user: {answer[:200]!r}"
    connect(path, env).close()   # and goes on serving its own


def test_a_launcher_that_dies_mid_request_costs_the_others_nothing(shared, tmp_path):
    """A grading process killed right after it asked for a kernel: the template's answer finds its connection
    closed. The template lets that launcher go (its kernel killed) and goes on serving the others."""
    path, env = shared
    staying = connect(path, env)
    try:
        spared = fork(staying, tmp_path, "staying")
        for attempt in range(3):
            dying = pool.connect(path)
            with open(tmp_path / f"dying-{attempt}.log", "wb") as log:
                request = ForkRequest(0, ["-m", "ipykernel_launcher", "-f", str(tmp_path / f"dying-{attempt}.json")],
                                      {**os.environ, "JPY_PARENT_PID": str(staying.pid)}, str(tmp_path), 0o022)
                socket.send_fds(dying, [request.encode()], [log.fileno(), log.fileno()])
            dying.close()   # before the template answers
        time.sleep(1.0)
        assert alive(spared), "another launcher's death killed this one's kernel"
        again = fork(staying, tmp_path, "again")   # the template still serves
        for pid in (spared, again):
            os.kill(pid, signal.SIGKILL)
            assert staying.exit_status(pid, wait_s=30) == -signal.SIGKILL
    finally:
        staying.close()
