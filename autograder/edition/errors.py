"""The one error of the student edition's build."""


class EditionError(RuntimeError):
    """The student edition cannot be built as asked; the message says why and what to do."""
