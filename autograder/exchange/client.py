"""nbgrader's exchange steps over HTTP to the course's exchange server (``autograder.service.http``).

A course's Jupyter config names them (deploy/jupyterhub/demo.py writes this for the demo hub)::

    c.ExchangeFactory.fetch_assignment = "autograder.exchange.client.ExchangeFetchAssignment"
    c.ExchangeFactory.submit = "autograder.exchange.client.ExchangeSubmit"
    c.ExchangeFactory.list = "autograder.exchange.client.ExchangeList"
    c.ExchangeFactory.fetch_feedback = "autograder.exchange.client.ExchangeFetchFeedback"
    c.HTTPExchange.service_url = "http://127.0.0.1:8005/services/pte-exchange/"

and the instructor's ``release_assignment``, ``collect`` and ``release_feedback``
(``ExchangeReleaseAssignment``, ``ExchangeCollect``, ``ExchangeReleaseFeedback``). nbgrader's Assignments tab,
the formgrader and nbgrader's commands use them unchanged. Each request carries the user's own hub token
(``$JUPYTERHUB_API_TOKEN`` in a hub user's server); the server takes the student from the hub, so nothing here
names one.
"""
from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

from nbgrader.exchange import abc
from traitlets import Bool, Float, Integer, Unicode, default

from .ids import BadId, check_id


