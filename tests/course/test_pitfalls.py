"""Every listed pitfall fails its exercise's visible checks, with its message, and its hidden checks.

One kernel per lesson. It runs, in order, the solution notebook's Setup, its answer cells, the
visible part of its test cells and the cells that define names the tests use (``cells_to_run``), in
``solutions/<lesson>/``, where the hidden checks find the reference observations (the hidden parts
run when an answer is judged; nbval's run of solutions/ compares the solution's in the kernel). Then,
for each wrong answer in ``tests/course/pitfalls/<lesson>.py``, it defines the wrong answer and
runs the test cell of its exercise in two parts:

- the visible part, as a student runs it: it must stop with a ``CheckFailed`` whose
  message is the one stored in ``tests/course/pitfalls/<lesson>.messages.json`` (numbers
  masked). A pitfall that stops failing, or a message that changes, fails here. After an
  intended change of message, rewrite the file with ``PTE_UPDATE_MESSAGES=1`` (for the
  whole lesson: the file is written afresh);
- the hidden part, recording, as under ``python -m autograder grade``: the grader's own
  judge must reject its observations.

``RULES`` holds, for each exercise, one wrong answer per rule of its spec: the spec's markdown cell lists its
rules under a lead-in line "The contract ...:" (or "The rules ...:"), one bullet a rule, each bullet opening with a
bold key (``- **own storage**: ...``), and ``RULES[exercise][key]`` breaks that rule alone. Every
bullet has a row, every row names a bullet, and each row's wrong answer loses the exercise's points
(its hidden part is rejected, as for ``PLAUSIBLE``).

``HIDDEN_ONLY`` answers must pass the visible part and fail only the hidden one. ``PLAUSIBLE``
answers are the mistakes students make that the spec's pitfall list does not name; they must
fail the hidden part (the visible one may catch them too). ``RIGHT_ANSWERS`` are correct answers
written differently; they must pass both. Before
any wrong answer, the solution's own observations must be accepted by the judge.

Every lesson is held to more. Everything computed in the student's kernel is the
student's, so a boolean observation ("is it a view?", "did the tripwire fire?") can be
forged: every wrong answer must also be rejected with each observation that holds a
boolean granted (replaced by the reference's), so that a value observation carries it.
``BOOLEAN_RESULTS`` names the exercises whose function returns the bool that is observed
(nothing to forge but the answer), ``NO_VALUE_SIGNATURE`` the pitfalls that have no value
signature at all (the exercise's spec says so). Each ``FORGERIES`` entry
(a wrong answer plus a trick that forges the evidence) runs in a kernel of its own, so its
patches reach nothing else, and the judge must reject it.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from autograder import course, warm
from autograder.grading.judging import judge
from autograder.kernel.vocabulary import messages, protocol

import coursekit as kit
from kernelkit import Kernel

LESSONS = course.lessons()
UPDATE = os.environ.get("PTE_UPDATE_MESSAGES") == "1"
HIDDEN_START, HIDDEN_END = protocol.HIDDEN_BEGIN, protocol.HIDDEN_END


def split_test(source: str) -> tuple[str, str]:
    visible, rest = source.split(HIDDEN_START, 1)
    hidden, after = rest.split(HIDDEN_END, 1)
    return visible, hidden + after


def mask(message: str) -> str:
    """The message with decimal numbers masked (they may move in the last digit between machines), and the
    index of the largest difference too: where several elements differ by about as much (a forgotten bias
    shifts a whole column), another CPU's rounding picks another one."""
    message = re.sub(r"-?\d+\.\d+(?:e[-+]?\d+)?", "#", message.strip())
    return re.sub(r"at index \([\d, ]*\)", "at index (#)", message)


def cases(kind: str) -> list[tuple[str, str, str]]:
    found = []
    for lesson in LESSONS:
        module = kit.load_pitfall_module(lesson)
        for exercise, wrong in (getattr(module, kind, None) or {}).items():
            found += [(lesson, exercise, description) for description in wrong]
    return found


def holds_boolean(value) -> bool:
    """Does an encoded observation hold a boolean anywhere (then the kernel could forge it)?"""
    if isinstance(value, bool):
        return True
    if isinstance(value, dict) and value.get("type") in ("list", "tuple"):
        return any(holds_boolean(item) for item in value.get("items", []))
    if isinstance(value, dict) and value.get("type") == "dict":
        return any(holds_boolean(item) for item in value.get("items", {}).values())
    return False


