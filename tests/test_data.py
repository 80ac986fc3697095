"""The shipped digits file, the script that rebuilds it, and autograder.data's helpers (lesson 03)."""
from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from autograder import course, data

BUILD_SCRIPT = course.REPO_ROOT / "data" / "build_digits.py"


def _build_module():
    spec = importlib.util.spec_from_file_location("build_digits", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rebuild_is_byte_identical(tmp_path):
    target = tmp_path / "digits.npz"
    _build_module().main(["build_digits.py", str(target)])
    assert target.read_bytes() == (course.REPO_ROOT / "data" / "digits.npz").read_bytes()


def test_rebuild_twice_gives_same_bytes(tmp_path):
    build = _build_module()
    build.main(["x", str(tmp_path / "a.npz")])
    build.main(["x", str(tmp_path / "b.npz")])
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


def test_shapes_dtypes_and_ranges():
    d = data.load_digits()
    assert d.images.shape == (1797, 8, 8) and d.images.dtype == np.uint8
    assert d.labels.shape == (1797,) and d.labels.dtype == np.uint8
    assert d.images.min() == 0 and d.images.max() == 16
    assert d.train_index.dtype == np.int64 and d.val_index.dtype == np.int64
    assert d.train_index.shape == (1437,) and d.val_index.shape == (360,)


def test_class_counts():
    d = data.load_digits()
    assert np.bincount(d.labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert np.bincount(d.labels[d.val_index], minlength=10).min() > 20


def test_split_is_a_partition():
    d = data.load_digits()
    both = np.concatenate([d.train_index, d.val_index])
    assert np.array_equal(np.sort(both), np.arange(1797))
    assert np.all(np.diff(d.train_index) > 0) and np.all(np.diff(d.val_index) > 0)


def test_matches_scikit_learn():
    from sklearn.datasets import load_digits as sk_load

    d, sk = data.load_digits(), sk_load()
    assert np.array_equal(d.images, sk.images) and np.array_equal(d.labels, sk.target)


def test_plain_npz_readable_by_numpy():
    with np.load(course.REPO_ROOT / "data" / "digits.npz", allow_pickle=False) as f:
        assert sorted(f.files) == ["images", "labels", "train_index", "val_index"]


def test_load_digits_honours_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PTE_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="build_digits.py"):
        data.load_digits()
    (tmp_path / "digits.npz").write_bytes((course.REPO_ROOT / "data" / "digits.npz").read_bytes())
    assert data.load_digits().images.shape == (1797, 8, 8)


@pytest.mark.parametrize("shape", [(6, 8, 8), (6, 1, 8, 8), (6, 64)])
def test_plot_digit_grid_accepts_layouts(shape):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = torch.randn(shape)
    fig = data.plot_digit_grid(images, torch.arange(6), ncols=4, title="t")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["0", "1", "2", "3", "4", "5"]
    assert len(fig.axes) == 8
    plt.close(fig)


def test_plot_digit_grid_rejects_bad_input():
    with pytest.raises(ValueError, match="expected images"):
        data.plot_digit_grid(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        data.plot_digit_grid(np.zeros((3, 8, 8)), [1, 2])


def test_batch_summary():
    line = data.batch_summary((torch.zeros(2, 1, 8, 8), torch.tensor([3, 1])))
    assert line == "xb (2, 1, 8, 8) torch.float32 | yb (2,) torch.int64 | labels [3, 1]"


def test_batch_pager_pages_and_reshuffles():
    import matplotlib
    matplotlib.use("Agg")

    ds = TensorDataset(torch.randn(40, 8, 8), torch.arange(40))
    loader = DataLoader(ds, batch_size=8, shuffle=False)
    pager = data.batch_pager(loader, max_batches=3)
    slider, again = pager.children[0].children
    info = pager.children[1]
    assert slider.max == 2 and "epoch 1, batch 0" in info.value and "labels [0, 1, 2" in info.value
    slider.value = 2
    assert "batch 2" in info.value and "labels [16, 17" in info.value
    again.click()
    assert "epoch 2, batch 0" in info.value and slider.value == 0


def test_png_digits_roundtrip(tmp_path):
    d = data.load_digits()
    paths = data.write_png_digits(tmp_path, d.images[:3], size=64)
    assert [p.name for p in paths] == ["digit_00000.png", "digit_00001.png", "digit_00002.png"]
    ds = data.PngDigits(paths, d.labels[:3], length=7)
    assert len(ds) == 7
    x, y = ds[4]
    assert x.shape == (1, 32, 32) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    assert y.dtype == torch.long and int(y) == int(d.labels[1])
    # the upscaled digit keeps its shape: correlate with the 8x8 original
    small = torch.nn.functional.avg_pool2d(ds[0][0].unsqueeze(0), 4)[0, 0]
    original = torch.from_numpy(d.images[0].astype(np.float32))
    corr = torch.corrcoef(torch.stack([small.flatten(), original.flatten()]))[0, 1]
    assert corr > 0.8


def test_png_digits_in_workers(tmp_path):
    d = data.load_digits()
    paths = data.write_png_digits(tmp_path, d.images[:4], size=32)
    ds = data.PngDigits(paths, d.labels[:4], length=8)
    one = torch.cat([x for x, _ in DataLoader(ds, batch_size=4)])
    two = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, num_workers=2)])
    assert torch.equal(one, two)


def _rule(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def _constant(worker_id):
    np.random.seed(0)


def test_worker_numpy_draws_shows_seeding():
    ok = data.worker_numpy_draws(_rule, seed=0, length=6)
    assert sorted(ok) == [0, 1] and len(ok[0]) == len(ok[1]) == 3 and ok[0] != ok[1]
    assert ok == data.worker_numpy_draws(_rule, seed=0, length=6)
    assert ok != data.worker_numpy_draws(_rule, seed=1, length=6)
    same = data.worker_numpy_draws(_constant, seed=0, length=6)
    assert same[0] == same[1]
    main = data.worker_numpy_draws(None, num_workers=0, length=3)
    assert list(main) == [-1] and len(main[-1]) == 3
