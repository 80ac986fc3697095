"""`make lab` serves the student notebooks headless, with nbgrader and the widget manager enabled."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import coursekit as kit

JUPYTER = str(Path(sys.executable).parent / "jupyter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_make_lab_answers_headless(tmp_path):
    port, token = free_port(), "pte-test-token"
    args = f"--no-browser --port {port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path))
    log = open(tmp_path / "lab.log", "w+")
    proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=kit.REPO,
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        status = None
        for _ in range(120):
            try:
                status = get_json(f"http://127.0.0.1:{port}/api/status?token={token}")
                break
            except OSError:
                assert proc.poll() is None, f"make lab exited early:\n{(tmp_path / 'lab.log').read_text()}"
                time.sleep(0.5)
        assert status is not None and "started" in status, (tmp_path / "lab.log").read_text()
        listing = get_json(f"http://127.0.0.1:{port}/api/contents?token={token}")
        names = {item["name"] for item in listing["content"]}
        assert "01_tensors_and_views" in names and "solutions" not in names, names
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_lab_extensions_enabled():
    out = subprocess.run([JUPYTER, "labextension", "list"], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    for extension in ("nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        line = next((row for row in text.splitlines() if extension in row), "")
        assert "enabled" in line and "OK" in line, f"{extension} not enabled:\n{text}"
