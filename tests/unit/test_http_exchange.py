"""The HTTP exchange (autograder/exchange, autograder/service/http.py) as a scripting student would try it.

A real tornado server on a free port with a fake HubAuth that maps tokens to hub users; the students use
nbgrader's exchange steps from autograder.exchange.client (as the Assignments tab does) or raw requests. The
student a submission counts for comes from the token; a name in the request changes nothing.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from nbgrader.utils import notebook_hash
from tornado import httpserver, ioloop, netutil
from traitlets.config import Config

from autograder.exchange import client
from autograder.exchange.store import Store
from autograder.service.http import DISCARD, JSON_OVERHEAD, make_app

COURSE, LESSON, PREFIX = "pte-course", "01_demo", "/services/pte-exchange/"
SCOPE = "access:services!service=pte-exchange"
CAP = 200_000


def user(name, groups=(), scopes=(SCOPE,), kind="user"):
    return {"name": name, "kind": kind, "groups": list(groups), "scopes": list(scopes)}


USERS = {"tok-ann": user("ann"), "tok-bob": user("pte-bob"), "tok-prof": user("prof", groups=["instructors"]),
         "tok-noscope": user("ann", scopes=["read:users:name!user=ann"]),
         "tok-service": user("pte-feedback", kind="service")}
BAD_NAMES = ["-h", "-x", "*", "ann*", "a?b", "[ab]", "..", "a/../b", "a/b", "a\nb", "a\x00b", "a\x1bb", "\u0430nn",
             "ann\u200b", "a+b", "", ".hidden", "a..b", "x" * 65,
             "_ann"]   # the feedback service refuses a leading '_': an id stored here must be one it grades


class FakeAuth:
    """HubAuth's interface as the server uses it; a token maps to a hub user's model."""
    access_scopes = {SCOPE}
    login_url = ""

    def get_token(self, handler, in_cookie=True):
        found = re.match(r"token (.+)", handler.request.headers.get("Authorization", ""))
        return found.group(1) if found else ""

    async def user_for_token(self, token, sync=True, **kwargs):
        return USERS.get(token)

    async def get_user(self, handler, sync=True):
        return USERS.get(self.get_token(handler))

    def check_scopes(self, required, model):
        return set(required) & set(model["scopes"])


def notebook(text="x = 1") -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text)])
    return nbformat.writes(nb)


@pytest.fixture
def hub(tmp_path):
    course = tmp_path / "course"
    (course / "notebooks" / LESSON / "data").mkdir(parents=True)
    (course / "notebooks" / LESSON / f"{LESSON}.ipynb").write_text(notebook("answer = None"))
    (course / "notebooks" / LESSON / "data" / "table.csv").write_text("a,b\n1,2\n")
    (course / "notebooks" / "unreleased").mkdir()
    store = Store(course, "notebooks", [".ipynb_checkpoints"], tmp_path / "exchange", COURSE, CAP)
    store.mark_released(LESSON)
    holder, ready = {}, threading.Event()

    def serve():
        asyncio.set_event_loop(asyncio.new_event_loop())
        sockets = netutil.bind_sockets(0, "127.0.0.1")
        server = httpserver.HTTPServer(make_app(store, FakeAuth(), PREFIX),
                                       max_body_size=DISCARD * (CAP + JSON_OVERHEAD))
        server.add_sockets(sockets)
        holder.update(port=sockets[0].getsockname()[1], loop=ioloop.IOLoop.current())
        ready.set()
        ioloop.IOLoop.current().start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    url = f"http://127.0.0.1:{holder['port']}{PREFIX}"
    yield {"url": url, "store": store, "tmp": tmp_path, "inbound": store.inbound}
    holder["loop"].add_callback(holder["loop"].stop)
    thread.join(10)


def request(hub, method, path, token=None, body=None, headers=None):
    """(status, JSON or text) of one raw request."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(hub["url"] + path, data=data, method=method, headers=dict(headers or {}))
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def step(hub, kind, token, home: Path, assignment=LESSON, **extra):
    """One of nbgrader's exchange steps, as the Assignments tab makes it, for the user of ``token``."""
    home.mkdir(parents=True, exist_ok=True)
    config = Config({"CourseDirectory": {"course_id": COURSE, "assignment_id": assignment,
                                         "root": str(hub["tmp"] / "course"), **extra.pop("coursedir", {})},
                     "HTTPExchange": {"service_url": hub["url"], "api_token": token},
                     "Exchange": {"assignment_dir": str(home)}, **extra})
    coursedir = CourseDirectory(config=config)
    return kind(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()


def inbound(hub) -> list[str]:
    return sorted(os.listdir(hub["inbound"]))


def submit_as(hub, token, home, text="x = 2", **extra):
    step(hub, client.ExchangeFetchAssignment, token, home, **extra) if not (home / LESSON).exists() else None
    (home / LESSON / f"{LESSON}.ipynb").write_text(notebook(text))
    step(hub, client.ExchangeSubmit, token, home, **extra)


def release_feedback(hub, folder: str, page: str) -> None:
    """What the feedback service does: a page named by the submission's secret in the private exchange."""
    secret = (hub["inbound"] / folder / "submission_secret.txt").read_text()
    name = notebook_hash(secret=secret, notebook_id=LESSON)
    (hub["store"].root / "feedback" / f"{name}.html").write_text(page)


def test_round_trip_fetch_submit_list_feedback(hub, tmp_path):
    home = tmp_path / "ann"
    [released] = step(hub, client.ExchangeList, "tok-ann", home, assignment="")
    assert released["status"] == "released" and released["assignment_id"] == LESSON   # not "unreleased"
    step(hub, client.ExchangeFetchAssignment, "tok-ann", home)
    assert (home / LESSON / "data" / "table.csv").read_text() == "a,b\n1,2\n"
    (home / LESSON / f"{LESSON}.ipynb").write_text(notebook("answer = 42"))
    step(hub, client.ExchangeSubmit, "tok-ann", home)
    [folder] = inbound(hub)
    student, assignment, timestamp, _ = folder.split("+")
    assert (student, assignment) == ("ann", LESSON)
    kept = hub["inbound"] / folder
    assert sorted(os.listdir(kept)) == [f"{LESSON}.ipynb", "submission_secret.txt", "timestamp.txt"]
    assert (kept / "timestamp.txt").read_text() == timestamp
    assert "answer = 42" in (kept / f"{LESSON}.ipynb").read_text()
    for path in [hub["store"].root.parent, hub["store"].root, hub["inbound"], kept, *kept.iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (path, oct(path.stat().st_mode))

    [listed] = step(hub, client.ExchangeList, "tok-ann", home, assignment="", ExchangeList={"cached": True})
    assert not listed["submissions"][0]["has_exchange_feedback"]
    release_feedback(hub, folder, "<p>Hint: ann's feedback</p>")
    [listed] = step(hub, client.ExchangeList, "tok-ann", home, assignment="", ExchangeList={"cached": True})
    assert listed["submissions"][0]["has_exchange_feedback"]
    step(hub, client.ExchangeFetchFeedback, "tok-ann", home)
    page = home / LESSON / "feedback" / timestamp / f"{LESSON}.html"
    assert page.read_text() == "<p>Hint: ann's feedback</p>"
    [listed] = step(hub, client.ExchangeList, "tok-ann", home, assignment="", ExchangeList={"cached": True})
    assert listed["submissions"][0]["has_local_feedback"] and not listed["submissions"][0]["feedback_updated"]
    for everything in ("", "*"):   # the Assignments tab asks for "*" after Fetch Feedback
        [listed] = step(hub, client.ExchangeList, "tok-ann", home, assignment=everything,
                        ExchangeList={"cached": True})
        assert listed["assignment_id"] == LESSON


def test_the_student_is_who_the_token_says(hub, tmp_path):
    """A student who names a classmate (nbgrader's --student, a field in the request) still submits as
    themself."""
    submit_as(hub, "tok-bob", tmp_path / "bob", coursedir={"student_id": "ann"})
    status, _ = request(hub, "POST", f"api/submissions/{LESSON}?student=ann", "tok-bob",
                        {"notebooks": {f"{LESSON}.ipynb": notebook()}, "student": "ann", "student_id": "ann"})
    assert status == 200
    assert [name.split("+")[0] for name in inbound(hub)] == ["pte-bob", "pte-bob"]


def test_feedback_only_to_its_owner(hub, tmp_path):
    submit_as(hub, "tok-ann", tmp_path / "ann")
    [folder] = inbound(hub)
    release_feedback(hub, folder, "<p>ann's secret hint</p>")
    bob = tmp_path / "bob"
    submit_as(hub, "tok-bob", bob)
    step(hub, client.ExchangeFetchFeedback, "tok-bob", bob)
    assert not (bob / LESSON / "feedback").exists() or not list((bob / LESSON / "feedback").rglob("*.html"))
    for path in (f"api/feedback/{LESSON}", "api/submissions", f"api/feedback/{LESSON}?student=ann"):
        status, answer = request(hub, "GET", path, "tok-bob")
        assert status == 200 and "ann" not in json.dumps(answer), (path, answer)
    status, answer = request(hub, "GET", f"api/feedback/{LESSON}", "tok-ann")
    assert status == 200 and [p["html"] for p in answer] == ["<p>ann's secret hint</p>"]
    for path in (f"api/collect/{LESSON}", f"api/release/{LESSON}"):   # the instructor's steps
        status, answer = request(hub, "GET" if "collect" in path else "POST", path, "tok-bob",
                                 None if "collect" in path else {})
        assert status == 403 and "instructors" in answer["message"], answer


@pytest.mark.parametrize("token", [None, "", "tok-unknown", "tok-noscope", "tok-service"])
def test_no_valid_token_is_403(hub, token):
    for method, path, body in [("GET", "api/assignments", None), ("GET", f"api/assignments/{LESSON}", None),
                               ("POST", f"api/submissions/{LESSON}", {"notebooks": {f"{LESSON}.ipynb": notebook()}}),
                               ("GET", "api/submissions", None), ("GET", f"api/feedback/{LESSON}", None),
                               ("GET", f"api/collect/{LESSON}", None), ("GET", "report", None)]:
        status, _ = request(hub, method, path, token, body)
        assert status == 403, (method, path, status)
    assert inbound(hub) == []


@pytest.mark.parametrize("name", BAD_NAMES, ids=ascii)
def test_a_hub_user_whose_name_is_no_safe_id_is_refused_with_a_message(hub, name):
    USERS["tok-odd"] = user(name)
    try:
        status, answer = request(hub, "POST", f"api/submissions/{LESSON}", "tok-odd",
                                 {"notebooks": {f"{LESSON}.ipynb": notebook()}})
    finally:
        del USERS["tok-odd"]
    assert status == 403, (status, answer)
    assert "cannot be a student id" in answer["message"] and "1 to 64 ASCII letters" in answer["message"]
    assert "\n" not in answer["message"] and ascii(name) in answer["message"]
    assert inbound(hub) == []


@pytest.mark.parametrize("assignment", ["-h", "*", "..", "%2E%2E", "..%2F..%2Fsolutions", "unreleased",
                                        "01_demo%0A", "%D0%B0"])
def test_an_assignment_id_that_is_no_released_id_is_refused(hub, assignment):
    status, answer = request(hub, "POST", f"api/submissions/{assignment}", "tok-ann",
                             {"notebooks": {f"{LESSON}.ipynb": notebook()}})
    assert status in (400, 404), (status, answer)
    assert isinstance(answer, dict) and answer["message"], answer
    status, _ = request(hub, "GET", f"api/assignments/{assignment}", "tok-ann")
    assert status in (400, 404)
    assert inbound(hub) == []


@pytest.mark.parametrize("notebooks, why", [
    ({f"{LESSON}.ipynb": "{not json"}, "not JSON"),
    ({f"{LESSON}.ipynb": "[1, 2]"}, "nbformat 4"),
    ({"../escape.ipynb": notebook()}, "is not a notebook of"),
    ({"other.ipynb": notebook()}, "is not a notebook of"),
    ({}, "no notebook"),
])
def test_what_is_not_a_notebook_of_the_assignment_is_refused(hub, notebooks, why):
    status, answer = request(hub, "POST", f"api/submissions/{LESSON}", "tok-ann", {"notebooks": notebooks})
    assert status == 400 and why in answer["message"], (status, answer)
    assert [name for name in inbound(hub) if not name.startswith(".")] == []


def test_a_huge_upload_is_refused(hub, tmp_path):
    huge = notebook("x = '" + "a" * (CAP + JSON_OVERHEAD) + "'")
    status, answer = request(hub, "POST", f"api/submissions/{LESSON}", "tok-ann",
                             {"notebooks": {f"{LESSON}.ipynb": huge}})
    assert status == 413 and "over the limit" in answer["message"], (status, answer)
    enormous = b"a" * (DISCARD * (CAP + JSON_OVERHEAD) + 1)   # not even read: the connection is closed
    try:
        status, answer = request(hub, "POST", f"api/submissions/{LESSON}", "tok-ann", enormous)
        assert status == 413, status
    except urllib.error.URLError as exc:
        assert isinstance(exc.reason, ConnectionError), exc
    big = notebook("x = '" + "a" * CAP + "'")   # under the request's limit, over the notebooks'
    status, answer = request(hub, "POST", f"api/submissions/{LESSON}", "tok-ann",
                             {"notebooks": {f"{LESSON}.ipynb": big}})
    assert status == 413 and "over the limit" in answer["message"], (status, answer)
    home = tmp_path / "ann"
    step(hub, client.ExchangeFetchAssignment, "tok-ann", home)
    (home / LESSON / f"{LESSON}.ipynb").write_text(big)
    with pytest.raises(ExchangeError, match="over the limit"):
        step(hub, client.ExchangeSubmit, "tok-ann", home, HTTPExchange={"service_url": hub["url"],
                                                                       "api_token": "tok-ann",
                                                                       "max_upload_bytes": 10 * CAP})
    assert inbound(hub) == []


def test_the_instructor_collects_the_latest_of_each_student(hub, tmp_path):
    submit_as(hub, "tok-ann", tmp_path / "ann", text="first = 1")
    submit_as(hub, "tok-ann", tmp_path / "ann", text="second = 2")
    submit_as(hub, "tok-bob", tmp_path / "bob")
    step(hub, client.ExchangeCollect, "tok-prof", tmp_path / "prof")
    submitted = hub["tmp"] / "course" / "submitted"
    assert sorted(os.listdir(submitted)) == ["ann", "pte-bob"]
    assert "second = 2" in (submitted / "ann" / LESSON / f"{LESSON}.ipynb").read_text()
    assert (submitted / "ann" / LESSON / "timestamp.txt").is_file()


def test_the_report_is_for_instructors_only(hub):
    status, text = request(hub, "GET", "report", "tok-ann")
    assert status == 403 and "instructors only" in text
    status, text = request(hub, "GET", "report", "tok-prof")
    assert status == 200 and "No report yet: nothing has been graded" in text   # nothing graded in this course
    status, _ = request(hub, "GET", "report?assignment=..%2Fx", "tok-prof")
    assert status == 400


def test_no_report_yet_is_a_page_that_says_so(hub, monkeypatch):
    monkeypatch.setitem(sys.modules, "autograder.classreport", None)   # the report's package missing
    status, text = request(hub, "GET", "report", "tok-prof")
    assert status == 200 and "No report yet" in text


def test_the_instructor_releases_feedback_only_to_the_submission_it_names(hub, tmp_path):
    submit_as(hub, "tok-ann", tmp_path / "ann")
    [folder] = inbound(hub)
    step(hub, client.ExchangeCollect, "tok-prof", tmp_path / "prof")
    feedback = hub["tmp"] / "course" / "feedback" / "ann" / LESSON
    feedback.mkdir(parents=True)
    for name in ("timestamp.txt", "submission_secret.txt"):   # as nbgrader's generate_feedback leaves them
        shutil.copy(hub["tmp"] / "course" / "submitted" / "ann" / LESSON / name, feedback / name)
    (feedback / f"{LESSON}.html").write_text("<p>the instructor's comments</p>")
    step(hub, client.ExchangeReleaseFeedback, "tok-prof", tmp_path / "prof")
    status, answer = request(hub, "GET", f"api/feedback/{LESSON}", "tok-ann")
    assert [page["html"] for page in answer] == ["<p>the instructor's comments</p>"]
    status, answer = request(hub, "GET", f"api/feedback/{LESSON}", "tok-bob")
    assert status == 200 and answer == []
    status, answer = request(hub, "POST", f"api/release-feedback/{LESSON}", "tok-prof",
                             {"pages": {"../../escape": "x", "0" * 64: "x"}})
    assert status == 400 and "feedback name" in answer["message"], answer
    status, answer = request(hub, "POST", f"api/release-feedback/{LESSON}", "tok-ann", {"pages": {}})
    assert status == 403, answer
    secret = (hub["inbound"] / folder / "submission_secret.txt").read_text()
    assert os.listdir(hub["store"].root / "feedback") == [f"{notebook_hash(secret=secret, notebook_id=LESSON)}.html"]


def test_a_flood_of_submissions_is_capped_per_hour(hub, tmp_path):
    hub["store"].max_per_hour = 3
    for _ in range(3):
        submit_as(hub, "tok-ann", tmp_path / "ann")
    with pytest.raises(ExchangeError, match="3 submissions of 01_demo in the last hour: the limit is 3"):
        submit_as(hub, "tok-ann", tmp_path / "ann")
    submit_as(hub, "tok-bob", tmp_path / "bob")   # a classmate is not held back
    assert [name.split("+")[0] for name in inbound(hub)].count("ann") == 3
