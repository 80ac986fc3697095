"""The worker-RNG dataset and the seed-spread figure of lesson 07."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch.utils.data import DataLoader

from autograder.kernel import repro


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
