"""The grader's messages between its own processes: one dataclass each, versioned (``autograder.kernel.messages``
says how a message is written and read back, and what a wrong version or field does).

======================  =========================================  ==============================================
message                 from -> to                                 over
======================  =========================================  ==============================================
``TemplateReady``       warm template -> launcher                  the template's socket (``SOCK_SEQPACKET``)
``ForkRequest``         launcher -> template                       the socket, with the kernel's stdout and
                                                                   stderr attached (``SCM_RIGHTS``)
``Forked``              template -> launcher                       the socket: the kernel's pid
``StartCold``           template -> launcher                       the socket: why this kernel must start cold
``ChildExited``         template -> launcher                       the socket: a child's exit status
``KernelStarted``       the sandboxed kernel -> its relay          the relay's pipe (``autograder.warm.isolate``)
``SandboxReady``        relay -> template                          the template's pipe: the kernel's host pid
``SandboxFailed``       relay or its PID 1 -> template             the pipes: why the sandbox could not be made
``RecordRequest``       grader -> recording process                the recorder's stdin, one per line
``RecordAnswer``        recording process -> grader                the recorder's answer pipe, one per line
``NotebookResult``      grading worker -> engine                   the process pool (``Message.to_dict``)
======================  =========================================  ==============================================

The sandbox policy a warm kernel is made with travels inside a ``ForkRequest`` as
``autograder.grading.isolate.policy.Policy``'s own message; an observation is
``autograder.kernel.messages.Observation``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from autograder.grading.status import Status
from autograder.kernel.messages import Message, MessageError, decode_one_of

__all__ = ["Message", "MessageError", "decode_one_of", "TemplateReady", "ForkRequest", "Forked", "StartCold",
           "ChildExited", "TEMPLATE_SAYS", "KernelStarted", "SandboxReady", "SandboxFailed", "RecordRequest",
           "RecordAnswer", "NotebookResult"]


# ---------------------------------------------------------------- the warm template's socket

@dataclass
class TemplateReady(Message):
    """The template has imported everything (``seconds``: how long that took) and forks on request."""
    KIND: ClassVar[str] = "template-ready"
    VERSION: ClassVar[int] = 1
    pid: int
    seconds: float


@dataclass
class ForkRequest(Message):
    """Fork one kernel: ``argv`` is its command after the Python (``["-m", "ipykernel_launcher", "-f", file]``);
    ``sandbox`` the policy's message for a grading kernel, None for any other."""
    KIND: ClassVar[str] = "fork"
    VERSION: ClassVar[int] = 1
    id: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    umask: int
    sandbox: dict | None = None


@dataclass
class Forked(Message):
    """Request ``id``'s kernel runs as ``pid`` (its own session leader; ``sandboxed``: inside the sandbox its
    request asked for, ``pid`` being the host's pid of the kernel itself)."""
    KIND: ClassVar[str] = "forked"
    VERSION: ClassVar[int] = 1
    id: int
    pid: int
    sandboxed: bool = False


@dataclass
class StartCold(Message):
    """Request ``id``'s kernel was not forked (``reason``): the launcher starts it cold."""
    KIND: ClassVar[str] = "start-cold"
    VERSION: ClassVar[int] = 1
    id: int
    reason: str


@dataclass
class ChildExited(Message):
    """Kernel ``pid`` ended with ``status`` (``Popen.returncode``'s convention)."""
    KIND: ClassVar[str] = "exited"
    VERSION: ClassVar[int] = 1
    pid: int
    status: int


TEMPLATE_SAYS = (TemplateReady, Forked, StartCold, ChildExited)   # what the launcher reads on the socket


# ---------------------------------------------------------------- the sandbox relay's pipes

@dataclass
class KernelStarted(Message):
    """The kernel runs in its sandbox as the unprivileged user, its own session leader (it sends no pid: inside
    its PID namespace it does not know its host pid; the relay finds it)."""
    KIND: ClassVar[str] = "kernel-started"
    VERSION: ClassVar[int] = 1


@dataclass
class SandboxReady(Message):
    """The sandboxed kernel runs as host pid ``pid``."""
    KIND: ClassVar[str] = "sandbox-ready"
    VERSION: ClassVar[int] = 1
    pid: int


@dataclass
class SandboxFailed(Message):
    """The sandbox could not be made (``reason``); nothing of the student's has run."""
    KIND: ClassVar[str] = "sandbox-failed"
    VERSION: ClassVar[int] = 1
    reason: str

    @classmethod
    def of(cls, error: BaseException) -> SandboxFailed:
        return cls(f"{type(error).__name__}: {error}"[:1000])


# ---------------------------------------------------------------- the recording process

@dataclass
class RecordRequest(Message):
    """Record (nbgrader autograde, then feedback) ``students`` of ``assignment`` from the ``staged`` folder."""
    KIND: ClassVar[str] = "record"
    VERSION: ClassVar[int] = 1
    assignment: str
    staged: str
    students: list[str]


@dataclass
class RecordAnswer(Message):
    """A batch is recorded (``error`` None) or what went wrong."""
    KIND: ClassVar[str] = "recorded"
    VERSION: ClassVar[int] = 1
    error: str | None


# ---------------------------------------------------------------- a grading worker's results

@dataclass
class NotebookResult(Message):
    """One notebook's outcome, from the worker that graded it to the engine, and on into the report."""
    KIND: ClassVar[str] = "notebook-result"
    VERSION: ClassVar[int] = 1
    student: str
    assignment: str
    notebook: str
    status: Status = Status.GRADED
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    execution_seconds: float = 0.0
    kernel_start: str = ""                                   # "warm" or "cold"
    timings: dict[str, float] = field(default_factory=dict)  # runner.Run.timings, rounded
    notes: list[str] = field(default_factory=list)
    verdicts: dict[str, float] = field(default_factory=dict)  # runner.Run.verdicts: grade id -> points earned

    def __post_init__(self):
        self.status = Status(self.status)   # from a report's JSON, the status comes back as its text
