"""Make the venv's scripts (nbgrader calls `alembic`, `jupyter`) reachable even without `make`."""
import os
import sys
from pathlib import Path

_bin = str(Path(sys.executable).parent)
if _bin not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")
