"""The shipped digits data, worker-side code, and the digit pictures of lesson 03.

``load_digits()`` reads ``data/digits.npz`` (see data/README.md); ``plot_digit_grid`` draws
images with their labels; ``batch_pager`` pages through the batches of a DataLoader.

Everything a DataLoader worker runs in lesson 03 lives here (``PngDigits``, ``NumpyNoise``,
``constant_numpy_seed``): workers started with ``spawn`` (the only start method on Windows,
the default on macOS) must import a dataset class or a ``worker_init_fn`` by name, and
cannot see what a notebook defines. ``simulated_worker_draws`` runs a ``worker_init_fn``
the way a worker would, but in this process, so it also works with a notebook function.

``plot_worker_timings`` draws the worker timings of lesson 03. ``check_digits_split``,
``check_spiral_dataset``, ``check_make_loaders`` and ``check_seed_worker`` hold the visible checks of
its four exercises.
"""
from __future__ import annotations

import io
import math
import random
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

from autograder.kernel import checks
from autograder.kernel.paths import data_dir

DIGITS_FILE = "digits.npz"


class DigitsArrays(NamedTuple):
    """The arrays of data/digits.npz (NumPy, as stored)."""

    images: np.ndarray       # (1797, 8, 8) uint8, ink 0..16
    labels: np.ndarray       # (1797,) uint8, digit 0..9
    train_index: np.ndarray  # (1437,) int64, rows of the training split
    val_index: np.ndarray    # (360,) int64, rows of the validation split


def digits_path() -> Path:
    """Where the shipped digits file is (``$PTE_DATA_DIR`` moves the whole data folder)."""
    return data_dir() / DIGITS_FILE


def load_digits(path: str | Path | None = None) -> DigitsArrays:
    """Read the shipped 8x8 digits: uint8 images, uint8 labels and the fixed split indices."""
    path = Path(path) if path is not None else digits_path()
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: restore it from your copy of the course "
                                "(`git checkout -- data/digits.npz`); in the course repository, "
                                "`python data/build_digits.py` rebuilds it")
    with np.load(path, allow_pickle=False) as archive:
        return DigitsArrays(*(archive[name] for name in DigitsArrays._fields))


def _as_numpy(x) -> np.ndarray:
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _as_image_stack(images) -> np.ndarray:
    images = _as_numpy(images).astype(np.float64)
    if images.ndim == 2 and images.shape[1] == 64:
        images = images.reshape(-1, 8, 8)
    elif images.ndim == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.ndim != 3:
        raise ValueError(f"expected images of shape (N, 8, 8), (N, 1, 8, 8) or (N, 64), got {images.shape}")
    return images


