"""Recording: nbgrader's own autograde and feedback steps write what the grader executed into the gradebook,
``autograded/`` and ``feedback/``, batch after batch while other submissions still run.

The grader side: :class:`Recorder` keeps one recording process for the whole run (its log is
``phase2.log`` in the run's work folder), :func:`next_batch` is the batching policy, and
:func:`record_batch` the retry policy (a batch nbgrader cannot record is recorded one student at a time).

The recording process: ``python -m autograder.grading.record.recording --serve COURSE_DIR FD`` (:func:`serve`:
:class:`~autograder.grading.messages.RecordRequest` messages on stdin, a
:class:`~autograder.grading.messages.RecordAnswer` for each on the pipe ``FD``), or
``python -m autograder.grading.record.recording COURSE_DIR ASSIGNMENT STAGED_DIR [STUDENT ...]`` for one batch.
nbgrader reads the staged submissions (the grader's executed, canonical notebooks) as if
they were the submitted ones, sanitizes them as usual, and then, instead of executing
them again, :class:`LoadStaged` puts the executed cells back. The rest is nbgrader's:
scores and comments into the gradebook (manual grades kept), late penalties, the
``autograded/`` copies, and the HTML feedback.
"""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import nbformat
from jinja2 import BytecodeCache
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Unicode
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.grading import private_apis
from autograder.grading.messages import MessageError, RecordAnswer, RecordRequest
from autograder.grading.plan.settings import RECORD_BATCH, RECORDER_STOP_S


class LoadStaged(NbGraderPreprocessor):
    """Replace the notebook's cells with the executed cells staged by the grader."""

    staged_root = Unicode("", help="folder holding <student>/<assignment>/<notebook>.ipynb").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = Path(self.staged_root) / info["student"] / info["assignment"] / f"{info['notebook']}.ipynb"
        staged = nbformat.read(path, as_version=4)
        nb.cells = staged.cells
        return nb, resources


def autograde_preprocessors(course_dir: Path) -> list:
    """nbgrader's own autograde steps, as the course's config sets them (nbgrader's default list otherwise),
    with only the execution step swapped for :class:`LoadStaged`: the grader has run the notebook already."""
    from nbgrader.converters import Autograde

    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    config_file = Path(course_dir) / "nbgrader_config.py"
    if config_file.is_file():
        config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
        steps = list(config.get("Autograde", {}).get("autograde_preprocessors", steps))
    swapped = [LoadStaged if isinstance(step, type) and issubclass(step, Execute) else step for step in steps]
    if LoadStaged not in swapped:
        raise RuntimeError("the course's Autograde.autograde_preprocessors has no Execute step to replace")
    return swapped


def others(folder: Path, assignment: str, batch: list[str]) -> str:
    """nbgrader's ``student_id_exclude``: every student with ``<student>/<assignment>`` under ``folder`` who is
    not in ``batch``, so that a run records and returns feedback to the batch alone."""
    if not folder.is_dir():
        return ""
    present = {p.name for p in folder.iterdir() if (p / assignment).is_dir()}
    return ",".join(sorted(present - set(batch)))


def runs_no_notebook(config: Config, converter: str) -> None:
    """Refuse (RuntimeError) a configuration that would execute a notebook here. The recording process is no
    sandbox: it runs as the grader, so a step that starts a kernel would run the student's code unconfined. The
    grader's own list of autograde steps drops nbgrader's Execute; a course's ``nbgrader_config.py`` may still name
    an executing step in another list, which no setting of ours replaces."""
    from nbconvert.preprocessors import ExecutePreprocessor
    from traitlets.utils.importstring import import_item

    for section in (converter, *EXPORTERS):
        for key in ("autograde_preprocessors", "sanitize_preprocessors", "preprocessors"):
            for step in config.get(section, {}).get(key, None) or []:
                found = import_item(step) if isinstance(step, str) else step
                if isinstance(found, type) and issubclass(found, ExecutePreprocessor):
                    raise RuntimeError(f"{section}.{key} names {found.__name__}, which executes the notebook: the "
                                       "recording step never runs a notebook (the grader has run it in its sandbox)")


# besides the converter's own (Autograde, GenerateFeedback), the sections whose preprocessor lists it reads
EXPORTERS = ("BaseConverter", "Exporter", "TemplateExporter", "HTMLExporter", "NotebookExporter")


def run_app(app_class, config: Config, assignment: str) -> Path:
    """One nbgrader app, configured before initialize() so that the course directory sees it, and again after,
    since initialize() loads the course's ``nbgrader_config.py`` over it: what the grader sets (the steps with
    Execute swapped, which students, which folders) is never the course's to undo; returns the course's
    autograded folder."""
    app = app_class.instance(config=config)
    try:
        app.initialize([assignment, "--log-level=ERROR"])
        app.update_config(config)
        app.coursedir.update_config(config)
        runs_no_notebook(app.config, app_class.__name__.removesuffix("App"))
        app.start()
        coursedir = app.coursedir
    finally:   # the next batch gets an app of its own, with its own configuration
        app_class.clear_instance()
    return Path(coursedir.format_path(coursedir.autograded_directory, ".", ".")).resolve()


