"""Messages between processes: each has one typed definition with a version, round-trips, and refuses another
version or a malformed payload with an error that says which; the modules that speak them build no message by
hand."""
from __future__ import annotations

import ast
import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading import messages
from autograder.grading.messages import Message, MessageError
from autograder.grading.status import Status
from autograder.kernel.vocabulary import observations, protocol
from autograder.kernel.vocabulary.messages import Observation

ROOT = Path(__file__).resolve().parents[2]

SAMPLES = [
    Observation("test_f", 0, "f(x)", {"type": "tensor", "dtype": "torch.float32", "shape": [1], "values": [0.5]},
                1e-6, 0.0, "the misconception"),
    Observation("test_f", 1, "count", 3, 0.0, 0.0, None),
    messages.TemplateReady(123, 1.25),
    messages.ForkRequest(7, ["-m", "ipykernel_launcher", "-f", "k.json"], {"PATH": "/bin"}, "/tmp", 0o022, None),
    messages.ForkRequest(8, ["-m", "ipykernel_launcher"], {}, "/work", 0o077, {"version": 1, "uid": 65534}),
    messages.Forked(7, 4242),
    messages.Forked(8, 4243, sandboxed=True),
    messages.StartCold(9, "the template has 2 threads"),
    messages.ChildExited(4242, -9),
    messages.KernelStarted(),
    messages.SandboxReady(4243),
    messages.SandboxFailed("OSError: unshare: Operation not permitted"),
    messages.RecordRequest("01_tensors_and_views", "/course/.grading/staged", ["ann", "bob"]),
    messages.RecordAnswer(None),
    messages.RecordAnswer("nbgrader exited with 1"),
    messages.CheckResult("test_a", "hidden", 2, 3, "failed", "dtype", "", "the misconception"),
    messages.PredictionRead("01_x:shape", "shape", "answered", [2, 3]),
    messages.GradingReport("/course", True, [messages.NotebookResult("bob", "01_x", "01_x").to_dict()], jobs=2,
                           seconds=1.5, references={"01_x": {"source": "host"}}),
    messages.NotebookResult("ann", "01_x", "01_x", status=Status.TIMEOUT, reason="slow", score=1.5, max_score=3.0,
                            seconds=2.0, execution_seconds=1.0, kernel_start="warm", timings={"start": 0.2},
                            notes=["graded again alone"], verdicts={"test_a": 1.5},
                            checks=[messages.CheckResult("test_a", "visible", 0, 0, "error", "exception",
                                                         "ValueError").to_dict()],
                            predictions=[messages.PredictionRead("01_x:pick", "choice", "unreadable").to_dict()]),
]
IDS = [f"{type(m).__name__}-{i}" for i, m in enumerate(SAMPLES)]


def every_message_type() -> set[type]:
    return {kind for kind in vars(messages).values()
            if isinstance(kind, type) and issubclass(kind, Message) and kind is not Message}


def test_every_message_type_has_a_kind_a_version_and_a_sample():
    kinds = every_message_type() | {Observation}
    assert all(kind.KIND and kind.VERSION >= 1 for kind in kinds)
    assert len({kind.KIND for kind in kinds}) == len(kinds), "two message types share a kind"
    assert kinds == {type(sample) for sample in SAMPLES}, "a message type without a sample here"


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_a_message_round_trips(message):
    kind = type(message)
    assert kind.decode(message.encode()) == message
    assert kind.from_dict(message.to_dict()) == message
    assert messages.decode_one_of(message.encode(), kind, messages.StartCold, messages.RecordAnswer) == message
    wire = json.loads(message.encode())
    assert wire["kind"] == kind.KIND and wire["version"] == kind.VERSION
    assert b"\n" not in message.encode(), "a message is one line (the recorder's pipes read lines)"


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_a_message_of_another_version_is_refused_by_name(message):
    kind = type(message)
    for version in (kind.VERSION + 1, kind.VERSION - 1, None, "1"):
        wire = dict(message.to_dict(), version=version)
        with pytest.raises(MessageError, match=rf"{kind.KIND}.*version"):
            kind.decode(json.dumps(wire))
    del wire["version"]
    with pytest.raises(MessageError, match="version"):
        kind.from_dict(wire)


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_a_malformed_message_is_refused_with_what_is_wrong(message):
    kind = type(message)
    with pytest.raises(MessageError, match="not JSON"):
        kind.decode(message.encode()[:-1])
    with pytest.raises(MessageError, match="not JSON"):
        kind.decode(b"\xff\xfe")
    with pytest.raises(MessageError, match="JSON object"):
        kind.decode(b"[1, 2]")
    with pytest.raises(MessageError, match="kind"):
        kind.from_dict(dict(message.to_dict(), kind="something-else"))
    with pytest.raises(MessageError, match="unknown"):
        kind.from_dict(dict(message.to_dict(), surplus=1))
    for name in list(message.to_dict())[2:]:
        wire = message.to_dict()
        del wire[name]
        with pytest.raises(MessageError, match=rf"missing \['{name}'\]"):
            kind.from_dict(wire)
        if name != "value":   # an observation's value is any plain JSON: the judge checks it
            with pytest.raises(MessageError, match=rf"{kind.KIND}\.{name}"):
                kind.from_dict(dict(message.to_dict(), **{name: object()}))


