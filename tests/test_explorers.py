"""The stride explorer's facts and pictures are right (lesson 01's 'Look')."""
import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from autograder import explorers


def test_layout_report_contiguous_and_permuted():
    assert explorers.layout_report((2, 3, 4), (0, 1, 2)) == {
        "shape": (2, 3, 4), "stride": (12, 4, 1), "contiguous": True,
        "view(-1) works": True, "reshape(-1) copies": False,
    }
    report = explorers.layout_report((3, 4), (1, 0))
    assert report["stride"] == (1, 4) and not report["contiguous"]
    assert report["view(-1) works"] is False and report["reshape(-1) copies"] is True


def test_storage_offsets_match_torch():
    base = torch.arange(24).reshape(2, 3, 4)
    for t in (base, base.permute(2, 0, 1), base[:, 1:, ::2], base[1]):
        assert torch.equal(explorers.storage_offsets(t), t)  # arange: each value is its own offset


def test_plot_memory_order_labels_cells_with_storage_positions():
    ax = explorers.plot_memory_order(torch.arange(6).reshape(2, 3).t())
    labels = [text.get_text() for text in ax.texts]
    assert labels == ["0", "3", "1", "4", "2", "5"]
    assert "stride (1, 3)" in ax.get_title()
    with pytest.raises(ValueError, match="1-D or 2-D"):
        explorers.plot_memory_order(torch.zeros(2, 2, 2))


def test_stride_explorer_builds_and_reacts():
    box = explorers.stride_explorer()
    shape_pick, perm_pick = box.children[0].children
    shape_pick.value = (2, 3, 4)
    assert len(perm_pick.options) == 6
    perm_pick.value = (2, 1, 0)
    assert perm_pick.value == (2, 1, 0)
