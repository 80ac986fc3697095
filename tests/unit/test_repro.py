"""Lesson 07's kernel helpers: the worker-RNG and jitter datasets (NoisyPoints too), the random tape and seed-spread
figures, and the visible checks of its exercises (repro_checks: invariants and replay, messages included)."""
import matplotlib

matplotlib.use("Agg")

import random

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, RandomSampler

from autograder.kernel import checks
from autograder.kernel.lessons import repro, repro_checks


def test_worker_draws_in_the_main_process_use_the_global_generator():
    ds = repro.WorkerDraws(4)
    assert len(ds) == 4
    torch.manual_seed(3)
    index, worker, draw = ds[2]
    torch.manual_seed(3)
    assert (index, worker) == (2, -1)
    assert torch.equal(draw, torch.rand(()))


def test_worker_draws_rejects_bad_lengths_and_indices():
    with pytest.raises(ValueError):
        repro.WorkerDraws(0)
    with pytest.raises(IndexError):
        repro.WorkerDraws(3)[3]


def test_worker_draws_helper_collects_every_item_in_index_order():
    loader = DataLoader(repro.WorkerDraws(5), batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    found = repro.worker_draws(loader)
    assert list(found) == [0, 1, 2, 3, 4]
    assert all(worker == -1 and 0.0 <= draw < 1.0 for worker, draw in found.values())


def test_two_workers_draw_reproducibly_from_the_loader_generator():
    def run(seed):
        loader = DataLoader(repro.WorkerDraws(4), batch_size=1, num_workers=2,
                            generator=torch.Generator().manual_seed(seed))
        return repro.worker_draws(loader)

    first = run(0)
    assert [worker for worker, _ in first.values()] == [0, 1, 0, 1]
    assert run(0) == first
    assert run(1) != first


def test_plot_seed_spread_draws_points_mean_and_range():
    fig, ax = plt.subplots()
    out = repro.plot_seed_spread({"a": {0: 0.7, 1: 0.9, 2: 0.8}, "b": {0: 0.5}}, ax, title="t")
    assert out is ax
    assert ax.get_title() == "t"
    assert ax.get_ylabel() == "final validation accuracy" and ax.get_xlabel() == "configuration"
    assert [label.get_text() for label in ax.get_xticklabels()] == ["a", "b"]
    texts = [t.get_text() for t in ax.texts]
    assert "mean 0.8000\nrange 0.7000 to 0.9000" in texts
    assert "seed 2" in texts
    low, high = ax.get_ylim()
    assert low < 0.5 and high > 0.9
    plt.close(fig)


def test_plot_seed_spread_needs_results():
    with pytest.raises(ValueError):
        repro.plot_seed_spread({})


def test_worker_draws_from_numpy_use_numpy_s_global_generator():
    ds = repro.WorkerDraws(3, "numpy")
    np.random.seed(5)
    _, worker, draw = ds[1]
    np.random.seed(5)
    assert worker == -1 and float(draw) == np.random.random()
    with pytest.raises(ValueError):
        repro.WorkerDraws(3, "random")


def test_jitter_dataset_draws_from_numpy_and_random():
    X, y = torch.zeros(4, 3), torch.tensor([0, 1, 0, 1])
    ds = repro.JitterDataset(X, y)
    assert len(ds) == 4

    def item():
        np.random.seed(1)
        random.seed(1)
        return ds[2]

    first, second = item(), item()
    assert first[0] == 2 and first[1].dtype == torch.float32 and first[1].shape == (3,) and int(first[2]) == 0
    assert torch.equal(first[1], second[1]) and not torch.equal(first[1], X[2])
    np.random.seed(1)
    random.seed(2)
    assert not torch.equal(ds[2][1], first[1])   # the strength comes from `random`
    with pytest.raises(ValueError):
        repro.JitterDataset(X, y[:3])


@pytest.mark.parametrize("width", [4, 64])
def test_random_tape_initialization_takes_what_the_model_draws(width):
    """The tape's counts are real: skipping as many values as the initialization takes gives the same shuffle."""
    tape = repro.random_tape(width, decoupled=False, n_items=48)
    init = tape[0]["count"]
    torch.manual_seed(0)
    torch.nn.Sequential(torch.nn.Linear(4, width), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(width, 2))
    after_model = next(iter(DataLoader(torch.arange(48), batch_size=16, shuffle=True))).tolist()
    torch.manual_seed(0)
    torch.empty(init).uniform_()
    after_skip = next(iter(DataLoader(torch.arange(48), batch_size=16, shuffle=True))).tolist()
    assert after_model == after_skip


def test_random_tape_puts_the_shuffles_and_the_jitter_on_the_data_stream_when_decoupled():
    coupled = repro.random_tape(4, decoupled=False, n_items=256, batch_size=16)
    decoupled = repro.random_tape(4, decoupled=True, n_items=256, batch_size=16)
    assert [e["consumer"] for e in coupled] == ["initialization", "shuffle, epoch 1", "jitter, epoch 1",
                                                 "dropout masks, epoch 1", "shuffle, epoch 2", "jitter, epoch 2",
                                                 "dropout masks, epoch 2"]
    assert all(e["stream"] == "global" for e in coupled)
    assert coupled[1]["count"] == 2 and coupled[2]["count"] == 256 * 4 and coupled[3]["count"] == 256 * 4
    assert [e["stream"] for e in decoupled] == ["global", "data", "data", "global", "data", "data", "global"]
    assert decoupled[1]["count"] is None and decoupled[2]["count"] is None


def test_plot_random_tape_draws_one_row_per_stream():
    fig, ax = plt.subplots()
    out = repro.plot_random_tape({"a": repro.random_tape(4, decoupled=False),
                                  "b": repro.random_tape(4, decoupled=True)}, ax, title="tape")
    assert out is ax and ax.get_title(loc="left") == "tape"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["a\n(global stream)", "b\n(global stream)", "b\n(a generator of its own)"]
    texts = [t.get_text() for t in ax.texts]
    assert "initialization\n30 values" in texts and "shuffle, epoch 1\n2 seeds" in texts
    assert "shuffle, epoch 2\nits own numbers" in texts and "jitter, epoch 1\n1,024 values" in texts
    assert ax.get_xlabel() and ax.get_ylabel()
    plt.close(fig)
    with pytest.raises(ValueError):
        repro.plot_random_tape({})


def _solution_loader(dataset, batch_size, seed, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed))


