"""Lesson 01's package code: the stride explorer, the memory-order and broadcasting pictures, the checks
(explorers.py and tensor_checks.py)."""
import matplotlib

matplotlib.use("Agg")

import copy  # noqa: E402
import io  # noqa: E402
import types  # noqa: E402
from unittest import mock  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from autograder import course  # noqa: E402
from autograder.kernel.checks import CheckFailed  # noqa: E402
from autograder.kernel.lessons import explorers, tensor_checks  # noqa: E402


def _solution() -> types.SimpleNamespace:
    """Lesson 01's answer cells, run from the solution notebook (the checks are tested on the real answers)."""
    namespace = {"np": np, "torch": torch}
    nb = nbformat.read(course.solution_path("01_tensors_and_views"), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith("ex_"):
            exec(cell.source, namespace)
    return types.SimpleNamespace(**namespace)


solution = _solution()


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_layout_report_contiguous_and_permuted():
    assert explorers.layout_report((2, 3, 4), (0, 1, 2)) == {
        "shape": (2, 3, 4), "stride": (12, 4, 1), "contiguous": True,
        "view(-1) works": True, "reshape(-1) copies": False,
    }
    report = explorers.layout_report((3, 4), (1, 0))
    assert report["stride"] == (1, 4) and not report["contiguous"]
    assert report["view(-1) works"] is False and report["reshape(-1) copies"] is True


def test_a_size_one_shape_answers_try_it_1():
    """Try-it 1 asks for a non-identity permutation that view(-1) accepts: the explorer offers one."""
    assert any(1 in shape for shape in explorers.SHAPES)
    moved = explorers.layout_report((2, 1, 4), (1, 0, 2))
    assert moved["shape"] == (1, 2, 4) and moved["contiguous"] and moved["view(-1) works"]
    assert not moved["reshape(-1) copies"]
    for perm in [(1, 0, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0), (2, 1, 0)]:  # none works without a size-1 dim
        assert explorers.layout_report((2, 3, 4), perm)["view(-1) works"] is False


def test_storage_offsets_match_torch():
    base = torch.arange(24).reshape(2, 3, 4)
    for t in (base, base.permute(2, 0, 1), base[:, 1:, ::2], base[1]):
        assert torch.equal(explorers.storage_offsets(t), t)  # arange: each value is its own offset


def test_plot_memory_order_labels_cells_and_axes():
    ax = explorers.plot_memory_order(torch.arange(6).reshape(2, 3).t())
    labels = [text.get_text() for text in ax.texts]
    assert labels == ["0", "3", "1", "4", "2", "5"]
    assert "stride (1, 3)" in ax.get_title()
    assert ax.get_xlabel() == "index along dim 1" and ax.get_ylabel() == "index along dim 0"
    row = explorers.plot_memory_order(torch.arange(4))
    assert row.get_xlabel() == "index along dim 0" and row.get_ylabel() == ""
    with pytest.raises(ValueError, match="1-D or 2-D"):
        explorers.plot_memory_order(torch.zeros(2, 2, 2))


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("shape, perm", [((3, 4), (1, 0)), ((2, 3, 4), (2, 1, 0)), ((2, 1, 4), (0, 2, 1))])
def test_explorer_picture_keeps_its_title_clear_of_the_panels(shape, perm):
    fig = explorers._draw_layout(shape, perm)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert f"permute{perm}" in fig._suptitle.get_text()
    for ax in fig.axes:
        assert ax.get_xlabel().startswith("index along") and ax.get_ylabel().startswith("index along")
        assert not _overlaps(title, ax.title.get_window_extent(renderer)), "suptitle overlaps a panel title"
        assert not _overlaps(title, ax.get_window_extent(renderer)), "suptitle overlaps a panel"
        assert title.x0 >= 0 and title.x1 <= fig.bbox.width, "suptitle is cut off"


def test_stride_explorer_builds_and_draws_once_per_change():
    drawn = []
    draw = explorers._draw_layout

    def counted(shape, perm):
        fig = draw(shape, perm)
        drawn.append(fig._suptitle.get_text())
        return fig

    with mock.patch.object(explorers, "_draw_layout", counted):
        box = explorers.stride_explorer()
        (shape_pick, perm_pick), report, picture = box.children[0].children, box.children[1], box.children[2]
        assert len(drawn) == 1 and bytes(picture.value).startswith(b"\x89PNG") and "stride: (4, 1)" in report.value
        shape_pick.value = (2, 3, 4)
        assert len(perm_pick.options) == 6 and perm_pick.value == (0, 1, 2)
        assert len(drawn) == 2
        perm_pick.value = (2, 1, 0)
        assert len(drawn) == 3 and "permute(2, 1, 0)" in drawn[-1] and "contiguous: False" in report.value
        shape_pick.value = (2, 1, 4)
        assert len(drawn) == 4 and "permute(0, 1, 2)" in drawn[-1]
    assert len(Image.open(io.BytesIO(bytes(picture.value))).convert("RGB").getcolors(10**6)) > 1, "a blank picture"


def test_expect_answer_accepts_the_exact_value_and_explains_others():
    explorers.expect_answer(lambda a, b: a is b, (1, 1), True, "same(1, 1)")
    with pytest.raises(CheckFailed, match=r"same\(1, 2\) returned False, expected True\.\nLikely mistake: look closer"):
        explorers.expect_answer(lambda a, b: a == b, (1, 2), True, "same(1, 2)", hint="look closer")
    with pytest.raises(CheckFailed, match="expected a bool"):
        explorers.expect_answer(lambda a, b: torch.tensor(True), (1, 2), True, "same(1, 2)")

    def stub(a, b):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not implemented yet"):
        explorers.expect_answer(stub, (1, 2), True, "stub(1, 2)")


# ---------------------------------------------------------------- broadcasting, drawn

@pytest.mark.parametrize("a, b", [((4, 1), (3,)), ((4, 3), (4,)), ((2, 1, 3), (5, 1)), ((3,), (3,)), ((8,), (8, 1)),
                                  ((), (2, 3)), ((2, 3), (3, 2))])
def test_broadcast_report_agrees_with_torch(a, b):
    report = explorers.broadcast_report(a, b)
    try:
        expected = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        expected = None
    assert report["result"] == expected
    assert bool(report["clash"]) == (expected is None)
    assert len(report["a"]) == len(report["b"]) == max(len(a), len(b))


def test_broadcast_report_names_what_stretches():
    report = explorers.broadcast_report((4, 1), (3,))
    assert report["b"] == (1, 3) and report["padded_b"] == 1 and report["padded_a"] == 0
    assert report["stretched_a"] == [1] and report["stretched_b"] == [0] and report["clash"] == []
    assert explorers.broadcast_report((4, 3), (4,))["clash"] == [1]


def test_plot_broadcast_draws_both_operands_the_result_and_a_title():
    ax = explorers.plot_broadcast((4, 1), (3,))
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["4", "1→3", "1→4", "3", "4", "3"]   # a's row, b's row (its missing 1 stretched), the sum
    assert ax.get_title() == "(4, 1) + (3,) → (4, 3)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a (4, 1)", "b (3,)", "a + b"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["-2", "-1"]
    assert ax.get_xlabel() and ax.get_ylabel()
    failing = explorers.plot_broadcast((4, 3), (4,), title="no fit")
    assert failing.get_title() == "no fit" and "✗" in [t.get_text() for t in failing.texts]
    assert explorers.plot_broadcast((4, 3), (4,)).get_title() == "(4, 3) + (4,) → error at dimension -1"


# ---------------------------------------------------------------- the visible checks of the exercises

def test_check_new_object_accepts_fresh_results_and_explains_a_kept_one():
    explorers.check_new_object(lambda t: t.detach().clone(), (torch.ones(2),), "copy(t)")
    explorers.check_new_object(lambda: [], (), "fresh()")
    kept = torch.zeros(3)
    with pytest.raises(CheckFailed, match=r"kept\(\): two calls returned the same object\nLikely mistake"):
        explorers.check_new_object(lambda: kept, (), "kept()")
    with pytest.raises(CheckFailed, match="the same storage"):
        explorers.check_new_object(lambda: kept[1:], (), "window()")


def test_visible_checks_pass_the_solutions_and_fail_a_wrong_answer():
    torch.manual_seed(0)
    tensor_checks.check_shares_storage_answers(solution.shares_storage)
    tensor_checks.check_flatten_answers(solution.flatten_features)
    tensor_checks.check_copy_answers(solution.independent_copy)
    tensor_checks.check_label_answers(solution.to_class_labels, np.random.default_rng(0))
    tensor_checks.check_linear_answers(solution.linear_forward)
    with pytest.raises(CheckFailed, match="is the bias added"):
        tensor_checks.check_linear_answers(lambda x, w, b: x @ w.T)
    with pytest.raises(CheckFailed, match="returned False, expected True"):
        tensor_checks.check_shares_storage_answers(lambda a, b: a.data_ptr() == b.data_ptr())


def test_copy_checks_keep_a_dict_s_sharing_and_count_only_what_its_entries_show():
    history = torch.arange(100.0)
    assert tensor_checks.shown_bytes([history[-6:], history[-5::2]]) == 6 * 4
    assert tensor_checks.shown_bytes([history[:2], torch.zeros(0), history[:2].t()]) == 2 * 4
    assert tensor_checks.held_bytes([history[-6:], history[-5::2], torch.zeros(3, dtype=torch.int32)]) == 400 + 12

    def per_entry(tensors):
        if isinstance(tensors, torch.Tensor):
            return tensors.detach().clone()
        return {name: t.detach().clone() for name, t in tensors.items()}

    def whole_storages(tensors):
        if isinstance(tensors, torch.Tensor):
            return tensors.detach().clone()
        return copy.deepcopy({name: t.detach() for name, t in tensors.items()})

    torch.manual_seed(0)
    with pytest.raises(CheckFailed, match="'embed.weight' and 'head.weight' are windows on one storage"):
        tensor_checks.check_copy_answers(per_entry)
    with pytest.raises(CheckFailed, match=r"the copies hold 464 bytes of storage, but the entries show only 88 bytes"):
        tensor_checks.check_copy_answers(whole_storages)
    with pytest.raises(CheckFailed, match="expected a dict with the keys"):
        tensor_checks.check_copy_answers(lambda ts: per_entry(ts) if isinstance(ts, torch.Tensor) else list(ts))


def test_linear_checks_count_matrix_products_and_explain_a_broadcast_without_a_new_axis():
    def by_matmul(x, weight, bias):
        if x.shape[-1] != weight.shape[1]:
            raise ValueError(f"x has {x.shape[-1]} features, the weight expects {weight.shape[1]}")
        if bias is not None and tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"bias has shape {tuple(bias.shape)}, the weight has {weight.shape[0]} outputs")
        return x @ weight.mT if bias is None else torch.nn.functional.linear(x, weight, bias)

    torch.manual_seed(0)
    with pytest.raises(CheckFailed, match=r"linear_forward called (linear|matmul)"):
        tensor_checks.check_linear_answers(by_matmul)
    with pytest.raises(CheckFailed, match="the shapes do not broadcast"):
        tensor_checks.check_linear_answers(lambda x, w, b: (x * w).sum(-1, keepdim=True) + b)
    counter = tensor_checks.ProductCounter()
    with counter:
        torch.ones(2, 3) @ torch.ones(3, 1), torch.einsum("ij->i", torch.ones(2, 2)), (torch.ones(3) * 2).sum()
    assert sorted(counter.calls) == ["einsum", "matmul"]


