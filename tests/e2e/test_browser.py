"""What a student sees in JupyterLab, checked in a real browser (headless Chromium driven by Playwright).

One JupyterLab, started by ``make lab`` with its own settings, and one browser serve every lesson walked here:
lessons 01, 03 and 06 (``browser_figures.WALKED``), which together show every kind of widget the course has
(dropdowns, HTML, image widgets, a slider, a button, labels, progress bars, an Output) and figures both inline and
in image widgets; test_the_walked_lessons_show_every_widget_kind fails when a lesson's stored widget state holds a
kind they lack. How JupyterLab renders a kind of widget or a figure is the same in every lesson; what each other
lesson's kernel sends (every figure a PNG of more than one colour, every widget a view of a model it sent, no
control, progress bars at their end, every figure titled and labelled by the same audit) is
test_warm_kernels.py's (its warm run of those solutions). Until issue 47 every lesson was walked here
(lessons 02-09 about 55 s of a 105 s run). For each walked lesson, on throwaway copies (the committed notebooks
are never touched):

1. the solution notebook is opened in JupyterLab, with its stored outputs cleared, and run with
   Run > Run All Cells; when the kernel is idle, no cell may show an error (cells tagged
   ``raises-exception`` excepted) and every code cell must have run;
2. every ipywidgets output renders as a live widget (not "Loading widget..." or its text repr) and
   every matplotlib figure as a non-blank image;
3. every widget control is worked twice (sliders moved, dropdowns changed, buttons clicked; buttons
   last in each round, so lesson 03's "new epoch" comes after a slider move): after each change
   the widget's output must change and every image in it must have more than one colour;
4. every figure the kernel rendered, in a cell or in a widget, has a title and labelled axes
   (an IPython startup file audits each one: tests/support/browser_figures.py);
5. nbgrader's Validate button must report success on the solution (first lesson, see below);
6. the untouched student release is run with Run All, as a student presses it first: it must reach
   the end. Every code cell runs (the self-check at the end included, which must report every
   exercise unsolved), every test cell shows its failure, and no other cell shows an error unless
   tagged ``raises-exception``. Its widgets and figures are checked as in 1-2 and 4, not worked
   (first lesson, see below);
7. Validate on the untouched release must fail naming every test cell (first lesson).

The release's Run All runs in the first lesson only, beside its control (the same release without the tag,
below): what only a browser shows is that JupyterLab's Run All goes on past a tagged failing test, and that
is one property of JupyterLab, not of a lesson. For every lesson the rest is proven without a browser:
every test cell of every release carries the tag (test_release.py::test_every_test_cell_is_tagged_raises_exception),
and in the round trip the untouched release, run top to bottom, fails only in its test cells, every test cell
fails (test_autograde.py::test_plain_nbgrader_autograde: zero points) and the self-check at the end reports
0 exercises passed (test_autograde.py::test_untouched_release_fails_only_in_exercise_cells). Until issue 47
every lesson's release ran here too (about 70 s of a loaded `make test`). What no test sees now in lessons 02-09
is a widget or figure that a demo draws only while an exercise is unsolved: the solution runs (here, or in a kernel in
test_warm_kernels.py) render every demo cell with the answers in place, and test_figures.py reads every cell's
drawing code.

Validate runs nbgrader's own execution of the notebook on the server. The browser proves the button,
its dialog and what it names on the first lesson; for every lesson the verdict itself is plain
``nbgrader autograde``'s in the round trip (test_autograde.py: the solution earns every point, the
untouched release none, and only its test cells fail), the same execution, so Validate is not run again.

Run All reaches the end of an unsolved release only because the release tags every test cell
``raises-exception`` (``course._finish_release``): JupyterLab then sends those cells with
``stop_on_error: false``. Without the tag the kernel aborts every queued cell after the first failing
test. A control proves that 6 can fail: the first lesson's release, with the tag stripped from its
test cells, must fail 6 for the cells it left unrun.

The test's JupyterLab user (a fresh settings folder) differs from a student's in three settings
only: every cell is attached to the page (``windowingMode: none``; by default cells far off screen
are not in the DOM), closing a notebook shuts its kernel down, and no news is fetched. Its ``python3``
kernels fork from a warm template (a ``python3`` kernelspec on its ``JUPYTER_PATH`` that names the
``pte-forking`` provisioner, as ``pte-warm`` does, and, unlike it, the debugger): what this test checks is
what a kernel shows, not how it starts, and tests/e2e/test_warm_kernels.py proves a warm kernel's outputs
identical to a cold one's. A student's JupyterLab keeps cold kernels.

Screenshots (one per walked lesson, plus the two Validate dialogs, plus any blank widget image) and
``timings.json`` (seconds per step and lesson, each step's CPU seconds as [Chromium, JupyterLab with its
kernels], and the totals of both) go to ``$PTE_ARTIFACTS/browser`` (default ``.artifacts/browser`` in the
repository; not committed).

Needs Debian's ``chromium`` (``tools/system-deps.sh`` installs it before ``make test``) and the
pinned ``playwright`` Python package; Playwright's own browser download is never used.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder import course
from autograder.kernel.vocabulary import protocol
from autograder.warm.__main__ import SPEC_DIR as WARM_SPEC

import coursekit as kit
from browser_figures import STARTUP, WALKED, WIDGET_FALLBACK

LESSONS = course.lessons()
ARTIFACTS = Path(os.environ.get("PTE_ARTIFACTS") or kit.REPO / ".artifacts") / "browser"
TOKEN = "pte-browser-token"

# Bounded but generous: a lesson runs in <= 10 s on an idle 2-core machine, and `make test` loads it.
START_TIMEOUT_S = 180      # JupyterLab answering, the page loaded, a notebook open with its kernel idle
RUN_TIMEOUT_S = 600        # Run All Cells until the kernel is idle
WIDGET_TIMEOUT_S = 120     # one widget change until its output has updated
# Validate is pressed, and the release run with Run All, in this lesson only (module docstring)
VALIDATED_LESSON = LESSONS[0] if LESSONS else None
VALIDATE_TIMEOUT_S = 600   # nbgrader's Validate re-runs the whole notebook on the server
POLL_S = 0.25
RUN_ALL_RETRY_S = 3        # Run All clicked again when no cell is queued this long after a click (start_run_all)

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# controls the walk knows how to work, in the order of one round (buttons last)
CONTROLS = [
    ("slider", ".widget-slider .noUi-handle"),
    ("dropdown", ".widget-dropdown select, .widget-select select"),
    ("checkbox", ".widget-checkbox input[type=checkbox]"),
    ("toggle", "button.widget-toggle-button"),
    ("choice", ".widget-toggle-buttons, .widget-radio-box"),
    ("button", "button.widget-button"),
]
# a progress bar (ipywidgets 8 marks the horizontal one widget-hprogress)
PROGRESS = ".widget-hprogress, .widget-vprogress, .widget-progress"
# anything else a student could change; the walk fails on it rather than silently skip it
UNKNOWN_CONTROLS = ("input:not([type=checkbox]):not([type=radio]), textarea, .widget-play, "
                    ".widget-colorpicker, .widget-datepicker, .widget-upload, .widget-tagsinput")
# what a control's own DOM is: left out of the "did the output change" signature
CONTROL_ROOTS = (".widget-slider, .widget-dropdown, .widget-select, button, .widget-checkbox, "
                 ".widget-toggle-buttons, .widget-radio-box, .widget-text, .widget-textarea, .widget-play")

JS_STATE = """() => {
  const nb = document.querySelector('%s');
  if (!nb) return null;
  const indicator = nb.querySelector('.jp-Notebook-ExecutionIndicator');
  return {status: indicator ? indicator.dataset.status : 'unknown',
          prompts: [...nb.querySelectorAll('.jp-Cell')].map((c) => !c.classList.contains('jp-CodeCell') ? null
              : (c.querySelector('.jp-InputPrompt') || {}).textContent || '')};
}""" % NOTEBOOK

JS_SIGNATURE = """(root) => {
  const skip = %s;
  const hash = (s) => {
    let h = 5381;
    for (let i = 0; i < s.length; i++) h = ((h * 33) ^ s.charCodeAt(i)) | 0;
    return h;
  };
  const parts = [];
  const walk = (n) => {
    if (n.nodeType === 3) { parts.push(n.textContent); return; }
    if (n.nodeType !== 1 || n.matches(skip)) return;
    if (n.tagName === 'IMG') parts.push('[img ' + n.src.length + ':' + hash(n.src) + ']');
    for (const child of n.childNodes) walk(child);
  };
  walk(root);
  return parts.join('');
}""" % json.dumps(CONTROL_ROOTS)

JS_OUTPUT_TEXTS = """() => [...document.querySelectorAll('%s .jp-Cell')].map(
  c => [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join('\\n'))""" % NOTEBOOK

JS_CONTROL_NAME = """(e) => {
  const box = e.closest('.widget-inline-hbox, .widget-inline-vbox');
  const label = box && box.querySelector('.widget-label');
  return ((label && label.textContent) || e.title || e.textContent || '').trim();
}"""

JS_IMAGE_PNG = """async (img) => {
  if (!img.complete || !img.naturalWidth) {
    await new Promise((done) => { img.addEventListener('load', done); img.addEventListener('error', done);
                                  setTimeout(done, 10000); });
  }
  if (!img.naturalWidth) return null;
  try { await img.decode(); } catch (e) { return null; }
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  canvas.getContext('2d').drawImage(img, 0, 0);
  return canvas.toDataURL('image/png');
}"""

JS_DIALOG = """(dialog) => {
  const body = dialog.querySelector('.jp-Dialog-body [class*=validation-]') || dialog.querySelector('.jp-Dialog-body');
  const failed = [];
  const kids = body ? [...body.children] : [];
  kids.forEach((kid, i) => {
    if (kid.textContent.trim() === 'The following cell failed:' && kids[i + 1]) {
      failed.push({source: kids[i + 1].innerText, error: kids[i + 2] ? kids[i + 2].innerText : ''});
    }
  });
  return {title: (dialog.querySelector('.jp-Dialog-header') || {}).innerText || '',
          cls: body ? body.className : '', text: dialog.innerText, failed};
}"""


class Timeout(Exception):
    """A wait ran past its limit; the message says what was awaited and what was seen."""


# ---------------------------------------------------------------- fixtures

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str:
    for name in (os.environ.get("PTE_CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.fail("Debian's chromium is not installed: `make test` installs it as root (tools/system-deps.sh), "
                "otherwise run `apt-get install chromium` (or point $PTE_CHROMIUM at a Chromium binary)")


def _cleared(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    return nb


@pytest.fixture(scope="module")
def course_copy(tmp_path_factory) -> Path:
    """A scratch course whose ``notebooks/`` (``make lab``'s root) holds both editions of every lesson.

    ``notebooks/<id>/<id>.ipynb`` is the untouched student release; ``notebooks/solutions/<id>/``
    the solution (outputs cleared, so everything on screen comes from this run) with its reference
    observations, which the hidden tests find from the kernel's folder when Validate runs them;
    ``notebooks/untagged/<id>/`` the first lesson's release with ``raises-exception`` stripped from
    its test cells (the control of test_run_all_without_the_tag_stops_at_the_first_test).
    """
    root = tmp_path_factory.mktemp("browser-course")
    shutil.copy(kit.REPO / "nbgrader_config.py", root / "nbgrader_config.py")  # Validate reads it from the cwd
    for lesson in LESSONS:
        solution = root / "notebooks" / "solutions" / lesson
        solution.mkdir(parents=True)
        nbformat.write(_cleared(nbformat.read(course.solution_path(lesson), as_version=4)),
                       solution / f"{lesson}.ipynb")
        if (course.solution_path(lesson).parent / course.REFERENCE_FILE).is_file():
            shutil.copy(course.solution_path(lesson).parent / course.REFERENCE_FILE, solution)
        release = kit.REPO / "notebooks" / lesson / f"{lesson}.ipynb"
        if release.is_file():
            (root / "notebooks" / lesson).mkdir()
            shutil.copy(release, root / "notebooks" / lesson)
    if LESSONS and (kit.REPO / "notebooks" / LESSONS[0] / f"{LESSONS[0]}.ipynb").is_file():
        nb = nbformat.read(kit.REPO / "notebooks" / LESSONS[0] / f"{LESSONS[0]}.ipynb", as_version=4)
        for cell in filter(protocol.is_test_cell, nb.cells):
            cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t != protocol.RAISES_EXCEPTION]
        (root / "notebooks" / "untagged" / LESSONS[0]).mkdir(parents=True)
        nbformat.write(nb, root / "notebooks" / "untagged" / LESSONS[0] / f"{LESSONS[0]}.ipynb")
    return root


@pytest.fixture(scope="module")
def lab(course_copy, tmp_path_factory, timings):
    """``make lab`` (its recipe and settings, run from the scratch course) on a free loopback port."""
    home = tmp_path_factory.mktemp("browser-lab")
    settings = home / "settings"
    # a fresh user's JupyterLab, with three settings of the test's own: every cell attached to the page
    # (the default windowing leaves off-screen cells out of the DOM), closing a notebook shuts its kernel
    # down, and no news poll from a machine that has no network
    for name, values in {"notebook-extension/tracker": {"windowingMode": "none", "kernelShutdown": True},
                         "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}.items():
        path = settings / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    # every figure the kernels render is audited for a title and axis labels (tests/support/browser_figures.py)
    startup = home / "ipython" / "profile_default" / "startup" / "50-pte-figure-audit.py"
    startup.parent.mkdir(parents=True)
    startup.write_text(STARTUP.format(tests=str(Path(__file__).parents[1] / "support")))
    # python3 kernels (the notebooks' own, and Validate's) fork from a warm template (module docstring), with the
    # debugger a student's python3 kernel has (pte-warm's kernels start without it)
    spec = json.loads((WARM_SPEC / "kernel.json").read_text())
    spec["argv"] = [arg for arg in spec["argv"] if not arg.startswith("--IPKernelApp.kernel_class=")]
    spec["metadata"] = {**spec["metadata"], "debugger": True}
    (home / "jupyter" / "kernels" / "python3").mkdir(parents=True)
    (home / "jupyter" / "kernels" / "python3" / "kernel.json").write_text(
        json.dumps({**spec, "display_name": "Python 3 (ipykernel)"}))
    port = _free_port()
    args = f"--no-browser --port {port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    venv = kit.venv_path_for_make()
    jupyter_path = os.pathsep.join(filter(None, [str(home / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTER_PATH=jupyter_path,
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               PTE_REFERENCE_ROOT=str(course_copy / "notebooks"), IPYTHONDIR=str(home / "ipython"),
               PTE_FIGURE_AUDIT=str(home / "figures.jsonl"))
    # -o: the venv is current (make test built it); the test must not reinstall it under other tests
    command = ["make", "--no-print-directory", "-f", str(kit.REPO / "Makefile"), "-o", f"{venv}/.installed",
               "lab", f"VENV={venv}", f"LAB_ARGS={args}"]
    log_path = home / "lab.log"
    log = open(log_path, "w+")
    proc = subprocess.Popen(command, cwd=course_copy, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                _api(url, "/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"`make lab` did not answer within {START_TIMEOUT_S} s:\n{log_path.read_text()}")
                time.sleep(0.5)
        _warm_up(url)
        yield {"url": url, "root": course_copy / "notebooks", "log": log_path, "figures": home / "figures.jsonl",
               "pid": proc.pid}
    finally:
        # JupyterLab and every kernel it ran (the browser's and Validate's), for the timing report
        _record_cpu("jupyterlab and kernels", _descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _warm_up(url: str) -> None:
    """Start one python3 kernel and end it: the warm template is built before the first notebook opens.

    Built while the first notebook waited for its kernel, it cost that notebook's first Run All clicks (lost,
    then repeated: about 9 CPU seconds of Chromium and JupyterLab; timings.json's run_all_s_clicks).
    """
    started = time.monotonic()
    kernel = _api(url, "/api/kernels", method="POST", timeout_s=START_TIMEOUT_S)   # answers once it has started
    _api(url, f"/api/kernels/{kernel['id']}", method="DELETE")
    WARM_UP_S.append(round(time.monotonic() - started, 1))


CPU_SECONDS: dict[str, float] = {}
WARM_UP_S: list[float] = []


def _descendants(pid: int | None = None) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _cpu(processes: list) -> float:
    """CPU seconds of ``processes``, their waited-for children included."""
    import psutil

    total = 0.0
    for process in processes:
        try:
            t = process.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _record_cpu(name: str, processes: list) -> None:
    """CPU seconds of ``processes``, kept in timings.json."""
    CPU_SECONDS[name] = round(_cpu(processes), 1)


def _name(process) -> str:
    """The process's name, or "" when it ended after it was listed."""
    import psutil

    try:
        return process.name()
    except psutil.Error:
        return ""


def _cpu_now(lab_pid: int) -> tuple[float, float]:
    """CPU seconds so far of Chromium, and of JupyterLab with its kernels (for the timings of each step)."""
    import psutil

    chromium = [p for p in _descendants() if "chrom" in _name(p)]
    try:
        lab = [psutil.Process(lab_pid), *_descendants(lab_pid)]
    except psutil.Error:
        lab = []
    return _cpu(chromium), _cpu(lab)


def _api(url: str, path: str, method: str = "GET", timeout_s: float = 10):
    request = urllib.request.Request(url + path, method=method, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture(scope="module")
def page(lab):
    """One headless Chromium (the system's, never Playwright's download) with JupyterLab loaded."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed in this environment: it is pinned in requirements.txt (make)")
    executable = _chromium()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    player = sync_playwright().start()
    browser = player.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
    try:
        tab = browser.new_context(viewport={"width": 1400, "height": 1000}, reduced_motion="reduce").new_page()
        tab.set_default_timeout(60_000)
        tab.goto(f"{lab['url']}/lab?token={TOKEN}&reset", timeout=START_TIMEOUT_S * 1000)
        tab.wait_for_selector(".jp-LabShell .lm-MenuBar-item", timeout=START_TIMEOUT_S * 1000)
        yield tab
    finally:
        _record_cpu("chromium", [p for p in _descendants() if "chrom" in p.name()])
        browser.close()
        player.stop()


@pytest.fixture(scope="module")
def timings():
    found: dict[str, dict[str, float]] = {}
    started = time.monotonic()
    yield found
    found["all"] = {"wall_s": round(time.monotonic() - started, 1), "cpu_s": CPU_SECONDS, "warm_up_s": WARM_UP_S}
    if found:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "timings.json").write_text(json.dumps(found, indent=1) + "\n")


# ---------------------------------------------------------------- the walk

class Walk:
    """One lesson's walk through JupyterLab; ``problems`` collects what a student would have seen wrong."""

    def __init__(self, page, lab: dict, lesson: str, timings: dict, name: str | None = None):
        self.page, self.lab, self.lesson = page, lab, lesson
        self.name = name or lesson   # the walk's name in timings.json and in screenshot names
        self.problems: list[str] = []
        self.timings = timings.setdefault(self.name, {})
        self.nb = None        # the notebook on disk (as saved from JupyterLab)
        self.blanks = 0
        self.marks: dict[float, tuple[float, float]] = {}   # a step's start -> CPU seconds then (clock)

    # ---- helpers
    def problem(self, text: str) -> None:
        self.problems.append(text)

    def clock(self) -> float:
        """A step's start: now, with Chromium's and JupyterLab's CPU seconds so far (see timed)."""
        now = time.monotonic()
        self.marks[now] = _cpu_now(self.lab["pid"])
        return now

    def timed(self, name: str, started: float) -> None:
        """Seconds since ``started``; from a clock() start, also CPU seconds [Chromium, JupyterLab and kernels]."""
        self.timings[name] = round(time.monotonic() - started, 1)
        if started in self.marks:
            self.timings[name.removesuffix("_s") + "_cpu"] = [round(now - then, 1) for now, then in
                                                              zip(_cpu_now(self.lab["pid"]), self.marks[started])]

    def cell_label(self, index: int) -> str:
        cell = self.nb.cells[index]
        first = next((line.strip() for line in cell.source.splitlines()
                      if line.strip() and not line.lstrip().startswith("#")), "")
        return f"cell {index} (id {cell.get('id')}, `{first[:60]}`)"

    def wait(self, what: str, until, timeout_s: float, seen=lambda: ""):
        deadline = time.monotonic() + timeout_s
        while True:
            value = until()
            if value:
                return value
            if time.monotonic() > deadline:
                raise Timeout(f"{what}: not done after {timeout_s:.0f} s{(': ' + seen()) if seen() else ''}")
            time.sleep(POLL_S)

    def state(self) -> dict | None:
        return self.page.evaluate(JS_STATE)

    def menu(self, top: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-item", has_text=top).first.click()
        self.page.locator(".lm-Menu-item:visible", has_text=item).first.click()

    def screenshot(self, name: str) -> Path:
        path = ARTIFACTS / f"{self.name}{name}.png"
        started = self.clock()
        self.page.screenshot(path=str(path))
        self.timed(f"screenshot{name}_s", started)
        return path

    # ---- notebooks
    def open(self, path: str) -> None:
        """File > Open from Path..., then wait for the notebook with its kernel idle."""
        self.close_all()
        self.menu("File", "Open from Path")
        dialog = self.page.locator(".jp-Dialog")
        dialog.locator("input").fill(path)
        dialog.locator("button.jp-mod-accept").click()
        self.page.wait_for_selector(f"{NOTEBOOK} .jp-Cell", timeout=START_TIMEOUT_S * 1000)
        self.page.wait_for_selector(f"{NOTEBOOK} [data-jp-item-name=executionProgress]:has-text('Idle')",
                                    timeout=START_TIMEOUT_S * 1000)

    def close_all(self) -> None:
        """Close every tab (discarding changes); closing shuts each notebook's kernel down."""
        self.page.keyboard.press("Escape")
        if self.page.locator(".jp-NotebookPanel").count():
            self.menu("File", "Close All Tabs")
            for _ in range(10):
                discard = self.page.locator(".jp-Dialog button", has_text=re.compile("Discard|Don.t Save"))
                if discard.count():
                    discard.first.click()
                elif not self.page.locator(".jp-NotebookPanel").count():
                    break
                time.sleep(0.3)
        for session in _api(self.lab["url"], "/api/sessions"):
            try:
                _api(self.lab["url"], f"/api/sessions/{session['id']}", method="DELETE")
            except urllib.error.HTTPError as error:
                if error.code != 404:   # 404: closing its tab ended it since the list was read
                    raise

    def save_and_read(self, path: Path):
        """Save, then read the file once the server has written it: the tab's dirty mark can be gone before the
        write starts, and the server writes the file in place (a read during the write found it empty)."""
        before = path.stat().st_mtime_ns
        self.page.locator(f"{NOTEBOOK} [data-jp-item-name=save] jp-button").click()
        self.wait("saving the notebook",
                  lambda: not self.page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count(), 60)
        found = {}

        def written():
            if path.stat().st_mtime_ns == before:
                return False
            try:
                found["nb"] = nbformat.read(path, as_version=4)
            except ValueError:   # still being written (JSON or nbformat cannot read it yet)
                return False
            return True
        self.wait("the saved notebook on disk", written, 60)
        return found["nb"]

    def run_all(self, timing: str = "run_all_s") -> None:
        """Run > Run All Cells until it has run something: a kernel busy for a request of JupyterLab's own (as the
        notebook connects) passes for the run's start, and the click may still be lost. A run that ran no cell at
        all is clicked again, twice at most; what ran is then checked as usual."""
        for attempt in range(3):
            self.start_run_all(timing)
            self.wait_run_all(timing)
            prompts = (self.state() or {}).get("prompts", [])
            if any(p and re.search(r"\d", p) for p in prompts):
                return
            self.timings[f"{timing}_lost"] = attempt + 1

    def start_run_all(self, timing: str = "run_all_s") -> None:
        """Run > Run All Cells, once every cell is queued (the kernel then works on its own)."""
        self.run_started = self.clock()
        self.run_statuses: list[str] = []   # the kernel statuses seen while Run All ran, in order (for a report)

        def began():   # a cell queued or run, or the kernel busy: a click that got through, however slowly shown
            st = self.state()
            return st is not None and (st["status"] == "busy" or any(p and re.search(r"\*|\d", p)
                                                                     for p in st["prompts"]))
        # Right after the page loads, the first notebook's first Run All is often lost: the menu item is disabled
        # until the notebook is the current widget, or JupyterLab takes the command and runs nothing. Each try
        # waits for an enabled item and clicks it once; a run that has not begun 10 s later is tried again.
        # JupyterLab marks every queued cell [*] as it sends the cells, so 10 s is ample even on a loaded machine
        # (a single 30 s wait, until issue 47, cost every run of this file 30 s on the first lesson). A busy kernel
        # counts as begun too: on a loaded machine the [*] prompts came later than the retry, and each extra click
        # ran the whole notebook again (timings.json: first_execution_count, and the step's CPU seconds).
        # The notebook's own execution indicator reads "unknown" until its kernel connection is up, whatever the
        # status bar says: a Run All sent before then is the one that gets lost.
        self.wait("the notebook's kernel to be connected and idle",
                  lambda: (self.state() or {}).get("status") == "idle", START_TIMEOUT_S,
                  lambda: f"kernel {(self.state() or {}).get('status')}")
        self.timed("run_all_ready_s", self.run_started)
        clicks = 0
        deadline = time.monotonic() + START_TIMEOUT_S
        while not began():
            self.page.locator(NOTEBOOK).locator(".jp-Cell").first.click()
            self.page.locator(".lm-MenuBar-item", has_text="Run").first.click()
            item = self.page.locator(".lm-Menu-item:visible", has_text="Run All Cells").first
            if "lm-mod-disabled" in (item.get_attribute("class") or ""):
                self.page.keyboard.press("Escape")
                time.sleep(POLL_S)
            else:
                item.click()
                clicks += 1
                try:
                    self.wait("Run All Cells to start", began, RUN_ALL_RETRY_S)
                except Timeout:
                    pass
            if time.monotonic() > deadline and not began():
                raise Timeout(f"Run > Run All Cells did not start a run within {START_TIMEOUT_S} s")
        if clicks > 1:
            self.timings[f"{timing}_clicks"] = clicks
            self.timed(f"{timing}_started_s", self.run_started)

    def wait_run_all(self, timing: str = "run_all_s") -> None:
        """Until the kernel is idle with no cell queued (checked three times in a row)."""
        stable = {"count": 0}

        def finished():
            st = self.state()
            if st is not None and st["status"] not in self.run_statuses[-1:]:
                self.run_statuses.append(st["status"])
            done = (st is not None and st["status"] == "idle"
                    and not any(p and "*" in p for p in st["prompts"]))
            if st is not None and st["status"] == "dead":
                raise Timeout("the kernel died while running the notebook")
            stable["count"] = stable["count"] + 1 if done else 0
            return stable["count"] >= 3

        def seen():
            st = self.state() or {}
            busy = [i for i, p in enumerate(st.get("prompts", [])) if p and "*" in p]
            return f"kernel {st.get('status')}, " + (f"cell {busy[0]} still running" if busy else "no cell queued")
        self.wait("Run All Cells", finished, RUN_TIMEOUT_S, seen)
        self.timed(timing, self.run_started)

    # ---- checks
    def image_colours(self, img) -> str | None:
        """None when ``img`` has more than one colour, else what is wrong with it (the image is saved)."""
        from PIL import Image

        img.scroll_into_view_if_needed()
        for attempt in (1, 2):
            data = img.evaluate(JS_IMAGE_PNG)
            if not data:
                return "the image did not load"
            png = base64.b64decode(data.split(",", 1)[1])
            picture = Image.open(io.BytesIO(png)).convert("RGBA")
            colours = picture.getcolors(1)
            if colours is None:
                return None
            if attempt == 1:   # read while the browser was still painting it? look again a second later
                time.sleep(1.0)
        self.blanks += 1
        saved = ARTIFACTS / f"{self.name}-blank-{self.blanks}.png"
        saved.write_bytes(png)
        return (f"the image ({picture.width}x{picture.height}) is blank: one colour {colours[0][1]} "
                f"(saved as {saved.name})")

    def check_outputs(self) -> tuple[list[int], list[int]]:  # noqa: C901  (one pass over the cells; to split)
        """Errors, cells that did not run, widgets and figures; returns (widget cells, figure cells)."""
        cells = self.page.locator(NOTEBOOK).locator(".jp-Cell")
        if cells.count() != len(self.nb.cells):
            self.problem(f"JupyterLab shows {cells.count()} cells, the notebook has {len(self.nb.cells)}")
            return [], []
        widget_cells, figure_cells, not_run = [], [], []
        for index, cell in enumerate(self.nb.cells):
            if cell.cell_type != "code":
                continue
            tags = cell.metadata.get("tags", [])
            if cell.get("execution_count") is None:
                not_run.append(index)
            for out in cell.get("outputs", []):
                if out.output_type == "error" and "raises-exception" not in tags:
                    self.problem(f"{self.cell_label(index)} shows an error: {out.ename}: {out.evalue}"[:600])
                data = out.get("data", {})
                if WIDGET_MIME in data and index not in widget_cells:
                    widget_cells.append(index)
                if "image/png" in data and index not in figure_cells:
                    figure_cells.append(index)
                figure_text = re.match(r"<Figure size .* with \d+ Axes>", str(data.get("text/plain", "")))
                if figure_text and "image/png" not in data:
                    self.problem(f"{self.cell_label(index)} shows a figure as text, not an image: {figure_text[0]}")
        if not_run:
            more = " ..." if len(not_run) > 12 else ""
            self.problem(f"{len(not_run)} code cell(s) did not run, from {self.cell_label(not_run[0])} on "
                         f"(cells {not_run[:12]}{more}): Run All stopped at an error above (kernel statuses seen "
                         f"during Run All: {' > '.join(getattr(self, 'run_statuses', [])) or 'none'})")
        for index, text in enumerate(self.page.evaluate(JS_OUTPUT_TEXTS)):
            match = WIDGET_FALLBACK.search(text)
            if match:
                self.problem(f"{self.cell_label(index)} shows a widget's text fallback, not the widget: '{match[0]}'")
        for index in widget_cells:
            widget = cells.nth(index).locator(".jp-OutputArea .jupyter-widgets")
            if not widget.count():
                self.problem(f"{self.cell_label(index)}: its widget output shows no live widget")
            images = cells.nth(index).locator(".jp-OutputArea-output:has(.jupyter-widgets) img")
            for k in range(images.count()):
                wrong = self.image_colours(images.nth(k))
                if wrong:
                    self.problem(f"{self.cell_label(index)}, widget image {k + 1} before any change: {wrong}")
        for index in figure_cells:
            want = sum("image/png" in out.get("data", {}) for out in self.nb.cells[index].outputs)
            images = cells.nth(index).locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
            if images.count() < want:
                self.problem(f"{self.cell_label(index)}: {want} figure(s) in the output, "
                             f"{images.count()} shown as images")
            for k in range(images.count()):
                wrong = self.image_colours(images.nth(k))
                if wrong:
                    self.problem(f"{self.cell_label(index)}, figure {k + 1}: {wrong}")
        return widget_cells, figure_cells

    def check_figure_audit(self, path: Path) -> None:
        """Figures this notebook's kernel rendered without a title or axis labels (tests/support/browser_figures.py)."""
        log = self.lab["figures"]
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
        by_count = {cell.get("execution_count"): i for i, cell in enumerate(self.nb.cells)
                    if cell.cell_type == "code" and cell.get("execution_count") is not None}
        seen = set()
        installed = [entry for entry in entries if entry.get("installed")
                     and Path(entry["notebook"]).resolve() == path.resolve()]
        if not installed:
            self.problem("the figure audit was not installed in this notebook's kernel "
                         "(tests/support/browser_figures.py)")
        for entry in entries:
            if entry.get("installed"):
                continue
            if Path(entry["notebook"]).resolve() != path.resolve():
                continue
            index = by_count.get(entry["execution_count"])
            where = f"during {self.cell_label(index)}" if index is not None else "in a widget callback"
            what = f"drawn by {entry['drawn_by']}" if entry.get("drawn_by") else "drawn in the cell"
            titles = ", ".join(repr(t) for t in entry["titles"][:2]) or "untitled"
            text = f"a figure {what} {where} ({titles}): {'; '.join(entry['problems'])}"
            if text not in seen:
                seen.add(text)
                self.problem(text)

    def signature(self, root) -> str:
        return root.evaluate(JS_SIGNATURE)

    def work_widgets(self, index: int) -> None:
        """Change every control of the widget in cell ``index`` twice; its output must update each time."""
        cell = self.page.locator(NOTEBOOK).locator(".jp-Cell").nth(index)
        root = cell.locator(".jp-OutputArea-output:has(.jupyter-widgets)").first
        root.scroll_into_view_if_needed()
        unknown = root.locator(UNKNOWN_CONTROLS)
        if unknown.count():
            self.problem(f"{self.cell_label(index)}: the browser test does not know how to work "
                         f"{unknown.count()} control(s) like {unknown.first.evaluate('e => e.outerHTML')[:120]}; "
                         "teach tests/e2e/test_browser.py (CONTROLS)")
        found = [(kind, root.locator(selector).nth(k)) for kind, selector in CONTROLS
                 for k in range(root.locator(selector).count())]
        if not found and root.locator(PROGRESS).count():
            # a progress bar (autograder.kernel.notebook_check.progress): nothing to work, but it must
            # have run to its end, "n/n" beside the bar
            text = root.inner_text()
            done = re.search(r"(\d+)/(\d+)", text)
            if not done or done[1] != done[2]:
                self.problem(f"{self.cell_label(index)}: its progress bar did not reach the end: {text[:80]!r}")
            return
        if not found:
            self.problem(f"{self.cell_label(index)}: a widget with no control to work")
        for round_ in (1, 2):
            for kind, control in found:
                what = f"{self.cell_label(index)}, {kind} '{control.evaluate(JS_CONTROL_NAME)[:30]}' change {round_}"
                before = self.signature(root)
                had_images = root.locator("img").count()
                started = time.monotonic()
                self.change(kind, control)
                stable = {"sig": None, "count": 0}

                def updated(before=before, stable=stable):
                    st = self.state()
                    sig = self.signature(root)
                    if sig == before or st is None or st["status"] != "idle":
                        stable["count"] = 0
                        return False
                    stable["count"] = stable["count"] + 1 if sig == stable["sig"] else 0
                    stable["sig"] = sig
                    return stable["count"] >= 2
                try:
                    self.wait(what + ": the output did not update", updated, WIDGET_TIMEOUT_S,
                              lambda: f"still showing {self.signature(root)[:200]!r}")
                except Timeout as exc:
                    self.problem(str(exc))
                    continue
                self.timings.setdefault("widget_changes_s", []).append(round(time.monotonic() - started, 2))
                images = root.locator("img")
                if had_images and not images.count():
                    self.problem(f"{what}: the widget showed {had_images} image(s) before the change, none after")
                for k in range(images.count()):
                    wrong = self.image_colours(images.nth(k))
                    if wrong:
                        shot = ARTIFACTS / f"{self.name}-cell{index}-blank-{self.blanks}.png"
                        root.screenshot(path=str(shot))
                        self.problem(f"{what}: {wrong}; the widget as shown: {shot.name}")

    def change(self, kind: str, control) -> None:
        if kind == "slider":
            now, top = (control.get_attribute(a) for a in ("aria-valuenow", "aria-valuemax"))
            control.focus()
            control.press("ArrowLeft" if float(now or 0) >= float(top or 0) else "ArrowRight")
        elif kind == "dropdown":
            count = control.locator("option").count()
            current = control.evaluate("e => e.selectedIndex")
            control.select_option(index=(current + 1) % max(count, 1))
        elif kind == "choice":
            options = control.locator("button:not(.mod-active), input[type=radio]:not(:checked)")
            options.first.click()
        else:
            control.click()

    def validate(self, name: str) -> dict:
        """Click the nbgrader toolbar's Validate; the dialog's title, class, text and failed cells."""
        started = self.clock()
        self.page.locator(f"{NOTEBOOK} .jp-Toolbar-item", has_text="Validate").locator("jp-button").click()
        dialog = self.page.locator(".jp-Dialog")
        self.wait(f"Validate ({name})", lambda: dialog.count() and "Validating" not in dialog.first.inner_text(),
                  VALIDATE_TIMEOUT_S)
        result = dialog.first.evaluate(JS_DIALOG)
        self.timed(f"validate_{name}_s", started)
        self.screenshot(f"-validate-{name}")
        dialog.first.locator("button").last.click()
        return result

    # ---- the two halves
    def solution(self) -> None:
        started = self.clock()
        path = self.lab["root"] / "solutions" / self.lesson / f"{self.lesson}.ipynb"
        self.open(f"solutions/{self.lesson}/{self.lesson}.ipynb")
        self.timed("open_solution_s", started)
        self.run_all()
        self.nb = self.save_and_read(path)
        self.timings["first_execution_count"] = next((c.get("execution_count") for c in self.nb.cells
                                                      if c.cell_type == "code"), None)
        checked = self.clock()
        widget_cells, figure_cells = self.check_outputs()
        cells = self.page.locator(NOTEBOOK).locator(".jp-Cell")
        self.timed("check_outputs_s", checked)
        worked = self.clock()
        for index in widget_cells:
            self.work_widgets(index)
        self.timed("work_widgets_s", worked)
        self.check_figure_audit(path)
        focus = (widget_cells or figure_cells or [0])[0]
        cells.nth(focus).evaluate("e => e.scrollIntoView({block: 'start'})")
        time.sleep(0.3)
        self.screenshot("")
        # Validate blocks JupyterLab's server while nbgrader runs its own copy of the notebook (JupyterLab
        # sends Run All's cells one by one, so the two cannot overlap): it comes last, as for a student.
        if self.lesson != VALIDATED_LESSON:
            self.timings["solution_total_s"] = round(time.monotonic() - started, 1)
            return
        result = self.validate("solution")
        if "validation-success" not in result["cls"]:
            self.problem(f"Validate on the solution did not report success: {result['title']}: "
                         f"{result['text'][:1500]}")
        self.timings["solution_total_s"] = round(time.monotonic() - started, 1)

    def run_release(self, where: str) -> None:
        """Run All on the untouched release at ``where`` (under the lab's root): it must reach the end.

        Every code cell ran, the last (the self-check) included, and it reports every exercise
        unsolved; every test cell shows an error; no other cell shows one unless tagged
        ``raises-exception`` (check_outputs, which also checks the widgets and figures).
        """
        started = self.clock()
        path = self.lab["root"] / where
        self.open(where)
        self.run_all("run_all_release_s")
        self.nb = self.save_and_read(path)
        self.check_outputs()
        self.check_figure_audit(path)
        code = [i for i, cell in enumerate(self.nb.cells) if cell.cell_type == "code"]
        tests = [i for i, cell in enumerate(self.nb.cells) if protocol.is_test_cell(cell)]
        for index in tests:
            if not any(out.output_type == "error" for out in self.nb.cells[index].get("outputs", [])):
                ran = self.nb.cells[index].get("execution_count") is not None
                self.problem(f"Run All on the untouched release: test {self.cell_label(index)} "
                             + ("shows no failure, though its exercise is unsolved" if ran else "did not run"))
        last = self.nb.cells[code[-1]]
        printed = "".join(out.get("text", "") for out in last.get("outputs", []) if out.output_type == "stream")
        if last.get("execution_count") is None:
            self.problem(f"Run All on the untouched release did not reach the self-check at the end "
                         f"({self.cell_label(code[-1])})")
        elif f"Passed the visible checks of 0 of {len(tests)} exercises" not in printed:
            self.problem(f"Run All on the untouched release: the self-check at the end should report 0 of "
                         f"{len(tests)} exercises passed; it printed {printed[:600]!r}")
        self.page.locator(NOTEBOOK).locator(".jp-Cell").nth(code[-1]).evaluate(
            "e => e.scrollIntoView({block: 'start'})")
        time.sleep(0.3)
        self.screenshot("-release-run-all")
        self.timed("release_run_all_total_s", started)

    def release(self) -> None:
        started = self.clock()
        release = self.lab["root"] / self.lesson / f"{self.lesson}.ipynb"
        if not release.is_file():
            self.problem(f"notebooks/{self.lesson}/{self.lesson}.ipynb is missing: run `make release`")
            return
        tests = {}
        for cell in nbformat.read(release, as_version=4).cells:
            if protocol.is_test_cell(cell):
                tests[protocol.nbgrader_meta(cell)["grade_id"]] = cell.source.strip()
        # Run All first, as a student presses it; Validate then runs its own copy, as for the solution
        self.run_release(f"{self.lesson}/{self.lesson}.ipynb")
        if self.lesson != VALIDATED_LESSON:
            self.timings["release_total_s"] = round(time.monotonic() - started, 1)
            return
        result = self.validate("release")
        if "validation-failed" not in result["cls"]:
            self.problem(f"Validate on the untouched release should fail naming every test; it said: "
                         f"{result['title']}: {result['text'][:1500]}")
        else:
            named = [f["source"].strip() for f in result["failed"]]
            first = {s.splitlines()[0] for s in named if s}
            for grade_id, source in tests.items():
                if source not in named and source.splitlines()[0] not in first:
                    self.problem(f"Validate on the untouched release did not name {grade_id} "
                                 f"({source.splitlines()[0][:80]}) among the failing tests")
            firsts = {t.splitlines()[0] for t in tests.values()}
            extra = [s.splitlines()[0] for s in named
                     if s and s not in tests.values() and s.splitlines()[0] not in firsts]
            if extra:
                self.problem(f"Validate on the untouched release named cells that are not tests: {extra}")
        self.timings["release_total_s"] = round(time.monotonic() - started, 1)


def test_the_walked_lessons_show_every_widget_kind():
    """The lessons walked here show every kind of widget that any lesson's solution stores, and figures both ways.

    The widget models each solution's stored outputs hold (``make release`` stores them) are the kinds a student
    sees; a lesson that brings one the walked lessons lack (a new control, say) must be walked too (WALKED).
    """
    def kinds(lesson: str) -> set[str]:
        nb = nbformat.read(course.solution_path(lesson), as_version=4)
        state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
        found = {model["model_name"] for model in state.get("state", {}).values()}
        if any("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", [])):
            found.add("a figure inline")
        return found
    every = course.lessons(narrowed=False)
    assert set(WALKED) <= set(every), f"WALKED names lessons the course lacks: {set(WALKED) - set(every)}"
    shown = set().union(*(kinds(lesson) for lesson in WALKED))
    missing = {lesson: sorted(kinds(lesson) - shown) for lesson in every if kinds(lesson) - shown}
    assert not missing, f"widget kinds no walked lesson shows (add the lesson to browser_figures.WALKED): {missing}"
    assert {"a figure inline", "ImageModel"} <= shown, "the walked lessons show no figure inline or in an image widget"


@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if lesson in WALKED])
def test_lesson_in_jupyterlab(lesson, lab, page, timings):
    walk = Walk(page, lab, lesson, timings)
    started = walk.clock()
    try:
        for half in (walk.solution, walk.release) if lesson == VALIDATED_LESSON else (walk.solution,):
            try:
                half()
            except Timeout as exc:
                walk.problem(f"{half.__name__}: {exc}")
                walk.screenshot(f"-{half.__name__}-timeout")
    finally:
        walk.close_all()
        walk.timed("lesson_total_s", started)
    print(f"{lesson}: {json.dumps(walk.timings)}; screenshots in {ARTIFACTS}")
    if walk.problems:
        pytest.fail(f"{lesson} in JupyterLab: {len(walk.problems)} problem(s) (screenshots in {ARTIFACTS}):\n  - "
                    + "\n  - ".join(walk.problems), pytrace=False)


def test_run_all_without_the_tag_stops_at_the_first_test(lab, page, timings):
    """The control of the release's Run All check: it fails once ``raises-exception`` is gone.

    The first lesson's release with the tag stripped from its test cells: JupyterLab sends each test
    with ``stop_on_error: true``, the kernel aborts every cell queued after the first failing one,
    and the check must say that the cells after it, the self-check included, did not run.
    """
    if not LESSONS:
        pytest.skip("no lesson selected")
    lesson = LESSONS[0]
    where = f"untagged/{lesson}/{lesson}.ipynb"
    if not (lab["root"] / where).is_file():
        pytest.skip(f"notebooks/{lesson}/{lesson}.ipynb is missing: run `make release`")
    walk = Walk(page, lab, lesson, timings, name=f"{lesson}-untagged")
    try:
        walk.run_release(where)
    finally:
        walk.close_all()
    print(f"{lesson} without the tag: {len(walk.problems)} problem(s):\n  - " + "\n  - ".join(walk.problems))
    first_test = next(i for i, cell in enumerate(walk.nb.cells) if protocol.is_test_cell(cell))
    not_run = [i for i, cell in enumerate(walk.nb.cells) if cell.cell_type == "code" and i > first_test
               and cell.get("execution_count") is None]
    assert not_run, f"{lesson} without the tag: Run All went past the first test cell ({first_test}): " \
                    "JupyterLab no longer stops there, so the tag is not what makes the release run to the end"
    assert any("did not run" in p and "Run All stopped" in p for p in walk.problems), walk.problems
    assert any("did not reach the self-check" in p for p in walk.problems), walk.problems
