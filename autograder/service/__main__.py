"""``python -m autograder.service --course DIR [--exchange DIR]``: the feedback service's loop (as root, beside
the grading command's requirements); the settings are ``c.PTEFeedback`` in the course's nbgrader_config.py.
Everything it writes is written under umask 077."""
from __future__ import annotations

import argparse
import logging
import os
import signal
from pathlib import Path

from autograder.grading.plan.planning import load_coursedir

from .lock import AlreadyRunning
from .service import Service
from .settings import PTEFeedback


def interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.service")
    parser.add_argument("--course", type=Path, required=True, help="the nbgrader course folder")
    parser.add_argument("--exchange", type=Path, default=None,
                        help="nbgrader's exchange root (default: the course's Exchange.root, else "
                             "/srv/nbgrader/exchange)")
    args = parser.parse_args(argv)
    # JupyterHub stops a managed service with SIGINT, then SIGTERM, at any moment, the start included: either ends
    # the run of the grading command under way (Service.run_grading), and the queue keeps the rest. Both handlers are
    # set before anything is written (whoever sees the queue may stop the service), SIGINT's too: a process started
    # in the background of a shell without job control inherits SIGINT ignored, and Python then leaves it so.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        return serve(args)
    except KeyboardInterrupt:
        logging.info("stopped; a submission being graded is graded again at the next start")
        return 0


def serve(args) -> int:
    os.umask(0o077)   # everything the service writes is its own: a student reads none of it
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    coursedir = load_coursedir(args.course)
    settings = PTEFeedback(config=coursedir.config)
    exchange = args.exchange or Path(coursedir.config.get("Exchange", {}).get("root", "/srv/nbgrader/exchange"))
    try:
        service = Service(args.course, exchange, coursedir.course_id, settings)
    except (AlreadyRunning, ValueError) as exc:
        logging.error("%s", exc)
        return 3
    if not settings.assignments:
        logging.warning("c.PTEFeedback.assignments is empty: no assignment is graded on submit")
    service.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
