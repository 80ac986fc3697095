"""DataLoader workers in lesson 03: their random streams, the same seeding simulated in this process, their timings.

``NumpyNoise``, ``constant_numpy_seed`` and ``constant_seeds`` run inside DataLoader workers:
workers started with ``spawn`` (the only start method on Windows, the default on macOS) must
import a dataset class or a ``worker_init_fn`` by name, and cannot see what a notebook defines.
``worker_numpy_draws`` starts real workers; ``as_worker``, ``simulated_worker_draws`` and
``simulated_worker_streams`` seed this process the way a worker is seeded, so they also work
with a function defined in a notebook. ``plot_worker_timings`` draws the lesson's epoch timings.
"""
from __future__ import annotations

import random
from contextlib import contextmanager

import numpy as np
import torch
from torch.utils.data import Dataset


class NumpyNoise(Dataset):
    """Item i is ``(i, worker id, a number drawn from NumPy's global random generator)``.

    Meant for looking at worker seeding: the numbers show which NumPy stream each
    worker process draws from (worker id -1 is the main process).
    """

    def __init__(self, length: int = 8):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        info = torch.utils.data.get_worker_info()
        return i, (-1 if info is None else info.id), float(np.random.random_sample())


def constant_numpy_seed(worker_id: int) -> None:
    """A ``worker_init_fn`` with the classic bug: every worker seeds NumPy with 0."""
    np.random.seed(0)


def constant_seeds(worker_id: int) -> None:
    """What a careless library does in every worker: seed NumPy and ``random`` with 0."""
    np.random.seed(0)
    random.seed(0)


def worker_numpy_draws(worker_init_fn=None, seed: int = 0, length: int = 8, num_workers: int = 2,
                       multiprocessing_context=None) -> dict[int, list[float]]:
    """Run a ``num_workers`` DataLoader over ``NumpyNoise`` (batch size 1, no shuffling).

    The loader's generator is seeded with ``seed``; ``worker_init_fn`` runs in each worker,
    so with ``spawn`` it must be importable (a function from a module, not from a notebook).
    Returns worker id -> the NumPy numbers that worker drew, in item order (id -1 is
    the main process, when ``num_workers`` is 0).
    """
    from torch.utils.data import DataLoader

    loader = DataLoader(NumpyNoise(length), batch_size=1, shuffle=False, num_workers=num_workers,
                        worker_init_fn=worker_init_fn, generator=torch.Generator().manual_seed(seed),
                        multiprocessing_context=multiprocessing_context)
    draws: dict[int, list[float]] = {}
    for _, worker, value in loader:
        draws.setdefault(int(worker), []).append(float(value))
    return draws


def loader_base_seed(seed: int) -> int:
    """The base seed a DataLoader with ``generator=torch.Generator().manual_seed(seed)`` gives its workers.

    Each epoch draws one from the loader's generator (or from the global one when the
    loader has none); worker ``w`` then runs with torch seed ``base_seed + w``.
    """
    generator = torch.Generator().manual_seed(seed)
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


@contextmanager
def as_worker(worker_id: int, num_workers: int, base_seed: int, dataset=None):
    """Inside the block, this process is seeded like DataLoader worker ``worker_id`` when it starts.

    As PyTorch does in a worker, before it calls ``worker_init_fn(worker_id)``:
    ``random`` and torch are seeded with ``base_seed + worker_id``, NumPy with a state
    derived from both, and ``torch.utils.data.get_worker_info()`` describes the worker.
    Afterwards every generator and the worker info are put back as they were, so the
    notebook's own random streams are untouched.
    """
    from torch.utils.data._utils import worker as _worker

    from autograder.kernel import private_apis

    generate_state = private_apis.get(private_apis.GENERATE_STATE)
    saved_torch, saved_numpy, saved_random = torch.get_rng_state(), np.random.get_state(), random.getstate()
    saved_cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    saved_info = private_apis.get(private_apis.WORKER_INFO)
    seed = base_seed + worker_id
    try:
        random.seed(seed)
        torch.manual_seed(seed)
        np.random.seed(generate_state(base_seed, worker_id))
        setattr(_worker, private_apis.WORKER_INFO.name,
                _worker.WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset))
        yield
    finally:
        setattr(_worker, private_apis.WORKER_INFO.name, saved_info)
        torch.set_rng_state(saved_torch)
        if saved_cuda is not None:
            torch.cuda.set_rng_state_all(saved_cuda)
        np.random.set_state(saved_numpy)
        random.setstate(saved_random)


