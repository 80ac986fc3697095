"""Messages between processes: one dataclass per message, each written and read in one version.

Every message that crosses a process boundary is a subclass of :class:`Message`. On the wire it is one JSON
object, ``{"kind": KIND, "version": VERSION, <each field>}``. Reading one back (:meth:`Message.from_dict`,
:meth:`Message.decode`, :func:`decode_one_of`) checks its kind and its version first, then that every field
is there, that there is no other, and that each has its declared type; anything else is a
:class:`MessageError` that says what was wrong. A message of another version is refused, never read as
this one: a change to a message's fields comes with a new ``VERSION``.

The one message of the kernel side is here: :class:`Observation`, what a hidden check publishes (its version
is :data:`observations.FORMAT`). The grader's own messages (the warm template's socket, the sandbox relay's
pipe, the recorder's requests and answers, a grading worker's results) are in ``autograder.grading.messages``,
built on the same class. Standard library only: a student's kernel imports this module.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import Any, ClassVar

from autograder.kernel.vocabulary import observations

_ENVELOPE = ("kind", "version")


class MessageError(ValueError):
    """Not a message of the expected type: another kind or version, not JSON, or a field missing, unknown or of
    the wrong type."""


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check(value: Any, expected: Any, where: str) -> Any:  # noqa: C901  (one branch per kind of type)
    """``value`` as a field of type ``expected`` (an int is accepted as a float, text as its enum), or
    MessageError naming the field. Never echoes the value: a message may come from a student's kernel."""
    if expected is Any:
        return value
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(expected):
            try:
                return _check(value, option, where)
            except MessageError:
                continue
        raise MessageError(f"{where}: {_describe(value)}, expected {expected}")
    if expected is type(None):
        ok = value is None
    elif expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif expected is str:
        ok = isinstance(value, str)
    elif isinstance(expected, type) and issubclass(expected, enum.Enum):
        try:
            return expected(value)
        except ValueError:
            raise MessageError(f"{where}: not one of {expected.__name__}'s values") from None
    elif expected is dict or origin is dict:
        if not isinstance(value, dict):
            raise MessageError(f"{where}: {_describe(value)}, expected an object")
        if origin is dict:
            keys, values = typing.get_args(expected)
            return {_check(k, keys, where): _check(v, values, f"{where}[{k!r:.40}]") for k, v in value.items()}
        return value
    elif expected is list or origin is list:
        if not isinstance(value, list):
            raise MessageError(f"{where}: {_describe(value)}, expected a list")
        if origin is list:
            (item,) = typing.get_args(expected)
            return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return value
    else:
        raise TypeError(f"{where}: a message field cannot be of type {expected}")
    if not ok:
        raise MessageError(f"{where}: {_describe(value)}, expected {getattr(expected, '__name__', expected)}")
    return value


@dataclasses.dataclass
class Message:
    """A message between processes. A subclass is a dataclass that sets ``KIND`` (unique) and ``VERSION``
    (raised with every change to its fields); its fields may be ``bool``, ``int``, ``float``, ``str``, an
    enum of text values, ``list[...]``, ``dict[str, ...]``, an opaque ``dict`` or ``list``, ``Any`` (plain JSON,
    unchecked), and ``X | None``."""

    KIND: ClassVar[str] = ""
    VERSION: ClassVar[int] = 0

    def to_dict(self) -> dict:
        """The message as it travels (the envelope and every field; containers not copied)."""
        data = {"kind": self.KIND, "version": self.VERSION}
        for field in dataclasses.fields(self):
            data[field.name] = getattr(self, field.name)
        return data

    def encode(self) -> bytes:
        """The message as JSON, one line (UTF-8); NaN and infinities are refused (ValueError)."""
        return json.dumps(self.to_dict(), allow_nan=False, separators=(",", ":")).encode()

    @classmethod
    def from_dict(cls, data: Any):
        """Read a message of this type back, or raise MessageError saying why it is not one."""
        if not isinstance(data, dict):
            raise MessageError(f"a {cls.KIND!r} message must be a JSON object, not {_describe(data)}")
        if data.get("kind") != cls.KIND:
            raise MessageError(f"expected a {cls.KIND!r} message, got kind {str(data.get('kind'))[:40]!r}")
        if data.get("version") != cls.VERSION:
            raise MessageError(f"a {cls.KIND!r} message of version {str(data.get('version'))[:20]}; this code "
                               f"reads version {cls.VERSION}")
        hints = _field_types(cls)
        missing = sorted(set(hints) - set(data))
        unknown = sorted(set(data) - set(hints) - set(_ENVELOPE))
        if missing or unknown:   # the unknown names are the sender's words (a student's kernel): counted, not shown
            raise MessageError(f"a {cls.KIND!r} message with fields missing {missing} and {len(unknown)} unknown")
        return cls(**{name: _check(data[name], kind, f"{cls.KIND}.{name}") for name, kind in hints.items()})

    @classmethod
    def decode(cls, raw: bytes | str):
        """:meth:`from_dict` of one encoded message."""
        return cls.from_dict(_loads(raw, cls.KIND))


