"""``ForkingProvisioner``: a jupyter_client kernel provisioner that forks kernels from a warm template.

Named ``pte-forking`` (entry point ``jupyter_client.kernel_provisioners``) and used by the ``pte-warm``
kernelspec (``python -m autograder.warm install``). A kernel asked for with ``python -m ipykernel_launcher``
is forked from a template (``autograder.warm.template``) that has already imported torch, matplotlib and
ipykernel; anything else, or anything the template cannot do soundly, starts cold, as ``LocalProvisioner``
does, with the reason logged (warning). Cold when:

- not Linux (the child is tracked through a pidfd), or ``PTE_WARM=0`` in the kernel's environment;
- the command is not ``<this venv's python> -m ipykernel_launcher ...``;
- CUDA asked for: ``CUDA_VISIBLE_DEVICES`` set to a device and an NVIDIA driver present (the template never
  initialises CUDA; a child could, but the course keeps GPU kernels cold, simple and proven);
- coverage measurement asked (``COVERAGE_PROCESS_START``), a stdin or an output pipe asked of the launcher,
  other ``Popen`` options, a ``matplotlibrc`` in the kernel's folder (matplotlib reads it at import);
- the template answers ``cold`` (a thread or ZMQ context in it, CUDA initialised) or died during the request.

Templates are kept per key (the environment variables an import reads, the Python, the venv, the CPU
affinity) in ``autograder.warm.pool``, which also holds ``ForkedProcess``, the kernel's Popen stand-in.

The kernel's ``JPY_PARENT_PID`` is the template's pid (the launcher's for a cold kernel): ipykernel's
ParentPollerUnix watches the process's real parent, so a kernel still ends when its launcher dies (launcher
gone -> template sees EOF and exits -> kernel's poller sees its parent go), and the kernel does not print its
connection banner (it prints it when the variable is absent), as a cold kernel does not.
"""
import os
import pathlib
import signal
import subprocess
import sys
import time

from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

from autograder.grading.isolate.policy import Policy
from autograder.grading.messages import ForkRequest, StartCold
from autograder.warm import isolate
from autograder.warm.pool import ForkedProcess, TemplateGone, get_template

# The grader's sandbox spec (autograder.warm.isolate.spec) travels as this argument of ``start_kernel``, which
# jupyter_client hands to the provisioner's pre_launch and launch_kernel: never in the kernel's environment, where
# any provisioner would pass it on unread. The stock LocalProvisioner hands an argument it does not know to Popen,
# which refuses it, so a kernelspec that names another provisioner cannot start a sandboxed kernel unsandboxed.
SANDBOX_ARG = "pte_sandbox"
POPEN_OPTIONS = {"env", "cwd", "independent", "stdin", "stdout", "stderr", "extra_arguments", "kernel_id"}
NVIDIA_DEVICE = "/dev/nvidiactl"   # present where an NVIDIA driver is loaded


def cuda_requested(env: dict[str, str]) -> bool:
    devices = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    return devices not in ("", "-1") and os.path.exists(NVIDIA_DEVICE)