def test_field_types_are_checked_inside_containers_and_never_echo_the_value():
    with pytest.raises(MessageError, match=r"fork\.argv\[1\]: int, expected str"):
        messages.ForkRequest.from_dict(dict(SAMPLES[3].to_dict(), argv=["-m", 1]))
    with pytest.raises(MessageError, match=r"fork\.env\['HOME'\]"):
        messages.ForkRequest.from_dict(dict(SAMPLES[3].to_dict(), env={"HOME": None}))
    with pytest.raises(MessageError, match=r"forked\.pid: bool, expected int"):
        messages.Forked.from_dict(dict(SAMPLES[5].to_dict(), pid=True))
    with pytest.raises(MessageError, match="status") as refused:
        messages.NotebookResult.from_dict(dict(SAMPLES[-1].to_dict(), status="SECRET-STATUS"))
    assert "SECRET" not in str(refused.value)
    assert messages.Forked.from_dict(dict(SAMPLES[5].to_dict())).sandboxed is False
    assert messages.NotebookResult.from_dict(dict(SAMPLES[-1].to_dict(), status="graded")).status is Status.GRADED


def test_the_grading_report_reads_each_result_and_check_through_their_own_definitions(tmp_path):
    """grading-report.json is one message: every submission in it a NotebookResult, every check a CheckResult,
    each refused by name when it is not this version's or has a field of its own."""
    report = messages.GradingReport("/course", False, [SAMPLES[-1].to_dict()], seconds=3.0)
    report.write(tmp_path / "grading-report.json")
    back = messages.GradingReport.read(tmp_path / "grading-report.json")
    assert back == report and back.submissions[0].checks[0].exception == "ValueError"
    assert back.submissions[0].predictions[0].state == "unreadable"
    wire = report.to_dict()
    for change, why in [
            (lambda w: w.update(version=2), r"'grading-report' message of version 2"),
            (lambda w: w.pop("kind") and w.pop("version"), "expected a 'grading-report' message"),
            (lambda w: w.update(extra=1), "and 1 unknown"),
            (lambda w: w["submissions"][0].update(version=1), r"'notebook-result' message of version 1"),
            (lambda w: w["submissions"][0]["checks"][0].update(secret="x"), "check-result.* and 1 unknown"),
            (lambda w: w["submissions"][0]["checks"][0].update(status="SECRET"), "status"),
            (lambda w: w["submissions"][0]["predictions"][0].update(state="run"), "prediction: state")]:
        broken = json.loads(json.dumps(wire))
        change(broken)
        (tmp_path / "broken.json").write_text(json.dumps(broken))
        with pytest.raises(MessageError, match=why) as refused:
            messages.GradingReport.read(tmp_path / "broken.json")
        assert "SECRET" not in str(refused.value)


def test_finish_refuses_a_shard_report_it_cannot_read_by_name(tmp_path):
    from autograder.grading.plan.planning import UsageError
    from autograder.grading.report import finish

    (tmp_path / "grading-report.shard-0-of-2.json").write_text(json.dumps({"submissions": []}))   # unversioned
    with pytest.raises(UsageError, match=r"grading-report.shard-0-of-2.json is not a grading report this version"):
        finish.read_report(tmp_path / "grading-report.shard-0-of-2.json")


def test_decode_one_of_names_the_kinds_it_takes():
    with pytest.raises(MessageError, match=r"kind 'exited', expected one of \['forked', 'start-cold'\]"):
        messages.decode_one_of(messages.ChildExited(1, 0).encode(), messages.Forked, messages.StartCold)


