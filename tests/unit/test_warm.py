"""Warm kernels (autograder.warm): a kernel forked from a template is, to the code it runs, a fresh kernel.

Every kernel here comes from the ``pte-warm`` kernelspec through jupyter_client, as nbclient and nbval get
it. The reference is a cold kernel from the same kernelspec with ``PTE_WARM=0`` (LocalProvisioner's own
launch). Templates take seconds to import torch: the module fixture starts the three it needs at once.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import nbformat
import pytest
from jupyter_client import AsyncKernelManager, KernelManager
from nbclient import NotebookClient

from autograder.warm import KERNEL_NAME, isolate, pool
from autograder.warm import provisioner as warm
from autograder.warm.__main__ import install

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm kernels fork: Linux only")

LOG = logging.getLogger("test_warm")
TIMEOUT = 300
# The first cell of every kernel here: what the kernel sees of itself, before it imports anything itself.
PROBE = r"""
import json as _json, os as _os, sys as _sys
_preloaded = "torch" in _sys.modules
_dynamo = "torch._dynamo" in _sys.modules
import random, threading, numpy, torch, matplotlib
print(_json.dumps({
    "torch_preloaded": _preloaded, "dynamo_preloaded": _dynamo, "cwd": _os.getcwd(), "pid": _os.getpid(),
    "ppid": _os.getppid(),
    "pgid": _os.getpgid(0), "sid": _os.getsid(0),
    "parent_cmdline": open(f"/proc/{_os.getppid()}/cmdline").read().split("\0"),
    "env": dict(_os.environ), "argv0": _sys.argv[0], "argc": len(_sys.argv), "orig_argv": _sys.orig_argv[:3],
    "path": _sys.path, "comm": open("/proc/self/comm").read().strip(), "backend": matplotlib.get_backend(),
    "threads": threading.active_count(), "stdin": _os.path.basename(_os.readlink("/proc/self/fd/0")).split(":")[0],
    "torch_threads": torch.get_num_threads(), "torch_seed": torch.initial_seed(),
    "torch_default_seed": torch.Generator().initial_seed(), "torch_rand": torch.rand(3).tolist(),
    "random": random.random(), "numpy": numpy.random.rand(),
}))
"""
NOTEBOOK_CELLS = [
    PROBE,
    "import torch, matplotlib.pyplot as plt\ntorch.manual_seed(0)\nprint(torch.randn(3))\n"
    "print(torch.randn(2, 2) @ torch.randn(2, 2))",
    "fig, ax = plt.subplots(figsize=(2, 2))\nax.plot([0, 1], [1, 0])\nplt.show()",
    "import numpy as np\nnp.random.seed(1)\nnp.random.rand(2)",
    "import sys\nprint('to stderr', file=sys.stderr)\nraise ValueError('expected ' + str(torch.arange(3)))",
]
# what differs between any two kernels' environments
PER_KERNEL_ENV = {"JPY_PARENT_PID", "PTE_WARM", "PYTEST_CURRENT_TEST"}


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def records():
    handler = Records()
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    yield handler
    LOG.removeHandler(handler)


def other_threads(env) -> dict[str, str]:
    """Another thread count for torch's OpenMP. OpenBLAS stays at one thread: with more it starts its pool as
    NumPy is imported, and a template owning threads never forks (test_cold_when_the_template_owns_a_thread).
    MKL_NUM_THREADS goes with OMP_NUM_THREADS: torch prefers it, and a test that loaded nbgrader_config.py in
    this worker may have set it to 1 in os.environ."""
    threads = "3" if env.get("OMP_NUM_THREADS") == "2" else "2"
    return {**env, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def templates():
    """The default template, one for another OMP_NUM_THREADS, one owning a thread (the test hook)."""
    install()
    saved = os.environ.pop("MPLBACKEND", None)   # a kernel then chooses the inline backend itself
    os.environ["PTE_LAUNCHER_ONLY"] = "launcher"   # in the templates' launcher, not passed to `second`
    env = dict(os.environ)
    started = {"default": pool.prestart(env), "omp": pool.prestart(other_threads(env)),
               "thread": pool.prestart({**env, "PTE_WARM_TEST_THREAD": "1"})}
    yield started
    pool.close_templates()   # ~350 MB each: not kept for the worker's next test files
    del os.environ["PTE_LAUNCHER_ONLY"]
    if saved is not None:
        os.environ["MPLBACKEND"] = saved


def probe(env=None, cwd=None, kernel=None):
    """Start a pte-warm kernel, run PROBE in it, shut it down; PROBE's answer and the kernel's process."""
    km = KernelManager(kernel_name=KERNEL_NAME, log=LOG)
    km.start_kernel(cwd=str(cwd or os.getcwd()), env=dict(os.environ if env is None else env))
    kc = km.client()
    kc.start_channels()
    chunks = []
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        reply = kc.execute_interactive(PROBE, timeout=TIMEOUT, output_hook=lambda msg: chunks.append(msg))
        assert reply["content"]["status"] == "ok", chunks
        if kernel is not None:
            kernel(km, kc)
        process = km.provisioner.process
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    text = "".join(m["content"]["text"] for m in chunks if m["msg_type"] == "stream")
    return json.loads(text), process


def wait_for_stream(kc, msg_id, text, timeout=TIMEOUT):
    """Read iopub until the cell msg_id has printed text; fail at once if the cell ends without printing it."""
    deadline = time.monotonic() + timeout
    seen = ""
    while text not in seen:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            seen += msg["content"]["text"]
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            reply = kc.get_shell_msg(timeout=30)["content"]
            raise AssertionError(f"the cell ended without printing {text!r}: {reply}")


def run_notebook(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS])
    nb.cells[-1].metadata["tags"] = ["raises-exception"]
    km = KernelManager(kernel_name=KERNEL_NAME, log=LOG)
    client = NotebookClient(nb, km=km, timeout=TIMEOUT, startup_timeout=TIMEOUT,
                            resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    finally:   # nbclient leaves running the kernel (and client) of a manager it was given
        if client.kc is not None:
            client.kc.stop_channels()
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    outputs = [[{k: v for k, v in out.items() if k != "execution_count"} for out in cell.outputs] for cell in nb.cells]
    return json.loads(outputs[0][0]["text"]), outputs[1:]


@pytest.fixture(scope="module")
def cold(templates, records, tmp_path_factory):
    """The notebook in a cold kernel of the same kernelspec (PTE_WARM=0): its probe and outputs."""
    os.environ["PTE_WARM"] = "0"
    try:
        return run_notebook(tmp_path_factory.mktemp("cold"))
    finally:
        del os.environ["PTE_WARM"]


@pytest.fixture(scope="module")
def warm_run(cold, tmp_path_factory):
    """The same notebook, warm (after the cold run, so the default template has had time to import)."""
    asyncio.run(pool.prestart().wait_ready())
    return run_notebook(tmp_path_factory.mktemp("warm"))


@pytest.fixture(scope="module")
def second(warm_run, tmp_path_factory, templates):
    """A second warm kernel, with a folder and an environment of its own."""
    env = {k: v for k, v in os.environ.items() if k != "PTE_LAUNCHER_ONLY"}
    folder = tmp_path_factory.mktemp("own folder")
    answer, _ = probe(env={**env, "PTE_KERNEL_ONLY": "kernel"}, cwd=folder)
    return answer, folder


def test_cold_reference_is_cold_and_says_why(cold, records):
    probe_answer, _ = cold
    assert probe_answer["ppid"] == os.getpid() and not probe_answer["torch_preloaded"]
    assert "pte-warm: cold start: PTE_WARM=0" in records.messages


def test_warm_kernel_is_forked_from_the_template(warm_run, cold, templates):
    answer, _ = warm_run
    assert answer["torch_preloaded"], "a fresh kernel has not imported torch: this one was not forked"
    assert answer["ppid"] == templates["default"].pid != os.getpid()
    assert "autograder.warm.template" in answer["parent_cmdline"]
    assert answer["pgid"] == answer["sid"] == answer["pid"]   # its own session, as a cold kernel


def test_warm_kernel_looks_like_a_cold_one(warm_run, cold):
    answer, reference = warm_run[0], cold[0]
    for key in ("argv0", "argc", "orig_argv", "path", "comm", "backend", "threads", "stdin", "torch_threads"):
        assert answer[key] == reference[key], key
    assert answer["backend"] == "module://matplotlib_inline.backend_inline"
    assert set(answer["env"]) - PER_KERNEL_ENV == set(reference["env"]) - PER_KERNEL_ENV
    assert answer["env"]["JPY_PARENT_PID"] == str(answer["ppid"])


def test_notebook_outputs_identical_warm_and_cold(warm_run, cold):
    assert [len(cell) for cell in cold[1]] == [1, 1, 1, 2]   # print, figure, result, stderr + error
    assert warm_run[1] == cold[1]


def test_own_folder_and_environment(second):
    answer, folder = second
    assert answer["cwd"] == str(folder)
    assert answer["env"].get("PTE_KERNEL_ONLY") == "kernel"
    assert "PTE_LAUNCHER_ONLY" not in answer["env"]


def test_generators_as_in_a_fresh_process(warm_run, second, cold, templates):
    first, other = warm_run[0], second[0]
    assert first["ppid"] == other["ppid"]   # same key, same template
    assert first["random"] != other["random"] and first["numpy"] != other["numpy"]
    # a fresh process (the cold kernel imported torch in PROBE) starts torch at a fixed seed or at one from the OS
    if cold[0]["torch_seed"] == cold[0]["torch_default_seed"]:
        assert first["torch_seed"] == other["torch_seed"] == cold[0]["torch_seed"] == 67280421310721
        assert first["torch_rand"] == other["torch_rand"] == cold[0]["torch_rand"]
    else:
        assert len({first["torch_seed"], other["torch_seed"], cold[0]["torch_seed"]}) == 3


def test_the_optimisers_import_waits_for_a_second_kernel(warm_run, second):
    """A template's first kernel is forked before it imports torch._dynamo (an optimiser's first step imports it,
    about 1 s of CPU that a template forking one kernel would spend for nothing); the second one after."""
    first, other = warm_run[0], second[0]
    assert first["ppid"] == other["ppid"]
    assert not first["dynamo_preloaded"] and other["dynamo_preloaded"]


def test_cold_when_the_template_owns_a_thread(templates, records, tmp_path, monkeypatch):
    tally = tmp_path / "tally.tsv"
    monkeypatch.setenv("TESTS_KERNEL_TALLY", str(tally))
    monkeypatch.setenv("TESTS_KERNEL_TALLY_OWNER", "thread")
    answer, _ = probe(env={**os.environ, "PTE_WARM_TEST_THREAD": "1"})
    assert answer["ppid"] == os.getpid() and not answer["torch_preloaded"]
    assert any("cold start: the template answered: the template has 2 threads" in m for m in records.messages)
    monkeypatch.setenv("TESTS_KERNEL_TALLY_OWNER", "warm")
    probe()
    lines = tally.read_text().splitlines()   # tests/support/tally, which the kernel_tally plugin installs
    assert lines == [f"thread\tcold\t{os.getpid()}", f"warm\twarm\t{os.getpid()}"]


def test_interrupt_and_kill_reach_the_forked_kernel(warm_run, templates):
    def interrupt(km, kc):
        # once through the process group (what LocalProvisioner prefers), once through ForkedProcess's pidfd
        for send in (km.interrupt_kernel, lambda: km.provisioner.process.send_signal(signal.SIGINT)):
            # the signal goes only once the cell says it runs: a fixed pause lost the race on a loaded CI machine
            # short sleeps: a process-directed SIGINT that lands on another of the kernel's threads sets Python's
            # flag but does not wake the main thread from one long sleep (a fresh clone on an Intel machine waited
            # out the 30 s below); the flag is checked after each short one.
            # stop_on_error=False: the kernel sends the interrupted cell's error reply before it starts aborting
            # what is queued, so a next cell sent as that reply arrives could come back "aborted" on a loaded
            # machine and never print (a fresh clone on an AMD machine waited 300 s for it)
            msg_id = kc.execute("import time\nprint('sleeping', flush=True)\nfor _ in range(2400):\n"
                                "    time.sleep(0.05)", stop_on_error=False)
            wait_for_stream(kc, msg_id, "sleeping")
            send()
            reply = kc.get_shell_msg(timeout=30)
            assert reply["parent_header"]["msg_id"] == msg_id
            assert reply["content"].get("ename") == "KeyboardInterrupt", reply["content"]

    answer, process = probe(kernel=interrupt)
    assert answer["ppid"] == templates["default"].pid
    assert isinstance(process, pool.ForkedProcess)
    assert process.returncode == -signal.SIGKILL   # shutdown_kernel(now=True) kills; the template reports it


def test_templates_keyed_by_thread_count(warm_run, templates):
    env = dict(os.environ)
    answer, _ = probe(env=other_threads(env))
    assert answer["ppid"] == templates["omp"].pid != templates["default"].pid
    assert answer["torch_preloaded"] and answer["torch_threads"] == int(other_threads(env)["OMP_NUM_THREADS"])
    assert pool.template_key(env) != pool.template_key({**env, "OMP_NUM_THREADS": "5"})
    assert pool.template_key(env) == pool.template_key({**env, "JPY_SESSION_NAME": "x", "PTE_KERNEL_ONLY": "y"})


def test_a_template_ends_with_its_launchers_socket(templates):
    template = templates["thread"]
    asyncio.run(template.wait_ready())
    template.sock.close()   # what this process's death does to it
    assert template.proc.wait(30) == 0


def test_cold_reasons(tmp_path, monkeypatch):
    python = [sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"]
    env = {"PATH": "/bin"}
    assert warm.cold_reason(python, env, {"cwd": str(tmp_path)}) is None
    assert warm.cold_reason(python, {"PTE_WARM": "0"}, {}) == "PTE_WARM=0"
    assert "another Python" in warm.cold_reason(["/usr/bin/python9", *python[1:]], env, {})
    assert "not an ipykernel_launcher" in warm.cold_reason([sys.executable, "-m", "other"], env, {})
    assert "pipe" in warm.cold_reason(python, env, {"stdout": subprocess.PIPE})
    assert "Popen options" in warm.cold_reason(python, env, {"preexec_fn": print})
    (tmp_path / "matplotlibrc").write_text("lines.linewidth: 3\n")
    assert "matplotlibrc" in warm.cold_reason(python, env, {"cwd": str(tmp_path)})
    monkeypatch.setattr(warm, "NVIDIA_DEVICE", str(tmp_path / "matplotlibrc"))   # a driver is "present"
    assert warm.cold_reason(python, {"CUDA_VISIBLE_DEVICES": "0"}, {}).startswith("CUDA requested")
    assert warm.cold_reason(python, {"CUDA_VISIBLE_DEVICES": ""}, {}) is None


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_relay_ends_as_its_kernel_ended(signum):
    """A sandboxed kernel's PID 1 exits 128 + the signal that killed the kernel (the grader kills with SIGKILL);
    its relay, the template's child, then dies of the same signal. SIGKILL has no handler to reset: trying
    raised EINVAL, and the relay printed a traceback into the grader's log and exited 1."""
    pid = os.fork()
    if pid == 0:
        try:
            init = os.fork()
            if init == 0:
                os._exit(128 + signum)
            _, life = os.pipe()
            isolate._relay(init, life)
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signum, os.waitstatus_to_exitcode(status)