def main(argv: list[str]) -> int:
    """COURSE_DIR ASSIGNMENT STAGED_DIR [STUDENT ...]: record the given students (every staged one if none)."""
    course_dir, assignment, staged = argv[:3]
    students = argv[3:]
    from nbgrader.apps import AutogradeApp, GenerateFeedbackApp

    root = Path(course_dir).resolve()
    staged_abs = Path(staged).resolve()
    grading = Config()
    grading.CourseDirectory.root = str(root)
    grading.CourseDirectory.submitted_directory = str(staged_abs.relative_to(root))
    grading.LoadStaged.staged_root = str(staged_abs)
    grading.Autograde.autograde_preprocessors = autograde_preprocessors(root)
    grading.Autograde.create_student = True
    grading.BaseConverter.force = True
    feedback = Config()
    feedback.CourseDirectory.root = str(root)
    feedback.BaseConverter.force = True
    if len(students) == 1:
        grading.CourseDirectory.student_id = feedback.CourseDirectory.student_id = students[0]
    elif students:   # a batch: the students recorded before it keep their records and feedback as they are
        grading.CourseDirectory.student_id_exclude = others(staged_abs, assignment, students)
    graded = run_app(AutogradeApp, grading, assignment)
    if len(students) > 1:
        feedback.CourseDirectory.student_id_exclude = others(graded, assignment, students)
    run_app(GenerateFeedbackApp, feedback, assignment)
    return 0


class CompiledTemplates(BytecodeCache):
    """Jinja's bytecode cache, in memory: each batch's feedback app builds a new nbconvert exporter, whose new
    Jinja environment compiled the nine feedback templates again (0.35 s a batch). Jinja checks each entry
    against its template's source, so an edited template is compiled anew."""

    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


def compile_templates_once() -> CompiledTemplates:
    """Give every nbconvert exporter this process makes one :class:`CompiledTemplates` (returned)."""
    from nbconvert.exporters.templateexporter import TemplateExporter

    create, cache = private_apis.get(private_apis.CREATE_ENVIRONMENT), CompiledTemplates()

    def with_cache(self):   # named as the method it stands for
        environment = create(self)
        environment.bytecode_cache = cache
        return environment

    setattr(TemplateExporter, private_apis.CREATE_ENVIRONMENT.name, with_cache)
    return cache


def serve(course_dir: str, answer_fd: int) -> int:
    """``--serve COURSE_DIR FD``: record batch after batch in one process, so that nbgrader is imported (and its
    templates compiled) once per grading run rather than once per batch. Each line on stdin is a
    :class:`RecordRequest`; each answer is a :class:`RecordAnswer`, one line on the pipe ``FD``, whose ``error`` is
    None or what went wrong. Whatever nbgrader prints goes to stdout and stderr, never into the answers."""
    compile_templates_once()
    with os.fdopen(answer_fd, "wb") as answers:
        for line in sys.stdin.buffer:
            answers.write(_record(course_dir, line).encode() + b"\n")
            answers.flush()
    return 0


def _record(course_dir: str, line: bytes) -> RecordAnswer:
    try:
        request = RecordRequest.decode(line)
    except MessageError as exc:
        return RecordAnswer(f"the recording process cannot read its request: {exc}")
    try:
        main([course_dir, request.assignment, request.staged, *request.students])
        return RecordAnswer(None)
    except SystemExit as exc:   # nbgrader's apps exit when a step fails
        return RecordAnswer(None if exc.code in (0, None) else f"nbgrader exited with {exc.code}")
    except Exception:  # reported to the grader, which records the batch's students one by one
        return RecordAnswer(traceback.format_exc()[-2000:])



# ---------------------------------------------------------------- the grader's side

