"""The shipped 8x8 digits of lesson 03: the arrays, pictures of them, a batch pager, and the digits as PNG files.

``load_digits()`` reads ``data/digits.npz`` (see data/README.md); ``plot_digit_grid`` draws
images with their labels; ``batch_pager`` pages through the batches of a DataLoader.
``classify_all`` runs a model over a whole loader (section 7's evaluation, written in lesson 04).
``write_png_digits`` saves digits as large PNG files and ``PngDigits`` decodes them again, item
by item: the work that DataLoader workers can share. Workers started with ``spawn`` (the only
start method on Windows, the default on macOS) import a dataset class by name and cannot see
what a notebook defines, which is why ``PngDigits`` lives here.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

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


def classify_all(model, loader) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(every image, every label, every predicted class) of ``loader``, in the loader's order.

    The model runs in eval mode without recording a graph; its mode is put back afterwards, also when
    the forward pass raises. Lesson 04 writes such an evaluation itself; here it only serves the demo.
    """
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            images, labels = (torch.cat(parts) for parts in zip(*loader))
            predicted = model(images).argmax(dim=1)
    finally:
        model.train(was_training)
    return images, labels, predicted


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
