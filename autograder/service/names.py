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
    """``value`` for a log line: printable ASCII as it is, everything else escaped (``repr``-style: a byte
    that is not UTF-8, as in a name ``os.listdir`` gives back, is ``\\xNN``), cut at ``limit`` characters."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    return "".join(escaped(ch) for ch in value[:limit]) + ("..." if len(value) > limit else "")


def escaped(ch: str) -> str:
    if " " <= ch <= "~" and ch != "\\":
        return ch
    if 0xDC80 <= ord(ch) <= 0xDCFF:   # a byte that is not UTF-8 (surrogateescape)
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return ascii(ch)[1:-1]
