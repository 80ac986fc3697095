"""Student and assignment ids: checked before they reach a path, a glob or a command line."""
from __future__ import annotations

import re

# ASCII only (no look-alike letters), no leading '-' or '.', no '+' (nbgrader's separator), no glob characters,
# no '/', no control characters; '..' refused below
ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\Z")
RULE = ("1 to 64 ASCII letters, digits, '_', '.', '@' or '-', starting with a letter, a digit or '_', "
        "without '..'")


class BadId(ValueError):
    """An id that cannot be used; its message says why, with the id written in ASCII (no control characters)."""


def check_id(value, kind: str = "student") -> str:
    """``value`` when it is a usable ``kind`` id, else BadId with a message a student can act on."""
    if not isinstance(value, str) or not ID.match(value) or ".." in value:
        raise BadId(f"the {kind} id {ascii(value)} cannot be used: an id is {RULE}")
    return value


def is_id(value) -> bool:
    try:
        check_id(value)
    except BadId:
        return False
    return True