def test_plot_broadcast_keys_its_shading_unless_told_not_to():
    assert explorers.plot_broadcast((4, 1), (3,)).get_legend() is not None
    assert explorers.plot_broadcast((4, 1), (3,), legend=False).get_legend() is None


def test_flatten_checks_refuse_the_input_object_itself():
    """A 2-D x returned as itself fails with the convention's message; a window of x (a new object) passes."""
    torch.manual_seed(12)

    def itself_when_2d(x):
        return x if x.dim() == 2 else solution.flatten_features(x)

    with pytest.raises(CheckFailed, match="returned its input object itself"):
        tensor_checks.check_flatten_answers(itself_when_2d)
    tensor_checks.check_flatten_answers(lambda x: solution.flatten_features(x)[:])


def test_shares_storage_checks_compare_memory_blocks_not_their_starts():
    """The old answer (same storage start, non-empty) misses a NumPy view's storage inside another; closed
    intervals call blocks side by side shared."""
    def same_start(a, b):
        sa, sb = a.untyped_storage(), b.untyped_storage()
        return sa.nbytes() > 0 and sb.nbytes() > 0 and sa.data_ptr() == sb.data_ptr()

    def closed(a, b):
        sa, sb = a.untyped_storage(), b.untyped_storage()
        if not sa.nbytes() or not sb.nbytes():
            return False
        return max(sa.data_ptr(), sb.data_ptr()) <= min(sa.data_ptr() + sa.nbytes(), sb.data_ptr() + sb.nbytes())

    with pytest.raises(CheckFailed, match=r"from_numpy\(arr\[2:\]\)\) returned False"):
        tensor_checks.check_shares_storage_answers(same_start)
    with pytest.raises(CheckFailed, match=r"blocks side by side"):
        tensor_checks.check_shares_storage_answers(closed)


