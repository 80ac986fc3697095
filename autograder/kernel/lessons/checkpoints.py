"""Training, evaluation, a tripwire and a figure for the checkpointing lesson (lesson 05).

``train_spirals`` runs epochs of lesson 04's reference spiral recipe and records the
validation loss after every epoch. That per-epoch evaluation runs on the validation
tensors directly, not through a ``DataLoader``, so it draws no random numbers: the
global generator sees exactly the draws of the reference run (the training shuffles,
dropout, and one seed per started validation loader every ``log_every`` epochs).

``Tripwire`` is a harmless stand-in for a malicious pickle payload: unpickling it calls
a function of this module that only appends to a list, so a check can tell whether a
loader ran code chosen by the file's author. ``torch.load(..., weights_only=True)``
refuses it.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import torch
from torch import nn

__all__ = ["train_spirals", "evaluate_spirals", "Tripwire", "tripwire_log", "plot_val_curves",
           "check_resume", "compare_resume"]


@torch.no_grad()
def evaluate_spirals(model: nn.Module, loader) -> tuple[float, float]:
    """(mean cross-entropy per sample, accuracy) of ``model`` on ``loader``, in eval mode without a graph.

    Iterating ``loader`` draws a seed from its generator (the global one unless the
    loader was given its own), exactly as lesson 04's evaluation did.
    """
    model.train(False)
    summed, hits, seen = 0.0, 0, 0
    for inputs, targets in loader:
        scores = model(inputs)
        summed += nn.functional.cross_entropy(scores, targets, reduction="sum").item()
        hits += int((scores.argmax(dim=1) == targets).sum())
        seen += targets.numel()
    return summed / seen, hits / seen


@torch.no_grad()
def _val_loss_without_draws(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    model.train(False)
    return nn.functional.cross_entropy(model(X), y).item()


def _one_epoch(model: nn.Module, opt: torch.optim.Optimizer, batches) -> float:
    model.train(True)
    summed, seen = 0.0, 0
    for inputs, targets in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        opt.step()
        summed += loss.item() * targets.numel()
        seen += targets.numel()
    return summed / seen


def train_spirals(model: nn.Module, optimizer: torch.optim.Optimizer, train_loader, val_loader,
                  epochs: Iterable[int], *, log_every: int | None = 30) -> dict[str, list]:
    """Train ``model`` for the given epoch numbers (e.g. ``range(76, 151)``) and return their history.

    Each epoch is lesson 04's: ``model.train()``, then zero_grad / forward / backward / step
    per batch with cross-entropy, logging the mean training loss per sample. After every
    epoch the validation loss is computed on ``val_loader.dataset.tensors`` in one pass
    (eval mode, no graph, no random draws). On epochs divisible by ``log_every`` the run
    also evaluates through ``val_loader``, as lesson 04's reference run did, and prints
    ``epoch  30: train ... | val ... | acc ...``; ``log_every=None`` prints nothing.

    Returns ``{"epoch": [...], "train_loss": [...], "val_loss": [...]}``, one entry per epoch.
    """
    X_val, y_val = val_loader.dataset.tensors
    record: dict[str, list] = {"epoch": [], "train_loss": [], "val_loss": []}
    for epoch in epochs:
        train_loss = _one_epoch(model, optimizer, train_loader)
        record["epoch"].append(epoch)
        record["train_loss"].append(train_loss)
        record["val_loss"].append(_val_loss_without_draws(model, X_val, y_val))
        if log_every and epoch % log_every == 0:
            val_loss, val_acc = evaluate_spirals(model, val_loader)
            print(f"epoch {epoch:3d}: train {train_loss:.4f} | val {val_loss:.4f} | acc {val_acc:.3f}")
    return record


_TRIPWIRE_LOG: list[str] = []


def _tripwire_fired(label: str) -> str:
    """What unpickling a ``Tripwire`` calls: it records ``label`` and returns it, nothing else."""
    _TRIPWIRE_LOG.append(label)
    return label


class Tripwire:
    """A harmless pickle payload: unpickling it appends ``label`` to :func:`tripwire_log`.

    A real attacker's ``__reduce__`` would return ``os.system`` and a shell command; this
    one returns a function of this module, so a loader that runs it leaves a trace and
    nothing else. ``torch.load(..., weights_only=True)`` refuses to call it.
    """

    def __init__(self, label: str = "tripwire"):
        self.label = label

    def __reduce__(self):
        return (_tripwire_fired, (self.label,))


def tripwire_log() -> list[str]:
    """The labels of every ``Tripwire`` unpickled in this process so far, oldest first (a copy)."""
    return list(_TRIPWIRE_LOG)


def plot_val_curves(runs: Mapping[str, Mapping[str, list]], *, resume_epoch: int | None = None,
                    zoom: tuple[int, int] | None = None, axes=None):
    """Overlay the validation-loss curves of several runs (histories from :func:`train_spirals`).

    The first run is drawn as a wide pale line and the others on top of it, so a run that
    retraces it exactly disappears into it. ``resume_epoch`` adds a vertical line;
    ``zoom=(first, last)`` adds a second panel with those epochs on a linear scale.
    Returns the axes.
    """
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("plot_val_curves needs at least one run")
    panels = 2 if zoom else 1
    if axes is None:
        _, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.6), squeeze=False)
        axes = list(axes[0])
    styles = [dict(linewidth=6, alpha=0.3, color="tab:blue"),
              dict(linewidth=1.6, linestyle="--", color="tab:orange"),
              dict(linewidth=1.2, color="tab:green"),
              dict(linewidth=1.2, color="tab:red"),
              dict(linewidth=1.2, color="tab:purple")]
    for ax_index, ax in enumerate(axes):
        zoomed = zoom is not None and ax_index == 1
        for (label, history), style in zip(runs.items(), styles):
            pairs = [(e, v) for e, v in zip(history["epoch"], history["val_loss"])
                     if not zoomed or zoom[0] <= e <= zoom[1]]
            if pairs:
                epochs, values = zip(*pairs)
                ax.plot(epochs, values, label=label, **style)
        if resume_epoch is not None:
            ax.axvline(resume_epoch, color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("epoch")
        if zoomed:
            ax.set_xlim(*zoom)
            ax.set_ylabel("validation loss")
            ax.set_title(f"epochs {zoom[0]}-{zoom[1]}, around the restart")
        else:
            ax.set_yscale("log")
            ax.set_ylabel("validation loss (log scale)")
            ax.set_title("validation loss, one run vs. stopped and resumed")
        ax.legend(fontsize=8)
    return axes


# ---------------------------------------------------------------- visible checks of the lesson's exercises

class _Renamed(nn.Module):
    """The probe's layers under other names: same shapes, in the same order, so only the names differ."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.body(x))


