"""``python -m autograder.service.http --course DIR --exchange DIR --port N``: the HTTP exchange's server, a
hub-managed service (deploy/jupyterhub/README.md) that runs as root beside the feedback service.

Every API request carries the hub user's own token (``Authorization: token ...``, the ``JUPYTERHUB_API_TOKEN``
of the user's server; never a cookie, so no other page can make a student's browser submit). The hub says who
sent it (``jupyterhub.services.auth.HubOAuth``): that name, checked by :func:`autograder.exchange.ids.check_id`,
is the student a submission counts for; no request names a student. What is kept, and where, is
:mod:`autograder.exchange.store` (only root may read it; written under umask 077).

- ``GET api/assignments``: the released assignments and their notebooks;
- ``GET api/assignments/<a>``: the release's files (fetch);
- ``POST api/submissions/<a>``: a submission (JSON ``{"notebooks": {name: text}}``, at most ``--max-upload``
  bytes, each notebook valid JSON); the answer is its timestamp;
- ``GET api/submissions``: the user's own submissions, with their feedback's checksums (list);
- ``GET api/feedback/<a>``: the feedback pages of the user's own submissions (fetch feedback);
- ``POST api/release/<a>``, ``GET api/collect/<a>``, ``POST api/release-feedback/<a>``: the instructor's
  release, collect and release of feedback (pages named as nbgrader names them, of submissions it holds);
- ``GET report[?assignment=<a>]``: the class report (``autograder.classreport.page``), instructors only; a
  page for the browser, logged in through the hub (OAuth).

An instructor is a hub user in the group ``--instructor-group`` (default ``instructors``); anyone else gets 403.
"""
from __future__ import annotations

import argparse
import html
import json
import logging
import os
from pathlib import Path

from tornado import ioloop, web

from autograder.exchange.ids import BadId, check_id
from autograder.exchange.store import Refused, Store

log = logging.getLogger("pte-exchange")
JSON_OVERHEAD = 2 * 2**20   # the JSON around the notebooks, and their escaping, beyond --max-upload
DISCARD = 4                 # a request up to this many times the limit is read to its end, then refused


class Api(web.RequestHandler):
    """A JSON API request, authenticated by the hub user's token only."""

    def initialize(self, store: Store, auth, instructor_group: str):
        self.store, self.auth, self.instructor_group = store, auth, instructor_group
        self.user: str | None = None
        self.model: dict = {}

    def check_xsrf_cookie(self):
        """No cookie authenticates an API request (the token does), so there is no cross-site form to guard."""

    async def prepare(self):
        token = self.auth.get_token(self, in_cookie=False)
        model = await self.auth.user_for_token(token, sync=False) if token else None
        if not model or model.get("kind", "user") != "user":
            raise web.HTTPError(403, reason="no hub user's token with this request")
        if self.auth.access_scopes and not self.auth.check_scopes(self.auth.access_scopes, model):
            raise web.HTTPError(403, reason="this token may not use the exchange")
        try:
            self.user = check_id(model.get("name"))
        except BadId as exc:
            log.warning("refused a request of hub user %s: %s", ascii(model.get("name")), exc)
            raise web.HTTPError(403, reason=f"your hub user name cannot be a student id here: {exc}") from None
        self.model = model

    def instructor(self) -> None:
        if self.instructor_group not in (self.model.get("groups") or []):
            raise web.HTTPError(403, reason=f"only the instructors (hub group {self.instructor_group}) may do this")

    def write_error(self, status_code: int, **kwargs):
        self.set_header("Content-Type", "application/json")
        self.finish({"message": self._reason})

    def answer(self, fn, *args):
        try:
            self.finish(json.dumps(fn(*args)))
        except Refused as exc:
            raise web.HTTPError(exc.status, reason=str(exc)) from None
        except BadId as exc:
            raise web.HTTPError(400, reason=str(exc)) from None


class Assignments(Api):
    def get(self):
        self.answer(lambda: [{"assignment_id": a, "notebooks": self.store.notebooks(a)} for a in self.store.released()])