def test_flatten_checks_count_reshapes_and_find_a_needless_copy():
    """reshape gives the right values and views, and is counted; a copy where a window exists is named."""
    with pytest.raises(CheckFailed, match="called reshape"):
        tensor_checks.check_flatten_answers(lambda x: x.reshape(x.shape[0], -1))

    def copy_unless_contiguous(x):
        packed = x.contiguous()
        return packed.as_strided((x.shape[0], x.shape[1:].numel()), (x.shape[1:].numel(), 1))

    with pytest.raises(CheckFailed, match=r"x\[::2\].*is a copy"):
        tensor_checks.check_flatten_answers(copy_unless_contiguous)


def test_label_checks_refuse_truncation_shared_memory_and_ignored_rows():
    rng = np.random.default_rng(0)
    with pytest.raises(CheckFailed, match="returned labels without complaint"):
        tensor_checks.check_label_answers(lambda arr: torch.tensor(arr.argmax(1) if arr.ndim == 2 else arr,
                                                                   dtype=torch.long), rng)

    def shares(arr):
        solution.to_class_labels(arr)
        return torch.as_tensor(arr.argmax(1) if arr.ndim == 2 else arr).long()

    with pytest.raises(CheckFailed, match="share its memory"):
        tensor_checks.check_label_answers(shares, np.random.default_rng(0))
    with pytest.raises(CheckFailed, match="one class per row"):
        tensor_checks.check_label_answers(lambda arr: torch.tensor(arr, dtype=torch.long), np.random.default_rng(0))


def test_linear_checks_want_named_value_errors():
    def unnamed(x, w, b):
        if x.shape[-1] != w.shape[1] or (b is not None and b.shape != (w.shape[0],)):
            raise ValueError("shapes do not fit")
        return solution.linear_forward(x, w, b)

    with pytest.raises(CheckFailed, match="does not name both sizes 5 and 3"):
        tensor_checks.check_linear_answers(unnamed)
    with pytest.raises(CheckFailed, match="expected a ValueError"):
        tensor_checks.check_linear_answers(lambda x, w, b: x @ w.T if b is None else x @ w.T + b)