def _probe(seed: int):
    """What a training script builds after ``torch.manual_seed(seed)``: data, a shuffled loader that draws from
    the global generator, a model with BatchNorm and dropout, and AdamW."""
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    X = torch.randn(48, 3)
    loader = DataLoader(TensorDataset(X, (X.sum(dim=1) > 0).long()), batch_size=16, shuffle=True)
    net = nn.Sequential(nn.Linear(3, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
    return net, torch.optim.AdamW(net.parameters(), lr=1e-2), loader


def _run(net, opt, loader, epochs: int) -> list[float]:
    return [_one_epoch(net, opt, loader) for _ in range(epochs)]


def compare_resume(save_fn, load_fn, *, stop: int = 2, epochs: int = 5, seed: int = 11) -> dict:
    """Train a small BatchNorm-and-dropout model for ``epochs`` epochs; save after ``stop`` with ``save_fn``;
    then restart as a script does (seed, build everything afresh), resume with ``load_fn`` and train to the end.

    Returns ``{"epoch": what load_fn returned, "equal": [bool per resumed epoch], "weights_equal": bool}``
    (training losses compared bit for bit; the final weights and buffers too)."""
    import contextlib
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        net, opt, loader = _probe(seed)
        _run(net, opt, loader, stop)
        save_fn("ckpt.pt", net, opt, stop)
        full = _run(net, opt, loader, epochs - stop)
        net2, opt2, loader2 = _probe(seed)
        epoch = load_fn("ckpt.pt", net2, opt2)
        resumed = _run(net2, opt2, loader2, epochs - stop)
    same = all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), net2.state_dict().values()))
    return {"epoch": epoch, "equal": [a == b for a, b in zip(resumed, full)], "weights_equal": same}


def _states_equal(found: dict, want: dict) -> bool:
    return set(found) == set(want) and all(
        torch.equal(found[k], want[k]) if isinstance(want[k], torch.Tensor) else found[k] == want[k] for k in want)


def _diagnose_load(net, opt, at_save: dict) -> None:
    """After the load: name the first part of the run that is not as it was at the save (behaviour, not layout)."""
    from autograder.kernel import checks

    buffers = {name for name, _ in net.named_buffers()}
    now = net.state_dict()
    params = [k for k in at_save["model"] if k not in buffers and not torch.equal(now[k], at_save["model"][k])]
    checks.expect(not params, f"after load_checkpoint the model's parameters {params[:2]} are not the saved ones: "
                              "put the saved values into the model object you were given (assigning a new object "
                              "to the name `model` inside the function changes nothing for the caller).")
    stale = [k for k in sorted(buffers) if not torch.equal(now[k], at_save["model"][k])]
    checks.expect(not stale, f"after load_checkpoint the buffers {stale} are not the saved ones: BatchNorm's running "
                             "statistics are not parameters, so a copy of parameters() leaves them at mean 0 and "
                             "variance 1, and in eval mode the model computes something else (section 2).")
    state, want = opt.state_dict()["state"], at_save["optimizer"]["state"]
    checks.expect(len(state) == len(want) and all(_states_equal(state[i], want[i]) for i in want),
                  "after load_checkpoint the optimizer's per-parameter state (AdamW's step count and its averages "
                  "of the gradient and of its square) is not the one it had at the save: a resumed AdamW starting "
                  "from zero moments moves every weight by about lr in its first steps.")
    checks.expect(torch.equal(torch.get_rng_state(), at_save["rng"]),
                  "after load_checkpoint the global random generator is not where it was when save_checkpoint ran, "
                  "so the resumed run draws other shuffles and dropout masks. A seed says where a stream started, "
                  "not where it is now: restore the generator's state (section 1).")


