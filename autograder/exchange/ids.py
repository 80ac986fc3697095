"""Student and assignment ids at the HTTP exchange: the feedback service's rule (``service/names.py``), so an id
the exchange stores is one the service grades, checked before it reaches a path, a glob or a command line."""
from __future__ import annotations

from autograder.service.names import MAX_ID, id_problem

RULE = (f"1 to {MAX_ID} ASCII letters, digits, '_', '.', '@' or '-', starting with a letter or a digit, "
        "without '..'")


class BadId(ValueError):
    """An id that cannot be used; its message says why, with the id written in ASCII (no control characters)."""


def check_id(value, kind: str = "student") -> str:
    """``value`` when it is a usable ``kind`` id, else BadId with a message a student can act on."""
    problem = id_problem(value) if isinstance(value, str) else "it is not text"
    if problem:
        raise BadId(f"the {kind} id {ascii(value)} cannot be used: {problem} (an id is {RULE})")
    return value


def is_id(value) -> bool:
    return isinstance(value, str) and not id_problem(value)
