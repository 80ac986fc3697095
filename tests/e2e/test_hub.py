"""The demo hub (``make hub``, deploy/jupyterhub) in a real browser: JupyterHub with configurable-http-proxy,
each user a Unix user of their own (as root), the course's HTTP exchange (``pte-exchange``) and the feedback
service as hub-managed services.

One hub, started by ``make hub`` on free ports in a temporary folder, with lesson 01 released:

1. a student logs in, opens JupyterLab, and in nbgrader's Assignments tab (Nbgrader > Assignment List)
   fetches lesson 01, over HTTP with their server's own hub token;
2. the student's notebook gets a wrong answer that passes the visible checks (the lesson's pitfall for a
   hidden check), and the student presses Submit in the same tab: the exchange keeps it in its private inbound
   (root's, 0700) in the name the hub gave;
3. the feedback service grades it once; the student presses Fetch Feedback, follows "(view feedback)" and opens
   the page in JupyterLab: it names the failed hidden check's hint ("Hint:") and none of its inputs (labels);
4. the student, scripting with their own token, submits naming a classmate (the submission is still theirs),
   asks for the classmate's feedback (gets only their own) and for the instructor's collect (403); no token or
   a made-up one gets 403. Then ``cat``/``ls`` on the course folder, ``solutions/``, ``gradebook.db``, the
   reference cache, the service's state and the exchange's store, as the student's uid and in a terminal of the
   student's own JupyterLab (its REST API and websocket): each "Permission denied" (what they printed goes to
   ``hub-student-refused.txt`` and ``hub-student-terminal.txt``);
5. the instructor logs in on the same hub and opens the formgrader on a page of its own
   (``/user/pte-instructor/formgrader``): JupyterHub >= 4.1 sends ``frame-ancestors 'none'`` with every
   single-user page, so the formgrader cannot be framed inside JupyterLab (nbgrader #1870, #1910, #1919);
   the test sees Chromium refuse the framed formgrader (Nbgrader > Formgrader), checks that header, then opens
   the formgrader's own page: lesson 01 is listed as released, and Collect brings in the student's latest
   submission through the HTTP exchange (# Submissions 1); ``nbgrader release_feedback`` as the instructor
   replaces the service's page for the student's submission;
6. the class report (issue 46, ``/services/pte-exchange/report``): the instructor sees it (a screenshot), the
   student gets 403.

A service killed while it grades is tests/e2e/test_feedback_service.py's (not repeated here).
Screenshots, what the student's terminal printed, and the hub's log go to ``$PTE_SCREENSHOTS`` (default: a
fresh temporary folder, named in the test's output). Every process the test started (make, the hub, the proxy,
the users' servers and kernels, the services and the grading) is ended by its process id.

Needs node and npm (for configurable-http-proxy), Debian's ``chromium`` and the pinned ``playwright``;
``make hub-deps`` (run by the test) installs JupyterHub (deploy/jupyterhub/requirements.txt, --no-deps) and
the proxy (npm ci).
"""
from __future__ import annotations

import asyncio
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
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import psutil
import pytest
from test_hub_permissions import assert_refused, private_paths, student_reads

from autograder.kernel.vocabulary import protocol

import coursekit as kit

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
    port, api_port, hub_port, exchange_port = free_port(), free_port(), free_port(), free_port()
    args = (f"--api-port {api_port} --hub-port {hub_port} --exchange-port {exchange_port} --lessons {LESSON} "
            "--cooldown 30")
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


def server_token(user: str) -> str:
    """The hub token of ``user``'s running server (its ``JUPYTERHUB_API_TOKEN``, read as root): what the
    student's own nbgrader sends the exchange, and what a scripting student holds in a terminal."""
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "jupyterhub.singleuser" in " ".join(process.info["cmdline"] or []) and \
                    process.environ().get("JUPYTERHUB_USER") == user:
                return process.environ()["JUPYTERHUB_API_TOKEN"]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    raise AssertionError(f"no server of {user} is running")


