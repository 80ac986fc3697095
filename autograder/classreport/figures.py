"""The class report's pictures, drawn with matplotlib and inlined (a ``data:`` URI of a PNG): the page has no
external assets. Counts only; each label is the course's own hint, shortened."""
from __future__ import annotations

import base64
import io
import textwrap

MAX_BARS = 20
LABEL_CHARS = 80


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _inline(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72, metadata={"Software": None})
    _pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def short(text: str, width: int = LABEL_CHARS) -> str:
    return textwrap.shorten(" ".join(str(text).split()), width=width, placeholder="…") if text else ""


def failing_checks(checks: list) -> str | None:
    """A bar per check (:class:`.tally.CheckTally`) of the share of the class that failed it, largest first,
    labelled with the check and its hint; None when no check failed."""
    shown = sorted((c for c in checks if c.failed), key=lambda c: (-c.share, c.key))[:MAX_BARS]
    if not shown:
        return None
    plt = _pyplot()
    labels = [f"{c.short_name}: {short(c.label, LABEL_CHARS - len(c.short_name))}" if c.label else c.short_name
              for c in shown]
    height = 0.3 * len(shown) + 0.9
    fig, ax = plt.subplots(figsize=(12, height))
    fig.subplots_adjust(left=0.52, right=0.97, top=1 - 0.2 / height, bottom=0.6 / height)
    shares = [100 * c.share for c in shown]
    ax.barh(range(len(shown)), shares, color="#c0504d")
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("students who failed it (%)")
    for y, c in enumerate(shown):
        ax.text(min(100 * c.share + 1, 92), y, f"{c.failed}/{c.seen}", va="center", fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _inline(fig)


def attempts_histogram(exercises: list) -> str | None:
    """Per exercise (:class:`.tally.ExerciseTally`), how many students passed it at their 1st, 2nd, ...
    feedback attempt, and how many never did; None without attempts."""
    shown = [e for e in exercises if e.with_attempts]
    if not shown:
        return None
    plt = _pyplot()
    most = max(max((n for n in e.to_pass if n), default=1) for e in shown)
    slots = list(range(1, most + 1)) + [0]
    fig, ax = plt.subplots(figsize=(min(2 + 0.9 * len(slots) * max(len(shown), 2) / 2, 12), 3.2))
    fig.subplots_adjust(left=0.08, right=0.98, top=0.95, bottom=0.17)
    width = 0.8 / len(shown)
    for i, e in enumerate(shown):
        xs = [s + (i - (len(shown) - 1) / 2) * width for s in range(len(slots))]
        ax.bar(xs, [e.to_pass.get(n, 0) for n in slots], width=width, label=e.exercise)
    ax.set_xticks(range(len(slots)), [str(n) for n in slots[:-1]] + ["never"])
    ax.set_xlabel("feedback attempts until the exercise passed")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _inline(fig)
