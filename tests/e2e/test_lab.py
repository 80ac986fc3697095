"""`make lab` serves the student notebooks headless, with nbgrader and the widget manager enabled.

That `make lab` answers headless with ``notebooks/`` as its root is test_browser.py's (its ``lab`` fixture runs
the recipe, and every notebook it opens is found under the root's ``notebooks/``); that the repository's
``notebooks/`` holds the lessons and nothing else (no solutions) is
test_release.py::test_release_has_exactly_the_lessons. A third JupyterLab started here for the same two facts
(test_make_lab_answers_headless, until issue 47) is gone; the edition's own ``make lab`` is
test_student_edition.py's. This file keeps the extensions check and the helpers the edition test uses.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

JUPYTER = str(Path(sys.executable).parent / "jupyter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_lab_extensions_enabled():
    out = subprocess.run([JUPYTER, "labextension", "list"], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    for extension in ("nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        line = next((row for row in text.splitlines() if extension in row), "")
        assert "enabled" in line and "OK" in line, f"{extension} not enabled:\n{text}"