def _sampled(d, b, s, num_workers=0):
    return DataLoader(d, batch_size=b, sampler=RandomSampler(d, generator=torch.Generator().manual_seed(s)),
                      num_workers=num_workers)


def test_distinct_worker_seeds_seeds_numpy_and_random_from_the_process_id():
    repro.distinct_worker_seeds(0)
    first = (np.random.random(), random.random())
    repro.distinct_worker_seeds(1)   # the same process: the same seeds, whatever the worker id
    assert (np.random.random(), random.random()) == first


def _script(seed_before=True, seed_after=False, seed_numpy=True, seed_random=True, fixed=None, worker_init_fn=None,
            jitter=True, workers=True):
    """jitter_script repaired (the defaults), or with one of its faults left in."""
    def seed_all(seed):
        torch.manual_seed(seed)
        if seed_numpy:
            np.random.seed(seed)
        if seed_random:
            random.seed(seed)

    def script(X, y, width, seed, num_workers=0, num_epochs=2):
        seed = seed if fixed is None else fixed
        if seed_before:
            seed_all(seed)
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], width), torch.nn.ReLU(), torch.nn.Linear(width, 2))
        if seed_after:
            seed_all(seed)
        data = repro.JitterDataset(X, y) if jitter else torch.utils.data.TensorDataset(torch.arange(len(X)), X, y)
        loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=num_workers if workers else 0,
                            worker_init_fn=worker_init_fn)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches, losses = [], []
        for _ in range(num_epochs):
            for idx, xb, yb in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                optimizer.step()
                batches.append(idx.tolist())
                losses.append(loss.item())
        return batches, losses
    return script


def test_check_reproducible_script_names_what_moved_the_run():
    repro_checks.check_reproducible_script(_script())
    with pytest.raises(checks.CheckFailed, match="after torch's global generator alone"):   # the script as handed over
        repro_checks.check_reproducible_script(_script(seed_before=False, seed_after=True, seed_numpy=False,
                                                       seed_random=False, worker_init_fn=repro.distinct_worker_seeds))
    with pytest.raises(checks.CheckFailed, match="after NumPy's global generator alone"):
        repro_checks.check_reproducible_script(_script(seed_numpy=False))
    with pytest.raises(checks.CheckFailed, match="after torch's global generator alone .* other losses"):
        repro_checks.check_reproducible_script(_script(seed_before=False, seed_after=True))
    with pytest.raises(checks.CheckFailed, match="with num_workers=2, two runs"):
        repro_checks.check_reproducible_script(_script(worker_init_fn=repro.distinct_worker_seeds))
    with pytest.raises(checks.CheckFailed, match="bitwise-equal losses at every step"):
        repro_checks.check_reproducible_script(_script(jitter=False))
    with pytest.raises(checks.CheckFailed, match="bitwise-equal losses at every step"):
        repro_checks.check_reproducible_script(_script(workers=False))
    with pytest.raises(checks.CheckFailed, match="seeds 0 and 1 gave the same"):
        repro_checks.check_reproducible_script(_script(fixed=3))


