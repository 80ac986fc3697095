"""The shipped digits file, the script that rebuilds it, and lesson 03's kernel modules: digits, workers and
data_loading_checks."""
from __future__ import annotations

import importlib.util
import operator
import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from autograder import course
from autograder.kernel import checks
from autograder.kernel.lessons import data_loading_checks, digits, workers

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
    d = digits.load_digits()
    assert d.images.shape == (1797, 8, 8) and d.images.dtype == np.uint8
    assert d.labels.shape == (1797,) and d.labels.dtype == np.uint8
    assert d.images.min() == 0 and d.images.max() == 16
    assert d.train_index.dtype == np.int64 and d.val_index.dtype == np.int64
    assert d.train_index.shape == (1437,) and d.val_index.shape == (360,)


def test_class_counts():
    d = digits.load_digits()
    assert np.bincount(d.labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert np.bincount(d.labels[d.val_index], minlength=10).min() > 20


def test_split_is_a_partition():
    d = digits.load_digits()
    both = np.concatenate([d.train_index, d.val_index])
    assert np.array_equal(np.sort(both), np.arange(1797))
    assert np.all(np.diff(d.train_index) > 0) and np.all(np.diff(d.val_index) > 0)


def test_matches_scikit_learn():
    from sklearn.datasets import load_digits as sk_load

    d, sk = digits.load_digits(), sk_load()
    assert np.array_equal(d.images, sk.images) and np.array_equal(d.labels, sk.target)


def test_plain_npz_readable_by_numpy():
    with np.load(course.REPO_ROOT / "data" / "digits.npz", allow_pickle=False) as f:
        assert sorted(f.files) == ["images", "labels", "train_index", "val_index"]


def test_load_digits_honours_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PTE_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="build_digits.py"):
        digits.load_digits()
    (tmp_path / "digits.npz").write_bytes((course.REPO_ROOT / "data" / "digits.npz").read_bytes())
    assert digits.load_digits().images.shape == (1797, 8, 8)


@pytest.mark.parametrize("shape", [(6, 8, 8), (6, 1, 8, 8), (6, 64)])
def test_plot_digit_grid_accepts_layouts(shape):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = torch.randn(shape)
    fig = digits.plot_digit_grid(images, torch.arange(6), ncols=4, title="t")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.texts] == ["0", "1", "2", "3", "4", "5"]
    assert ax.images[0].get_array().shape == (2 * 12, 4 * 9)     # 2 rows, 4 columns of 8x8 tiles with room
    assert fig._suptitle.get_text() == "t"
    plt.close(fig)


def test_plot_digit_grid_captions_replace_labels():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = digits.plot_digit_grid(np.zeros((2, 8, 8)), [1, 2], captions=["7→1", "3→8"])
    assert [t.get_text() for t in fig.axes[0].texts] == ["7→1", "3→8"]
    plt.close(fig)


