"""Submissions that probe the hidden part of lesson 01 while it runs, and what their feedback pages must never hold
(issue 48). Graded by tests/e2e/test_grading_trust.py, in its one grading run.

Each probing student submits correct answers and one extra cell (right after the setup) that patches the
kernel side while the hidden tests run:

- ``probe-inspect`` prints every text the hidden code's frames hold (``inspect.currentframe()`` up the stack, its
  constants, its locals, ``inspect.getsource``) to stdout and stderr;
- ``probe-malformed`` patches the observation client so that each hidden observation is sent malformed, with
  the hidden label and the hidden code's texts as its field names;
- ``probe-raise`` raises an exception whose message holds the hidden inputs;
- ``probe-forge`` sends well-formed observations whose label, test and hint hold the hidden texts, forges a
  display message and a ``HiddenTestFailed`` line carrying them, and a wrong value of the right type.

:func:`hidden_needles` lists every hidden label and the hidden code's inputs (from the solution notebook's hidden
test cells and the reference observations) and every expected value (windows of the reference tensors' values, as
Python and torch print them); :func:`page` is a rendered feedback page to search for them.
"""
from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path

import nbformat

from autograder.kernel.vocabulary import protocol

import coursekit as kit

LESSON = "01_tensors_and_views"

PROBE_COMMON = '''
import sys, inspect
import autograder.kernel.hidden as _pte_hidden
from autograder.kernel.vocabulary import observations as _pte_obs
from IPython.display import display as _pte_display
_pte_state = {"hidden": False}


def _pte_harvest():
    """Every text the frames of the hidden code hold: constants, locals, source."""
    found = []
    frame = inspect.currentframe().f_back
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.endswith(".py"):
            found += [c for c in code.co_consts if isinstance(c, str)]
            found += [repr(c) for c in code.co_consts if isinstance(c, tuple)]
            try:
                found.append(inspect.getsource(frame))
            except Exception:
                pass
            for key, value in list(frame.f_locals.items()):
                if isinstance(value, (str, tuple, list)) or type(value).__name__ in ("Tensor", "ndarray"):
                    found.append(f"{key}={value!r:.400}")
        frame = frame.f_back
    return found


_pte_init, _pte_done, _pte_observe = (_pte_hidden.HiddenTests.__init__, _pte_hidden.HiddenTests.done,
                                      _pte_hidden.HiddenTests.observe)


def _pte_enter(self, *args, **kwargs):
    _pte_state["hidden"] = True
    _pte_init(self, *args, **kwargs)


def _pte_leave(self):
    _pte_state["hidden"] = False
    _pte_done(self)


_pte_hidden.HiddenTests.__init__, _pte_hidden.HiddenTests.done = _pte_enter, _pte_leave
_pte_call = checks.call
'''

PROBES = {
    "probe-inspect": '''
def _pte_probe_call(fn, *args, **kwargs):
    if _pte_state["hidden"]:
        texts = _pte_harvest() + [repr(a)[:400] for a in args]
        print("\\n".join(texts))
        print("\\n".join(texts), file=sys.stderr)
        for entry in inspect.stack():
            print(entry.code_context, file=sys.stderr)
    return _pte_call(fn, *args, **kwargs)


checks.call = _pte_probe_call
''',
    "probe-malformed": '''
def _pte_malformed(self, label, value, **kwargs):
    texts = [label] + _pte_harvest()
    _pte_display({_pte_obs.MIME: {label: 0}}, raw=True)
    _pte_display({_pte_obs.MIME: {text[:60]: 0 for text in texts}}, raw=True)
    _pte_display({_pte_obs.MIME: {"test": label, "index": label, "label": 0, "value": value, "atol": label,
                                  "rtol": 0.0, "hint": 0}}, raw=True)


_pte_hidden.HiddenTests.observe = _pte_malformed
''',
    "probe-raise": '''
def _pte_raising_call(fn, *args, **kwargs):
    if _pte_state["hidden"]:
        raise ValueError(" | ".join(_pte_harvest() + [repr(a)[:400] for a in args])[:5000])
    return _pte_call(fn, *args, **kwargs)


checks.call = _pte_raising_call
''',
    "probe-forge": '''
def _pte_forge(self, label, value, **kwargs):
    texts = " | ".join([label] + _pte_harvest())[:3000]
    _pte_display({"text/plain": f"HiddenTestFailed: {texts}", "text/html": f"<b>{texts}</b>"}, raw=True)
    print(f"HiddenTestFailed: {label} expected {value!r}")
    print(f"HiddenTestFailed: {label}", file=sys.stderr)
    encoded = _pte_obs.encode(value)
    if isinstance(encoded, dict) and encoded.get("type") == "tensor":
        encoded = dict(encoded, values=[texts] * len(encoded["values"]))
    elif isinstance(encoded, dict) and encoded.get("type") in ("list", "tuple"):
        encoded = dict(encoded, items=[{"type": "str"}] * (len(encoded["items"]) + 1))
    else:
        encoded = {"type": "dict", "items": {texts[:60]: 1}}
    _pte_display({_pte_obs.MIME: {"test": texts, "index": self.count, "label": texts, "value": encoded,
                                  "atol": 0.0, "rtol": 0.0, "hint": texts},
                  "text/plain": texts}, raw=True)
    self.count += 1


_pte_hidden.HiddenTests.observe = _pte_forge
''',
}