def _decoupled(make_loader, reseed=False, jitter="own", returns=3):
    """coupled_run with the loader make_loader(dataset, batch_size, seed) builds; the jitter drawn in the loop from a
    generator of its own ("own"), from the global stream ("global"), or by NoisyPoints in the loader ("dataset")."""
    def run(X, y, width, seed, num_epochs=2, batch_size=16):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], width), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                    torch.nn.Linear(width, 2))
        noise = torch.Generator().manual_seed(seed + 1)
        data = (repro.NoisyPoints(X, y) if jitter == "dataset"
                else torch.utils.data.TensorDataset(torch.arange(len(X)), X, y))
        loader = make_loader(data, batch_size, seed)
        if reseed:
            torch.manual_seed(seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches, points = [], []
        model.train()
        for _ in range(num_epochs):
            for idx, xb, yb in loader:
                if jitter in ("own", "global"):
                    xb = xb + 0.1 * torch.randn(xb.shape, generator=noise if jitter == "own" else None)
                batches.append(idx.tolist())
                points.append(xb)
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                optimizer.step()
        return (batches, points, model) if returns == 3 else (batches, model)
    return run


def test_check_decoupled_run_replays_the_student_s_own_points():
    repro_checks.check_decoupled_run(_decoupled(_solution_loader))
    repro_checks.check_decoupled_run(_decoupled(lambda d, b, s: _solution_loader(d, b, s + 7)))   # another order
    with pytest.raises(checks.CheckFailed, match="replayed on the points you returned"):
        repro_checks.check_decoupled_run(_decoupled(_sampled))          # the loader draws from the global stream
    with pytest.raises(checks.CheckFailed, match="replayed on the points you returned"):
        repro_checks.check_decoupled_run(_decoupled(_solution_loader, reseed=True))
    with pytest.raises(checks.CheckFailed, match="widths 4 and 16"):
        repro_checks.check_decoupled_run(_decoupled(lambda d, b, s: DataLoader(d, batch_size=b, shuffle=True)))


def test_check_decoupled_run_sees_the_jitter_the_loader_s_generator_leaves_on_the_global_stream():
    """The edition before this one asked for the order alone: its answer, a loader generator (with NoisyPoints
    now), fails; so do a jitter drawn in the loop from the global stream, no jitter, and a jitter drawn once."""
    with pytest.raises(checks.CheckFailed, match="expected \\(batches, points, model\\)"):
        repro_checks.check_decoupled_run(_decoupled(_solution_loader, jitter="dataset", returns=2))
    for jitter in ("dataset", "global"):
        with pytest.raises(checks.CheckFailed, match="the batches agree but the jittered points of 6 of the 6"):
            repro_checks.check_decoupled_run(_decoupled(_solution_loader, jitter=jitter))
    with pytest.raises(checks.CheckFailed, match="standard deviation 0.000"):
        repro_checks.check_decoupled_run(_decoupled(_solution_loader, jitter="none"))

    def jittered_once(d, b, s):
        X = d.tensors[1] + 0.1 * torch.randn(d.tensors[1].shape, generator=torch.Generator().manual_seed(s + 3))
        return _solution_loader(torch.utils.data.TensorDataset(d.tensors[0], X, d.tensors[2]), b, s)
    with pytest.raises(checks.CheckFailed, match="48 of the 48 items got the same noise"):
        repro_checks.check_decoupled_run(_decoupled(jittered_once, jitter="none"))


def test_noisy_points_jitters_from_the_global_generator_at_every_fetch():
    X, y = torch.zeros(5, 3), torch.tensor([0, 1, 0, 1, 1])
    ds = repro.NoisyPoints(X, y)
    assert len(ds) == 5
    torch.manual_seed(2)
    index, point, label = ds[3]
    torch.manual_seed(2)
    assert index == 3 and int(label) == 1 and point.dtype == torch.float32
    assert torch.equal(point, 0.1 * torch.randn(3))
    assert not torch.equal(ds[3][1], point)   # a new draw at every fetch
    with pytest.raises(ValueError):
        repro.NoisyPoints(X, y[:4])


def test_jitter_helpers_see_the_noise_its_repeats_and_other_points():
    X = torch.arange(12.0).reshape(4, 3)
    batches = [[0, 1], [2, 3], [3, 2], [1, 0]]
    noise = torch.full((8, 3), 0.5)
    noise[4] = 0.25                              # item 3 gets new noise in the second epoch, the others do not
    points = [X[torch.tensor(b)] + noise[2 * k:2 * k + 2] for k, b in enumerate(batches)]
    found = repro_checks.jitter_of(X, batches, points)
    assert torch.allclose(found, noise)
    assert repro_checks.repeated_jitter(batches, found, 4) == 3
    assert repro_checks.jitter_of(X, batches, points[:3]) is None
    assert repro_checks.jitter_of(X, batches, [p.double() for p in points]) is None
    assert repro_checks.points_differ(points, points) == 0
    assert repro_checks.points_differ(points, points[:3]) == 1
    assert repro_checks.points_differ(points, [points[0] + 1, *points[1:]]) == 1
    model = repro_checks.replay_run(X, torch.tensor([0, 1, 0, 1]), 4, 0, batches, points)
    assert repro_checks.weight_gap(model, repro_checks.replay_run(X, torch.tensor([0, 1, 0, 1]), 4, 0, batches)) > 0


def test_random_tape_jitter_count_is_what_noisy_points_draws():
    """NoisyPoints's jitter takes one 64-bit value per noise value: skipping that many leaves the global stream
    where fetching every item leaves it."""
    tape = repro.random_tape(4, decoupled=False, n_items=16, num_epochs=1)
    ds = repro.NoisyPoints(torch.zeros(16, 4), torch.zeros(16))
    torch.manual_seed(0)
    for i in range(16):
        ds[i]
    after_real = torch.rand(3)
    torch.manual_seed(0)
    torch.empty(tape[2]["count"], dtype=torch.int64).random_()
    assert torch.equal(torch.rand(3), after_real)


def test_replay_run_reproduces_a_run_and_weight_gap_sees_a_change():
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(1))
    y = (X.sum(dim=1) > 0).long()
    batches = [[0, 5, 9], [1, 2, 3, 4], [19, 18]]
    first, second = repro_checks.replay_run(X, y, 4, 2, batches), repro_checks.replay_run(X, y, 4, 2, batches)
    assert repro_checks.weight_gap(first, second) == 0.0
    assert repro_checks.weight_gap(first, repro_checks.replay_run(X, y, 4, 2, batches[::-1])) > 0
    assert repro_checks.weight_gap(None, first) == 1e9
    assert repro_checks.epoch_faults([[0, 1, 2], [2, 1, 0], [2, 1, 0], [0, 0, 1]], 3) == (1, 1)