def _checksum(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.md5(handle.read()).hexdigest()


def _plain(name: str, what: str) -> str:
    """A single path component the server sent (a timestamp, a notebook's name): refused if it is not one."""
    if not name or "/" in name or "\0" in name or name in (".", "..") or name.startswith("."):
        raise BadId(f"the exchange sent a {what} that is not a plain name: {ascii(name)}")
    return name


class HTTPExchange(abc.Exchange):
    """What every step shares: the server's address, the user's token, one JSON request."""

    service_url = Unicode(help="the exchange server's URL (default $PTE_EXCHANGE_URL), e.g. "
                               "http://127.0.0.1:8005/services/pte-exchange/").tag(config=True)
    api_token = Unicode(help="the hub token sent with each request (default $JUPYTERHUB_API_TOKEN)").tag(config=True)
    timeout_s = Float(120.0, help="seconds one request may take").tag(config=True)
    max_upload_bytes = Integer(20 * 2**20, help="notebook bytes one submission may send (the server's limit "
                                               "decides; this refuses earlier, with the same message)").tag(config=True)
    path_includes_course = Bool(False, help="assignments are fetched into <course_id>/<assignment_id>"
                                ).tag(config=True)

    @default("service_url")
    def _url_default(self):
        return os.environ.get("PTE_EXCHANGE_URL", "")

    @default("api_token")
    def _token_default(self):
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    def call(self, method: str, path: str, payload=None):
        """The server's JSON answer; ExchangeError with the server's message when it refuses."""
        if not self.service_url:
            self.fail("No exchange server is configured (c.HTTPExchange.service_url): ask your instructor.")
        if not self.api_token:
            self.fail("No hub token ($JUPYTERHUB_API_TOKEN): the exchange works from a server the hub started.")
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(self.service_url.rstrip("/") + "/" + path, data=data, method=method,
                                         headers={"Authorization": f"token {self.api_token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("message") or exc.reason
            except (ValueError, AttributeError, OSError):
                message = exc.reason
            self.fail(f"The exchange refused this ({exc.code}): {message}")
        except (OSError, ValueError) as exc:
            self.fail(f"The exchange could not be reached ({exc}): try again in a minute, or ask your instructor.")

    def quoted(self, assignment: str) -> str:
        return urllib.parse.quote(assignment, safe="")

    def assignment_path(self, assignment: str) -> str:
        parts = [self.coursedir.course_id, assignment] if self.path_includes_course else [assignment]
        return os.path.abspath(os.path.join(self.assignment_dir, *parts))

    def need_course(self) -> None:
        if not self.coursedir.course_id:
            self.fail("No course id specified. Re-run with --course flag.")
        try:
            check_id(self.coursedir.assignment_id, "assignment")
        except BadId as exc:
            self.fail(str(exc))

    def init_src(self):
        pass

    def init_dest(self):
        pass

    def copy_files(self):
        pass


class ExchangeFetchAssignment(abc.ExchangeFetchAssignment, HTTPExchange):
    def init_src(self):
        self.need_course()
        self.files = self.call("GET", f"api/assignments/{self.quoted(self.coursedir.assignment_id)}")["files"]

    def init_dest(self):
        self.dest_path = self.assignment_path(self.coursedir.assignment_id)
        if os.path.isdir(self.dest_path) and not self.replace_missing_files:
            self.fail(f"You already have a copy of the assignment in this directory: {self.coursedir.assignment_id}")

    def copy_files(self):
        for name, data in sorted(self.files.items()):
            relative = PurePosixPath(name)
            if relative.is_absolute() or ".." in relative.parts or not relative.parts:
                self.fail(f"The exchange sent a file outside the assignment: {ascii(name)}")
            target = Path(self.dest_path, *relative.parts)
            if target.exists():
                continue   # replace_missing_files: only what is missing
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(data))
        self.log.info("Fetched as: %s %s", self.coursedir.course_id, self.coursedir.assignment_id)


class ExchangeSubmit(abc.ExchangeSubmit, HTTPExchange):
    def init_src(self):
        self.need_course()
        self.src_path = self.assignment_path(self.coursedir.assignment_id)
        if not os.path.isdir(self.src_path):
            self.fail(f"Assignment not found at: {self.src_path}")

    def copy_files(self):
        [released] = [a for a in self.call("GET", "api/assignments")
                      if a["assignment_id"] == self.coursedir.assignment_id] or [None]
        if released is None:
            self.fail(f"Assignment {self.coursedir.assignment_id} is not released in {self.coursedir.course_id}")
        notebooks, missing = {}, []
        for name in released["notebooks"]:
            path = os.path.join(self.src_path, name)
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    notebooks[name] = handle.read(self.max_upload_bytes + 1)
            else:
                missing.append(name)
        if missing and (self.strict or not notebooks):
            self.fail(f"Assignment {self.coursedir.assignment_id} not submitted: missing {', '.join(missing)}")
        size = sum(len(data) for data in notebooks.values())
        if size > self.max_upload_bytes:
            self.fail(f"The submission is {size} bytes, over the limit of {self.max_upload_bytes}: clear large "
                      "outputs (Edit > Clear Outputs of All Cells), save, and submit again.")
        try:
            texts = {name: data.decode("utf-8") for name, data in notebooks.items()}
        except UnicodeDecodeError:
            self.fail("A notebook is not UTF-8 text: open it in JupyterLab, save it, and submit again.")
        sent = self.call("POST", f"api/submissions/{self.quoted(self.coursedir.assignment_id)}", {"notebooks": texts})
        self.timestamp = sent["timestamp"]
        self.log.info("Submitted as: %s %s %s", self.coursedir.course_id, self.coursedir.assignment_id,
                      self.timestamp)


class ExchangeFetchFeedback(abc.ExchangeFetchFeedback, HTTPExchange):
    def init_src(self):
        self.need_course()
        self.pages = self.call("GET", f"api/feedback/{self.quoted(self.coursedir.assignment_id)}")

    def init_dest(self):
        self.dest_path = os.path.join(self.assignment_path(self.coursedir.assignment_id), "feedback")

    def copy_files(self):
        for page in self.pages:
            try:
                folder = os.path.join(self.dest_path, _plain(page["timestamp"], "timestamp"))
                name = _plain(page["notebook_id"], "notebook name") + ".html"
            except BadId as exc:
                self.fail(str(exc))
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
                handle.write(page["html"])
            self.log.info("Fetched feedback: %s", os.path.join(folder, name))
        if not self.pages:
            self.log.warning("No feedback yet for %s", self.coursedir.assignment_id)


class ExchangeList(abc.ExchangeList, HTTPExchange):
    def list_files(self):
        if self.inbound:
            self.fail("The HTTP exchange keeps the submissions on its server: collect them (nbgrader collect).")
        course = self.coursedir.course_id
        if self.cached:
            return self.submitted(course, self.call("GET", "api/submissions"))
        found = []
        for assignment in self.call("GET", "api/assignments"):
            if self.coursedir.assignment_id not in ("", "*") and \
                    assignment["assignment_id"] != self.coursedir.assignment_id:
                continue
            path = self.assignment_path(assignment["assignment_id"])
            fetched = os.path.isdir(path)
            found.append({"course_id": course, "assignment_id": assignment["assignment_id"],
                          "status": "fetched" if fetched else "released",
                          "path": path if fetched else self.service_url,
                          "notebooks": [{"notebook_id": name[:-len(".ipynb")], "path": os.path.join(path, name)}
                                        for name in assignment["notebooks"]]})
        return found

    def remove_files(self):
        self.fail("The HTTP exchange does not remove submissions or releases from here.")

    def submitted(self, course: str, submissions: list[dict]) -> list[dict]:
        """The user's submissions, grouped by assignment, as nbgrader's own list of cached submissions."""
        groups: dict[str, list[dict]] = {}
        for submission in submissions:
            assignment = submission["assignment_id"]
            if self.coursedir.assignment_id not in ("", "*") and assignment != self.coursedir.assignment_id:
                continue
            folder = os.path.join(self.assignment_path(assignment), "feedback", _plain(submission["timestamp"],
                                                                                       "timestamp"))
            notebooks = []
            for notebook in submission["notebooks"]:
                local = os.path.join(folder, _plain(notebook["notebook_id"], "notebook name") + ".html")
                has_local = os.path.isfile(local)
                remote = notebook["feedback_checksum"]
                notebooks.append({"notebook_id": notebook["notebook_id"], "path": local,
                                  "has_local_feedback": has_local, "has_exchange_feedback": remote is not None,
                                  "local_feedback_path": local if has_local else None,
                                  "feedback_updated": bool(has_local and remote and _checksum(local) != remote)})
            info = {"course_id": course, "student_id": "", "assignment_id": assignment,
                    "timestamp": submission["timestamp"], "status": "submitted", "path": folder,
                    "notebooks": notebooks,
                    "has_local_feedback": bool(notebooks) and all(n["has_local_feedback"] for n in notebooks),
                    "has_exchange_feedback": bool(notebooks) and all(n["has_exchange_feedback"] for n in notebooks),
                    "feedback_updated": any(n["feedback_updated"] for n in notebooks)}
            info["local_feedback_path"] = folder if info["has_local_feedback"] else None
            groups.setdefault(assignment, []).append(info)
        return [{"course_id": course, "student_id": "", "assignment_id": assignment, "status": "submitted",
                 "submissions": sorted(infos, key=lambda i: i["timestamp"])}
                for assignment, infos in sorted(groups.items())]


class ExchangeReleaseAssignment(abc.ExchangeReleaseAssignment, HTTPExchange):
    """The instructor's release: the server serves the course's release folder once it is marked released."""

    def init_src(self):
        self.need_course()
        source = self.coursedir.format_path(self.coursedir.release_directory, ".", self.coursedir.assignment_id)
        if not os.path.isdir(source):
            self.fail(f"Assignment not found: {source} (run nbgrader generate_assignment first)")

    def copy_files(self):
        self.call("POST", f"api/release/{self.quoted(self.coursedir.assignment_id)}", {})
        self.log.info("Released as: %s %s", self.coursedir.course_id, self.coursedir.assignment_id)


class ExchangeCollect(abc.ExchangeCollect, HTTPExchange):
    """The instructor's collect: each student's latest submission, from the server into ``submitted/``."""

    def init_src(self):
        self.need_course()
        self.records = self.call("GET", f"api/collect/{self.quoted(self.coursedir.assignment_id)}")

    def copy_files(self):
        from nbgrader.utils import parse_utc

        for record in self.records:
            try:
                student = check_id(record["student_id"])
                names = [_plain(name, "file name") for name in record["files"]]
            except BadId as exc:
                self.log.warning("not collected: %s", exc)
                continue
            if self.coursedir.student_id not in ("", "*") and student != self.coursedir.student_id:
                continue
            dest = self.coursedir.format_path(self.coursedir.submitted_directory, student,
                                              self.coursedir.assignment_id)
            if os.path.isdir(dest):
                existing = self.coursedir.get_existing_timestamp(dest)
                if not self.update or (existing is not None and parse_utc(record["timestamp"]) <= existing):
                    self.log.info("No newer submission to collect: %s %s", student, self.coursedir.assignment_id)
                    continue
                shutil.rmtree(dest)
            os.makedirs(dest)
            for name in names:
                with open(os.path.join(dest, name), "wb") as handle:
                    handle.write(base64.b64decode(record["files"][name]))
            self.log.info("Collected submission: %s %s", student, self.coursedir.assignment_id)


class ExchangeReleaseFeedback(abc.ExchangeReleaseFeedback, HTTPExchange):
    """The instructor's release of feedback: each student's pages (``feedback/<student>/<assignment>/``), named
    by the submission's secret as nbgrader names them, sent to the server one student at a time."""

    def init_src(self):
        self.need_course()
        student = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else "*"
        self.folders = sorted(glob.glob(self.coursedir.format_path(self.coursedir.feedback_directory, student,
                                                                   self.coursedir.assignment_id)))

    def copy_files(self):
        from nbgrader.utils import notebook_hash

        excluded = set(filter(None, self.coursedir.student_id_exclude.split(",")))
        for folder in self.folders:
            student = Path(folder).parent.name
            secret_path = os.path.join(folder, "submission_secret.txt")
            if student in excluded or not os.path.isfile(secret_path):
                continue
            with open(secret_path) as handle:
                secret = handle.read()
            pages = {}
            for page in sorted(glob.glob(os.path.join(folder, "*.html"))):
                with open(page, encoding="utf-8") as handle:
                    pages[notebook_hash(secret=secret, notebook_id=Path(page).stem)] = handle.read()
            if pages:
                self.call("POST", f"api/release-feedback/{self.quoted(self.coursedir.assignment_id)}",
                          {"pages": pages})
                self.log.info("Released feedback for %s on %s", student, self.coursedir.assignment_id)
