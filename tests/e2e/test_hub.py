"""The demo hub (``make hub``, deploy/jupyterhub) in a real browser: JupyterHub with configurable-http-proxy,
each user a Unix user of their own (as root), nbgrader's exchange and the feedback service as a hub-managed
service.

One hub, started by ``make hub`` on free ports in a temporary folder, with lesson 01 released:

1. a student logs in, opens JupyterLab, and in nbgrader's Assignments tab (Nbgrader > Assignment List)
   fetches lesson 01;
2. the student's notebook gets a wrong answer that passes the visible checks (the lesson's pitfall for a
   hidden check), and the student presses Submit in the same tab; right after, the other student (as that
   Unix user, with ``nbgrader submit``) submits a notebook whose cell floods its output, with a symbolic link
   to the course's gradebook beside it in the inbound folder;
3. the feedback service (the hub started it; the test watches its queue) is killed with SIGKILL while it
   grades the first submission: the hub starts it again, the new service ends what was left of the killed
   run, and grades both submissions, each once: the flood ends ``output-limit``, the link is neither followed
   nor copied. The student presses Fetch Feedback, follows "(view feedback)" and opens the page in
   JupyterLab: it names the failed hidden check's hint ("Hint:") and none of its inputs (labels);
4. the instructor logs in on the same hub and opens the formgrader on a page of its own
   (``/user/pte-instructor/formgrader``): JupyterHub >= 4.1 sends ``frame-ancestors 'none'`` with every
   single-user page, so the formgrader cannot be framed inside JupyterLab (nbgrader #1870, #1910, #1919);
   the test sees Chromium refuse the framed formgrader (Nbgrader > Formgrader), checks that header, then opens
   the formgrader's own page: lesson 01 is listed as released, and Collect brings in the students'
   submissions through the exchange (# Submissions 2). Before that, ``nbgrader release_feedback`` run as the
   instructor replaces the service's page in the exchange: the two can share it (groupshared;
   deploy/jupyterhub/README.md).

Screenshots of the student's feedback and the instructor's formgrader (framed and refused, then on its own
page), and the hub's log, go to ``$PTE_SCREENSHOTS`` (default: a fresh temporary folder, named in the test's
output). Every process the test started (make, the hub, the proxy, the users' servers and kernels, the
service and its grading) is ended by its process id.

Needs node and npm (for configurable-http-proxy), Debian's ``chromium`` and the pinned ``playwright``;
``make hub-deps`` (run by the test) installs JupyterHub (deploy/jupyterhub/requirements.txt, --no-deps) and
the proxy (npm ci).
"""
from __future__ import annotations

import html as htmllib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import psutil
import pytest

from autograder.kernel import protocol

import coursekit as kit
from servicekit import read_pid, running_in_group