def simulated_worker_draws(worker_init_fn=None, seed: int = 0, length: int = 8,
                           num_workers: int = 2) -> dict[int, list[float]]:
    """What ``worker_numpy_draws`` returns, computed in this process with no worker started.

    Worker ``w`` of a loader with batch size 1 fetches items ``w, w + num_workers, ...``;
    here each worker's share is fetched inside :func:`as_worker`, after
    ``worker_init_fn(w)``. Because nothing is sent to another process, a function defined
    in a notebook works with every start method (``fork``, ``spawn``, ``forkserver``).
    """
    base_seed = loader_base_seed(seed)
    dataset = NumpyNoise(length)
    draws: dict[int, list[float]] = {}
    for worker_id in range(num_workers):
        with as_worker(worker_id, num_workers, base_seed, dataset):
            if worker_init_fn is not None:
                worker_init_fn(worker_id)
            draws[worker_id] = [dataset[i][2] for i in range(worker_id, length, num_workers)]
    return draws


def simulated_worker_streams(worker_init_fn, seed: int = 0, num_workers: int = 2, count: int = 3,
                             before=None) -> dict[int, tuple[list[float], list[float]]]:
    """Worker id -> (``count`` NumPy numbers, ``count`` ``random`` numbers) each worker draws after it started.

    Each worker of a loader whose generator is seeded with ``seed`` is simulated in this process
    (:func:`as_worker`): ``before(worker_id)`` runs first if given (a library seeding the generators
    with a constant, say, :func:`constant_seeds`), then ``worker_init_fn(worker_id)``.
    """
    base_seed = loader_base_seed(seed)
    streams = {}
    for worker_id in range(num_workers):
        with as_worker(worker_id, num_workers, base_seed):
            if before is not None:
                before(worker_id)
            if worker_init_fn is not None:
                worker_init_fn(worker_id)
            streams[worker_id] = (np.random.random_sample(count).tolist(), [random.random() for _ in range(count)])
    return streams


# ---------------------------------------------------------------- the worker timings

def plot_worker_timings(timings, fig=None, title: str | None = "one epoch without and with worker processes"):
    """Bar chart of ``timings``, which maps ``(dataset label, num_workers)`` to seconds per epoch.

    One panel per dataset, each on its own scale (an in-memory epoch can take a hundredth of a
    decoding one), one bar per worker count; every bar after the first is marked with its ratio
    to the first ("x0.62": the epoch took 0.62 times as long). Returns the figure (a new pyplot
    figure unless ``fig`` is given).
    """
    labels = list(dict.fromkeys(label for label, _ in timings))
    if not labels:
        raise ValueError("no timings to draw")
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(3.2 * len(labels), 3.0))
    axes = fig.subplots(1, len(labels), squeeze=False)[0]
    for ax, label in zip(axes, labels):
        workers = sorted(w for lab, w in timings if lab == label)
        seconds = [float(timings[label, w]) for w in workers]
        names = [f"{w} worker{'s' if w != 1 else ''}" for w in workers]
        bars = ax.bar(names, seconds, color=["tab:gray"] + ["tab:blue"] * (len(workers) - 1))
        for bar, value in zip(bars[1:], seconds[1:]):
            ratio = value / seconds[0] if seconds[0] > 0 else float("inf")
            ax.annotate(f"×{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=9)
        ax.set_ylim(0, 1.2 * max(seconds) if max(seconds) > 0 else 1.0)
        ax.set_title(label, fontsize=10)
        ax.set_ylabel("seconds per epoch")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
