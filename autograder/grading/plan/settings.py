"""One settings object for the grading command: its defaults, the course's ``nbgrader_config.py``, then the
command line, in that order of precedence. Every default and every fixed limit of the engine lives here.

The course config speaks to the grading command the nbgrader way, through documented traitlets options:

- nbgrader's own ``c.Execute.timeout`` is the cap per cell, for plain ``nbgrader autograde`` and for
  ``python -m autograder grade`` alike (nbgrader's default when the course does not set it);
- ``c.PTEGrading.<name>`` sets any trait of :class:`PTEGrading`, e.g. ``c.PTEGrading.kernel_threads = 1``
  (BLAS/OpenMP threads per kernel, which decide how some reductions round) or ``c.PTEGrading.memory_mb = 2048``.
  A value of the wrong type or an unknown name is a usage error that names the key.

This module imports no Jupyter package (traitlets only): ``python -m autograder`` of any verb reads it.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from traitlets import Enum, Float, Integer, List, TraitError, Unicode
from traitlets.config import Configurable

from autograder.grading.plan import shards

# ---------------------------------------------------------------- fixed limits of the engine (not course settings)
# Each guards the grader against one thing a submission can send it; none changes a score. (The sandbox's own:
# isolate/sandbox.py.)
FLOOD_FACTOR = 10                 # times the output cap: a cell still printing then is interrupted
KILL_FACTOR = 5                   # times the flood limit: a kernel still sending then is killed
CELL_LINE_LIMIT = 1000            # stream lines kept per cell (as nbgrader's LimitOutput does)
MAX_OUTPUT_DEPTH = 100            # JSON nesting kept in a message; deeper is dropped (the decoders recurse)
MAX_OBSERVATIONS = 500            # observations one test cell may publish
MAX_CELLS = 2000                  # cells of a submitted notebook (a lesson has fewer than 100)
MAX_NOTEBOOK_BYTES = 20 * 2**20   # a lesson notebook with its outputs is well under 2 MB
MAX_TIMESTAMP_BYTES = 1024        # nbgrader's timestamp.txt
INTERRUPT_GRACE_S = 5.0           # at least this long (a quarter of the cell cap if more) to answer an interrupt
KERNEL_STARTUP_S = 60             # a kernel that has not answered by then is a failed start
WATCHDOG_INTERVAL_S = 0.1         # how often the watchdog looks at the kernel's clock and memory
CGROUP_MEMORY_HEADROOM_MB = 512   # cgroup memory beyond the RSS cap: the kernel's tmpfs pages, reclaimable cache
REFERENCE_GRACE_S = 60           # beyond three reference runs' clocks, before a worker gives up waiting
TASK_GRACE_S = 120                # per notebook, beyond its cap and two kernel starts, before its worker is stopped
RECORD_BATCH = 8                  # students recorded together once that many of one assignment wait
RECORDER_STOP_S = 30              # the recording process's time to exit once its input is closed


@dataclass
class Limits:
    """What one kernel runs under. Built by :meth:`Settings.limits`; its CPU set is added per job."""
    timeout_s: float                # the whole notebook
    cell_timeout_s: float           # one cell
    memory_mb: int
    output_mb: float                # all outputs of the notebook together
    threads: int
    sandbox: bool
    processes: int                  # processes and threads of the kernel
    disk_mb: int                    # size of each tmpfs the kernel writes (work folder, /tmp, runtime folder)
    cpus: str = ""                  # CPU list for this kernel, e.g. "1"; "" = no pinning (set per job)
    mpl_cache: str = ""             # matplotlib's font cache, built once per run and copied into each kernel
    warm: bool = False              # fork the kernel from a template (autograder.warm), sandboxed per child


class PTEGrading(Configurable):
    """``c.PTEGrading.<name>`` in the course's nbgrader_config.py: what ``python -m autograder grade`` does
    when the command line does not say."""

    assignments = List(Unicode(), default_value=None, allow_none=True,
                       help="assignments to grade (default: every assignment in the gradebook)").tag(config=True)
    students = List(Unicode(), default_value=None, allow_none=True,
                    help="students to grade (default: every folder under submitted/)").tag(config=True)
    shard = Unicode(None, allow_none=True,
                    help="'I/N': only students whose id hashes to shard I of N; 'auto': the shard of this "
                         "Slurm array task or Kubernetes Indexed Job pod").tag(config=True)
    shard_count = Integer(None, allow_none=True,
                          help="how many shards 'auto' splits the class into (Kubernetes does not tell a pod)"
                          ).tag(config=True)
    jobs = Integer(os.cpu_count() or 1,
                   help="submissions graded at once, each kernel on its own cores (default: the cores)"
                   ).tag(config=True)
    timeout_s = Float(600.0, help="wall-clock cap of one notebook, in seconds").tag(config=True)
    cell_timeout_s = Float(None, allow_none=True,
                           help="cap per cell, in seconds (default: c.Execute.timeout; never more than "
                                "timeout_s)").tag(config=True)
    memory_mb = Integer(3072, help="memory cap of one kernel, in MB").tag(config=True)
    output_mb = Float(2.0, help="output cap of one notebook (every cell together), in MB").tag(config=True)
    disk_mb = Integer(256, help="size of each tmpfs a kernel writes (work folder, /tmp), in MB").tag(config=True)
    processes = Integer(256, help="processes and threads of one kernel").tag(config=True)
    kernel_threads = Integer(1, help="BLAS/OpenMP threads per kernel (they decide how some reductions "
                                     "round: plain nbgrader's kernels must get the same)").tag(config=True)
    sandbox = Enum(["auto", "bwrap", "none"], "auto",
                   help="bubblewrap isolation: auto (required), bwrap, or none (knowingly)").tag(config=True)
    phase2_timeout_s = Float(900.0, help="cap of nbgrader's recording step for one batch, in seconds"
                             ).tag(config=True)
    kernels = Enum(["warm", "cold"], "warm",
                   help="warm: fork each sandboxed kernel from a template that has imported torch (each child "
                        "makes its own sandbox; cold where it cannot, the reason in the report); cold: start "
                        "every kernel as a new Python").tag(config=True)


# PTEGrading names that are not the Settings field's own name
CONFIG_ALIASES = {"kernel_threads": "threads"}


def _trait_default(name: str):
    trait = PTEGrading.class_traits()[{v: k for k, v in CONFIG_ALIASES.items()}.get(name, name)]
    return trait.default_value


@dataclass(frozen=True)
class Settings:
    course: Path
    assignments: tuple[str, ...] | None = None   # None: every assignment in the gradebook
    students: tuple[str, ...] | None = None      # None: every student folder
    shard: tuple[int, int] | None = None         # (index, count): only students hashing to shard index
    shard_count: int | None = None               # shards of --shard auto (Kubernetes; checked against Slurm's)
    jobs: int = _trait_default("jobs")
    timeout_s: float = _trait_default("timeout_s")
    cell_timeout_s: float | None = None          # per cell; None: the course's Execute.timeout
    memory_mb: int = _trait_default("memory_mb")
    output_mb: float = _trait_default("output_mb")
    disk_mb: int = _trait_default("disk_mb")
    processes: int = _trait_default("processes")
    threads: int = _trait_default("threads")
    sandbox: str = _trait_default("sandbox")
    phase2_timeout_s: float = _trait_default("phase2_timeout_s")   # nbgrader's recording step, per batch
    kernels: str = _trait_default("kernels")                        # "warm" or "cold"

    @classmethod
    def resolve(cls, course: Path, config, overrides: dict | None = None) -> Settings:
        """The settings for ``course``: defaults < its nbgrader config < ``overrides`` (the command line;
        None means "not given"). ValueError names a key the config sets wrongly."""
        values = from_config(config)
        values.setdefault("cell_timeout_s", execute_timeout(config))
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        if isinstance(values.get("shard"), str):   # from the config: "I/N" or "auto"
            values["shard"] = shards.parse(values["shard"])
        values["shard"] = shards.resolve(values.get("shard"), values.get("shard_count"), os.environ)
        for name in ("assignments", "students"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(course=Path(course), **values)

    def limits(self, mpl_cache: str = "") -> Limits:
        """What each kernel runs under (its CPU set is added per job)."""
        use_bwrap = self.sandbox != "none"
        cell = self.cell_timeout_s if self.cell_timeout_s is not None else nbgrader_cell_timeout()
        return Limits(timeout_s=self.timeout_s, cell_timeout_s=min(cell, self.timeout_s), memory_mb=self.memory_mb,
                      output_mb=self.output_mb, threads=self.threads, sandbox=use_bwrap, processes=self.processes,
                      disk_mb=self.disk_mb, mpl_cache=mpl_cache, warm=self.kernels == "warm")

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
        if self.shard_count is not None and self.shard_count < 1:
            found.append("--shard-count must be >= 1")
        if self.sandbox not in ("auto", "bwrap", "none"):
            found.append("--sandbox must be auto, bwrap or none")
        if self.kernels not in ("warm", "cold"):
            found.append("--kernels must be warm or cold")
        return found


def from_config(config) -> dict:
    """The Settings fields that ``c.PTEGrading`` sets, each checked by its trait: a wrong type or an unknown
    name is a ValueError that names the key."""
    section = dict(config.get("PTEGrading", {}) or {})
    known = set(PTEGrading.class_trait_names(config=True))
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"nbgrader_config.py sets c.PTEGrading.{unknown[0]}, which the grading command does not "
                         f"know (it knows: {', '.join(sorted(known))})")
    options = PTEGrading()
    values = {}
    for key, value in section.items():
        try:
            setattr(options, key, value)
        except TraitError:
            trait = PTEGrading.class_traits()[key]
            raise ValueError(f"nbgrader_config.py sets c.PTEGrading.{key} = {value!r}, but it must be "
                             f"{trait.info()} ({trait.help})") from None
        values[CONFIG_ALIASES.get(key, key)] = getattr(options, key)
    return values


def execute_timeout(config) -> float:
    """The course's ``c.Execute.timeout`` (nbgrader's default when it sets none)."""
    value = (config.get("Execute", {}) or {}).get("timeout")
    if value is None or value == 0:
        return nbgrader_cell_timeout()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"nbgrader_config.py sets c.Execute.timeout = {value!r}, but it must be a number of seconds")
    return float(value)


def nbgrader_cell_timeout() -> float:
    """Plain nbgrader's cap per cell when the course sets none."""
    from nbgrader.preprocessors import Execute

    return float(Execute.class_traits()["timeout"].default_value)


def default(name: str):
    """The default of one field (for the command line's help)."""
    return next(f.default for f in dataclasses.fields(Settings) if f.name == name)