# ---------------------------------------------------------------- observations: the version travels in the MIME type

def test_an_observation_travels_under_a_mime_type_that_names_its_format():
    sent = SAMPLES[0]
    data = sent.display_data()
    assert list(data) == [observations.MIME] and f".v{observations.FORMAT}+" in observations.MIME
    assert Observation.VERSION == observations.FORMAT
    assert protocol.observations_in([{"output_type": "display_data", "data": data}]) == [sent]


@pytest.mark.parametrize("mime, why", [
    ("application/vnd.pte.observation+json", "without a format"),
    ("application/vnd.pte.observation.v2+json", "of format 2"),
    ("application/vnd.pte.observation.v0+json", "of format 0"),
])
def test_an_observation_of_another_format_is_seen_and_refused(mime, why):
    """Seen (kept out of feedback, counted, judged as a failure) and refused with the reason, never overlooked."""
    output = {"output_type": "display_data", "data": {mime: SAMPLES[0].display_data()[observations.MIME]}}
    assert protocol.is_observation(output)
    [read] = protocol.observations_in([output])
    assert isinstance(read, MessageError) and why in str(read) and "another version of autograder.kernel" in str(read)
    assert protocol.without_observations([output]) == []
    with pytest.raises(MessageError, match=why):
        protocol.Reference.entries([read])


def test_an_observation_payload_is_checked_field_by_field():
    fields = SAMPLES[0].display_data()[observations.MIME]
    for payload, why in ((dict(fields, index="0"), r"observation\.index"), (dict(fields, version=1), "MIME type"),
                         ({k: v for k, v in fields.items() if k != "test"}, "missing"), ("text", "JSON object")):
        [read] = protocol.observations_in([{"output_type": "display_data", "data": {observations.MIME: payload}}])
        assert isinstance(read, MessageError) and __import__("re").search(why, str(read)), (why, read)


# ---------------------------------------------------------------- the ends of each channel

def test_a_worker_result_of_another_version_is_a_grader_error_not_a_grade():
    from concurrent.futures import Future

    from autograder.grading.plan import job as jobs
    from autograder.grading.plan import settings
    from autograder.grading.run import engine

    limits = settings.Limits(timeout_s=1, cell_timeout_s=1, memory_mb=100, output_mb=1, threads=1, sandbox=False,
                             processes=8, disk_mb=8)
    job = jobs.Job("ann", "01_x", {"01_x": 3.0}, {}, jobs.Paths(*(["."] * 6)), limits)
    done = Future()
    done.set_result([dict(SAMPLES[-1].to_dict(), version=99, status="graded", score=3.0)])
    [result] = engine.Engine.outcome_of(None, done, job)
    assert result.status == Status.ERROR and "version 99" in result.reason and result.score == 0.0
    done = Future()
    done.set_result([SAMPLES[-1].to_dict()])
    assert engine.Engine.outcome_of(None, done, job) == [SAMPLES[-1]]


def test_the_recording_process_answers_a_request_it_cannot_read_with_why():
    from autograder.grading.record import recording

    answer = recording._record("/nonexistent", json.dumps(dict(SAMPLES[12].to_dict(), version=2)).encode())
    assert isinstance(answer, messages.RecordAnswer) and "version 2" in answer.error


def test_the_relay_and_the_template_read_each_others_answers_or_start_cold():
    from autograder.warm import isolate, template

    assert template._sandbox_answer(messages.SandboxReady(77).encode()) == messages.SandboxReady(77)
    failed = template._sandbox_answer(messages.SandboxFailed("no pivot_root").encode())
    assert failed == messages.SandboxFailed("no pivot_root")
    assert "without an answer" in template._sandbox_answer(b"").reason
    assert "cannot be read" in template._sandbox_answer(b"P77").reason   # the old encoding is no answer
    assert isinstance(isolate._init_answer(messages.KernelStarted().encode()), messages.KernelStarted)
    assert "ended before the kernel started" in isolate._init_answer(b"").reason
    assert "cannot read" in isolate._init_answer(b"K").reason
    assert "ValueError: bad" in messages.SandboxFailed.of(ValueError("bad")).reason