def plot_digit_grid(images, labels=None, ncols: int = 8, ax_size: float = 0.9, title: str | None = None,
                    fig=None, captions=None):
    """Draw images (N, 8, 8), (N, 1, 8, 8) or (N, 64) in a grid, each with its label above it.

    ``captions`` (N strings) replaces the labels, e.g. ``"7→1"`` for a 7 read as a 1.
    Raw and normalized images both work: one grey scale spans the whole batch. The grid
    is one image in one set of axes, which draws much faster than one axes per digit.
    Returns the matplotlib figure (a new pyplot figure unless ``fig`` is given).
    """
    images = _as_image_stack(images)
    n = len(images)
    if captions is None and labels is not None:
        captions = [str(int(v)) for v in _as_numpy(labels).reshape(-1)]
    if captions is not None:
        captions = [str(c) for c in captions]
        if len(captions) != n:
            raise ValueError(f"{n} images but {len(captions)} labels")
    ncols = max(1, min(ncols, n))
    nrows = max(1, -(-n // ncols))
    gap, head = 1, (4 if captions is not None else 1)   # pixels between tiles, room for a caption
    cell_w, cell_h = 8 + gap, 8 + head
    low, high = (float(images.min()), float(images.max())) if n else (0.0, 1.0)
    montage = np.full((nrows * cell_h, ncols * cell_w), np.nan)
    for k, img in enumerate(images):
        top, left = (k // ncols) * cell_h + head, (k % ncols) * cell_w
        montage[top:top + 8, left:left + 8] = img
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(ax_size * ncols, ax_size * nrows * cell_h / cell_w + (0.35 if title else 0.05)))
    ax = fig.add_axes((0.0, 0.0, 1.0, 0.92 if title else 1.0))
    import matplotlib

    cmap = matplotlib.colormaps["gray_r"].with_extremes(bad="white")
    ax.imshow(montage, cmap=cmap, vmin=low, vmax=high if high > low else low + 1, interpolation="nearest")
    ax.set_axis_off()
    if captions is not None:
        for k, caption in enumerate(captions):
            ax.text((k % ncols) * cell_w + 3.5, (k // ncols) * cell_h + head - 0.8, caption,
                    ha="center", va="bottom", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10, y=0.995)
    return fig


def batch_summary(batch) -> str:
    """One line describing a batch ``(xb, yb)``: shapes, dtypes and the labels."""
    xb, yb = batch[0], batch[1]
    return (f"xb {tuple(xb.shape)} {xb.dtype} | yb {tuple(yb.shape)} {yb.dtype} | "
            f"labels {[int(v) for v in yb.reshape(-1).tolist()]}")


def _batch_figure(batch, ncols: int, title: str):
    """The digit grid of one batch, titled, in a figure outside pyplot (a widget callback draws it)."""
    from matplotlib.figure import Figure

    n = len(batch[0])
    cols = max(1, min(ncols, n))
    fig = Figure(figsize=(max(0.9 * cols, 4.0), 0.9 * -(-n // cols) * 12 / 9 + 0.4))
    return plot_digit_grid(batch[0], batch[1], ncols=ncols, fig=fig, title=title)


def _draw_batch(batch, ncols: int, title: str) -> bytes:
    """The digit grid of one batch as PNG bytes (no pyplot state involved)."""
    fig = _batch_figure(batch, ncols, title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def batch_pager(loader, max_batches: int = 10, ncols: int = 8):
    """An ipywidgets pager over the first ``max_batches`` batches of one pass of ``loader``.

    "new epoch" iterates the loader again, so a shuffling loader shows a new order
    and a non-shuffling one shows the same batches again. Every change draws the grid
    exactly once, as a PNG image widget.
    """
    import ipywidgets as widgets

    state = {"batches": [], "epoch": 0, "resetting": False}
    slider = widgets.IntSlider(value=0, min=0, max=0, description="batch")
    again = widgets.Button(description="new epoch")
    info = widgets.Label()
    picture = widgets.Image(format="png")

    def redraw(*_):
        if state["resetting"] or not state["batches"]:
            return
        batch = state["batches"][slider.value]
        info.value = f"epoch {state['epoch']}, batch {slider.value}: {batch_summary(batch)}"
        picture.value = _draw_batch(batch, ncols, f"epoch {state['epoch']}, batch {slider.value}: "
                                                  f"{len(batch[0])} digits, each with its label above")

    def new_epoch(*_):
        batches = []
        for batch in loader:
            batches.append(batch)
            if len(batches) == max_batches:
                break
        state["batches"] = batches
        state["epoch"] += 1
        state["resetting"] = True   # moving the slider back must not draw a page of its own
        try:
            slider.max = max(0, len(batches) - 1)
            slider.value = 0
        finally:
            state["resetting"] = False
        redraw()

    slider.observe(redraw, names="value")
    again.on_click(new_epoch)
    new_epoch()
    return widgets.VBox([widgets.HBox([slider, again]), info, picture])


def write_png_digits(folder: str | Path, images, size: int = 384, seed: int = 0) -> list[Path]:
    """Save each 8x8 digit as a ``size`` x ``size`` greyscale PNG (upscaled, with pixel noise).

    The noise keeps the files from compressing to almost nothing, so decoding them is
    real work, as it is for photographs. Returns the paths, in image order.
    """
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images = _as_numpy(images)
    paths = []
    for i, img in enumerate(images):
        ink = (np.asarray(img, dtype=np.float64) * (255.0 / 16.0)).round().astype(np.uint8)
        big = np.asarray(Image.fromarray(ink).resize((size, size), Image.BILINEAR), dtype=np.int16)
        noisy = np.clip(big + rng.integers(-16, 17, size=big.shape), 0, 255).astype(np.uint8)
        path = folder / f"digit_{i:05d}.png"
        Image.fromarray(noisy).save(path, compress_level=1)
        paths.append(path)
    return paths


class PngDigits(Dataset):
    """Items decoded from PNG files: open, decode, rotate a little, shrink to 32x32.

    ``length`` may exceed the number of files (item i reads file ``i % len(paths)``), so a
    few files make a long epoch. Item i is ``(image (1, 32, 32) float32 in [0, 1], label long)``.
    """

    def __init__(self, paths, labels, length: int | None = None, out_size: int = 32):
        self.paths = [str(p) for p in paths]
        self.labels = torch.as_tensor(_as_numpy(labels), dtype=torch.long)
        self.length = len(self.paths) if length is None else int(length)
        self.out_size = out_size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        from PIL import Image

        k = i % len(self.paths)
        with Image.open(self.paths[k]) as img:
            img = img.convert("L").rotate(5 * (i % 5 - 2), resample=Image.BILINEAR)
            img = img.resize((self.out_size, self.out_size), Image.BILINEAR)
            pixels = np.asarray(img, dtype=np.float32) / 255.0
        return torch.from_numpy(pixels).unsqueeze(0), self.labels[k]


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


# ---------------------------------------------------------------- visible checks of DigitsDataset

def _digits_expectations():
    d = load_digits()
    raw = torch.from_numpy(d.images.astype(np.float64))
    train = raw[d.train_index]
    return d, raw, float(train.mean()), float(train.std(correction=0))


def _diagnose_normalization(got, raw, rows, split_rows, mean, std) -> str:
    """Name the normalization mistake whose numbers ``got`` (images of ``rows``, (k, 1, 8, 8)) reproduce."""
    images = raw[rows].unsqueeze(1)
    split = raw[split_rows]
    suspects = {
        "the images were normalized with their own split's mean and std; every split must use the "
        "TRAINING set's statistics (the validation set stands in for data you have not seen).":
            (images - split.mean()) / split.std(correction=0),
        "the statistics were computed over all 1,797 images; use the training split's rows only.":
            (images - raw.mean()) / raw.std(correction=0),
        "the images are not normalized: subtract the training mean and divide by the training std.": images,
        "the mean was not subtracted (or the std not divided by).": images / std,
    }
    for hint, values in suspects.items():
        if torch.is_tensor(got) and got.shape == values.shape and torch.allclose(got.double(), values, atol=1e-4):
            return hint
    return "expected (raw - train mean) / train std, with both statistics taken over every training pixel."


def check_digits_split(ds, split: str, positions) -> None:
    """Visible checks of lesson 03's ``DigitsDataset(split)``: length, statistics, and the items at ``positions``.

    Each image must be float32 of shape (1, 8, 8) equal to ``(raw - train mean) / train std``,
    each label a 0-dimensional ``torch.long``; ``ds.mean`` and ``ds.std`` the training
    statistics, for either split. A failure names the likely mistake.
    """
    d, raw, mean, std = _digits_expectations()
    rows = d.train_index if split == "train" else d.val_index
    name = f"DigitsDataset({split!r})"
    checks.expect(len(ds) == len(rows), f"len({name}) is {len(ds)}, expected {len(rows)} "
                  f"(the rows listed in {split}_index).")
    own = raw[rows]
    stats = {"mean": (mean, float(own.mean()), float(raw.mean())),
             "std": (std, float(own.std(correction=0)), float(raw.std(correction=0)))}
    for attr, (want, own_value, all_value) in stats.items():
        checks.expect(hasattr(ds, attr), f"{name} has no attribute `{attr}`: store the training {attr} as "
                      f"self.{attr} (a Python float).")
        got = getattr(ds, attr)
        hint = None
        if isinstance(got, float) and split != "train" and abs(got - own_value) < 1e-6:
            hint = (f"the validation split computed its own {attr}; every split must use the TRAINING set's "
                    "statistics (the validation set stands in for data you have not seen).")
        elif isinstance(got, float) and abs(got - all_value) < 1e-6:
            hint = f"the {attr} was computed over all 1,797 images; use the training split's rows only."
        elif attr == "std" and isinstance(got, float) and abs(got - float(raw[d.train_index].std())) < 1e-6:
            hint = ("this is the sample standard deviation, torch's default .std() (it divides by n - 1). The spec "
                    "asks for the population standard deviation, NumPy's default: .std(correction=0) in torch.")
        # The hidden check's own tolerance (atol 1e-5 + rtol 1e-6): what passes here passes there.
        checks.check_number(got, want, f"{name}.{attr}", tol=1e-5 + 1e-6 * abs(want), hint=hint)
    for i in positions:
        image, label = checks.dataset_item(ds, i, f"{name}[{i}]")
        want_image = ((raw[rows[i]] - mean) / std).unsqueeze(0).float()
        values_hint = (_diagnose_normalization(image.unsqueeze(0), raw, rows[i:i + 1], rows, mean, std)
                       if torch.is_tensor(image) and image.shape == want_image.shape else None)
        checks.check_tensor(image, want_image, f"{name}[{i}] image", atol=1e-4,
                            hints={"values": values_hint,
                                   "shape": "an image should have one channel: shape (1, 8, 8)."})
        checks.check_tensor(label, torch.tensor(int(d.labels[rows[i]])), f"{name}[{i}] label",
                            hints={"shape": "a label is a single number: a 0-dimensional tensor "
                                            "(index the label tensor with [i])."})


# ---------------------------------------------------------------- visible checks of SpiralDataset

def _clean_spiral_point(n_per_class: int, i: int) -> tuple[torch.Tensor, int]:
    label = i // n_per_class
    t = torch.linspace(0.5, 3 * math.pi, n_per_class, dtype=torch.float64)[i % n_per_class]
    radius, angle = t / (3 * math.pi) * 2.5, t + label * math.pi
    return torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)]), label


def check_spiral_items(ds, n_per_class: int, positions) -> None:
    """Visible checks of lesson 03's ``SpiralDataset`` on the items at ``positions``.

    Each item, read twice, must give the same float32 point of shape (2,), within 0.5 of
    its noise-free spiral position, and the label ``i // n_per_class`` as a 0-dimensional
    ``torch.long``; different items must get different noise.
    """
    name = f"SpiralDataset({n_per_class})"
    noises = set()
    for i in positions:
        point, label = checks.dataset_item(ds, i, f"{name}[{i}]")
        clean, want_label = _clean_spiral_point(n_per_class, i)
        checks.check_tensor(label, torch.tensor(want_label), f"label of {name}[{i}]",
                            hints={"shape": "a label is a single number: a 0-dimensional tensor, "
                                            "e.g. torch.tensor(label)."})
        checks.check_tensor(point, clean.float(), f"point {name}[{i}]", atol=0.5,
                            hints={"values": "more than 6 noise standard deviations from the clean spiral point: "
                                             "check t, the radius, the angle (t + label * pi) and the noise "
                                             "scale 0.08."})
        again = checks.dataset_item(ds, i, f"{name}[{i}], read again")[0]
        checks.expect(torch.equal(point, again),
                      f"item {i} changed between two reads: a generator shared by all items (or the global "
                      "RNG) advances with every access, so an item depends on what was read before it. Seed a "
                      "fresh torch.Generator from (seed, index) inside __getitem__.")
        noises.add(tuple((point.double() - clean).round(decimals=6).tolist()))
    checks.expect(len(noises) == len(positions),
                  f"items {list(positions)} got exactly the same noise: a generator seeded with `seed` alone "
                  "gives every item the same draws; seed it from both the seed and the index.")


def check_spiral_dataset(dataset_class, n_per_class: int, seed: int, positions) -> None:
    """Visible checks of lesson 03's ``SpiralDataset``, built here as ``dataset_class(n_per_class, seed)``.

    Its length; the items at ``positions`` (:func:`check_spiral_items`); torch's global random
    state, which building and reading must leave alone; and an index given as a NumPy integer
    or a 0-dimensional tensor, which must give the same item as the Python int.
    """
    ds = checks.call(dataset_class, n_per_class, seed)
    checks.expect(len(ds) == 2 * n_per_class, f"len(SpiralDataset({n_per_class})) is {len(ds)}, expected "
                  f"{2 * n_per_class} (two classes of {n_per_class}).")
    rng_state = torch.get_rng_state()
    check_spiral_items(ds, n_per_class, positions)
    checks.expect(torch.equal(rng_state, torch.get_rng_state()),
                  "reading items changed torch's global random generator: a torch.manual_seed (or a torch.randn "
                  "without generator=) inside __getitem__ reseeds or advances the stream that shuffling, dropout and "
                  "initialization draw from. Draw the noise from your own torch.Generator.")
    k = positions[1]
    point, label = checks.dataset_item(ds, k)
    index_hint = {r"integer is required|expected a long|[Tt]ensor": (
        "torch.Generator.manual_seed accepts a Python int only. A DataLoader passes ints, but code that "
        "indexes a dataset by hand often holds NumPy integers (np.random.permutation) or 0-dimensional tensors "
        "(torch.randperm): turn the index into an int first (operator.index(i) accepts all three).")}
    for index, shown in ((np.int64(k), f"np.int64({k})"), (torch.tensor(k), f"torch.tensor({k})")):
        name = f"SpiralDataset({n_per_class})[{shown}]"
        other_point, other_label = checks.dataset_item(ds, index, name, hints=index_hint)
        checks.expect(torch.is_tensor(other_point) and torch.equal(other_point, point)
                      and torch.is_tensor(other_label) and other_label.dtype == label.dtype
                      and other_label.shape == label.shape and torch.equal(other_label, label),
                      f"{name} is not the item SpiralDataset({n_per_class})[{k}] returns ({checks.describe(point)}, "
                      f"{checks.describe(label)}): an index that is a NumPy integer or a 0-dimensional tensor "
                      "must give the same point and label as the equal Python int.")


# ---------------------------------------------------------------- visible checks of make_loaders

def _epoch_order(loader) -> list[int]:
    return [int(v) for batch in loader for v in batch[0]]


def check_make_loaders(make_loaders) -> None:
    """Visible checks of lesson 03's ``make_loaders`` on 100 training and 50 validation items, batches of 8.

    Two DataLoaders with that batch size; validation in dataset order; a training epoch that
    returns every item once, not in dataset order, and in the order that a shuffling DataLoader
    gives after the same ``torch.manual_seed``.
    """
    from torch.utils.data import DataLoader, TensorDataset

    loaders = checks.call(make_loaders, TensorDataset(torch.arange(100)), TensorDataset(torch.arange(50)), 8)
    checks.check_type(loaders, tuple, "make_loaders(...)",
                      hint="return the two loaders as a tuple: (train_loader, val_loader).")
    checks.expect(len(loaders) == 2,
                  f"make_loaders returned {len(loaders)} items, expected (train_loader, val_loader).")
    train_dl, val_dl = loaders
    checks.check_type(train_dl, DataLoader, "train_loader")
    checks.check_type(val_dl, DataLoader, "val_loader")
    checks.expect(train_dl.batch_size == 8 and val_dl.batch_size == 8,
                  f"batch sizes are {train_dl.batch_size} (train) and {val_dl.batch_size} (val), expected 8 for both.")
    checks.expect(_epoch_order(val_dl) == list(range(50)),
                  "the validation loader does not return the examples in dataset order: do not shuffle evaluation "
                  "data (predictions must line up with the dataset's rows, and shuffling buys nothing for an average).")
    order = _epoch_order(train_dl)
    checks.expect(sorted(order) == list(range(100)),
                  f"one training epoch returned {len(order)} examples, expected each of the 100 exactly once "
                  "(no drop_last, no sampling with replacement).")
    checks.expect(order != list(range(100)),
                  "the training loader returns the examples in dataset order: shuffle=True is needed so each batch "
                  "is a fair sample and the order changes every epoch.")
    torch.manual_seed(5)
    order = _epoch_order(train_dl)
    torch.manual_seed(5)
    checks.expect(order == _epoch_order(DataLoader(TensorDataset(torch.arange(100)), batch_size=8, shuffle=True)),
                  "after torch.manual_seed(5) the training loader gave another order than "
                  "DataLoader(..., shuffle=True) gives after the same seed: shuffle with the default random source "
                  "(no generator= of your own, no fixed permutation), so that torch.manual_seed fixes the order.")


# ---------------------------------------------------------------- visible checks of seed_worker

def check_seed_worker(seed_worker) -> None:
    """Visible checks of lesson 03's ``seed_worker``, in simulated workers (:func:`as_worker`).

    In each check a careless library has first seeded NumPy and ``random`` with 0 in every
    worker (:func:`constant_seeds`). The workers of one loader must then draw different numbers
    from both; the same loader seed must give the same numbers again and another loader seed
    other ones; and each worker's numbers must be those of NumPy and ``random`` seeded with its
    torch seed modulo 2**32.
    """
    modulo_hint = {r"[Ss]eed must be between|out of bounds|too large|2\*\*32":
                   "np.random.seed only accepts seeds below 2**32, and a worker's torch seed is a 64-bit number: "
                   "reduce it modulo 2**32."}

    def streams(seed):
        return checks.call(simulated_worker_streams, seed_worker, seed=seed, num_workers=2, count=4,
                           before=constant_seeds, hints=modulo_hint)

    with as_worker(0, 2, base_seed=2**40 + 7):   # a stub, or a seed NumPy refuses, is reported here
        checks.call(seed_worker, 0, hints=modulo_hint)
    first = streams(0)
    for which, generator in ((0, "NumPy's global generator (np.random)"), (1, "Python's random module")):
        checks.expect(first[0][which] != first[1][which],
                      f"in a loader with 2 workers, both workers drew the same numbers from {generator} after "
                      "seed_worker ran (a library had seeded it with a constant in every worker, as some do): "
                      "seed_worker must give every worker a stream of its own, from something that differs "
                      "between workers and is fixed by the loader's seed.")
    checks.expect(streams(0) == first,
                  "two loaders seeded alike gave the workers different numbers: the streams must be fixed by the "
                  "loader's seed (no clock, no os.urandom), or a run cannot be repeated.")
    checks.expect(streams(1) != first,
                  "loaders seeded 0 and 1 gave the workers the same numbers: the streams ignore the loader's seed, so "
                  "every epoch and every run repeats the same 'random' augmentations. Derive them from the worker's "
                  "torch seed (torch.initial_seed() inside the worker), which changes with the loader's seed and "
                  "every epoch.")
    for worker_seed in (1234, 2**40 + 2**31 + 7):
        with as_worker(0, 2, base_seed=worker_seed):   # in here torch.initial_seed() == worker_seed
            constant_seeds(0)
            checks.call(seed_worker, 0, hints=modulo_hint)
            got = np.random.random_sample(3).tolist(), [random.random() for _ in range(3)]
        numpy_state, random_state = np.random.get_state(), random.getstate()
        try:
            np.random.seed(worker_seed % 2**32)
            random.seed(worker_seed % 2**32)
            want = np.random.random_sample(3).tolist(), [random.random() for _ in range(3)]
        finally:
            np.random.set_state(numpy_state)
            random.setstate(random_state)
        for which, generator in ((0, "NumPy's global generator"), (1, "Python's random module")):
            checks.expect(got[which] == want[which],
                          f"in a worker whose torch seed is {worker_seed}, {generator} after seed_worker(0) draws "
                          f"other numbers than after seeding it with {worker_seed} % 2**32: seed both generators "
                          "with the worker's torch seed (it already includes the worker id), taken modulo 2**32.")