def in_terminal(hub, user: str, paths: list[Path]) -> str:
    """What a JupyterLab terminal of ``user`` printed for ``cat`` (a file) or ``ls`` (a folder) of each path: a
    terminal of the user's own server (its REST API and websocket, with the server's token), as the student
    opens it from the launcher."""
    from tornado import httpclient, websocket

    token = server_token(user)
    base = f"{hub['url']}user/{user}/"
    request = urllib.request.Request(base + "api/terminals", method="POST", data=b"",
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        name = json.loads(response.read())["name"]
    commands = "; ".join(f"ls -la {p}" if p.is_dir() else f"cat {p}" for p in paths)

    async def talk() -> str:
        ws = await websocket.websocket_connect(httpclient.HTTPRequest(
            base.replace("http://", "ws://") + f"terminals/websocket/{name}",
            headers={"Authorization": f"token {token}"}))
        ws.write_message(json.dumps(["set_size", 50, 400, 800, 2000]))
        ws.write_message(json.dumps(["stdin", f"{commands}; echo END-OF-$((6 * 7))\r"]))
        printed, deadline = "", time.monotonic() + UI_TIMEOUT_S
        while "END-OF-42" not in printed and time.monotonic() < deadline:
            message = await ws.read_message()
            if message is None:
                break
            kind, *text = json.loads(message)
            printed += "".join(text) if kind == "stdout" else ""
        ws.close()
        return printed

    try:
        with ThreadPoolExecutor(max_workers=1) as thread:   # a loop of its own, apart from Playwright's
            return thread.submit(asyncio.run, asyncio.wait_for(talk(), UI_TIMEOUT_S + 10)).result()
    finally:
        urllib.request.urlopen(urllib.request.Request(base + f"api/terminals/{name}", method="DELETE",
                                                      headers={"Authorization": f"token {token}"}), timeout=60)


def exchange_call(settings: dict, path: str, token: str | None, body=None) -> tuple[int, dict]:
    """(status, JSON answer) of a raw request to the HTTP exchange, as a script in a terminal would make it."""
    request = urllib.request.Request(settings["exchange_url"] + path, method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode())
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def inbound_entries(settings: dict) -> list[str]:
    return sorted(os.listdir(settings["inbound"]))


def scripting_student(settings: dict, notebook: Path) -> None:
    """The student, with their own token, tries to submit in a classmate's name and to read the classmate's
    feedback; without a token, or with a made-up one, nothing is served."""
    token = server_token(STUDENT)
    before = inbound_entries(settings)
    text = notebook.read_text()
    status, answer = exchange_call(settings, f"api/submissions/{LESSON}?student={OTHER}", token,
                                   {"notebooks": {f"{LESSON}.ipynb": text}, "student": OTHER, "student_id": OTHER})
    assert status == 200, answer
    [new] = sorted(set(inbound_entries(settings)) - set(before))
    assert new.startswith(f"{STUDENT}+{LESSON}+"), new   # counted for who the hub says sent it
    assert not [name for name in inbound_entries(settings) if name.startswith(f"{OTHER}+")]
    status, answer = exchange_call(settings, f"api/feedback/{LESSON}?student={OTHER}", token)
    assert status == 200 and answer and all(OTHER not in json.dumps(page) for page in answer), answer
    for bad in (None, "not-a-token", token[:-4] + "0000"):
        status, answer = exchange_call(settings, f"api/feedback/{LESSON}", bad)
        assert status == 403, (status, answer)
    status, answer = exchange_call(settings, f"api/collect/{LESSON}", token)   # the instructor's step
    assert status == 403 and "instructors" in answer["message"], answer


def release_as_instructor(state: Path, settings: dict) -> None:
    """``nbgrader release_feedback`` as the instructor, with the instructor's server's token, of a page for the
    student's submission the instructor collected (its timestamp and secret, as nbgrader's generate_feedback
    leaves them beside the page): the student's next fetch gets it."""
    collected = state / "course" / "submitted" / STUDENT / LESSON
    mine = state / "course" / "feedback" / STUDENT / LESSON
    mine.mkdir(parents=True)
    for name in ("timestamp.txt", "submission_secret.txt"):
        shutil.copy(collected / name, mine / name)
    (mine / f"{LESSON}.html").write_text("<p>See me after class: the instructor's own page.</p>")
    instructor = pwd.getpwnam(INSTRUCTOR if settings["own_unix_users"] else pwd.getpwuid(os.getuid()).pw_name)
    for path in [mine.parent.parent, mine.parent, mine, *mine.iterdir()]:
        os.chown(path, instructor.pw_uid, instructor.pw_gid)
    env = dict(os.environ, HOME=str(state / "home" / INSTRUCTOR), OMP_NUM_THREADS="1",
               JUPYTER_CONFIG_PATH=settings["config_dirs"]["instructor"],
               JUPYTERHUB_API_TOKEN=server_token(INSTRUCTOR))
    done = subprocess.run([settings["users_python"], "-m", "nbgrader", "release_feedback", LESSON,
                           f"--student={STUDENT}", "--log-level=ERROR"], cwd=state / "course", env=env,
                          user=instructor.pw_uid, group=instructor.pw_gid, extra_groups=[],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the instructor's release_feedback failed:\n{done.stdout}{done.stderr}"
    status, pages = exchange_call(settings, f"api/feedback/{LESSON}", server_token(STUDENT))
    assert status == 200 and any("the instructor's own page" in page["html"] for page in pages), pages


def student_refused(hub, state: Path, shots: Path) -> None:
    """The course and the exchange's store refused to the student's uid, and in a terminal of their JupyterLab."""
    printed = student_reads(STUDENT, private_paths(state))
    (shots / "hub-student-refused.txt").write_text("\n".join(f"{c}\n  {o}" for c, o in printed.items()) + "\n")
    assert_refused(printed)
    assert (state / "course" / ".grading" / "reference-cache").is_dir()   # the grading wrote it: refused above
    paths = private_paths(state)   # the same, in a terminal of the student's own JupyterLab
    terminal = in_terminal(hub, STUDENT, paths)
    (shots / "hub-student-terminal.txt").write_text(terminal)
    assert "END-OF-42" in terminal, terminal[-3000:]
    for path in paths:
        assert re.search(rf"{re.escape(str(path))}'?: Permission denied", terminal), (path, terminal[-3000:])


def test_student_feedback_and_instructor_formgrader(hub, browser, shots):
    state = hub["state"]
    settings = json.loads((state / "hub.json").read_text())
    own = settings["own_unix_users"]   # False where the checkout lies in a folder other users may not enter
    timings = {"hub start (make hub, after make hub-deps)": hub["start_s"]}

    # 1. the student: log in, Assignments tab, Fetch (over the HTTP exchange)
    started = time.monotonic()
    context, page = log_in(browser, hub, STUDENT)
    timings["student log in until JupyterLab loaded"] = time.monotonic() - started
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
    owner = STUDENT if own else pwd.getpwuid(os.getuid()).pw_name
    assert pwd.getpwuid(notebook.stat().st_uid).pw_name == owner   # written by the student's own server

    # 2. a wrong answer, written as the student's editor would save it, then Submit: the exchange keeps it in
    # its private inbound, in the name the hub gave, root's and 0700
    nbformat.write(wrong_answer(state), notebook)
    entry = pwd.getpwnam(owner)
    os.chown(notebook, entry.pw_uid, entry.pw_gid)
    submitted = time.monotonic()
    submit.click()
    page.locator("#submitted_assignments_list .list_item", has_text=LESSON).first.wait_for()
    [kept] = [name for name in inbound_entries(settings) if name.startswith(f"{STUDENT}+{LESSON}+")]
    folder = Path(settings["inbound"]) / kept
    assert (folder.stat().st_uid, folder.stat().st_mode & 0o777) == (0, 0o700)

    # 3. the service grades it once; Fetch Feedback; (view feedback); the page in JupyterLab
    deadline = submitted + GRADE_TIMEOUT_S
    while not (queue_rows(state, STUDENT) and all(row[0] == "done" for row in queue_rows(state, STUDENT))):
        assert time.monotonic() < deadline, (f"no feedback {GRADE_TIMEOUT_S} s after Submit; queue: "
                                             f"{queue_rows(state, STUDENT)}\n{hub['log'].read_text()[-5000:]}")
        time.sleep(POLL_S)
    log_text = hub["log"].read_text()
    assert len(re.findall(rf"pte-feedback {STUDENT}/{LESSON} \(", log_text)) == 1, log_text[-5000:]
    [row] = queue_rows(state, STUDENT)
    assert row[1] == "graded", row
    timings["Submit until the service released feedback"] = time.monotonic() - submitted
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

    # a scripting student: another's name, another's feedback, no token; then the student's terminal on the
    # course and the exchange's store (what the student's uid may read)
    scripting_student(settings, notebook)
    if own:
        student_refused(hub, state, shots)
    else:   # every server runs as root here (demo.py says why): file modes protect nothing a server can reach
        print(f"not checked: a student's refusals ({settings['why_shared']})")

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
    while submissions.inner_text().strip() != "1":
        assert time.monotonic() < deadline, f"# Submissions after Collect: {submissions.inner_text()!r}"
        page.wait_for_timeout(POLL_S * 1000)
    page.screenshot(path=str(shots / "hub-instructor-formgrader.png"), full_page=True)
    assert (state / "course" / "submitted" / STUDENT / LESSON / f"{LESSON}.ipynb").is_file()
    release_as_instructor(state, settings)

    # 5. the class report (issue 46): the instructor's page behind the hub's login; a student gets 403
    report_url = f"{hub['url']}services/{settings['exchange_service']}/report"
    response = page.goto(report_url)
    assert response.ok and page.url.startswith(report_url), (response.status, page.url)
    body = page.locator("body").inner_text()
    assert "Class report" in body, body[:2000]
    page.screenshot(path=str(shots / "hub-instructor-report.png"), full_page=True)
    context.close()
    context, page = log_in(browser, hub, STUDENT)
    response = page.goto(report_url)
    assert response.status == 403 and "instructors only" in page.locator("body").inner_text(), response.status
    page.screenshot(path=str(shots / "hub-student-report-403.png"))
    context.close()

    print("screenshots:", *sorted(shots.glob("hub-*.png")))
    for step, seconds in timings.items():
        print(f"{seconds:7.1f} s  {step}")