def _check_save_leaves_no_trace(save_fn, net, opt) -> dict:
    """Save once; the run must go on as if nothing had happened. Returns what the run was at the save."""
    from autograder.kernel import checks

    at_save = {"model": {k: v.clone() for k, v in net.state_dict().items()},
               "optimizer": __import__("copy").deepcopy(opt.state_dict()), "rng": torch.get_rng_state()}
    grads = [None if p.grad is None else p.grad.clone() for p in net.parameters()]
    checks.call(save_fn, "ckpt.pt", net, opt, 2)
    checks.expect(torch.equal(torch.get_rng_state(), at_save["rng"]),
                  "save_checkpoint moved the global random generator (it drew random numbers, or set a seed), so the "
                  "run that goes on after it is not the run a resume repeats: saving must change nothing.")
    checks.expect(net.training, "the model came to save_checkpoint in training mode and left in eval mode: leave no "
                                "trace (lesson 04): the mode as it came.")
    checks.expect(all(p.requires_grad for p in net.parameters()) and all(
        (g is None and p.grad is None) or (g is not None and p.grad is not None and torch.equal(g, p.grad))
        for g, p in zip(grads, net.parameters())),
        "save_checkpoint changed the parameters' .grad or requires_grad: leave no trace (lesson 04).")
    return at_save


def _check_refuses_code(load_fn, net, opt) -> None:
    """A copy of the student's own file with a harmless pickled object added: the load must raise, running nothing."""
    import pickle

    from autograder.kernel import checks

    try:
        found = torch.load("ckpt.pt", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError):
        found = None   # a file that needs unpickling; the tampered one below is then a dict of its own
    tampered = {**found, "note": Tripwire("visible test")} if isinstance(found, dict) else {"note": Tripwire()}
    torch.save(tampered, "tampered.pt")
    fired_before = len(tripwire_log())
    try:
        load_fn("tampered.pt", net, opt)
        refused = False
    except Exception:
        refused = True
    checks.expect(len(tripwire_log()) == fired_before,
                  "loading a file ran code that its author chose: a copy of your checkpoint with one harmless pickled "
                  "object added (its __reduce__ names a function) made your load_checkpoint call that function. "
                  "Unpickling an arbitrary object runs whatever it names (section 3): read the file so that anything "
                  "but tensors, numbers, strings and containers of them is refused.")
    checks.expect(refused, "load_checkpoint accepted a file that holds an arbitrary pickled object: it must raise "
                           "(and the error must reach the caller).")


def check_resume(save_fn, load_fn) -> None:
    """Visible checks of exercise 1: a resume through the student's own pair, a tampered file, a model that does not
    fit, the mode of the model handed over."""
    import contextlib
    import tempfile

    from autograder.kernel import checks

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        net, opt, loader = _probe(11)
        _run(net, opt, loader, 2)
        at_save = _check_save_leaves_no_trace(save_fn, net, opt)
        full = _run(net, opt, loader, 3)
        net2, opt2, loader2 = _probe(11)   # a restarted script: seeds, builds everything afresh, then loads
        epoch = checks.call(load_fn, "ckpt.pt", net2, opt2)
        checks.check_type(epoch, int, "load_checkpoint(...)'s result", hint="return the saved epoch as a Python int.")
        checks.expect(epoch == 2, f"the run was saved after epoch 2, but load_checkpoint returned {epoch}: return "
                                  "the number of epochs completed (the caller continues with the next one).")
        checks.expect(net2.training, "the model came to load_checkpoint in training mode and left in eval mode: "
                                     "loading changes the model's values, not its mode.")
        _diagnose_load(net2, opt2, at_save)
        resumed = _run(net2, opt2, loader2, 3)
        same = sum(a == b for a, b in zip(resumed, full))
        checks.expect(same == len(full) and all(torch.equal(a, b) for a, b in
                                                zip(net.state_dict().values(), net2.state_dict().values())),
                      f"the resumed run equals the uninterrupted one at {same} of {len(full)} epochs, though the "
                      "model, the optimizer and the generator were restored: something else differs.")
        evaluating, opt3, _ = _probe(12)
        load_fn("ckpt.pt", evaluating.eval(), opt3)
        checks.expect(not evaluating.training, "the model came to load_checkpoint in eval mode and left in training "
                                               "mode: loading changes the model's values, not its mode.")
        _check_refuses_code(load_fn, net2, opt2)
        torch.manual_seed(13)
        renamed = _Renamed()
        try:
            load_fn("ckpt.pt", renamed, torch.optim.AdamW(renamed.parameters(), lr=1e-2))
            fitted = "returned"
        except Exception:
            fitted = "raised"
        checks.expect(fitted == "raised",
                      "load_checkpoint loaded a file into a model whose parameters and buffers have other names "
                      "(same shapes, in the same order) without an error: a file that does not fit the model must "
                      "stop the run, not start it from half-matched weights (section 7, strict loading).")
