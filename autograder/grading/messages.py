"""The grader's messages between its own processes: one dataclass each, versioned
(``autograder.kernel.vocabulary.messages`` says how a message is written and read back, and what a wrong version
or field does).

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
``CheckResult``         inside ``NotebookResult``                  one check of one graded cell, judged
``PredictionRead``      inside ``NotebookResult``                  one prediction cell, read without running it
``GradingReport``       grading command -> ``finish``, the feedback ``grading-report.json`` (and a shard's), through
                        service, the class report                  :meth:`GradingReport.read` and ``.write``
======================  =========================================  ==============================================

The sandbox policy a warm kernel is made with travels inside a ``ForkRequest`` as
``autograder.grading.isolate.policy.Policy``'s own message; an observation is
``autograder.kernel.vocabulary.messages.Observation``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from autograder.grading.status import Status
from autograder.kernel.vocabulary.messages import Message, MessageError, decode_one_of

__all__ = ["Message", "MessageError", "decode_one_of", "TemplateReady", "ForkRequest", "Forked", "StartCold",
           "ChildExited", "TEMPLATE_SAYS", "KernelStarted", "SandboxReady", "SandboxFailed", "RecordRequest",
           "RecordAnswer", "NotebookResult", "CheckResult", "PredictionRead", "GradingReport"]


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
class CheckResult(Message):
    """One check of one graded test cell, as the judge saw it (``autograder.grading.judging.outcomes``).

    ``part`` is ``visible`` (the test cell's visible checks, one entry, ``index`` 0) or ``hidden`` (hidden check
    ``index`` of ``of``, from 1). ``status``: :data:`CHECK_STATUSES`. ``failure``: what differed (a hidden check:
    ``values``, ``dtype``, ``shape``, ``type``, ... from ``observations.compare``; ``exception``, ``timeout``,
    ``malformed``, ``not-run``), "" when it passed. ``exception``: the type name of an exception, only one of
    :data:`autograder.grading.judging.outcomes.KNOWN_EXCEPTIONS` (anything else is ``other``). ``hint``: the
    check's hint as the course defines it (the reference's for a hidden check; for the visible part, the one
    literal of the instructor's visible test code or of the course's kernel package that the failure named), never
    the kernel's text."""
    KIND: ClassVar[str] = "check-result"
    VERSION: ClassVar[int] = 1
    grade_id: str
    part: str
    index: int
    of: int
    status: str
    failure: str = ""
    exception: str = ""
    hint: str = ""

    def __post_init__(self):
        if self.part not in _PARTS or self.status not in CHECK_STATUSES:
            raise MessageError("check-result: its part or its status is not one the grader writes")

    @classmethod
    def from_dict(cls, data: Any) -> CheckResult:
        """:meth:`Message.from_dict`, with a quick path for a well-formed one (a class's report holds tens of
        thousands): the same checks, written out for these fields; anything else takes the general path."""
        if type(data) is dict and data.keys() == _CHECK_KEYS and data["kind"] == cls.KIND and \
                data["version"] == cls.VERSION and type(data["index"]) is int and type(data["of"]) is int and \
                data["part"] in _PARTS and data["status"] in CHECK_STATUSES and type(data["grade_id"]) is str and \
                type(data["failure"]) is str and type(data["exception"]) is str and type(data["hint"]) is str:
            return cls(data["grade_id"], data["part"], data["index"], data["of"], data["status"], data["failure"],
                       data["exception"], data["hint"])
        return super().from_dict(data)


CHECK_STATUSES = ("passed", "failed", "error", "timeout", "not-run")
_PARTS = ("visible", "hidden")
_CHECK_FIELDS = ("grade_id", "part", "index", "of", "status", "failure", "exception", "hint")
_CHECK_KEYS = {"kind", "version", *_CHECK_FIELDS}


@dataclass
class PredictionRead(Message):
    """One prediction cell of a submitted notebook (``autograder.grading.intake.predictions``): its id and
    ``form`` (the cell's ``kind``: number, shape or choice) from the release, ``state`` (``answered``,
    ``not_answered``, ``unreadable``) and the literal (plain JSON) when answered."""
    KIND: ClassVar[str] = "prediction"
    VERSION: ClassVar[int] = 1
    id: str
    form: str
    state: str
    value: Any = None

    def __post_init__(self):
        if self.state not in ("answered", "not_answered", "unreadable"):
            raise MessageError("prediction: state is not one the grader writes")


@dataclass
class NotebookResult(Message):
    """One notebook's outcome, from the worker that graded it to the engine, and on into the report."""
    KIND: ClassVar[str] = "notebook-result"
    VERSION: ClassVar[int] = 2   # 2: checks and predictions
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
    checks: list[dict] = field(default_factory=list)          # CheckResult each (objects once read)
    predictions: list[dict] = field(default_factory=list)     # PredictionRead each (objects once read)

    def __post_init__(self):
        self.status = Status(self.status)   # from a report's JSON, the status comes back as its text
        self.checks = [CheckResult.from_dict(c) if isinstance(c, dict) else c for c in self.checks]
        self.predictions = [PredictionRead.from_dict(p) if isinstance(p, dict) else p for p in self.predictions]

    def to_dict(self) -> dict:
        data = super().to_dict()
        data["checks"] = [c.to_dict() for c in self.checks]
        data["predictions"] = [p.to_dict() for p in self.predictions]
        return data


# ---------------------------------------------------------------- the grading command's report

@dataclass
class GradingReport(Message):
    """``grading-report.json`` (or a shard's ``grading-report.shard-I-of-N.json``): what one grading run (``grade``)
    or the join of a class's shards (``finish``) wrote, read back by ``finish``, the feedback service and the
    class report through :meth:`read` alone. ``submissions``: one :class:`NotebookResult` per student and
    notebook (objects once read). A run's own fields are None in ``finish``'s report and the reverse."""
    KIND: ClassVar[str] = "grading-report"
    VERSION: ClassVar[int] = 1
    course: str
    partial: bool
    submissions: list[dict]
    # a grading run's
    jobs: int | None = None
    sandbox: str | None = None
    cgroups: str | None = None
    kernel_package: str | None = None
    settings: dict | None = None
    limits: dict | None = None
    gradebook_backup: str | None = None
    references: dict | None = None
    seconds: float | None = None
    # finish's
    finished_from: list[str] | None = None
    shard_count: int | None = None
    shards: dict | None = None
    not_graded: list[dict] | None = None
    graded_more_than_once: list[str] | None = None

    def __post_init__(self):
        self.submissions = [NotebookResult.from_dict(s) if isinstance(s, dict) else s for s in self.submissions]

    def to_dict(self) -> dict:
        data = super().to_dict()
        data["submissions"] = [s.to_dict() for s in self.submissions]
        return data

    def write(self, path: Path) -> None:
        """Write atomically (a reader never sees half a report), indented for a person."""
        path = Path(path)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")
        temporary.replace(path)

    @classmethod
    def read(cls, path: Path) -> GradingReport:
        """The report at ``path``; MessageError when it is not this version's (OSError when it cannot be read)."""
        return cls.decode(Path(path).read_bytes())