def cold_reason(cmd: list[str], env: dict[str, str], kwargs: dict) -> str | None:
    """Why this kernel must start cold, or None when a template may fork it."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return f"not Linux with pidfd ({sys.platform})"
    if env.get("PTE_WARM") == "0":
        return "PTE_WARM=0"
    if len(cmd) < 3 or cmd[1:3] != ["-m", "ipykernel_launcher"]:
        return f"not an ipykernel_launcher command: {cmd[:3]}"
    # normalised, not resolved: a venv's python is a link to the system's, and another venv is another Python
    python, mine = (os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in (cmd[0], sys.executable))
    if python != mine and os.path.dirname(python) != os.path.dirname(mine):
        return f"another Python ({python}, not {mine})"
    if cuda_requested(env):
        return f"CUDA requested (CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']})"
    if env.get("COVERAGE_PROCESS_START") or env.get("COVERAGE_PROCESS_CONFIG"):
        return "coverage measurement asked (COVERAGE_PROCESS_START)"
    others = sorted(set(kwargs) - POPEN_OPTIONS)
    if others:
        return f"Popen options {others}"
    if kwargs.get("stdin") is not None:
        return "the launcher gave the kernel a stdin"
    if subprocess.PIPE in (kwargs.get("stdout"), kwargs.get("stderr")):
        return "the launcher reads the kernel's output through a pipe"
    cwd = str(kwargs.get("cwd") or os.getcwd())
    if not os.path.isdir(cwd):
        return f"the kernel's folder {cwd} is not a folder"
    if os.path.exists(os.path.join(cwd, "matplotlibrc")):
        return f"a matplotlibrc in the kernel's folder {cwd}"
    return None


def _stream(value, default: int, opened: list[int]) -> int:
    """The file descriptor a cold kernel's stdout/stderr would be, given Popen's argument."""
    if value is None:
        fd = default
    elif value == subprocess.DEVNULL:
        fd = -1
    else:
        fd = value if isinstance(value, int) else value.fileno()
    try:
        os.fstat(fd)
        return fd
    except OSError:   # closed here, or DEVNULL: the kernel writes to /dev/null
        opened.append(os.open(os.devnull, os.O_WRONLY))
        return opened[-1]


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would race with other threads)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


class ColdStartRefused(RuntimeError):
    """A sandboxed kernel could not be forked: the caller starts it cold inside its own sandbox (this
    provisioner never starts a sandboxed kernel without one)."""


def template_env(env: dict[str, str], sandbox: dict | None) -> dict[str, str]:
    """The environment a kernel's template is keyed by and started with. A sandboxed kernel's ``HOME`` and
    ``MPLCONFIGDIR`` are its own work folder: its template imports matplotlib with the grader's font cache,
    the one each child gets a copy of, and with no home, so that one template serves the whole class."""
    if sandbox is None:
        return env
    return {**env, "HOME": "/nonexistent", "MPLCONFIGDIR": sandbox["mpl_cache"] or "/nonexistent"}


def _python(argv: list[str]) -> list[str]:
    """A kernelspec's argv with ``python`` as jupyter_client runs it (this process's ``sys.executable``)."""
    if argv and argv[0] in ("python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]):
        return [sys.executable, *argv[1:]]
    return list(argv)


class ForkingProvisioner(LocalProvisioner):
    """LocalProvisioner whose kernels are forked from a warm template where that is sound.

    A sandboxed kernel is asked for with the spec as the ``pte_sandbox`` argument of ``start_kernel``
    (``SANDBOX_ARG``): it is forked into a sandbox the template's child makes from that spec, or not started at all
    (ColdStartRefused). ``sandbox`` is then the spec the child was sandboxed with, as the template reported it: the
    grader's kernel manager checks it before it counts the kernel started (kernel_client.SandboxedKernelManager)."""

    sandbox: dict | None = None

    async def pre_launch(self, **kwargs):
        """Wait for the kernel's template before LocalProvisioner chooses its TCP ports. Ports are chosen free
        and left closed until the kernel binds them: chosen while a new template imports torch (seconds, a
        minute on a loaded machine), another process could take one meanwhile and the kernel would die before
        replying to kernel_info (a CI run lost all of a notebook so). A cold start binds within a second."""
        final = await KernelProvisionerBase.pre_launch(self, env=kwargs.get("env") or os.environ)
        env, sandbox = final["env"], kwargs.get(SANDBOX_ARG)   # the environment launch_kernel will get
        options = {name: value for name, value in kwargs.items()
                   if name not in ("env", "transport_encryption", SANDBOX_ARG)}
        if cold_reason(_python(self.kernel_spec.argv), env, options) is None:
            try:
                await get_template(template_env(env, sandbox), self.log).wait_ready()
            except (TemplateGone, TimeoutError, OSError):
                pass   # launch_kernel meets it again, and says so
        return await super().pre_launch(**kwargs)

    async def launch_kernel(self, cmd: list[str], **kwargs):
        sandbox = kwargs.pop(SANDBOX_ARG, None)
        env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
        reason = cold_reason(cmd, env, kwargs)
        if reason is None:
            try:
                reason = await self._fork(cmd, env, kwargs, sandbox)
            except (TemplateGone, TimeoutError, OSError) as error:
                reason = f"template failed: {error}"
        if reason is not None and sandbox is not None:
            raise ColdStartRefused(reason)
        if reason is not None:
            self.log.warning("pte-warm: cold start: %s", reason)
            kwargs["env"] = env
            return await super().launch_kernel(cmd, **kwargs)   # LocalProvisioner's
        return self.connection_info

    async def _fork(self, cmd: list[str], env: dict[str, str], kwargs: dict, sandbox: dict | None) -> str | None:
        """Fork the kernel and set what LocalProvisioner.launch_kernel sets; the reason to go cold, or None."""
        template = get_template(template_env(env, sandbox), self.log)
        await template.wait_ready()   # a shared template's pid is known once it is
        if sandbox is not None:   # the policy's environment, as bubblewrap's --setenv gives a cold kernel
            env = isolate.kernel_env(Policy.from_message(sandbox), env)
        elif kwargs.get("independent"):
            env.pop("JPY_PARENT_PID", None)
        else:
            env["JPY_PARENT_PID"] = str(template.pid)   # the real parent: see the module's docstring
        cwd = kwargs.get("cwd") or pathlib.Path.cwd()
        opened: list[int] = []
        try:
            fds = [_stream(kwargs.get("stdout"), 1, opened), _stream(kwargs.get("stderr"), 2, opened)]
            if kwargs.get("stderr") == subprocess.STDOUT:
                fds[1] = fds[0]
            argv = [os.path.expanduser(arg) for arg in cmd[1:]]
            request = ForkRequest(0, argv, env, str(cwd), _umask(), sandbox)
            started = time.perf_counter()
            reply = await template.fork(request, fds)
        finally:
            for fd in opened:
                os.close(fd)
        if isinstance(reply, StartCold):
            return f"the template answered: {reply.reason}"
        if sandbox is not None and not reply.sandboxed:   # never so: the template answers cold instead
            os.kill(reply.pid, signal.SIGKILL)
            return "the template forked a kernel without reporting its sandbox"
        # LocalProvisioner.launch_kernel's bookkeeping, with a ForkedProcess in place of its Popen
        self.process = ForkedProcess(reply.pid, template, cmd)
        self.pid = self.process.pid
        self.pgid = os.getpgid(self.pid)   # == pid: the template replies once the child has called setsid()
        self.cwd = cwd
        self.sandbox = sandbox
        self.log.info("pte-warm: kernel %s forked from template %s in %.3f s", self.pid, template.pid,
                      time.perf_counter() - started)
        return None