def test_a_killed_template_is_replaced_and_ports_are_chosen_once_it_is_ready(templates, records, tmp_path):
    """A template that died is replaced when a kernel asks for it: the kernel forks from the new one.

    A kernel's TCP ports are chosen free (bound and closed) before its launch and bound by the kernel as it
    starts. Chosen while a new template still imports torch (seconds, a minute on a loaded machine), any
    process could take one in between, and the kernel died before replying to kernel_info: a CI run lost all
    of lesson 01 in one nbval run so, the first kernel of that run's template. The provisioner waits for its
    template before the ports are chosen. Here the kernel asks for the killed template's key, so its template
    is a new one, still importing; a port seen before it is ready is taken, as that other process did; the
    kernel must still answer."""
    env = other_threads(os.environ)
    dead = templates["omp"]
    before = {id(template) for template in pool._templates.values()}
    os.kill(dead.pid, signal.SIGKILL)
    dead.proc.wait(30)
    taken: list = []

    async def take_early_ports(km):
        while not km.shell_port:
            await asyncio.sleep(0.002)
        new = [template for template in pool._templates.values() if id(template) not in before]
        for template in new:
            template.drain()
        if not new or new[0].ready is None:
            thief = socket.socket()
            thief.bind((km.ip, km.shell_port))
            thief.listen()
            taken.append(thief)

    async def start():
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, log=LOG)
        await asyncio.gather(km.start_kernel(cwd=str(tmp_path), env=env), take_early_ports(km))
        kc = km.client()
        kc.start_channels()
        chunks: list = []
        try:
            await kc.wait_for_ready(timeout=TIMEOUT)
            reply = await kc.execute_interactive(PROBE, timeout=TIMEOUT, output_hook=chunks.append)
            text = "".join(m["content"]["text"] for m in chunks if m["msg_type"] == "stream")
            return reply["content"]["status"], km.provisioner.process, text
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    try:
        status, process, text = asyncio.run(start())
    finally:
        for thief in taken:
            thief.close()
    assert not taken, "the kernel's ports were chosen while its template was still importing"
    assert status == "ok" and isinstance(process, pool.ForkedProcess), (status, text)
    answer = json.loads(text)
    assert answer["torch_preloaded"] and answer["ppid"] != dead.pid
    assert "autograder.warm.template" in answer["parent_cmdline"]
    assert any(f"template {dead.pid} ended" in m for m in records.messages)
