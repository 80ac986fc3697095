"""Where the shipped data lives, as seen from a notebook's kernel."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The shipped data folder (``$PTE_DATA_DIR`` overrides it, e.g. for a grading sandbox)."""
    return Path(os.environ.get("PTE_DATA_DIR", PACKAGE_ROOT / "data"))