def test_plot_digit_grid_rejects_bad_input():
    with pytest.raises(ValueError, match="expected images"):
        digits.plot_digit_grid(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        digits.plot_digit_grid(np.zeros((3, 8, 8)), [1, 2])


def test_batch_summary():
    line = digits.batch_summary((torch.zeros(2, 1, 8, 8), torch.tensor([3, 1])))
    assert line == "xb (2, 1, 8, 8) torch.float32 | yb (2,) torch.int64 | labels [3, 1]"


def _pager(monkeypatch, shuffle=False):
    """A pager over 40 digits in batches of 8 (3 pages) and the list of batches it drew, by first label."""
    drawn = []
    draw = digits._draw_batch
    monkeypatch.setattr(digits, "_draw_batch",
                        lambda batch, ncols, title: drawn.append(int(batch[1][0])) or draw(batch, ncols, title))
    d = digits.load_digits()
    ds = TensorDataset(torch.from_numpy(d.images[:40]).float(), torch.arange(40))
    pager = digits.batch_pager(DataLoader(ds, batch_size=8, shuffle=shuffle), max_batches=3)
    slider, again = pager.children[0].children
    return pager, slider, again, drawn


def _ink(png: bytes) -> int:
    """How many dark pixels a PNG holds (a blank page has none)."""
    import io

    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return int((pixels < 100).sum())


def test_batch_pager_pages_and_reshuffles(monkeypatch):
    pager, slider, again, drawn = _pager(monkeypatch)
    info, picture = pager.children[1], pager.children[2]
    assert slider.max == 2 and "epoch 1, batch 0" in info.value and "labels [0, 1, 2" in info.value
    slider.value = 2
    assert "batch 2" in info.value and "labels [16, 17" in info.value
    again.click()
    assert "epoch 2, batch 0" in info.value and slider.value == 0
    assert drawn == [0, 16, 0]
    assert _ink(picture.value) > 100


def test_new_epoch_draws_the_first_page_once_from_any_page(monkeypatch):
    """JupyterLab showed a blank grid after "new epoch" when the slider was not at 0: two draws raced."""
    pager, slider, again, drawn = _pager(monkeypatch, shuffle=True)
    for page in (1, 2, 0, 2):
        slider.value = page
        before = len(drawn)
        again.click()
        assert len(drawn) == before + 1, "one click, one drawing"
        assert slider.value == 0 and _ink(pager.children[2].value) > 100


def test_png_digits_roundtrip(tmp_path):
    d = digits.load_digits()
    paths = digits.write_png_digits(tmp_path, d.images[:3], size=64)
    assert [p.name for p in paths] == ["digit_00000.png", "digit_00001.png", "digit_00002.png"]
    ds = digits.PngDigits(paths, d.labels[:3], length=7)
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
    d = digits.load_digits()
    paths = digits.write_png_digits(tmp_path, d.images[:4], size=32)
    ds = digits.PngDigits(paths, d.labels[:4], length=8)
    one = torch.cat([x for x, _ in DataLoader(ds, batch_size=4)])
    two = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, num_workers=2)])
    assert torch.equal(one, two)


