"""The ids a student chooses (the student and assignment parts of an inbound folder's name), checked before
they reach an argument list, a glob, a path or a log line.

An id is ASCII letters, digits and ``._-@``, starts with a letter or a digit, holds no ``..``, and is at most
:data:`MAX_ID` characters; its NFKC form is itself (no look-alike). Anything else is refused with a reason the
student can read. :func:`shown` writes any text a student chose into a log line with its control characters
escaped, so a newline cannot forge a line.
"""
from __future__ import annotations

import re
import unicodedata

MAX_ID = 64
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")


def id_problem(value: str) -> str:
    """Why ``value`` is not an id the service passes on ("" when it is one)."""
    if not value:
        return "it is empty"
    if len(value) > MAX_ID:
        return f"it is longer than {MAX_ID} characters"
    if unicodedata.normalize("NFKC", value) != value or not value.isascii():
        return "it holds characters other than ASCII letters, digits and ._-@"
    if not ID.fullmatch(value):
        return "it must start with a letter or a digit and hold only letters, digits and ._-@"
    if ".." in value:
        return "it holds '..'"
    return ""


def shown(value: str | bytes, limit: int = 200) -> str:
    """``value`` for a log line: printable ASCII as it is, everything else escaped (``repr``-style), cut at
    ``limit`` characters."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = "".join(ch if " " <= ch <= "~" and ch != "\\" else ascii(ch)[1:-1] for ch in value[:limit])
    return text + ("..." if len(value) > limit else "")
