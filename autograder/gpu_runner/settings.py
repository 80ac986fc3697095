"""The GPU runner's settings (the ``GPU_TEST_*`` environment variables), its wall-clock budget and a run's
context. Standard library only."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = ("nbval", "nbclient")   # best first
CELL_TIMEOUT_S = 300      # one cell, in every runner
STEP_TIMEOUT_S = 300      # one notebook, or the CUDA assertions
MIN_LEFT_S = 15           # a step starts only with this much of the budget left


@dataclass
class Settings:
    """What the environment variables ask for (see the package docstring)."""

    runner: str = "auto"
    lessons: list[str] = field(default_factory=list)
    solutions: Path = ROOT / "solutions"
    allow_cpu: bool = False
    budget_s: float = 570.0

    @classmethod
    def from_env(cls, env) -> Settings:
        """Read the ``GPU_TEST_*`` variables; ``ValueError`` names a bad one."""
        runner = env.get("GPU_TEST_RUNNER") or "auto"
        if runner not in ("auto", *RUNNERS):
            raise ValueError(f"GPU_TEST_RUNNER must be auto, {', '.join(RUNNERS)}; got {runner!r}")
        try:
            budget = float(env.get("GPU_TEST_BUDGET_S") or 570)
        except ValueError:
            raise ValueError(f"GPU_TEST_BUDGET_S must be a number of seconds; got {env['GPU_TEST_BUDGET_S']!r}") \
                from None
        return cls(runner=runner,
                   lessons=[w for w in env.get("GPU_TEST_LESSONS", "").split(",") if w],
                   solutions=ROOT / (env.get("GPU_TEST_SOLUTIONS") or "solutions"),
                   allow_cpu=env.get("GPU_TEST_ALLOW_CPU") == "1",
                   budget_s=budget)


class Budget:
    """The wall-clock budget of a whole run."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self.seconds, self.clock = seconds, clock
        self.start = clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def timeout(self, cap: float = STEP_TIMEOUT_S) -> float:
        """A step's time limit: what is left, at most ``cap``, at least 10 s."""
        return max(10.0, min(self.left(), cap))


@dataclass
class Run:
    """One run's context: where its files go, its budget, whether CUDA is there."""

    work: Path
    budget: Budget
    cuda: bool


def find_lessons(folder: Path, wanted: list[str]) -> list[tuple[str, Path]]:
    """``(id, notebook)`` for each ``NN_topic/NN_topic.ipynb`` under ``folder``, narrowed to ``wanted``."""
    found = sorted(p.name for p in folder.iterdir()
                   if p.is_dir() and p.name[:2].isdigit() and (p / f"{p.name}.ipynb").is_file())
    return [(name, folder / name / f"{name}.ipynb") for name in found if not wanted or name in wanted]