def _rule(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def _rule_from_worker_info(worker_id):
    seed = torch.utils.data.get_worker_info().seed % 2**32
    np.random.seed(seed)
    random.seed(seed)


def test_worker_numpy_draws_shows_seeding():
    ok = workers.worker_numpy_draws(_rule, seed=0, length=6)
    assert sorted(ok) == [0, 1] and len(ok[0]) == len(ok[1]) == 3 and ok[0] != ok[1]
    assert ok == workers.worker_numpy_draws(_rule, seed=0, length=6)
    assert ok != workers.worker_numpy_draws(_rule, seed=1, length=6)
    same = workers.worker_numpy_draws(workers.constant_numpy_seed, seed=0, length=6)
    assert same[0] == same[1]
    main = workers.worker_numpy_draws(None, num_workers=0, length=3)
    assert list(main) == [-1] and len(main[-1]) == 3


@pytest.mark.parametrize("init", [None, workers.constant_numpy_seed, _rule, _rule_from_worker_info])
def test_simulated_workers_draw_what_real_workers_draw(init):
    for seed in (0, 7):
        real = workers.worker_numpy_draws(init, seed=seed, length=7, num_workers=2)
        assert workers.simulated_worker_draws(init, seed=seed, length=7, num_workers=2) == real


def test_simulation_runs_a_function_real_spawned_workers_cannot_import():
    def local_rule(worker_id):   # not importable by name: a spawned worker could not unpickle it
        np.random.seed(torch.initial_seed() % 2**32)

    draws = workers.simulated_worker_draws(local_rule, seed=0, length=6)
    assert draws == workers.simulated_worker_draws(_rule, seed=0, length=6)


def test_as_worker_seeds_like_a_worker_and_restores_everything():
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    expected = torch.rand(2), np.random.random_sample(2), random.random()
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    with workers.as_worker(3, 4, base_seed=2**40):
        assert torch.initial_seed() == 2**40 + 3
        info = torch.utils.data.get_worker_info()
        assert (info.id, info.num_workers, info.seed) == (3, 4, 2**40 + 3)
        torch.rand(5), np.random.random_sample(5), random.random()
    assert torch.utils.data.get_worker_info() is None
    after = torch.rand(2), np.random.random_sample(2), random.random()
    assert torch.equal(after[0], expected[0]) and np.array_equal(after[1], expected[1]) and after[2] == expected[2]


def test_loader_base_seed_matches_a_loader():
    class Seeds(torch.utils.data.Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return torch.initial_seed()

    loader = DataLoader(Seeds(), num_workers=1, generator=torch.Generator().manual_seed(3))
    assert int(next(iter(loader))) == workers.loader_base_seed(3)


# ---------------------------------------------------------------- the visible checks of DigitsDataset and SpiralDataset

class _Digits(torch.utils.data.Dataset):
    """A correct DigitsDataset, or one with a chosen normalization mistake."""

    def __init__(self, split, mistake=None):
        d = digits.load_digits()
        train = d.images[d.train_index].astype(np.float64)
        rows = d.train_index if split == "train" else d.val_index
        stats_from = {None: train, "own split": d.images[rows].astype(np.float64),
                      "all images": d.images.astype(np.float64)}[mistake]
        self.mean, self.std = float(stats_from.mean()), float(stats_from.std())
        self.images = (torch.from_numpy(d.images[rows]).float().unsqueeze(1) - self.mean) / self.std
        self.labels = torch.from_numpy(d.labels[rows]).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def test_check_digits_split_accepts_a_correct_dataset():
    data_loading_checks.check_digits_split(_Digits("train"), "train", [0, 1436])
    data_loading_checks.check_digits_split(_Digits("val"), "val", [0, 359])


@pytest.mark.parametrize("mistake,split,message", [
    ("own split", "val", "the validation split computed its own mean"),
    ("all images", "train", "computed over all 1,797 images"),
])
def test_check_digits_split_names_the_statistics_mistake(mistake, split, message):
    with pytest.raises(checks.CheckFailed, match=message):
        data_loading_checks.check_digits_split(_Digits(split, mistake), split, [0])


def test_check_digits_split_diagnoses_images_normalized_with_their_own_split():
    ds = _Digits("val", "own split")
    ds.mean, ds.std = _Digits("train").mean, _Digits("train").std     # right attributes, wrong images
    with pytest.raises(checks.CheckFailed, match="normalized with their own split"):
        data_loading_checks.check_digits_split(ds, "val", [0])


class _Spirals(torch.utils.data.Dataset):
    def __init__(self, n=400, seed=0, shared=False, same_noise=False):
        self.n, self.seed, self.shared, self.same_noise = n, seed, shared, same_noise
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self):
        return 2 * self.n

    def __getitem__(self, i):
        point, label = data_loading_checks._clean_spiral_point(self.n, i)
        key = self.seed if self.same_noise else self.seed * len(self) + i
        gen = self.gen if self.shared else torch.Generator().manual_seed(key)
        return (point + 0.08 * torch.randn(2, generator=gen, dtype=torch.float64)).float(), torch.tensor(label)


def test_check_spiral_items():
    data_loading_checks.check_spiral_items(_Spirals(), 400, [0, 5, 400, 799])
    with pytest.raises(checks.CheckFailed, match="item 0 changed between two reads"):
        data_loading_checks.check_spiral_items(_Spirals(shared=True), 400, [0, 5])
    with pytest.raises(checks.CheckFailed, match="got exactly the same noise"):
        data_loading_checks.check_spiral_items(_Spirals(same_noise=True), 400, [0, 5])
    with pytest.raises(checks.CheckFailed, match="more than 6 noise standard deviations"):
        data_loading_checks.check_spiral_items(_Spirals(n=50), 400, [40])


def test_check_spiral_dataset_accepts_numpy_and_tensor_indices():
    class Converting(_Spirals):
        def __getitem__(self, i):
            return super().__getitem__(operator.index(i))

    data_loading_checks.check_spiral_dataset(Converting, 400, 0, [0, 5, 400, 799])


def test_check_spiral_dataset_names_an_index_that_cannot_seed_a_generator():
    class AsGiven(_Spirals):
        def __getitem__(self, i):
            if isinstance(i, int):
                return super().__getitem__(i)
            torch.Generator().manual_seed(i)     # what the spec's own formula does with the index it was given

    with pytest.raises(checks.CheckFailed) as info:
        data_loading_checks.check_spiral_dataset(AsGiven, 400, 0, [0, 5, 400, 799])
    text = str(info.value)
    assert text.startswith("SpiralDataset(400)[np.int64(5)]: raised TypeError") and "operator.index" in text


def test_check_spiral_dataset_wants_the_same_item_for_an_equal_index():
    class Shifted(_Spirals):
        def __getitem__(self, i):
            return super().__getitem__(int(i) + (0 if isinstance(i, int) else 1))

    with pytest.raises(checks.CheckFailed, match=r"np.int64\(5\)\] is not the item"):
        data_loading_checks.check_spiral_dataset(Shifted, 400, 0, [0, 5, 400, 799])


def test_check_spiral_dataset_notices_the_global_generator():
    class Reseeding(_Spirals):
        def __getitem__(self, i):
            torch.manual_seed(i)
            return super().__getitem__(i)

    with pytest.raises(checks.CheckFailed, match="changed torch's global random generator"):
        data_loading_checks.check_spiral_dataset(Reseeding, 400, 0, [0, 5])


def _loaders(train_shuffle=True, val_shuffle=False, own_generator=True, drop_last=False, fixed_seed=None,
             shared_generator=False, val_generator=False):
    def make_loaders(train_ds, val_ds, batch_size, seed=0):
        generator = torch.Generator().manual_seed(seed if fixed_seed is None else fixed_seed) if own_generator else None
        val_gen = generator if shared_generator else torch.Generator().manual_seed(seed) if val_generator else None
        return (DataLoader(train_ds, batch_size=batch_size, shuffle=train_shuffle, generator=generator,
                           drop_last=drop_last),
                DataLoader(val_ds, batch_size=batch_size, shuffle=val_shuffle, generator=val_gen))
    return make_loaders


def _numpy_order(train_ds, val_ds, batch_size, seed=0):
    rng = np.random.default_rng(seed)

    class Order(torch.utils.data.Sampler):
        def __len__(self):
            return len(train_ds)

        def __iter__(self):
            return iter(rng.permutation(len(train_ds)).tolist())

    return DataLoader(train_ds, batch_size=batch_size, sampler=Order()), DataLoader(val_ds, batch_size=batch_size)


@pytest.mark.parametrize("kwargs,message", [
    ({"train_shuffle": False}, "training loader returns the examples in dataset order"),
    ({"val_shuffle": True}, "validation loader does not return the examples in dataset order"),
    ({"drop_last": True}, "expected each of the 100 exactly once"),
    ({"own_generator": False}, "other code had drawn from torch's global generator"),
    ({"fixed_seed": 0}, "seeds 0 and 1 gave the same training epochs"),
    ({"shared_generator": True}, "when the validation loader was walked before each epoch"),
])
def test_check_make_loaders(kwargs, message):
    data_loading_checks.check_make_loaders(_loaders())
    data_loading_checks.check_make_loaders(_numpy_order)          # another right answer: any private order
    data_loading_checks.check_make_loaders(_loaders(val_generator=True))   # and a generator for each loader
    with pytest.raises(checks.CheckFailed, match=message):
        data_loading_checks.check_make_loaders(_loaders(**kwargs))


def _modulo_2_31(worker_id):
    seed = torch.initial_seed() % 2**31
    np.random.seed(seed)
    random.seed(seed)


def _numpy_only(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)


def _unreduced(worker_id):
    np.random.seed(torch.initial_seed())


@pytest.mark.parametrize("rule", [_rule, _rule_from_worker_info, _modulo_2_31])
def test_check_seed_worker_accepts_the_rule(rule):
    state = np.random.get_state(), random.getstate(), torch.get_rng_state()
    data_loading_checks.check_seed_worker(rule)
    after = np.random.get_state(), random.getstate(), torch.get_rng_state()
    assert np.array_equal(state[0][1], after[0][1]) and state[1] == after[1] and torch.equal(state[2], after[2])


@pytest.mark.parametrize("rule,message", [
    (workers.constant_seeds, "both workers drew the same numbers from NumPy's global generator"),
    (_numpy_only, "both workers drew the same numbers from Python's random module"),
    (lambda worker_id: (np.random.seed(worker_id), random.seed(worker_id)), "loaders seeded 0 and 1 gave"),
    (lambda worker_id: (np.random.seed(torch.initial_seed() % 2**32), random.seed(worker_id)),
     "loaders seeded 0 and 1 gave the workers the same random numbers"),
    (_unreduced, r"only accepts seeds below 2\*\*32"),
])
def test_check_seed_worker_names_the_mistake(rule, message):
    with pytest.raises(checks.CheckFailed, match=message):
        data_loading_checks.check_seed_worker(rule)


def test_classify_all_puts_the_mode_back_and_records_no_graph():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Dropout(0.5))
    loader = DataLoader(TensorDataset(torch.randn(10, 2), torch.arange(10)), batch_size=4)
    images, labels, predicted = digits.classify_all(model, loader)
    assert model.training and labels.tolist() == list(range(10)) and tuple(images.shape) == (10, 2)
    assert not predicted.requires_grad and predicted.dtype == torch.long
    with torch.no_grad():
        assert torch.equal(predicted, model.eval()(images).argmax(dim=1))   # eval mode: dropout off
    assert digits.classify_all(model, loader)[2].equal(predicted) and not model.training

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("broken forward")

    broken = Broken().train()
    with pytest.raises(RuntimeError, match="broken forward"):
        digits.classify_all(broken, loader)
    assert broken.training