def _loads(raw: bytes | str, what: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as error:   # UnicodeDecodeError is one
        raise MessageError(f"a {what!r} message that is not JSON ({error})") from None


_TYPES: dict[type, dict[str, Any]] = {}


def _field_types(cls: type) -> dict[str, Any]:
    """Each field's declared type (resolved once per class)."""
    if cls not in _TYPES:
        hints = typing.get_type_hints(cls)
        _TYPES[cls] = {field.name: hints[field.name] for field in dataclasses.fields(cls)}
    return _TYPES[cls]


def decode_one_of(raw: bytes | str, *kinds: type[Message]) -> Message:
    """The message in ``raw``, which must be of one of ``kinds`` (told apart by their ``KIND``)."""
    data = _loads(raw, " or ".join(kind.KIND for kind in kinds))
    by_kind = {kind.KIND: kind for kind in kinds}
    found = by_kind.get(data.get("kind")) if isinstance(data, dict) else None
    if found is None:
        kind = str(data.get("kind"))[:40] if isinstance(data, dict) else _describe(data)
        raise MessageError(f"a message of kind {kind!r}, expected one of {sorted(by_kind)}")
    return found.from_dict(data)


@dataclasses.dataclass
class Observation(Message):
    """One hidden check's observation, as the kernel publishes it (display data under ``observations.MIME``,
    from ``autograder.kernel.hidden``): which test and which of its checks, and the value, encoded by
    :func:`observations.encode`. From a grading kernel it is untrusted: the judge reads the value alone and
    takes the label, tolerances and hint from the reference."""

    KIND: ClassVar[str] = "observation"
    VERSION: ClassVar[int] = observations.FORMAT

    test: str
    index: int
    label: str
    value: Any
    atol: float
    rtol: float
    hint: str | None

    def display_data(self) -> dict:
        """The display data bundle that carries it (``IPython.display.display(..., raw=True)``): the fields
        under :data:`observations.MIME`, which names the version, as a Jupyter MIME bundle does."""
        data = self.to_dict()
        del data["kind"], data["version"]
        return {observations.MIME: data}

    @classmethod
    def from_display(cls, mime: str, payload: Any) -> Observation:
        """Read one back from a display data bundle's ``mime`` key and its payload (MessageError otherwise)."""
        if not observations.is_mime(mime):
            raise MessageError("not an observation's MIME type")
        version = observations.mime_format(mime)
        if version != cls.VERSION:
            raise MessageError(f"an observation {'without a format' if version is None else f'of format {version}'}; "
                               f"this grader reads format {cls.VERSION} (the kernel imported another version of "
                               "autograder.kernel)")
        if not isinstance(payload, dict):
            raise MessageError(f"an observation must be a JSON object, not {_describe(payload)}")
        if set(payload) & set(_ENVELOPE):
            raise MessageError("an observation carries its version in its MIME type, not in its fields")
        return cls.from_dict({**payload, "kind": cls.KIND, "version": version})
