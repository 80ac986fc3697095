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
           "check_save_checkpoint", "check_load_checkpoint", "check_compatibility_report"]


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

def _probe_net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def _trained_probe(seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The checks' probe after three AdamW steps from ``seed``: weights, buffers and optimizer state all moved."""
    torch.manual_seed(seed)
    net = _probe_net()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    xb, yb = torch.randn(16, 3), torch.randint(0, 2, (16,))
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(net(xb), yb).backward()
        opt.step()
    return net, opt


def check_save_checkpoint(fn) -> None:
    """Visible checks of exercise 1: one save of a trained BatchNorm model, read back with weights_only=True."""
    import contextlib
    import os
    import pickle
    import tempfile

    from autograder.kernel import checks

    tnet, topt = _trained_probe(5)
    rng_at_save = torch.get_rng_state()
    unsafe = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        checks.call(fn, "ckpt.pt", tnet, topt, 7, best_val_loss=0.25, note="visible test")
        checks.expect(os.path.isfile("ckpt.pt"),
                      "save_checkpoint wrote no file at `path`: end with torch.save(checkpoint, path).")
        try:
            saved = torch.load("ckpt.pt", weights_only=True)
        except pickle.UnpicklingError:
            saved = None
            unsafe = sorted(torch.serialization.get_unsafe_globals_in_checkpoint("ckpt.pt"))
    if saved is None:
        if any(name.startswith("torch.nn.modules") for name in unsafe):
            why = ("it holds a pickled nn.Module. Save model.state_dict() (a dict of tensors), not the model object: "
                   "a pickled model loads only with weights_only=False, which runs whatever code the file names, "
                   "and it stops loading once its class is renamed or moved.")
        elif any(name.startswith("torch.optim") for name in unsafe):
            why = "it holds a pickled optimizer object. Save optimizer.state_dict(), not the optimizer."
        else:
            why = "store only tensors, numbers, strings, None, and dicts, lists or tuples of them."
        named = [name for name in unsafe if name.startswith("torch.")] or unsafe
        checks.expect(False, f"torch.load(path, weights_only=True) refuses the file, which needs {named[:3]}: {why}")
    checks.check_type(saved, dict, "what save_checkpoint wrote",
                      hint="save one dict: {'model': ..., 'optimizer': ..., 'epoch': ..., 'rng_state': ..., **extra}.")
    why_needed = {
        "model": "Store model.state_dict(): the weights and the buffers.",
        "optimizer": ("Without the optimizer state, a resumed AdamW would start again from zero moments and step 0, so "
                      "its first updates would move every weight by about lr. Store optimizer.state_dict()."),
        "epoch": "Store the number of epochs completed, so that the caller knows where to continue.",
        "rng_state": ("Without the RNG state, the resumed run would draw other shuffles and dropout masks than the "
                      "uninterrupted one, so it could not repeat it. Store torch.get_rng_state()."),
    }
    for key, why in why_needed.items():
        checks.expect(key in saved, f"the checkpoint has no '{key}' entry (its keys: {sorted(map(str, saved))}). {why}")

    want_model = tnet.state_dict()
    checks.check_type(saved["model"], dict, "checkpoint['model']", hint="store model.state_dict().")
    lacking = [key for key in want_model if key not in saved["model"]]
    buffers = [key for key in lacking if key.split(".")[-1] in ("running_mean", "running_var", "num_batches_tracked")]
    checks.expect(not buffers, f"checkpoint['model'] lacks the buffers {buffers}: parameters() and named_parameters() "
                               "leave out BatchNorm's running statistics. "
                               "model.state_dict() holds parameters and buffers.")
    checks.expect(not lacking, f"checkpoint['model'] lacks {lacking}: store model.state_dict().")
    for key, tensor in want_model.items():
        checks.check_tensor(saved["model"][key], tensor, f"checkpoint['model']['{key}']", atol=0, rtol=0)

    saved_opt, want_opt = saved["optimizer"], topt.state_dict()
    checks.expect(isinstance(saved_opt, dict) and isinstance(saved_opt.get("state"), dict)
                  and "param_groups" in saved_opt,
                  "checkpoint['optimizer'] should be optimizer.state_dict(): a "
                  "dict with 'state' (AdamW's step, exp_avg "
                  "and exp_avg_sq per parameter) and 'param_groups' (lr, betas, weight decay, ...).")
    for index, moments in want_opt["state"].items():
        checks.expect(index in saved_opt["state"],
                      f"checkpoint['optimizer']['state'] has no entry for parameter {index}: "
                      "save the optimizer's state after its steps, with optimizer.state_dict().")
        for name in ("step", "exp_avg", "exp_avg_sq"):
            checks.check_tensor(saved_opt["state"][index].get(name), moments[name],
                                f"checkpoint['optimizer']['state'][{index}]['{name}']", atol=0, rtol=0)

    checks.check_type(saved["epoch"], int, "checkpoint['epoch']", hint="store the epoch you were given, a Python int.")
    checks.expect(saved["epoch"] == 7,
                  f"save_checkpoint(..., epoch=7, ...) stored epoch {saved['epoch']}: store the epoch as given.")
    checks.check_type(saved["rng_state"], torch.Tensor, "checkpoint['rng_state']",
                      hint=("store the generator's state, torch.get_rng_state() (a uint8 tensor). A seed such as "
                            "torch.initial_seed() says where the stream started, not where it is now."))
    checks.check_tensor(saved["rng_state"], rng_at_save, "checkpoint['rng_state']",
                        hints={"values": "this is not the generator's state at the time of the call: take "
                                         "torch.get_rng_state() inside save_checkpoint, "
                                         "without drawing random numbers first."})
    for key, value in {"best_val_loss": 0.25, "note": "visible test"}.items():
        got = saved.get(key, "no such key")
        checks.expect(type(got) is type(value) and got == value,
                      "save_checkpoint(..., best_val_loss=0.25, note='visible "
                      "test') should store each keyword argument "
                      f"under its own name at the top level: checkpoint['{key}'] should be {value!r}, got {got!r}.")


def check_load_checkpoint(fn) -> None:
    """Visible checks of exercise 2: a load into freshly built objects, and a file that carries a pickled object."""
    import contextlib
    import tempfile

    from autograder.kernel import checks

    tnet, topt = _trained_probe(6)
    written = {"model": tnet.state_dict(), "optimizer": topt.state_dict(), "epoch": 7,
               "rng_state": torch.get_rng_state(), "best_val_loss": 0.25}
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        torch.save(written, "ckpt.pt")
        next_draws = torch.rand(4)
        torch.manual_seed(60)
        tnet2 = _probe_net()
        topt2 = torch.optim.AdamW(tnet2.parameters(), lr=1e-2)
        epoch = checks.call(fn, "ckpt.pt", tnet2, topt2)
        draws_after_load = torch.rand(4)
        torch.save({**written, "note": Tripwire("visible test")}, "tampered.pt")
        fired_before = len(tripwire_log())
        try:
            fn("tampered.pt", tnet2, topt2)
            refused = False
        except Exception:
            refused = True
        code_ran = len(tripwire_log()) > fired_before

    checks.check_type(epoch, int, "load_checkpoint(...)'s result", hint="return the saved epoch as a Python int.")
    checks.expect(epoch == 7, f"load_checkpoint returned {epoch}, but the file says "
                              "epoch 7: return the saved epoch itself "
                              "(the caller continues with the epoch after it).")
    for key, tensor in tnet.state_dict().items():
        checks.check_tensor(tnet2.state_dict()[key], tensor, f"model['{key}'] after loading", atol=0, rtol=0,
                            hints={"values": "load the saved state into the model you were given: "
                                             "model.load_state_dict(checkpoint['model']). "
                                             "Assigning a new object to the "
                                             "name `model` inside the function changes nothing for the caller."})
    restored_state = topt2.state_dict()["state"]
    checks.expect(len(restored_state) > 0,
                  "the optimizer has no state after loading: AdamW would restart from zero moments and step 0, so its "
                  "first updates would move every weight by about lr. "
                  "Call optimizer.load_state_dict(checkpoint['optimizer']).")
    for index, moments in topt.state_dict()["state"].items():
        for name in ("step", "exp_avg", "exp_avg_sq"):
            checks.check_tensor(restored_state[index][name], moments[name],
                                f"optimizer state [{index}]['{name}'] after loading", atol=0, rtol=0)
    checks.check_tensor(draws_after_load, next_draws, "torch.rand(4) right after load_checkpoint",
                        hints={"values": "the global random generator was not restored, so the resumed run would "
                                         "draw other shuffles and dropout masks: "
                                         "torch.set_rng_state(checkpoint['rng_state'])."})
    checks.expect(not code_ran,
                  "loading a file ran code that its author chose: the file held a harmless Tripwire object "
                  "whose __reduce__ names a function, and your load called it. "
                  "That is what torch.load(..., weights_only=False) and "
                  "pickle.load do with any file. Load with torch.load(path, map_location='cpu', weights_only=True).")
    checks.expect(refused,
                  "load_checkpoint accepted a file that holds an arbitrary "
                  "pickled object: load with weights_only=True, "
                  "which refuses anything but tensors and plain containers (and do not catch that error).")


def check_compatibility_report(fn) -> None:
    """Visible checks of exercise 3: one matching state_dict and one per kind of problem, the model unchanged."""
    from autograder.kernel import checks

    def reported(result, label):
        checks.check_type(result, list, f"check_state_dict_compatible({label})", hint="return a list of strings.")
        for problem in result:
            checks.check_type(problem, str, f"an item of check_state_dict_compatible({label})")
        return sorted(" ".join(problem.split()[:2] + [problem.split()[2].rstrip(":,;")]) if len(problem.split()) > 2
                      else problem for problem in result)


    torch.manual_seed(8)
    tnet = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    before = {key: value.clone() for key, value in tnet.state_dict().items()}
    good = {key: value.clone() for key, value in nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(),
                                                             nn.Linear(4, 2)).state_dict().items()}
    got = reported(checks.call(fn, tnet, good), "a matching state_dict")
    unchanged = ("check_state_dict_compatible changed the model: compare keys and shapes only. A trial "
                 "load_state_dict(..., strict=False) writes every tensor that fits into the model.")
    checks.expect(all(torch.equal(before[key], value) for key, value in tnet.state_dict().items()), unchanged)
    checks.expect(got == [], f"a state_dict from an identical architecture loads strictly, but you reported {got}.")

    no_bias = {key: value for key, value in good.items() if key != "3.bias"}
    got = reported(checks.call(fn, tnet, no_bias), "state_dict without '3.bias'")
    checks.expect(got == ["missing key: 3.bias"],
                  f"the state_dict lacks '3.bias', which the model has: expected ['missing key: 3.bias'], got {got}. "
                  "A strict load fails on every key of model.state_dict() that the state_dict does not hold.")
    no_var = {key: value for key, value in good.items() if key != "1.running_var"}
    got = reported(checks.call(fn, tnet, no_var), "state_dict without '1.running_var'")
    checks.expect(got == ["missing key: 1.running_var"],
                  "the state_dict lacks the buffer '1.running_var': expected "
                  f"['missing key: 1.running_var'], got {got}. "
                  "Buffers count: compare with model.state_dict(), which holds parameters and buffers, "
                  "not with named_parameters().")
    extra = {**good, "4.weight": torch.zeros(2, 2)}
    got = reported(checks.call(fn, tnet, extra), "state_dict with an extra '4.weight'")
    checks.expect(got == ["unexpected key: 4.weight"],
                  f"the state_dict has '4.weight', which the model lacks: expected ['unexpected key: 4.weight'], "
                  f"got {got}. A strict load also fails on keys it does not know "
                  "(a 'module.' prefix makes every key one).")
    wide = {**good, "0.weight": torch.zeros(4, 5)}
    got = reported(checks.call(fn, tnet, wide), "state_dict with a (4, 5) '0.weight'")
    checks.expect(got == ["shape mismatch: 0.weight"],
                  f"'0.weight' is (4, 5) in the state_dict and (4, 3) in the model: expected "
                  f"['shape mismatch: 0.weight ...'], got {got}. Compare the shapes of the keys both have.")
    mixed = {**no_bias, "head.weight": torch.zeros(2, 4), "1.running_mean": torch.zeros(5)}
    got = reported(checks.call(fn, tnet, mixed), "three problems at once")
    checks.expect(got == ["missing key: 3.bias", "shape mismatch: 1.running_mean", "unexpected key: head.weight"],
                  f"with '3.bias' missing, an extra 'head.weight' and a (5,) '1.running_mean', "
                  f"expected all three problems, got {got}.")
    no_count = {key: value for key, value in good.items() if key != "1.num_batches_tracked"}
    got = reported(checks.call(fn, tnet, no_count), "state_dict without '1.num_batches_tracked'")
    checks.expect(got == ["missing key: 1.num_batches_tracked"],
                  f"the state_dict lacks the buffer '1.num_batches_tracked': expected "
                  f"['missing key: 1.num_batches_tracked'], got {got}. A strict load of this plain dict lets it pass "
                  "(BatchNorm keeps the model's own counter), but the contract compares with every key of "
                  "model.state_dict().")
    checks.expect(all(torch.equal(before[key], value) for key, value in tnet.state_dict().items()), unchanged)
