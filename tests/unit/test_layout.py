"""No module of ``autograder/`` grows past LIMIT lines: past that, a module is usually several things, and it
is split into what it holds (as ``kernel/checks.py`` became ``checks`` and ``hidden``, and ``kernel/data.py``
became ``digits``, ``workers`` and ``data_loading_checks``).

The modules over the limit today are listed with a reason and their size now, which they may not pass; an
entry whose module is gone or back under the limit fails too, so the list only shrinks.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 450

# module -> (its lines when listed, the most it may have; why it is allowed past LIMIT for now)
EXCEPTIONS: dict[str, tuple[int, str]] = {}


def module_lengths(root: Path = ROOT) -> dict[str, int]:
    """Every Python module under ``root/autograder``, relative to ``root``, with its number of lines."""
    return {path.relative_to(root).as_posix(): len(path.read_text().splitlines())
            for path in sorted((root / "autograder").rglob("*.py")) if "__pycache__" not in path.parts}


def test_no_module_grows_past_the_limit():
    lengths = module_lengths()
    assert "autograder/kernel/checks.py" in lengths   # the scan sees the package
    too_long = {name: lines for name, lines in lengths.items()
                if lines > EXCEPTIONS.get(name, (LIMIT, ""))[0]}
    assert not too_long, (
        f"modules longer than {LIMIT} lines (or than their listed size): {too_long}. A module that long is usually "
        "several things: split it into what it holds, one module each, with a docstring line saying what it is.")


def test_every_exception_is_still_needed():
    lengths = module_lengths()
    stale = {name: lengths.get(name) for name in EXCEPTIONS if lengths.get(name, 0) <= LIMIT}
    assert not stale, (f"listed as too long but gone or back under {LIMIT} lines: {stale}; remove them from "
                       "EXCEPTIONS in tests/unit/test_layout.py")
