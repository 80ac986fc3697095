"""The feedback service's queue: on disk (SQLite), so a restart of the service or the hub loses nothing.

One row per submission the service noticed in the exchange (its inbound folder's name is the key, so a
submission is queued once). The policy lives here too, as queries over the rows:

- **latest only**: a new submission of a student and assignment supersedes the ones still waiting; "new" is
  the order the service noticed them in (within one look, the entries' ctime), never the name's timestamp;
- **cooldown**: a student's next grading of an assignment starts no sooner than ``cooldown_s`` after the
  previous one started (``not_before``); a submission inside the cooldown waits, and its feedback says when
  it will be graded;
- **caps**: at most ``max_per_assignment`` gradings per student and assignment, and ``max_per_day`` per
  student and day (UTC) across assignments, counted from the submissions taken for grading and checked both
  when a submission is noticed and when it is taken (so k assignments waiting at once cannot add k-1
  gradings); past a cap a submission is not graded (the instructor's grading after the deadline still is);
- **settling**: while submissions keep arriving (a class submitting together), the next run of the grading
  command waits until ``quiet_s`` pass without a new one, at most ``longest_s`` after the first ready one was
  noticed, so that it grades them together (one run of the grading command for a class costs far less than
  one for each student);
- **round-robin**: of the submissions ready now, the one whose student was served longest ago (never
  first), so one student submitting again and again cannot starve the others;
- **once**: a row taken for grading is ``grading`` until it is ``done``; a service that died meanwhile puts
  it back to ``waiting`` when it starts (:meth:`Queue.recover`), and the same submission is graded again,
  writing the same feedback.
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from .names import id_problem

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    inbound TEXT PRIMARY KEY,        -- the exchange's folder name: student+assignment+timestamp+random
    student TEXT NOT NULL,
    assignment TEXT NOT NULL,
    timestamp TEXT NOT NULL,         -- nbgrader's, as the folder name has it
    noticed REAL NOT NULL,           -- when the service saw it (epoch seconds)
    state TEXT NOT NULL,             -- waiting, grading, done, superseded, capped
    not_before REAL NOT NULL DEFAULT 0,
    started REAL,                    -- when its grading started
    finished REAL,
    status TEXT NOT NULL DEFAULT '', -- the grading command's status for it, or why it was not graded
    reason TEXT NOT NULL DEFAULT '',
    arrived REAL NOT NULL DEFAULT 0, -- the entry's ctime as the service saw it (not the name's timestamp)
    failures INTEGER NOT NULL DEFAULT 0  -- tries that failed for a reason of its own (see Queue.retry)
);
CREATE INDEX IF NOT EXISTS by_state ON submissions (state, not_before);
"""
DAY_S = 86400


@dataclass(frozen=True)
class Limits:
    cooldown_s: float = 600.0
    max_per_assignment: int = 10
    max_per_day: int = 20


@dataclass(frozen=True)
class Entry:
    inbound: str
    student: str
    assignment: str
    timestamp: str
    noticed: float
    state: str
    not_before: float
    started: float | None
    status: str
    reason: str
    arrived: float = 0.0
    failures: int = 0


def parse_inbound(name: str) -> tuple[str, str, str] | None:
    """(student, assignment, timestamp) of an exchange inbound folder's name, or None when it is not one. The
    student and the assignment name folders the service writes (``submitted/<student>/<assignment>``) and
    reach the grading command's arguments: anything but an id (:func:`.names.id_problem`) is refused."""
    parts = name.split("+")
    if len(parts) not in (3, 4) or not parts[2] or id_problem(parts[0]) or id_problem(parts[1]):
        return None
    return parts[0], parts[1], parts[2]