def grant_booleans(reference: list[dict], payloads: list) -> list:
    """The payloads as a forger who controls every boolean observation would make them."""
    granted = []
    for index, payload in enumerate(payloads):
        if index < len(reference) and holds_boolean(reference[index]["value"]) and \
                isinstance(payload, messages.Observation):
            payload = dataclasses.replace(payload, value=reference[index]["value"])
        granted.append(payload)
    return granted


def names(source: str) -> tuple[set[str], set[str]]:
    """(read, bound): the names a cell reads and the names it binds anywhere in it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return read, bound


def cells_to_run(nb) -> list:
    """What the pitfall kernel runs: the Setup section, every answer and test cell, and any other cell
    that binds a name a test cell reads without binding it (nothing else defines). The demos are
    nbval's business; skipping them makes the kernel's start a few seconds instead of a whole lesson."""
    code = [c for c in nb.cells if c.cell_type == "code" and protocol.REQUIRES_CUDA not in protocol.tags(c)]
    needed = set()
    for cell in code:
        if kit.nbgrader_meta(cell).get("grade"):
            read, bound = names(cell.source)
            needed |= read - bound
    chosen, in_setup, defined = set(), True, set()
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## ") and "Setup" not in cell.source.split("\n")[0]:
            in_setup = False
        meta = kit.nbgrader_meta(cell)
        if cell.cell_type == "code" and (in_setup or meta.get("solution") or meta.get("grade")):
            chosen.add(id(cell))
            defined |= names(cell.source)[1]
    missing = needed - defined
    return [cell for cell in code if id(cell) in chosen or names(cell.source)[1] & missing]   # in notebook order


class LessonSession:
    """The lesson's kernel after the solution's setup, answers and tests, and the outcome of every wrong answer."""

    def __init__(self, lesson: str):
        """Of each test cell the set-up runs the visible part: the hidden parts run, recording, when an answer is
        judged, and nbval's run of solutions/ compares them in the kernel (no cell reads a name only a hidden part
        binds)."""
        self.lesson = lesson
        self.nb = nbformat.read(course.solution_path(lesson), as_version=4)
        self.exercises = kit.exercises(self.nb)
        self.reference = judge.load_reference(course.REPO_ROOT / "solutions", lesson)
        # warm: forked from a template (tests/e2e/test_warm_kernels.py proves it changes no observation)
        self.kernel = Kernel(course.solution_path(lesson).parent, kernel_name=warm.KERNEL_NAME,
                             env=dict(os.environ, PTE_OBSERVE="compare", MPLBACKEND="agg"))
        self.setup_error = None
        self.outcomes: dict[tuple[str, str], dict] = {}
        hidden_bound: set[str] = set()
        for cell in cells_to_run(self.nb):
            graded = kit.nbgrader_meta(cell).get("grade") and HIDDEN_START in cell.source
            source = split_test(cell.source)[0] if graded else cell.source
            read, bound = names(source)
            if (read - bound) & hidden_bound:
                self.setup_error = f"cell {cell.get('id')} reads {sorted(read & hidden_bound)}, bound by a hidden part"
                break
            hidden_bound = (hidden_bound | (names(cell.source)[1] - bound if graded else set())) - bound
            result = self.kernel.run(source, timeout=300)
            if result.status != "ok" and "raises-exception" not in " ".join(cell.metadata.get("tags", [])):
                self.setup_error = f"cell {cell.get('id')} of the solution failed: {result.ename}: {result.evalue}"
                break

    def hidden_run(self, exercise: str) -> tuple[list, bool]:
        """The hidden part, recording: (the observation payloads it published, whether it ran to its end)."""
        _, hidden = split_test(self.exercises[exercise]["test"].source)
        self.kernel.run("import os; os.environ['PTE_OBSERVE'] = 'record'")
        try:
            result = self.kernel.run(hidden, timeout=300)
        finally:
            self.kernel.run("import os; os.environ['PTE_OBSERVE'] = 'compare'")
        payloads = protocol.observations_in([{"output_type": "display_data", "data": d} for d in result.displays])
        return payloads, result.status == "ok"

    def hidden_verdict(self, exercise: str) -> judge.Verdict:
        payloads, finished = self.hidden_run(exercise)
        return judge.judge_cell(self.reference.get(f"test_{exercise}", []), payloads, finished)

    def try_answer(self, exercise: str, answer: str) -> dict:
        """Define ``answer``, run the visible and hidden parts, restore the solution.

        ``hidden`` is the judge's verdict; ``on_values`` the verdict with every boolean observation
        granted (see :func:`grant_booleans`). The same answer to the same exercise runs once per kernel: a
        ``RULES`` row is often word for word a ``PITFALLS`` or ``PLAUSIBLE`` row (the rule it breaks is the
        pitfall), and its test then asserts its own property on the outcome already observed.
        """
        key = (exercise, answer)
        if key not in self.outcomes:
            self.outcomes[key] = self._try_answer(exercise, answer)
        return self.outcomes[key]

    def _try_answer(self, exercise: str, answer: str) -> dict:
        entry = self.exercises[exercise]
        defined = self.kernel.run(answer)
        visible, _ = split_test(entry["test"].source)
        seen = self.kernel.run(visible, timeout=300)
        payloads, finished = self.hidden_run(exercise)
        reference = self.reference.get(f"test_{exercise}", [])
        verdict = judge.judge_cell(reference, payloads, finished)
        on_values = judge.judge_cell(reference, grant_booleans(reference, payloads), finished)
        restored = self.kernel.run(kit.solution_body(entry["solution"].source))
        assert restored.status == "ok", f"the solution of {exercise} did not run: {restored.ename}: {restored.evalue}"
        return {"defined": defined, "visible": seen, "hidden": verdict, "on_values": on_values}


_sessions: dict[str, LessonSession] = {}


def session(lesson: str) -> LessonSession:
    if lesson not in _sessions:
        _sessions[lesson] = LessonSession(lesson)
    found = _sessions[lesson]
    assert found.setup_error is None, found.setup_error
    return found


@pytest.fixture(scope="module", autouse=True)
def close_kernels():
    yield
    for found in _sessions.values():
        found.kernel.close()
    _sessions.clear()


def messages_file(lesson: str) -> Path:
    return kit.PITFALL_DIR / f"{lesson}.messages.json"


_messages: dict[str, dict] = {}


def stored_message(lesson: str, key: str, actual: str) -> str | None:
    path = messages_file(lesson)
    if lesson not in _messages:
        # an update starts afresh, so renamed or removed pitfalls leave nothing behind: update whole lessons
        _messages[lesson] = json.loads(path.read_text()) if path.exists() and not UPDATE else {}
    if UPDATE:
        _messages[lesson][key] = actual
        path.write_text(json.dumps(dict(sorted(_messages[lesson].items())), indent=1, ensure_ascii=False) + "\n")
    return _messages[lesson].get(key)


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_observations_are_accepted(lesson):
    """The judge accepts what the solution records: the reference observations are current."""
    found = session(lesson)
    for exercise in found.exercises:
        verdict = found.hidden_verdict(exercise)
        assert verdict.passed, f"{lesson} test_{exercise}: {verdict.reason} (run `make release`)"


@pytest.mark.parametrize("lesson,exercise,description", cases("PITFALLS"))
def test_pitfall_fails_visible_and_hidden_checks(lesson, exercise, description):
    answer = kit.load_pitfalls(lesson)[exercise][description].strip("\n")
    outcome = session(lesson).try_answer(exercise, answer)
    visible, verdict = outcome["visible"], outcome["hidden"]
    assert visible.status == "error" and visible.ename == "CheckFailed", (
        f"'{description}' passes the visible checks of {exercise} ({visible.ename}: {visible.evalue})")
    assert len(visible.evalue.strip()) > 20, f"'{description}': the message does not explain: {visible.evalue!r}"
    expected = stored_message(lesson, f"{exercise}: {description}", mask(visible.evalue))
    assert expected is not None, (f"no stored message for '{description}' in {messages_file(lesson).name}: "
                                  "run with PTE_UPDATE_MESSAGES=1 once and review the file")
    assert mask(visible.evalue) == mask(expected), f"the message for '{description}' changed"
    assert not verdict.passed, f"'{description}' passes the hidden checks of {exercise}"
    check_rejected_on_values(lesson, exercise, description, outcome)


def check_rejected_on_values(lesson: str, exercise: str, description: str, outcome: dict) -> None:
    """A value observation rejects the wrong answer, not only a (forgeable) boolean."""
    module = kit.load_pitfall_module(lesson)
    if exercise in getattr(module, "BOOLEAN_RESULTS", ()):
        return
    if description in (getattr(module, "NO_VALUE_SIGNATURE", {}) or {}).get(exercise, {}):
        return
    assert not outcome["on_values"].passed, (
        f"'{description}' is rejected only by boolean observations of {exercise}, which the student's kernel "
        "can forge: observe a value that the pitfall changes")


@pytest.mark.parametrize("lesson,exercise,description", cases("HIDDEN_ONLY"))
def test_hidden_only_wrong_answer_fails_only_hidden_checks(lesson, exercise, description):
    """Grade with what grades: this wrong answer passes every visible check and fails a hidden one."""
    answer = kit.load_pitfall_module(lesson).HIDDEN_ONLY[exercise][description].strip("\n")
    outcome = session(lesson).try_answer(exercise, answer)
    assert outcome["visible"].status == "ok", f"'{description}' fails a visible check: {outcome['visible'].evalue}"
    assert not outcome["hidden"].passed, f"'{description}' passes the hidden checks of {exercise}"
    check_rejected_on_values(lesson, exercise, description, outcome)


@pytest.mark.parametrize("lesson,exercise,description", cases("PLAUSIBLE"))
def test_plausible_wrong_answer_loses_its_points(lesson, exercise, description):
    """A wrong answer a student would really write, that the spec's pitfall list does not name (a rule stated
    but not listed, a weaker property, a state left changed, a clean-up only on success): the hidden checks
    reject it. A visible check may catch it too; it need not."""
    answer = kit.load_pitfall_module(lesson).PLAUSIBLE[exercise][description].strip("\n")
    outcome = session(lesson).try_answer(exercise, answer)
    assert outcome["defined"].status == "ok", f"'{description}' does not run: {outcome['defined'].evalue}"
    assert not outcome["hidden"].passed, f"'{description}' passes the hidden checks of {exercise}"
    check_rejected_on_values(lesson, exercise, description, outcome)


@pytest.mark.parametrize("lesson,exercise,description", cases("RIGHT_ANSWERS"))
def test_right_answer_written_differently_keeps_its_points(lesson, exercise, description):
    """A correct answer in another style (another API, another order of operations, float64 inside, prints and
    warnings) passes the visible checks and the judge."""
    answer = kit.load_pitfall_module(lesson).RIGHT_ANSWERS[exercise][description].strip("\n")
    outcome = session(lesson).try_answer(exercise, answer)
    assert outcome["defined"].status == "ok", f"'{description}' does not run: {outcome['defined'].evalue}"
    assert outcome["visible"].status == "ok", (
        f"the right answer '{description}' fails a visible check of {exercise}: {outcome['visible'].evalue}")
    assert outcome["hidden"].passed, (
        f"the right answer '{description}' fails the hidden checks of {exercise}: {outcome['hidden'].reason}")


@pytest.mark.parametrize("lesson,exercise,description", cases("FORGERIES"))
def test_forgery_is_rejected(lesson, exercise, description):
    """A wrong answer that forges its evidence (patches the checks, lies about itself, rewrites an instrument's
    record, undoes a payload's trace) is rejected by the judge. A kernel of its own: its patches stay there."""
    answer = kit.load_pitfall_module(lesson).FORGERIES[exercise][description].strip("\n")
    found = LessonSession(lesson)
    try:
        assert found.setup_error is None, found.setup_error
        outcome = found.try_answer(exercise, answer)
    finally:
        found.kernel.close()
    defined = outcome["defined"]
    assert defined.status == "ok", f"'{description}' does not run: {defined.ename}: {defined.evalue}"
    assert not outcome["hidden"].passed, f"the forgery '{description}' passes the hidden checks of {exercise}"
    check_rejected_on_values(lesson, exercise, description, outcome)


@pytest.mark.parametrize("lesson,exercise,description", cases("NO_VALUE_SIGNATURE"))
def test_pitfall_without_value_signature_is_named_in_the_spec(lesson, exercise, description):
    """A pitfall that no value observation can carry is a known PITFALLS entry, and its exercise's spec says so."""
    module = kit.load_pitfall_module(lesson)
    assert description in module.PITFALLS.get(exercise, {}), f"'{description}' is not a PITFALLS entry of {exercise}"
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    specs = [cell.source for cell in nb.cells if cell.cell_type == "markdown" and f"`{exercise}`" in cell.source
             and "Exercise" in cell.source]
    assert specs and "no value" in " ".join(specs[0].split()).lower(), (
        f"the spec of {exercise} should say which of its pitfalls leaves no value to observe (only an instrument)")


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_lesson_has_a_hidden_only_wrong_answer(lesson):
    hidden_only = getattr(kit.load_pitfall_module(lesson), "HIDDEN_ONLY", None) or {}
    assert hidden_only, f"tests/course/pitfalls/{lesson}.py needs a HIDDEN_ONLY wrong answer"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_exercise_has_plausible_wrong_answers_and_a_right_one(lesson):
    """Students make mistakes the spec does not list: each exercise has at least three of them in PLAUSIBLE,
    and a correct answer written differently in RIGHT_ANSWERS."""
    module = kit.load_pitfall_module(lesson)
    plausible, right = getattr(module, "PLAUSIBLE", {}) or {}, getattr(module, "RIGHT_ANSWERS", {}) or {}
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    for exercise in kit.exercises(nb):
        assert len(plausible.get(exercise, {})) >= 3, f"{lesson} {exercise}: fewer than 3 PLAUSIBLE wrong answers"
        assert right.get(exercise), f"{lesson} {exercise}: no entry in RIGHT_ANSWERS"


RULES_LEAD = re.compile(r"\bThe (?:rules|contract)\b[^:]*:\s*$")
RULE_KEY = re.compile(r"^- \*\*(.+?)\*\*")


def spec_cell(nb, exercise: str) -> str | None:
    """The markdown cell that opens an exercise: its '### Exercise' heading names the exercise."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("### Exercise") and (
                f"`{exercise}`" in cell.source.splitlines()[0]):
            return cell.source
    return None


def rule_bullets(spec: str) -> list[str] | None:
    """The bullets (continuation lines joined) of the list that follows the spec's "The rules ...:" line, or
    ``None`` when the spec has no rules list. The list ends at the first line that is neither a bullet nor
    indented under one."""
    lines = spec.splitlines()
    start = next((i for i, line in enumerate(lines) if RULES_LEAD.search(line)), None)
    if start is None:
        return None
    bullets: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("- "):
            bullets.append(line)
        elif bullets and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()
        elif bullets or line.strip():
            break
    return bullets


def lessons_with_rules() -> list[str]:
    return [lesson for lesson in LESSONS if getattr(kit.load_pitfall_module(lesson), "RULES", None) is not None]


def test_every_lesson_has_a_rules_table():
    """Every lesson's pitfall module has a RULES table (a new lesson too)."""
    lacking = {lesson for lesson in course.lessons(narrowed=False)
               if getattr(kit.load_pitfall_module(lesson), "RULES", None) is None}
    assert not lacking, f"lessons without RULES in tests/course/pitfalls/: {sorted(lacking)}"


@pytest.mark.parametrize("lesson", lessons_with_rules())
def test_every_rule_of_every_spec_has_a_row(lesson):
    """In a lesson with a RULES table, every exercise's spec lists its rules, every bullet opens with a bold key
    that has a row in RULES, and every row names a bullet of its exercise's spec."""
    rules = kit.load_pitfall_module(lesson).RULES
    nb = nbformat.read(course.solution_path(lesson), as_version=4)
    names = set(kit.exercises(nb))
    assert set(rules) <= names, f"RULES names unknown exercises: {sorted(set(rules) - names)}"
    for exercise in names:
        spec = spec_cell(nb, exercise)
        assert spec is not None, f"{lesson} {exercise}: no '### Exercise' cell names it"
        bullets = rule_bullets(spec)
        assert bullets, f"{lesson} {exercise}: the spec has no rules list (a line 'The rules:' and one bullet a rule)"
        keys = [RULE_KEY.match(bullet) for bullet in bullets]
        unkeyed = [bullet for bullet, key in zip(bullets, keys) if key is None]
        assert not unkeyed, f"{lesson} {exercise}: rule bullets without a bold key: {unkeyed}"
        keys = [key.group(1) for key in keys]
        assert len(set(keys)) == len(keys), f"{lesson} {exercise}: two rule bullets share a key: {keys}"
        rows = rules.get(exercise, {})
        assert not set(keys) - set(rows), (
            f"{lesson} {exercise}: rules without a wrong answer in RULES: {sorted(set(keys) - set(rows))}")
        assert not set(rows) - set(keys), (
            f"{lesson} {exercise}: RULES rows that name no rule bullet of the spec: {sorted(set(rows) - set(keys))}")


@pytest.mark.parametrize("lesson,exercise,rule", cases("RULES"))
def test_rule_breaker_loses_its_points(lesson, exercise, rule):
    """A wrong answer that breaks one rule of the spec, and only that one, is rejected by the hidden checks: every
    rule a spec states is checked (on values, like every other wrong answer)."""
    answer = kit.load_pitfall_module(lesson).RULES[exercise][rule].strip("\n")
    outcome = session(lesson).try_answer(exercise, answer)
    assert outcome["defined"].status == "ok", f"the answer breaking '{rule}' does not run: {outcome['defined'].evalue}"
    assert not outcome["hidden"].passed, f"breaking the rule '{rule}' of {exercise} passes its hidden checks"
    check_rejected_on_values(lesson, exercise, rule, outcome)