def test_a_template_that_sends_what_the_launcher_cannot_read_is_gone_with_the_reason():
    from autograder.warm import pool

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    fake = object.__new__(pool.Template)   # the launcher's side alone, its template a stand-in process
    fake.__dict__.update(sock=ours, proc=subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]),
                         pid=0, ready=None, replies={}, exits={}, eof=False, unreadable="", started=0.0)
    fake._lock = __import__("threading").Lock()
    try:
        theirs.send(json.dumps(dict(messages.TemplateReady(1, 0.5).to_dict(), version=2)).encode())
        with pytest.raises(pool.TemplateGone, match="cannot read.*version 2"):
            asyncio.run(fake.wait_ready(timeout=5))
        assert fake.proc.wait(timeout=5) is not None, "the unreadable template was not ended"
    finally:
        fake.proc.kill()
        ours.close()
        theirs.close()


# ---------------------------------------------------------------- no message built by hand

SPEAKERS = ["autograder/warm/template.py", "autograder/warm/pool.py", "autograder/warm/provisioner.py",
            "autograder/warm/isolate.py", "autograder/grading/record/recording.py",
            "autograder/grading/run/worker.py", "autograder/grading/run/engine.py", "autograder/grading/plan/job.py",
            "autograder/grading/judging/judge.py", "autograder/grading/report/reporting.py",
            "autograder/grading/report/finish.py", "autograder/classreport/data.py", "autograder/service/service.py"]
HASHING = {("autograder/warm/pool.py", "template_key")}   # json.dumps of a key to hash, not a message


def _encoded(node) -> bool:
    """``message.encode()`` (or that and a newline), not text made by hand and then encoded."""
    if isinstance(node, ast.BinOp):
        return _encoded(node.left)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "encode"):
        return False
    made = node.func.value
    return not isinstance(made, (ast.Constant, ast.JoinedStr, ast.BinOp)) and not (
        isinstance(made, ast.Call) and isinstance(made.func, ast.Attribute) and made.func.attr == "dumps")


def _by_hand(node: ast.Call, hashing: bool) -> list[str]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    target = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
    found = []
    if target == "json" and name in ("dumps", "loads", "dump", "load") and not hashing:
        found.append(f"json.{name}")
    if name == "asdict":
        found.append("asdict")
    if name in ("NotebookResult", "ForkRequest") and any(k.arg is None for k in node.keywords):
        found.append(f"{name}(**...)")
    if name == "write" and target == "os" and not _encoded(node.args[1]):
        found.append("os.write of raw bytes")
    if name == "send" and node.args and not _encoded(node.args[0]):
        found.append("send of raw bytes")
    if name == "send_fds" and not all(_encoded(item) for item in getattr(node.args[1], "elts", [None])):
        found.append("send_fds of raw bytes")
    if name == "write" and isinstance(func.value, ast.Attribute) and func.value.attr == "stdin" and \
            not _encoded(node.args[0]):
        found.append("a write to a process's stdin of raw text")
    return found


def hand_built(source: str, module: str) -> list[str]:
    """Where ``source`` encodes or decodes a message by hand: a JSON call, a dataclass turned into a dict, a
    ``**`` of a received dict into a message type, or a write/send of anything but a message's ``encode()``."""
    tree = ast.parse(source)
    owners = {}
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                owners.setdefault(node, function.name)
    return [f"{module}:{node.lineno}: {problem}" for node in ast.walk(tree) if isinstance(node, ast.Call)
            for problem in _by_hand(node, (module, owners.get(node)) in HASHING)]


@pytest.mark.parametrize("module", SPEAKERS)
def test_the_modules_that_speak_between_processes_send_only_messages(module):
    assert hand_built((ROOT / module).read_text(), module) == []


def test_the_check_for_hand_built_messages_finds_them():
    """What the modules did before they had message types, each found."""
    old = ('import json, os\nfrom dataclasses import asdict\n'
           'def f(sock, request, proc, report, r):\n'
           '    sock.send(json.dumps({"ready": 1}).encode())\n'
           '    os.write(report, b"P%d" % os.getpid())\n'
           '    proc.stdin.write(json.dumps(request) + "\\n")\n'
           '    return [asdict(r)], NotebookResult(**r), json.loads(r)\n')
    found = sorted(line.split(": ", 1)[1] for line in hand_built(old, "old"))
    assert found == sorted(["json.dumps", "send of raw bytes", "os.write of raw bytes", "json.dumps", "asdict",
                            "a write to a process's stdin of raw text", "NotebookResult(**...)", "json.loads"])
