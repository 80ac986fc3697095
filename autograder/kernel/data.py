"""The shipped digits data, datasets used by the worker demos, and the batch pictures (lesson 03).

``load_digits()`` reads ``data/digits.npz`` (see data/README.md); ``plot_digit_grid`` draws
images with their labels; ``batch_pager`` pages through the batches of a DataLoader.
``PngDigits`` and ``NumpyNoise`` live here rather than in the notebook because DataLoader
workers started with ``spawn`` (the default on macOS and Windows) can only rebuild a
dataset whose class they can import.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

from autograder.kernel.paths import data_dir

DIGITS_FILE = "digits.npz"
DIGITS_SHAPE = (8, 8)
NUM_CLASSES = 10


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
        raise FileNotFoundError(f"{path} is missing: rebuild it with `python data/build_digits.py`")
    with np.load(path, allow_pickle=False) as archive:
        return DigitsArrays(*(archive[name] for name in DigitsArrays._fields))


def _as_numpy(x) -> np.ndarray:
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def plot_digit_grid(images, labels=None, ncols: int = 8, ax_size: float = 0.9, title: str | None = None,
                    fig=None):
    """Draw images (N, 8, 8), (N, 1, 8, 8) or (N, 64) in a grid, each titled with its label.

    Works for raw and for normalized images (each panel uses the grey scale of the
    whole batch). Returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt

    images = _as_numpy(images).astype(np.float64)
    if images.ndim == 2 and images.shape[1] == 64:
        images = images.reshape(-1, 8, 8)
    elif images.ndim == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.ndim != 3:
        raise ValueError(f"expected images of shape (N, 8, 8), (N, 1, 8, 8) or (N, 64), got {images.shape}")
    n = len(images)
    labels = None if labels is None else [int(v) for v in _as_numpy(labels).reshape(-1)]
    if labels is not None and len(labels) != n:
        raise ValueError(f"{n} images but {len(labels)} labels")
    ncols = max(1, min(ncols, n))
    nrows = max(1, -(-n // ncols))
    if fig is None:
        fig = plt.figure(figsize=(ax_size * ncols, ax_size * nrows + (0.4 if title else 0.1)))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    low, high = (float(images.min()), float(images.max())) if n else (0.0, 1.0)
    for k, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if k < n:
            ax.imshow(images[k], cmap="gray_r", vmin=low, vmax=high)
            if labels is not None:
                ax.set_title(str(labels[k]), fontsize=9, pad=2)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def batch_summary(batch) -> str:
    """One line describing a batch ``(xb, yb)``: shapes, dtypes and the labels."""
    xb, yb = batch[0], batch[1]
    return (f"xb {tuple(xb.shape)} {xb.dtype} | yb {tuple(yb.shape)} {yb.dtype} | "
            f"labels {[int(v) for v in yb.reshape(-1).tolist()]}")


def batch_pager(loader, max_batches: int = 10, ncols: int = 8):
    """An ipywidgets pager over the first ``max_batches`` batches of one pass of ``loader``.

    "new epoch" iterates the loader again, so a shuffling loader shows a new order
    and a non-shuffling one shows the same batches again.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    state = {"batches": [], "epoch": 0}
    slider = widgets.IntSlider(value=0, min=0, max=0, description="batch")
    again = widgets.Button(description="new epoch")
    info = widgets.Label()
    out = widgets.Output()

    def collect():
        batches = []
        for batch in loader:
            batches.append(batch)
            if len(batches) == max_batches:
                break
        state["batches"] = batches
        state["epoch"] += 1
        slider.max = max(0, len(batches) - 1)
        slider.value = 0

    def redraw(*_):
        if not state["batches"]:
            return
        batch = state["batches"][slider.value]
        info.value = f"epoch {state['epoch']}, batch {slider.value}: {batch_summary(batch)}"
        with out:
            out.clear_output(wait=True)
            plot_digit_grid(batch[0], batch[1], ncols=ncols)
            plt.show()

    def new_epoch(_):
        collect()
        redraw()

    slider.observe(redraw, names="value")
    again.on_click(new_epoch)
    collect()
    redraw()
    return widgets.VBox([widgets.HBox([slider, again]), info, out])


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
    worker process draws from.
    """

    def __init__(self, length: int = 8):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        info = torch.utils.data.get_worker_info()
        return i, (-1 if info is None else info.id), float(np.random.random_sample())


def worker_numpy_draws(worker_init_fn=None, seed: int = 0, length: int = 8, num_workers: int = 2,
                       multiprocessing_context=None) -> dict[int, list[float]]:
    """Run a ``num_workers`` DataLoader over ``NumpyNoise`` (batch size 1, no shuffling).

    The loader's generator is seeded with ``seed``; ``worker_init_fn`` runs in each worker.
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