LESSON = "01_tensors_and_views"
STUDENT, OTHER, INSTRUCTOR, PASSWORD = "pte-ann", "pte-bob", "pte-instructor", "pte-demo"
START_TIMEOUT_S = 300     # make hub-deps done: users, course copy, release, hub, proxy, service
SPAWN_TIMEOUT_S = 180     # a user's JupyterLab up and its page loaded
GRADE_TIMEOUT_S = 600     # from Submit to the service's feedback released
UI_TIMEOUT_S = 60         # one click until the tab shows its result
POLL_S = 0.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chromium() -> str:
    for name in (os.environ.get("PTE_CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.fail("Debian's chromium is not installed: `make test` installs it as root (tools/system-deps.sh), "
                "otherwise run `apt-get install chromium` (or point $PTE_CHROMIUM at a Chromium binary)")


@pytest.fixture(scope="module")
def shots() -> Path:
    """Where the screenshots and the hub's log go: $PTE_SCREENSHOTS, else a fresh temporary folder (kept)."""
    folder = Path(os.environ.get("PTE_SCREENSHOTS") or tempfile.mkdtemp(prefix="pte-hub-screenshots-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def family(pid: int) -> set[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return {root, *root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def end(processes: set[psutil.Process]) -> None:
    """Terminate, then kill, each process still alive (by its id)."""
    alive = [p for p in processes if p.is_running()]
    for p in alive:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, still = psutil.wait_procs(alive, timeout=10)
    for p in still:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(still, timeout=10)


@pytest.fixture(scope="module")
def hub(shots):
    if not shutil.which("npm") or not shutil.which("node"):
        pytest.skip("node and npm are missing: the hub's proxy is configurable-http-proxy from npm "
                    "(Debian: apt-get install nodejs npm)")
    deps = subprocess.run(["make", "--no-print-directory", "hub-deps"], cwd=kit.REPO, capture_output=True,
                          text=True, timeout=900)
    assert deps.returncode == 0, f"make hub-deps failed:\n{deps.stdout}{deps.stderr}"
    state = Path(tempfile.mkdtemp(prefix="pte-hub-"))
    state.chmod(0o755)   # the users' servers live below it
    port, api_port, hub_port = free_port(), free_port(), free_port()
    args = f"--api-port {api_port} --hub-port {hub_port} --lessons {LESSON} --cooldown 30"
    log_path = shots / "hub.log"
    log = open(log_path, "w+")
    proc = subprocess.Popen(["make", "--no-print-directory", "hub", f"HUB_STATE={state}", f"HUB_PORT={port}",
                             f"HUB_ARGS={args}"], cwd=kit.REPO, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    seen: set[psutil.Process] = set()
    url = f"http://127.0.0.1:{port}/"
    info = {"url": url, "state": state, "log": log_path, "proc": proc, "seen": seen}
    try:
        deadline, started = time.monotonic() + START_TIMEOUT_S, time.monotonic()
        while True:
            seen |= family(proc.pid)
            try:
                with urllib.request.urlopen(url + "hub/api/", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, f"make hub exited early:\n{log_path.read_text()[-5000:]}"
            assert time.monotonic() < deadline, f"the hub did not answer in {START_TIMEOUT_S} s:\n" \
                                                f"{log_path.read_text()[-5000:]}"
            time.sleep(POLL_S)
        info["start_s"] = time.monotonic() - started
        yield info
    finally:
        seen |= family(proc.pid)
        stopped = time.monotonic()
        # the hub only (make's child): it stops the proxy, the users' servers and the service
        for child in [p for p in seen if p.is_running() and p.ppid() == proc.pid]:
            child.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        end(seen)
        print(f"hub stopped in {time.monotonic() - stopped:.1f} s; log: {log_path}")
        log.close()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: it is pinned in requirements.txt (make venv)")
    player = sync_playwright().start()
    browser = player.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
    try:
        yield browser
    finally:
        browser.close()
        player.stop()


def log_in(browser, hub, user: str):
    """A fresh browser context logged in as ``user``, on its JupyterLab page once loaded."""
    context = browser.new_context(viewport={"width": 1800, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_S * 1000)
    page.goto(hub["url"] + "hub/login")
    page.fill("input#username_input", user)
    page.fill("input#password_input", PASSWORD)
    page.click("#login_submit")
    page.wait_for_selector("#jp-main-dock-panel", timeout=SPAWN_TIMEOUT_S * 1000)
    assert page.url.startswith(f"{hub['url']}user/{user}/lab"), page.url
    return context, page


def queue_rows(state: Path, student: str) -> list[tuple[str, str, str]]:
    db = state / "course" / ".grading" / "feedback-service" / "queue.sqlite"
    if not db.is_file():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT state, status, reason FROM submissions WHERE student = ? ORDER BY noticed",
                           (student,)).fetchall()
    except sqlite3.OperationalError:   # created but its table not yet
        return []
    finally:
        con.close()


def wrong_answer(state: Path) -> nbformat.NotebookNode:
    """The release with every answer right but one: a pitfall that passes the visible checks of its
    exercise and fails a hidden one."""
    course = state / "course"
    solution = nbformat.read(course / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    release = nbformat.read(course / "notebooks" / LESSON / f"{LESSON}.ipynb", as_version=4)
    wrong = next(iter(kit.load_pitfall_module(LESSON).HIDDEN_ONLY["independent_copy"].values()))
    return kit.fill_answers(release, solution, {"independent_copy": wrong})


FLOOD = ("def linear_forward(x, weight, bias):\n    import sys\n    chunk = 'x' * 5_000_000\n"
         "    while True:\n        sys.stdout.write(chunk)\n")


def run_as(state: Path, user: str, *args: str, cwd: Path) -> None:
    """nbgrader as the Unix user ``user``, a student, with their home and their server's config."""
    settings = json.loads((state / "hub.json").read_text())
    entry = pwd.getpwnam(user)
    env = dict(os.environ, HOME=str(state / "home" / user), OMP_NUM_THREADS="1",
               JUPYTER_CONFIG_PATH=settings["config_dirs"]["students"])
    done = subprocess.run([settings["users_python"], "-m", "nbgrader", *args, "--log-level=ERROR"], cwd=cwd,
                          env=env, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} as {user} failed:\n{done.stdout}{done.stderr}"


def fetch_as_other(state: Path) -> None:
    """The other student fetches the lesson and writes an answer whose cell floods its output."""
    home, entry = state / "home" / OTHER, pwd.getpwnam(OTHER)
    run_as(state, OTHER, "fetch_assignment", LESSON, cwd=home)
    course = state / "course"
    solution = nbformat.read(course / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    release = nbformat.read(course / "notebooks" / LESSON / f"{LESSON}.ipynb", as_version=4)
    notebook = home / LESSON / f"{LESSON}.ipynb"
    nbformat.write(kit.fill_answers(release, solution, {"linear_forward": FLOOD}), notebook)
    os.chown(notebook, entry.pw_uid, entry.pw_gid)


def submit_as_other(state: Path) -> None:
    """The other student submits it, and puts a symbolic link to the course's gradebook beside it in the inbound
    folder (they may write there)."""
    home, entry = state / "home" / OTHER, pwd.getpwnam(OTHER)
    run_as(state, OTHER, "submit", LESSON, cwd=home)
    [inbound] = [p for p in (state / "exchange" / "pytorch-essentials" / "inbound").iterdir()
                 if p.name.startswith(f"{OTHER}+")]
    link = inbound / "gradebook.db"
    link.symlink_to(state / "course" / "gradebook.db")
    os.lchown(link, entry.pw_uid, entry.pw_gid)


def service_process(hub) -> psutil.Process | None:
    """The feedback service's process, a child of the hub."""
    for process in family(hub["proc"].pid):
        try:
            if "autograder.service" in process.cmdline():
                return process
        except psutil.NoSuchProcess:
            pass
    return None


def kill_the_service_while_grading(hub, state: Path) -> int:
    """SIGKILL the service once the grading command runs for the student's submission; the hub starts it again.
    The process group of the killed service's grading run, which the new service must end (the end-to-end test
    of the service kills it later, when that run has worker processes)."""
    pid_file = state / "course" / ".grading" / "feedback-service" / "grading.pid"
    deadline = time.monotonic() + GRADE_TIMEOUT_S
    while not (any(row[0] == "grading" for row in queue_rows(state, STUDENT)) and read_pid(pid_file)):
        assert time.monotonic() < deadline, f"not graded: {queue_rows(state, STUDENT)}"
        time.sleep(0.1)
    pgid = read_pid(pid_file)
    killed = service_process(hub)
    hub["seen"].update(family(killed.pid))
    killed.kill()
    killed.wait(timeout=30)
    while (restarted := service_process(hub)) is None or restarted.pid == killed.pid:
        assert time.monotonic() < deadline, "the hub did not start the service again"
        time.sleep(POLL_S)
    return pgid


def release_as_instructor(state: Path) -> None:
    """``nbgrader release_feedback`` as the instructor, of the service's feedback for the student's submission
    (its timestamp and secret): it replaces the service's page (groupshared, deploy/jupyterhub/README.md)."""
    settings = json.loads((state / "hub.json").read_text())
    service_feedback = state / "course" / ".grading" / "feedback-service" / "course" / "feedback" / STUDENT / LESSON
    mine = state / "course" / "feedback" / STUDENT / LESSON
    shutil.copytree(service_feedback, mine)
    instructor = pwd.getpwnam(INSTRUCTOR)
    for path in [mine.parent.parent, mine.parent, mine, *mine.iterdir()]:
        os.chown(path, instructor.pw_uid, instructor.pw_gid)
    env = dict(os.environ, HOME=str(state / "home" / INSTRUCTOR), OMP_NUM_THREADS="1",
               JUPYTER_CONFIG_PATH=settings["config_dirs"]["instructor"])
    done = subprocess.run([settings["users_python"], "-m", "nbgrader", "release_feedback", LESSON,
                           f"--student={STUDENT}", "--log-level=ERROR"], cwd=state / "course", env=env,
                          user=instructor.pw_uid, group=instructor.pw_gid, extra_groups=[],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the instructor's release_feedback failed:\n{done.stdout}{done.stderr}"
    from nbgrader.utils import notebook_hash

    secret = (service_feedback / "submission_secret.txt").read_text()
    name = notebook_hash(secret=secret, notebook_id=LESSON)   # the student's page, as fetch_feedback finds it
    page = state / "exchange" / "pytorch-essentials" / "feedback" / f"{name}.html"
    assert pwd.getpwuid(page.stat().st_uid).pw_name == INSTRUCTOR, pwd.getpwuid(page.stat().st_uid).pw_name


def test_student_feedback_and_instructor_formgrader(hub, browser, shots):
    state = hub["state"]
    timings = {"hub start (make hub, after make hub-deps)": hub["start_s"]}

    # the other student's Unix user fetches and answers meanwhile (one Unix user per hub user only)
    other = json.loads((state / "hub.json").read_text())["own_unix_users"]
    helper = ThreadPoolExecutor(max_workers=1)
    fetched = helper.submit(fetch_as_other, state) if other else None

    # 1. the student: log in, Assignments tab, Fetch
    started = time.monotonic()
    context, page = log_in(browser, hub, STUDENT)
    timings["student log in until JupyterLab loaded"] = time.monotonic() - started
    owner = pwd.getpwuid((state / "home" / STUDENT).stat().st_uid).pw_name
    page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    page.click(".lm-Menu-itemLabel:text-is('Assignment List')")
    fetch = page.locator("#released_assignments_list .list_item", has_text=LESSON).locator("button",
                                                                                          has_text="Fetch")
    fetch.click()
    submit = page.locator("#fetched_assignments_list .list_item", has_text=LESSON).locator("button",
                                                                                           has_text="Submit")
    submit.wait_for()
    notebook = state / "home" / STUDENT / LESSON / f"{LESSON}.ipynb"
    assert notebook.is_file(), "Fetch did not write the student's copy"
    if owner == STUDENT:   # one Unix user per hub user: the fetched copy is the student's own
        assert pwd.getpwuid(notebook.stat().st_uid).pw_name == STUDENT

    # 2. a wrong answer, written as the student's editor would save it, then Submit
    nbformat.write(wrong_answer(state), notebook)
    entry = pwd.getpwnam(owner)
    os.chown(notebook, entry.pw_uid, entry.pw_gid)
    submitted = time.monotonic()
    submit.click()
    page.locator("#submitted_assignments_list .list_item", has_text=LESSON).first.wait_for()
    inbound = [p.name for p in (state / "exchange" / "pytorch-essentials" / "inbound").iterdir()]
    assert any(name.startswith(f"{STUDENT}+{LESSON}+") for name in inbound), inbound

    if other:   # the other student's own Unix user submits (the exchange's real permissions)
        fetched.result()
        helper.shutdown()
        submit_as_other(state)

    # 3. the service, killed while it grades, started again by the hub, grades both once; Fetch Feedback; (view
    # feedback); the page in JupyterLab
    pgid = kill_the_service_while_grading(hub, state)
    deadline = submitted + GRADE_TIMEOUT_S
    students = [STUDENT, OTHER] if other else [STUDENT]
    while not all(queue_rows(state, s) and all(row[0] == "done" for row in queue_rows(state, s)) for s in students):
        assert time.monotonic() < deadline, (f"no feedback {GRADE_TIMEOUT_S} s after Submit; queue: "
                                             f"{[queue_rows(state, s) for s in students]}\n"
                                             f"{hub['log'].read_text()[-5000:]}")
        time.sleep(POLL_S)
    log_text = hub["log"].read_text()
    assert "Service pte-feedback exited with status -9" in log_text, log_text[-5000:]   # the hub restarted it
    assert not running_in_group(pgid), "a process of the killed service's grading run outlived the restart"
    for student in students:   # each submission queued once, graded once, its feedback released once
        assert len(queue_rows(state, student)) == 1, queue_rows(state, student)
        assert len(re.findall(rf"pte-feedback {student}/{LESSON} \(", log_text)) == 1, log_text[-5000:]
    if other:
        [bob] = queue_rows(state, OTHER)
        assert bob[1] == "output-limit", bob
        copied = state / "course" / ".grading" / "feedback-service" / "course" / "submitted" / OTHER / LESSON
        assert sorted(p.name for p in copied.iterdir()) == [f"{LESSON}.ipynb", "submission_secret.txt",
                                                               "timestamp.txt"]
        assert not any(p.is_symlink() for p in copied.iterdir())
    [row] = [row for row in queue_rows(state, STUDENT) if row[0] == "done"]
    assert row[1] == "graded", row
    timings["Submit until the service released feedback (killed and started again meanwhile)"] = \
        time.monotonic() - submitted
    page.click("#refresh_assignments_list")
    page.locator("#submitted_assignments_list button", has_text="Fetch Feedback").first.click()
    view = page.locator("#submitted_assignments_list a", has_text="view feedback").first
    view.click()   # the file browser goes to the feedback folder
    page.locator(".jp-DirListing-item", has_text=f"{LESSON}.html").first.dblclick()
    frame = page.frame_locator(".jp-HTMLViewer iframe").first
    frame.locator("body").wait_for()
    page.wait_for_timeout(1000)
    text = htmllib.unescape(re.sub(r"\s+", " ", frame.locator("body").inner_text()))
    assert "Hint:" in text and "HiddenTestFailed" in text, text[-3000:]
    labels = [e["label"] for e in protocol.Reference.read(
        state / "course" / "solutions" / LESSON / protocol.REFERENCE_FILE).cells["test_independent_copy"]]
    assert not [label for label in labels if label in text], "a hidden check's label (its inputs) is shown"
    news = page.locator(".jp-Notification-Toast-Close, button:text-is('No')").first
    if news.is_visible():   # JupyterLab's first-start question about news
        news.click()
        page.wait_for_timeout(500)
    page.keyboard.press("Control+b")   # the file browser folded away: the feedback page gets the width
    hint = frame.locator("text=Hint:").first
    hint.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "hub-student-feedback.png"))
    context.close()

    # the instructor can still release feedback of their own into the exchange the service (root) writes to
    if owner == STUDENT:
        release_as_instructor(state)

    # 4. the instructor: the formgrader on a page of its own
    started = time.monotonic()
    context, page = log_in(browser, hub, INSTRUCTOR)
    timings["instructor log in until JupyterLab loaded"] = time.monotonic() - started
    # inside JupyterLab (Nbgrader > Formgrader) the browser refuses the frame
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    page.click(".lm-Menu-itemLabel:text-is('Formgrader')")
    page.locator("iframe").first.wait_for(state="attached")
    deadline = time.monotonic() + UI_TIMEOUT_S
    while not [text for text in console if "frame-ancestors 'none'" in text]:
        assert time.monotonic() < deadline, f"the framed formgrader was not refused: {console}"
        page.wait_for_timeout(POLL_S * 1000)
    page.screenshot(path=str(shots / "hub-instructor-formgrader-framed.png"))
    # on a page of its own it works
    response = page.goto(f"{hub['url']}user/{INSTRUCTOR}/formgrader")
    assert response.ok, response.status
    csp = response.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in csp, f"JupyterHub's header changed (the formgrader could be framed?): {csp}"
    row = page.locator("table tbody tr", has_text=LESSON).first
    row.wait_for()
    assert "released" in row.inner_text(), row.inner_text()
    # and works with the exchange's real permissions: Collect reads the student's submission from inbound/
    row.locator("td.collect a").click()
    page.locator("#success-modal, #error-modal").first.wait_for()
    assert page.locator("#success-modal").count(), page.locator("#error-modal").inner_text()
    page.locator("#success-modal .modal-footer button").first.click()
    page.locator("#success-modal").wait_for(state="detached")
    submissions = page.locator("table tbody tr", has_text=LESSON).first.locator("td").nth(8)
    deadline = time.monotonic() + UI_TIMEOUT_S
    while submissions.inner_text().strip() != str(len(students)):
        assert time.monotonic() < deadline, f"# Submissions after Collect: {submissions.inner_text()!r}"
        page.wait_for_timeout(POLL_S * 1000)
    page.screenshot(path=str(shots / "hub-instructor-formgrader.png"), full_page=True)
    context.close()

    print("screenshots:", *sorted(shots.glob("hub-*.png")))
    for step, seconds in timings.items():
        print(f"{seconds:7.1f} s  {step}")
