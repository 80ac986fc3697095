"""One settings object for the grading command: its defaults, the course's ``nbgrader_config.py``, then the
command line, in that order of precedence. Every default lives here and nowhere else.

The course config speaks to the grading command in two ways:

- nbgrader's own ``c.Execute.timeout`` is the cap per cell, for plain ``nbgrader autograde`` and for
  ``python -m autograder grade`` alike (nbgrader's default when the course does not set it);
- ``c.PTEGrading.<name>`` sets any field below, e.g. ``c.PTEGrading.kernel_threads = 1`` (BLAS/OpenMP
  threads per kernel, which decide how some reductions round) or ``c.PTEGrading.memory_mb = 2048``.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from .runner import Limits

# PTEGrading names that are not the field's own name
CONFIG_ALIASES = {"kernel_threads": "threads"}


@dataclass(frozen=True)
class Settings:
    course: Path
    assignments: tuple[str, ...] | None = None   # None: every assignment in the gradebook
    students: tuple[str, ...] | None = None      # None: every student folder
    shard: tuple[int, int] | None = None         # (index, count): only students hashing to shard index
    jobs: int = os.cpu_count() or 1              # submissions graded at once, each kernel on its own cores
    timeout_s: float = 600.0                     # wall clock per notebook
    cell_timeout_s: float | None = None          # per cell; None: the course's Execute.timeout
    memory_mb: int = 3072                        # per kernel
    output_mb: float = 2.0                       # all outputs of one notebook together
    disk_mb: int = 256                           # each tmpfs the kernel may write (work folder, /tmp)
    processes: int = 256                         # processes and threads per kernel
    threads: int = 1                             # BLAS/OpenMP threads per kernel
    sandbox: str = "auto"                        # auto | bwrap | none
    phase2_timeout_s: float = 900.0              # nbgrader's recording step, per assignment

    @classmethod
    def resolve(cls, course: Path, config, overrides: dict | None = None) -> Settings:
        """The settings for ``course``: defaults < its nbgrader config < ``overrides`` (the command line;
        None means "not given")."""
        names = {f.name for f in dataclasses.fields(cls)} - {"course"}
        values: dict = {}
        for key, value in (config.get("PTEGrading", {}) or {}).items():
            name = CONFIG_ALIASES.get(key, key)
            if name not in names:
                raise ValueError(f"nbgrader_config.py sets c.PTEGrading.{key}, which the grading command does not "
                                 f"know (it knows: {', '.join(sorted(names | set(CONFIG_ALIASES)))})")
            values[name] = value
        values.setdefault("cell_timeout_s", float(config.get("Execute", {}).get("timeout") or nbgrader_cell_timeout()))
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        for name in ("assignments", "students"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(course=Path(course), **values)

    def limits(self) -> Limits:
        """What each kernel runs under (its CPU set is added per job)."""
        use_bwrap = self.sandbox != "none"
        cell = self.cell_timeout_s if self.cell_timeout_s is not None else nbgrader_cell_timeout()
        return Limits(timeout_s=self.timeout_s, cell_timeout_s=min(cell, self.timeout_s), memory_mb=self.memory_mb,
                      output_mb=self.output_mb, threads=self.threads, sandbox=use_bwrap, processes=self.processes,
                      disk_mb=self.disk_mb)

    def problems(self) -> list[str]:
        """What makes these settings unusable (shown as a usage error)."""
        found = []
        if self.jobs < 1:
            found.append("--jobs must be >= 1")
        if self.timeout_s <= 0 or (self.cell_timeout_s is not None and self.cell_timeout_s <= 0):
            found.append("--timeout-s and --cell-timeout-s must be > 0")
        if self.memory_mb < 256:
            found.append("--memory-mb must be >= 256")
        if self.output_mb <= 0 or self.disk_mb < 16 or self.processes < 16:
            found.append("--output-mb must be > 0, --disk-mb >= 16 and --processes >= 16")
        if self.sandbox not in ("auto", "bwrap", "none"):
            found.append("--sandbox must be auto, bwrap or none")
        return found


def nbgrader_cell_timeout() -> float:
    """Plain nbgrader's cap per cell when the course sets none."""
    from nbgrader.preprocessors import Execute

    return float(Execute.class_traits()["timeout"].default_value)


def default(name: str):
    """The default of one field (for the command line's help)."""
    return next(f.default for f in dataclasses.fields(Settings) if f.name == name)