class Assignment(Api):
    def get(self, assignment: str):
        self.answer(lambda: {"assignment_id": assignment, "files": self.store.release_files(assignment)})


@web.stream_request_body
class Submit(Api):
    """A submission: its body counted as it arrives, and refused (413) past the limit before it is all read."""

    async def prepare(self):
        await super().prepare()
        self.body, self.size = bytearray(), 0
        self.limit = self.store.max_upload_bytes + JSON_OVERHEAD
        declared = self.request.headers.get("Content-Length")
        # up to DISCARD times the limit is read (and dropped) so that the student's client gets the message;
        # beyond, the connection is closed at once
        if declared is not None and (not declared.isdigit() or int(declared) > DISCARD * self.limit):
            raise web.HTTPError(413, reason=self.too_big())
        self.request.connection.set_max_body_size(DISCARD * self.limit)

    def too_big(self) -> str:
        return f"the submission is over the limit of {self.store.max_upload_bytes} bytes: it was not kept"

    def data_received(self, chunk: bytes):
        self.size += len(chunk)
        if self.size <= self.limit:
            self.body += chunk

    def post(self, assignment: str):
        if self.size > self.limit:
            raise web.HTTPError(413, reason=self.too_big())
        try:
            sent = json.loads(bytes(self.body))
            notebooks = {str(k): str(v).encode("utf-8") for k, v in dict(sent["notebooks"]).items()}
        except (ValueError, KeyError, TypeError, UnicodeEncodeError):
            raise web.HTTPError(400, reason="the request is not {\"notebooks\": {name: notebook}}") from None
        self.answer(self.kept, assignment, notebooks)

    def kept(self, assignment: str, notebooks: dict[str, bytes]) -> dict:
        timestamp = self.store.submit(self.user, assignment, notebooks)
        log.info("%s submitted %s (%s)", self.user, assignment, timestamp)
        return {"assignment_id": assignment, "timestamp": timestamp}


class Submissions(Api):
    def get(self):
        self.answer(lambda: [{k: v for k, v in s.items() if k != "folder"} for s in self.store.submissions(self.user)])


class Feedback(Api):
    def get(self, assignment: str):
        self.answer(lambda: self.store.feedback(self.user, check_id(assignment, "assignment")))


class Release(Api):
    def post(self, assignment: str):
        self.instructor()
        self.answer(lambda: self.store.mark_released(assignment) or {"assignment_id": assignment})


class ReleaseFeedback(Api):
    def post(self, assignment: str):
        self.instructor()
        try:
            pages = {str(k): str(v) for k, v in dict(json.loads(self.request.body)["pages"]).items()}
        except (ValueError, KeyError, TypeError):
            raise web.HTTPError(400, reason="the request is not {\"pages\": {name: html}}") from None
        self.answer(lambda: {"released": self.store.release_feedback(assignment, pages)})


class Collect(Api):
    def get(self, assignment: str):
        self.instructor()
        self.answer(self.store.collect, assignment)


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1>{body}</body></html>\n")


class Report(web.RequestHandler):
    """The class report for instructors: a browser page behind the hub's login (OAuth, then its cookie)."""

    def initialize(self, store: Store, auth, instructor_group: str):
        self.store, self.auth, self.instructor_group = store, auth, instructor_group

    def set_default_headers(self):
        self.set_header("Content-Security-Policy", "frame-ancestors 'none'")
        self.set_header("Cache-Control", "no-store")

    async def get(self):
        model = await self.auth.get_user(self, sync=False)
        if not model:
            if not getattr(self.auth, "login_url", ""):
                raise web.HTTPError(403)
            state = self.auth.set_state_cookie(self, next_url=self.request.uri)
            return self.redirect(f"{self.auth.login_url}?state={state}"
                                 if "?" not in self.auth.login_url else f"{self.auth.login_url}&state={state}")
        allowed = not self.auth.access_scopes or self.auth.check_scopes(self.auth.access_scopes, model)
        if not allowed or self.instructor_group not in (model.get("groups") or []):
            self.set_status(403)
            return self.finish(page("403: instructors only", "<p>The class report is for the course's "
                                                              "instructors.</p>"))
        assignment = self.get_argument("assignment", None)
        try:
            if assignment is not None:
                check_id(assignment, "assignment")
        except BadId as exc:
            raise web.HTTPError(400, reason=str(exc)) from None
        try:
            self.finish(class_report(self.store.course, assignment))
        except Exception as exc:   # the report's own fault: said on the page, the service goes on
            log.exception("the class report failed")
            self.set_status(500)
            self.finish(page("Class report", f"<p>The class report could not be made ({type(exc).__name__}): "
                                             "see the pte-exchange service's log.</p>"))