def _compare(pairs=lambda s: (s, s), verdict="ranges", guard=True):
    def compare_recipes(train_a, train_b, seeds):
        seeds = list(seeds)
        if guard and len(seeds) < 2:
            raise ValueError("two seeds at least")
        out = {}
        for name, train_fn in (("a", train_a), ("b", train_b)):
            values = [float(train_fn(*pairs(s))) for s in seeds]
            out[name] = {"values": values, "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
        a, b = out["a"], out["b"]
        if verdict == "ranges":
            out["verdict"] = "b" if b["min"] > a["max"] else "a" if a["min"] > b["max"] else "noise"
        else:
            out["verdict"] = "b" if b["mean"] > a["mean"] else "a"
        return out
    return compare_recipes


def test_check_compare_recipes_accepts_sound_rules_and_catches_the_traps():
    repro_checks.check_compare_recipes(_compare())
    repro_checks.check_compare_recipes(_compare(pairs=lambda s: (s, 500 + s)))      # another pairing
    with pytest.raises(checks.CheckFailed, match="expected 'noise'"):
        repro_checks.check_compare_recipes(_compare(verdict="means"))
    with pytest.raises(checks.CheckFailed, match="the data seeds of the 5 runs were"):
        repro_checks.check_compare_recipes(_compare(pairs=lambda s: (s, 0)))
    with pytest.raises(checks.CheckFailed, match="ValueError"):
        repro_checks.check_compare_recipes(_compare(guard=False))
    recipe = repro_checks.FakeRecipe([0.1, 0.2])
    assert [recipe(1, 2), recipe(3, 4), recipe(5, 6)] == [0.1, 0.2, 0.1] and recipe.calls == [(1, 2), (3, 4), (5, 6)]


def test_random_tape_dropout_and_shuffle_counts_are_what_the_generator_gives():
    """Dropout takes one 64-bit value per element, a plain loader's shuffle two 64-bit seeds: skipping that many
    leaves the global stream where the real consumers leave it."""
    tape = repro.random_tape(4, decoupled=False, n_items=16, batch_size=16, num_epochs=1)
    shuffle, masks = tape[1]["count"], tape[3]["count"]
    dropout = torch.nn.Dropout(0.2)
    torch.manual_seed(0)
    next(iter(DataLoader(torch.arange(16), batch_size=16, shuffle=True)))
    dropout(torch.ones(16, 4))
    after_real = torch.rand(3)
    torch.manual_seed(0)
    torch.empty(shuffle + masks, dtype=torch.int64).random_()
    assert torch.equal(torch.rand(3), after_real)


def test_worker_draws_from_python_use_random_s_global_generator():
    random.seed(4)
    index, worker, draw = repro.WorkerDraws(3, "python")[1]
    random.seed(4)
    assert (index, worker) == (1, -1) and draw.item() == random.random()
    with pytest.raises(ValueError):
        repro.WorkerDraws(3, "jax")