class Recorder:
    """nbgrader's recording step (:func:`serve`) in one process for the whole run, fed
    one batch at a time: nbgrader and its templates load once, not once per batch. A batch that fails or
    runs too long is reported; a process that dies or hangs is replaced for the next batch. Its output goes
    to ``.grading/phase2.log``."""

    def __init__(self, course: Path, log: Path):
        self.course, self.log = course, log
        self.proc: subprocess.Popen | None = None
        log.write_bytes(b"")   # this run's alone

    def start(self) -> None:
        answers_r, answers_w = os.pipe()
        try:
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen([sys.executable, "-m", __name__, "--serve", str(self.course),
                                              str(answers_w)], cwd=self.course, stdin=subprocess.PIPE,
                                             stdout=log, stderr=log, pass_fds=(answers_w,))
        finally:
            os.close(answers_w)   # the process's copy is the only one: EOF when it ends
        self.answers: queue.Queue = queue.Queue()

        def read(stream, answers):
            with stream:
                for line in stream:
                    answers.put(line)
            answers.put(None)   # the process ended

        threading.Thread(target=read, args=(os.fdopen(answers_r, "rb"), self.answers), daemon=True).start()

    def record(self, assignment: str, staged_root: Path, students: list[str], timeout_s: float) -> str | None:
        """Autograde and feedback for ``students`` of ``assignment``; returns an error text or None."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        logged = self.log.stat().st_size
        request = RecordRequest(assignment, str(staged_root), list(students))
        try:
            self.proc.stdin.write(request.encode() + b"\n")
            self.proc.stdin.flush()
            answer = self.answers.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            return f"nbgrader's recording step ran longer than {timeout_s:g} s"
        except OSError:   # the process is gone
            answer = None
        if answer is None:
            self.stop()
            with open(self.log, "rb") as log:
                log.seek(logged)
                return "nbgrader's recording process ended: " + log.read().decode(errors="replace")[-2000:]
        try:
            error = RecordAnswer.decode(answer).error
        except MessageError as exc:   # the process is not this grader's: it is not used again
            self.stop()
            return f"nbgrader's recording process answered what this grader cannot read: {exc}"
        if error:
            with open(self.log, "rb") as log:
                log.seek(logged)
                error = (log.read().decode(errors="replace") + error).strip()[-2000:]
        return error

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=RECORDER_STOP_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def next_batch(waiting: dict[str, list[str]], unsettled: dict[str, int], jobs: int) -> tuple[str, list[str]] | None:
    """The batching policy: the students nbgrader records next, or None to wait for more. An assignment whose
    submissions are all in, any :data:`RECORD_BATCH` students of one assignment, and near the end of the run
    (no more than ``jobs`` + :data:`RECORD_BATCH` submissions left) whatever is waiting, as soon as the
    recording process is free. So the batch still recording when the last notebook ends is a small one, and
    so is the one after it, the only recording that overlaps nothing (a batch of 8 begun just before the end
    kept lesson 01's class of 12 waiting 8 s). The batch leaves ``waiting``."""
    ending = sum(unsettled.values()) <= jobs + RECORD_BATCH
    for assignment, students in sorted(waiting.items(), key=lambda item: unsettled[item[0]]):
        if students and (ending or not unsettled[assignment] or len(students) >= RECORD_BATCH):
            waiting[assignment] = []
            return assignment, students
    return None


def record_batch(run, recorder: Recorder, assignment: str, students: list[str]) -> set[tuple[str, str]]:
    """Phase 2 for some students of one assignment (one writer to the gradebook at a time); returns those
    nbgrader could not record, found one by one without losing the others."""
    staged = Path(run.paths.staged)
    students = sorted(s for s in students if (staged / s / assignment).is_dir())
    timeout = run.settings.phase2_timeout_s
    if not students or not recorder.record(assignment, staged, students, timeout):
        return set()
    if len(students) == 1:
        return {(students[0], assignment)}
    return {(s, assignment) for s in students if recorder.record(assignment, staged, [s], timeout)}


def leave(code: int) -> None:
    """End the recording process once the grader has closed its requests: every batch was answered after
    nbgrader had written it (the gradebook committed, the files closed), so what is left is the interpreter's
    teardown of nbgrader, nbconvert and SQLAlchemy, 0.3 s the grading command waited for at its end. The log's
    buffers are flushed; the rest is skipped (os._exit)."""
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        leave(serve(sys.argv[2], int(sys.argv[3])))
    sys.exit(main(sys.argv[1:]))


def record_verdicts(coursedir, results) -> None:
    """One score everywhere: where the gradebook holds a grade other than the judge's verdict (a preprocessor of
    the course's nbgrader config changed what nbgrader read; ``reporting.check_verdicts`` has made the notebook
    ``error``), the judge's points are written into that grade's ``auto_score``, the field nbgrader's formgrader,
    its exports, the LMS exports (``autograder/lms.py``) and ``grades.csv`` read, each such notebook's score is
    read back and its feedback made again (nbgrader's, from the corrected gradebook). A notebook nbgrader never
    recorded is left alone (no score, with its error)."""
    from nbgrader.api import Gradebook, MissingEntry

    corrected: set[tuple[str, str]] = set()
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for result in (r for r in results if r.verdicts):
            try:
                notebook = gb.find_submission_notebook(result.notebook, result.assignment, result.student)
            except MissingEntry:
                continue
            wrong = [grade for grade in notebook.grades if grade.name in result.verdicts
                     and (grade.auto_score is None or abs(grade.auto_score - result.verdicts[grade.name]) > 1e-6)]
            for grade in wrong:
                grade.auto_score = result.verdicts[grade.name]
            if wrong:
                gb.db.commit()
                gb.db.refresh(notebook)
                result.score = float(notebook.score or 0.0)
                corrected.add((result.student, result.assignment))
    for student, assignment in sorted(corrected):   # the page showed nbgrader's scores: made again from the judge's
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", assignment, "--student", student,
                        "--force", "--log-level=ERROR"], cwd=coursedir.root, capture_output=True, timeout=600)