def page(root: Path, student: str) -> str:
    """The rendered feedback page, as text (tags dropped, entities decoded) and as it is (raw)."""
    raw = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", raw)) + "\n" + html.unescape(raw)


def _number_forms(value) -> list[str]:
    number = float(value["value"] if isinstance(value, dict) else value)
    if number.is_integer():
        whole = int(number)
        return [f"{whole}.0", f"{whole}."]
    return [repr(number), f"{number:.4f}"]


def _expected_values(value) -> list[str]:
    """Windows of four consecutive values of every reference tensor of four values or more, as Python and torch
    print them (``61.0, 67.0, 29.0, 17.0`` and ``61., 67., 29., 17.``)."""
    found = []
    if not isinstance(value, dict):
        return found
    if value.get("type") in ("tensor", "ndarray"):
        numbers = [v for v in value.get("values", []) if isinstance(v, (int, float, dict)) and not isinstance(v, bool)]
        for start in range(len(numbers) - 3):
            forms = [_number_forms(v) for v in numbers[start:start + 4]]
            for which in range(2):
                found.append(", ".join(f[which] for f in forms))
    for item in (value.get("items") or []) if isinstance(value.get("items"), list) else []:
        found += _expected_values(item)
    return found


def hidden_needles(root: Path) -> dict[str, set[str]]:
    """What the page must never hold: each hidden label, the hidden code's lines and text inputs, and the
    expected values, less what the student's own release shows anyway (the hints are the instructor's words
    for feedback, so a hidden constant that is part of a hint is no input)."""
    reference = json.loads((root / "solutions" / LESSON / protocol.REFERENCE_FILE).read_text())["cells"]
    hints = [entry.get("hint") or "" for entries in reference.values() for entry in entries]
    labels = {entry["label"] for entries in reference.values() for entry in entries}
    values = {text for entries in reference.values() for entry in entries for text in _expected_values(entry["value"])}
    solution = nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    code, inputs = set(), set()
    for entry in kit.exercises(solution).values():
        visible, hidden = protocol.split_hidden(entry["test"].source)
        code |= {line.strip() for line in hidden.splitlines() if len(line.strip()) > 15 and line.strip() not in visible}
        for node in ast.walk(ast.parse(hidden)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 6:
                if not any(node.value in hint for hint in hints):
                    inputs.add(node.value)
            elif isinstance(node, ast.Tuple) and node.elts and all(isinstance(e, ast.Constant) for e in node.elts):
                if len(node.elts) >= 3:
                    inputs.add(ast.unparse(node))
    release = kit.release_notebook(root, LESSON)
    shown = "\n".join(c.source for c in release.cells) + "\n" + "\n".join(hints) + "\n" + "\n".join(reference)
    shown += re.sub(r"[`*]", "", shown)   # the markdown as the page renders it; the grade ids nbgrader shows
    needles = {"label": labels, "code": code, "input": inputs, "expected value": values}
    return {kind: {n for n in found if n not in shown} for kind, found in needles.items()}


def submit_probes(root: Path, release_nb, solution_nb) -> None:
    """Each probe: correct answers, and the probe's cell right after the setup."""
    setup = next(i for i, c in enumerate(release_nb.cells) if c.cell_type == "code")
    for student, probe in PROBES.items():
        nb = kit.fill_answers(release_nb, solution_nb)
        cell = nbformat.v4.new_code_cell(PROBE_COMMON + probe)
        cell["id"] = "student-probe"
        nb.cells.insert(setup + 1, cell)
        kit.submit(root, student, LESSON, nb)