def test_simulated_worker_streams_start_from_what_before_left():
    spoiled = workers.simulated_worker_streams(None, seed=0, before=workers.constant_seeds)
    assert spoiled[0] == spoiled[1]
    own = workers.simulated_worker_streams(None, seed=0)
    assert own[0][0] != own[1][0] and own[0][1] != own[1][1]
    assert own[0][0] == workers.simulated_worker_draws(None, seed=0, length=6)[0][:3]
    repaired = workers.simulated_worker_streams(_rule, seed=0, before=workers.constant_seeds)
    assert repaired == workers.simulated_worker_streams(_rule, seed=0) and repaired[0] != repaired[1]


def test_plot_worker_timings_draws_one_panel_per_dataset():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timings = {("in memory", 0): 0.02, ("in memory", 2): 0.3, ("decoding", 0): 0.8, ("decoding", 2): 0.5}
    fig = workers.plot_worker_timings(timings, title="t")
    left, right = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["in memory", "decoding"] and fig._suptitle.get_text() == "t"
    assert [t.get_text() for t in left.get_xticklabels()] == ["0 workers", "2 workers"]
    assert [round(p.get_height(), 3) for p in right.patches] == [0.8, 0.5]
    assert [t.get_text() for t in left.texts] == ["×15.00"] and [t.get_text() for t in right.texts] == ["×0.62"]
    assert left.get_ylabel() == right.get_ylabel() == "seconds per epoch"
    plt.close(fig)
    with pytest.raises(ValueError, match="no timings"):
        workers.plot_worker_timings({})


def test_the_lesson_never_lets_nbval_compare_the_timings():
    """Timings change on every run: every cell of lesson 03 that measures or draws them is left out of nbval's
    comparison (its outputs, figure included, are not compared)."""
    import nbformat

    nb = nbformat.read(course.solution_path("03_data_loading"), as_version=4)
    timed = [c for c in nb.cells if c.cell_type == "code"
             and ("plot_worker_timings(" in c.source or "perf_counter" in c.source)
             and "def seconds_per_epoch" not in c.source]
    assert len(timed) >= 2
    for cell in timed:
        assert "nbval-ignore-output" in cell.metadata.get("tags", []), cell.get("id")