class Queue:
    def __init__(self, path: Path, limits: Limits):
        self.limits = limits
        self.db = sqlite3.connect(str(path), isolation_level=None, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(submissions)")}
        for column in ("arrived REAL NOT NULL DEFAULT 0", "failures INTEGER NOT NULL DEFAULT 0"):
            if column.split()[0] not in columns:   # a queue made before these columns
                self.db.execute(f"ALTER TABLE submissions ADD COLUMN {column}")
        self.capped: list[Entry] = []   # taken past a cap (Queue.take): the service tells their students

    def close(self) -> None:
        self.db.close()

    def _one(self, sql: str, *args) -> Entry | None:
        row = self.db.execute(sql, args).fetchone()
        return None if row is None else Entry(**{k: row[k] for k in Entry.__dataclass_fields__})

    def get(self, inbound: str) -> Entry | None:
        return self._one("SELECT * FROM submissions WHERE inbound = ?", inbound)

    def recover(self) -> int:
        """Rows left ``grading`` by a service that stopped are waiting again; how many."""
        return self.db.execute("UPDATE submissions SET state = 'waiting', started = NULL "
                               "WHERE state = 'grading'").rowcount

    def last_start(self, student: str, assignment: str) -> float | None:
        row = self.db.execute("SELECT MAX(started) FROM submissions WHERE student = ? AND assignment = ? "
                              "AND started IS NOT NULL", (student, assignment)).fetchone()
        return row[0]

    def graded_count(self, student: str, assignment: str | None = None, since: float | None = None) -> int:
        sql = ("SELECT COUNT(*) FROM submissions WHERE student = ? AND started IS NOT NULL AND "
               "(state = 'grading' OR (state = 'done' AND status != 'refused'))")
        args: list = [student]
        if assignment is not None:
            sql += " AND assignment = ?"
            args.append(assignment)
        if since is not None:
            sql += " AND started >= ?"
            args.append(since)
        return self.db.execute(sql, args).fetchone()[0]

    def cap_reason(self, student: str, assignment: str, now: float) -> str:
        """Why ``student`` may not have ``assignment`` graded again now ("" when they may)."""
        if self.graded_count(student, assignment) >= self.limits.max_per_assignment:
            return (f"the limit of {self.limits.max_per_assignment} graded submissions of {assignment} is reached; "
                    "your instructor grades the final submission after the deadline")
        day_start = now - now % DAY_S
        if self.graded_count(student, since=day_start) >= self.limits.max_per_day:
            return (f"the limit of {self.limits.max_per_day} graded submissions a day is reached; submit again "
                    "tomorrow (UTC), or wait for your instructor's grading")
        return ""

    def add(self, inbound: str, now: float | None = None, arrived: float = 0.0) -> Entry | None:
        """Queue the submission in exchange folder ``inbound`` (once); the new entry, or None when it was
        queued before or is not a submission's name. Earlier waiting ones of the same student and assignment
        are superseded; past a cap the entry is ``capped``."""
        parsed = parse_inbound(inbound)
        if parsed is None or self.get(inbound) is not None:
            return None
        student, assignment, timestamp = parsed
        now = time.time() if now is None else now
        last = self.last_start(student, assignment)
        not_before = 0.0 if last is None else last + self.limits.cooldown_s
        capped = self.cap_reason(student, assignment, now)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("UPDATE submissions SET state = 'superseded', reason = ? WHERE student = ? AND "
                            "assignment = ? AND state = 'waiting'",
                            (f"a later submission ({timestamp}) replaced it", student, assignment))
            self.db.execute("INSERT INTO submissions (inbound, student, assignment, timestamp, noticed, state, "
                            "not_before, status, reason, arrived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (inbound, student, assignment, timestamp, now, "capped" if capped else "waiting",
                             not_before, "capped" if capped else "", capped, arrived))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return self.get(inbound)

    def settling(self, now: float, quiet_s: float, longest_s: float, batch: int) -> bool:
        """Whether to wait before taking a batch: some submissions are ready but fewer than ``batch``, the newest
        of them was noticed less than ``quiet_s`` ago (more are arriving), and the oldest less than
        ``longest_s`` ago."""
        count, oldest, newest = self.db.execute(
            "SELECT COUNT(*), MIN(noticed), MAX(noticed) FROM submissions WHERE state = 'waiting' AND "
            "not_before <= ?", (now,)).fetchone()
        return 0 < count < batch and now - newest < quiet_s and now - oldest < longest_s

    def take(self, now: float | None = None, assignment: str | None = None) -> Entry | None:
        """The next submission to grade (round-robin over students, oldest first within the ready ones; of
        ``assignment`` alone if given), marked ``grading``; None when nothing is ready. Its cooldown and the
        caps are checked again now: one inside its cooldown waits longer, one past a cap is ``capped`` (and
        listed in :attr:`capped` for the service to tell its student)."""
        now = time.time() if now is None else now
        rows = self.db.execute(
            "SELECT w.inbound FROM submissions w LEFT JOIN (SELECT student, MAX(started) AS served FROM "
            "submissions GROUP BY student) s ON s.student = w.student WHERE w.state = 'waiting' AND "
            "w.not_before <= ? AND (? IS NULL OR w.assignment = ?) ORDER BY COALESCE(s.served, 0), w.noticed, "
            "w.inbound", (now, assignment, assignment)).fetchall()
        for (inbound,) in rows:
            entry = self.get(inbound)
            last = self.last_start(entry.student, entry.assignment)
            if last is not None and last + self.limits.cooldown_s > now:
                self.db.execute("UPDATE submissions SET not_before = ? WHERE inbound = ?",
                                (last + self.limits.cooldown_s, inbound))
                continue
            capped = self.cap_reason(entry.student, entry.assignment, now)
            if capped:
                self.db.execute("UPDATE submissions SET state = 'capped', status = 'capped', reason = ? "
                                "WHERE inbound = ?", (capped, inbound))
                self.capped.append(self.get(inbound))
                continue
            self.db.execute("UPDATE submissions SET state = 'grading', started = ? WHERE inbound = ?", (now, inbound))
            return self.get(inbound)
        return None

    def take_batch(self, limit: int, now: float | None = None) -> list[Entry]:
        """Up to ``limit`` submissions to grade together: the next one (:meth:`take`), then the next ones of the
        same assignment in round-robin order (one grading run serves them all, as the grading command grades a
        class); each student at most once, as only their latest submission waits."""
        first = self.take(now)
        if first is None:
            return []
        batch = [first]
        while len(batch) < limit and (entry := self.take(now, first.assignment)) is not None:
            batch.append(entry)
        return batch

    def finish(self, inbound: str, status: str, reason: str = "", now: float | None = None) -> None:
        self.db.execute("UPDATE submissions SET state = 'done', finished = ?, status = ?, reason = ? "
                        "WHERE inbound = ?", (time.time() if now is None else now, status, reason, inbound))

    def retry(self, inbound: str, reason: str, delay_s: float, now: float | None = None, count: bool = True) -> int:
        """The submission failed for a reason of its own (not written completely yet, an error): waiting again,
        ``delay_s`` from now, not counted as graded; how many times it has failed."""
        now = time.time() if now is None else now
        self.db.execute("UPDATE submissions SET state = 'waiting', started = NULL, not_before = ?, reason = ?, "
                        "failures = failures + ? WHERE inbound = ?", (now + delay_s, reason, int(count), inbound))
        return self.get(inbound).failures

    def refuse(self, inbound: str, reason: str, now: float | None = None) -> None:
        """An inbound entry that is not graded at all (its name refused): recorded once, done."""
        student, assignment, timestamp = (inbound.split("+") + ["", "", ""])[:3]
        self.db.execute("INSERT OR IGNORE INTO submissions (inbound, student, assignment, timestamp, noticed, state, "
                        "status, reason) VALUES (?, ?, ?, ?, ?, 'done', 'refused', ?)",
                        (inbound, student, assignment, timestamp, time.time() if now is None else now, reason))

    def next_ready(self) -> float | None:
        """When the earliest waiting submission becomes ready (epoch seconds), or None."""
        return self.db.execute("SELECT MIN(not_before) FROM submissions WHERE state = 'waiting'").fetchone()[0]

    def entries(self) -> list[Entry]:
        rows = self.db.execute("SELECT inbound FROM submissions ORDER BY noticed, inbound").fetchall()
        return [self.get(row[0]) for row in rows]