def class_report(course: Path, assignment: str | None) -> str:
    """The report helper's page (``autograder.classreport.page``), or a page saying there is none yet."""
    try:
        from autograder.classreport import page as report_page
    except ImportError:
        return page("Class report", "<p>No report yet: this course has no class report to show "
                                    "(<code>autograder.classreport</code> is not installed).</p>")
    try:
        from autograder.classreport.data import ReportMissing
    except ImportError:
        ReportMissing = FileNotFoundError
    try:
        return report_page(course, assignment)
    except (ReportMissing, FileNotFoundError):
        graded = f" of {html.escape(assignment)}" if assignment else ""
        return page("Class report", f"<p>No report yet: nothing{graded} has been graded.</p>")


def make_app(store: Store, auth, prefix: str = "/", instructor_group: str = "instructors") -> web.Application:
    kwargs = {"store": store, "auth": auth, "instructor_group": instructor_group}
    name = r"([^/]+)"
    routes = [(r"api/assignments", Assignments), (rf"api/assignments/{name}", Assignment),
              (r"api/submissions", Submissions), (rf"api/submissions/{name}", Submit),
              (rf"api/feedback/{name}", Feedback), (rf"api/release/{name}", Release),
              (rf"api/collect/{name}", Collect), (rf"api/release-feedback/{name}", ReleaseFeedback),
              (r"report", Report)]
    handlers = [(prefix + path, handler, kwargs) for path, handler in routes]
    if getattr(auth, "oauth_redirect_uri", None):
        from jupyterhub.services.auth import HubOAuthCallbackHandler

        handlers.append((prefix + "oauth_callback", HubOAuthCallbackHandler))
    return web.Application(handlers, cookie_secret=os.urandom(32), hub_auth=auth)


def main(argv=None) -> int:
    from jupyterhub.services.auth import HubOAuth

    from autograder.grading.plan.planning import load_coursedir

    parser = argparse.ArgumentParser(prog="python -m autograder.service.http")
    parser.add_argument("--course", type=Path, required=True, help="the nbgrader course folder")
    parser.add_argument("--exchange", type=Path, required=True,
                        help="the service's private exchange root (the feedback service's --exchange)")
    parser.add_argument("--port", type=int, required=True, help="the port on 127.0.0.1")
    parser.add_argument("--max-upload", type=int, default=20 * 2**20, help="bytes of notebooks per submission")
    parser.add_argument("--max-per-hour", type=int, default=30,
                        help="submissions kept per student and assignment in any hour")
    parser.add_argument("--instructor-group", default="instructors", help="the hub group of the instructors")
    args = parser.parse_args(argv)
    os.umask(0o077)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    coursedir = load_coursedir(args.course)
    store = Store(args.course.resolve(), coursedir.release_directory, list(coursedir.ignore), args.exchange,
                  coursedir.course_id, args.max_upload, args.max_per_hour)
    # the one instance HubOAuthCallbackHandler also uses (it keeps the OAuth states of the logins under way)
    auth = HubOAuth.instance(api_token=os.environ["JUPYTERHUB_API_TOKEN"], cache_max_age=60)
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    app = make_app(store, auth, prefix if prefix.endswith("/") else prefix + "/", args.instructor_group)
    app.listen(args.port, "127.0.0.1", max_body_size=DISCARD * (args.max_upload + JSON_OVERHEAD))
    log.info("the exchange of %s at 127.0.0.1:%d%s", coursedir.course_id, args.port, prefix)
    ioloop.IOLoop.current().start()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
