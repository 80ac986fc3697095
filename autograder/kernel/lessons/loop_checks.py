"""Lesson 04's visible checks: each runs one exercise's checks on a student's function.

The test cell only calls the check, so no expected value is computed or written out under the
answer cell. Inputs are seeded here, in a fixed order. The instruments they watch a loop with
(mode recorder, loss probe, recording optimizer, decoy device, ``fit``'s stand-ins) live in
:mod:`autograder.kernel.lessons.spirals`.
"""
from __future__ import annotations

import torch
from torch import nn

from autograder.kernel.lessons.spirals import (
    FitSpy,
    LossProbe,
    RecordingSGD,
    accuracy_hint,
    decoy_device,
    record_modes,
    table_model,
)

__all__ = ["check_train_one_epoch", "check_evaluate", "check_fit", "check_saliency"]

SUMMED_HINT = ("this loss_fn sums each batch's losses (reduction='sum'): the number it returns is already the batch's "
               "total, so multiplying it by the batch size counts every sample len(yb) times, and dividing by the "
               "number of batches is no mean per sample either. The result is still the mean over the samples.")



def check_train_one_epoch(train_one_epoch, namespace: dict) -> None:
    """Exercise 1: training mode, gradients cleared every batch, no graphs kept, the per-sample mean as a float.

    ``namespace`` is the notebook's globals: its ``device`` is pointed at a decoy while the function runs.
    """
    from torch.utils.data import DataLoader, TensorDataset

    from autograder.kernel import checks

    torch.manual_seed(1)
    x4, x2 = torch.randn(4, 3), torch.randn(2, 3)
    X_probe, y_probe = torch.cat([x4, x4, x2]), torch.tensor([0, 1, 1, 0, 0, 1, 1, 0, 1, 0])
    probe_loader = DataLoader(TensorDataset(X_probe, y_probe), batch_size=4)   # two identical batches of 4, then 2
    probe = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.0), nn.Linear(4, 2)).eval()  # as evaluation left it
    with torch.no_grad():
        want = nn.functional.cross_entropy(probe(X_probe), y_probe).item()
    # Each batch's own gradient, at the weights every step sees (lr 0 below): written to no .grad.
    own = [torch.autograd.grad(nn.functional.cross_entropy(probe(xb), yb), list(probe.parameters()))
           for xb, yb in zip(X_probe.split(4), y_probe.split(4))]
    nn.functional.cross_entropy(probe(X_probe), y_probe).mul(3.0).backward()   # gradients left in .grad from before
    frozen = RecordingSGD(probe.parameters(), lr=0.0)   # lr 0: the weights stay, each step's gradients are recorded
    watched_loss = LossProbe(nn.CrossEntropyLoss())      # counts the earlier batches' graphs still alive
    with decoy_device(namespace), record_modes(probe) as seen:
        got = checks.call(train_one_epoch, probe, probe_loader, watched_loss, frozen)
    checks.check_number(got, want, "train_one_epoch (batches of 4, 4, 2)", tol=1e-5,
                        hint="the mean must be per sample: weight each batch's mean loss by its batch size (the last "
                             "batch is smaller) and divide by the number of samples, not by the number of batches.")
    checks.expect(bool(seen.training) and all(seen.training),
                  "the model ran in eval mode during training (an earlier evaluation left it there): call "
                  "model.train() at the top of train_one_epoch so dropout and batch norm train again.")
    checks.expect(len(frozen.grads_at_step) == 3, f"optimizer.step() ran {len(frozen.grads_at_step)} times for 3 "
                  "batches: one step per batch, after that batch's backward().")
    _expect_own_gradients(frozen.grads_at_step, own)
    checks.expect(watched_loss.max_kept <= 1,
                  f"{watched_loss.max_kept} earlier batches' graphs were still alive when a new batch started: the "
                  "loss tensors were kept (e.g. total = total + loss * len(yb)), which keeps every batch's graph in "
                  "memory. Accumulate loss.item(), a Python float.")
    # The same samples' losses added instead of averaged: the per-sample mean is the same number.
    got = checks.call(train_one_epoch, probe, probe_loader, nn.CrossEntropyLoss(reduction="sum"),
                      RecordingSGD(probe.parameters(), lr=0.0))
    checks.check_number(got, want, "train_one_epoch with loss_fn=CrossEntropyLoss(reduction='sum') (batches of 4, 4, "
                        "2)", tol=1e-5, hint=SUMMED_HINT)
    before = [p.detach().clone() for p in probe.parameters()]
    checks.call(train_one_epoch, probe, probe_loader, nn.CrossEntropyLoss(),
                torch.optim.SGD(probe.parameters(), lr=0.1))
    checks.expect(any(not torch.equal(b, p) for b, p in zip(before, probe.parameters())),
                  "train_one_epoch did not change the parameters: the optimizer's step must follow the backward "
                  "pass.")


def _same(seen, want) -> bool:
    return all(x is not None and torch.allclose(x, y, rtol=1e-5, atol=1e-7) for x, y in zip(seen, want))


def _expect_own_gradients(at_step: list, own: list) -> None:
    """Each step saw its own batch's gradient; otherwise name how the clearing was misplaced."""
    from autograder.kernel import checks

    if all(_same(seen, want) for seen, want in zip(at_step, own)):
        return
    if all(all(g is None or not g.any() for g in seen) for seen in at_step):
        checks.fail("the gradients optimizer.step() saw", "none at any step (every .grad None or zero)",
                    "the gradients were cleared too early: zero_grad() between backward() and step() throws away "
                    "what backward() just wrote, so no step had a gradient to follow and the weights never "
                    "learned. Clear before backward(), never between backward() and step().")
    if not _same(at_step[0], own[0]) and all(_same(s, w) for s, w in zip(at_step[1:], own[1:])):
        checks.fail("the gradients the first optimizer.step() saw", "those of its batch plus what .grad held before "
                    "the call", "the gradients were cleared after each step instead of before each backward(): the "
                    "first step also followed the gradients the model arrived with. Clear before backward().")
    checks.fail("the gradients optimizer.step() saw", "two identical batches gave different gradients at their steps",
                "the gradients were not cleared, and backward() adds into .grad, so each step followed the sum of "
                "every gradient so far (and what .grad held before the call). Call optimizer.zero_grad() once per "
                "batch, before backward().")


def check_evaluate(evaluate, namespace: dict) -> None:
    """Exercise 2: eval mode, no graph (grad mode back on afterwards), per-sample loss, accuracy over class indices."""
    from torch.utils.data import DataLoader, TensorDataset

    from autograder.kernel import checks

    logits = torch.tensor([[2.5, -1.25], [0.75, 1.5], [-0.5, 0.25], [3.25, 0.5], [-2.75, 1.75],
                           [1.25, 1.5], [0.5, -0.75], [-1.5, 2.25], [0.25, -0.5], [1.75, 2.5]])
    labels = torch.tensor([0, 1, 0, 0, 1, 0, 0, 1, 1, 1])
    with torch.no_grad():
        want_loss = nn.functional.cross_entropy(logits, labels).item()
    want_acc = (logits.argmax(1) == labels).sum().item() / len(labels)
    torch.manual_seed(3)
    table = table_model(logits, dropout=0.5).train()   # row i of torch.eye(10) -> logits[i]; left with dropout on
    with decoy_device(namespace), record_modes(table) as seen:
        result = checks.call(evaluate, table, DataLoader(TensorDataset(torch.eye(10), labels), batch_size=4),
                             nn.CrossEntropyLoss())
    checks.expect(bool(seen.training) and not any(seen.training),
                  "the model ran in training mode during evaluation, so dropout was still dropping and two calls on "
                  "identical data would disagree. Call model.eval() first.")
    checks.expect(not any(seen.grad_enabled), "evaluate recorded an autograd graph (grad mode was on during the "
                  "forward pass). model.eval() does not turn gradients off: wrap the loop in `with torch.no_grad():` "
                  "(or torch.inference_mode()).")
    checks.expect(seen.grad_enabled_after, "grad mode was still off after evaluate returned: "
                  "torch.set_grad_enabled(False) as a statement switches autograd off for everything that runs "
                  "afterwards, training included. Use it as a context manager: `with torch.no_grad():`.")
    checks.check_type(result, tuple, "evaluate(...)", hint="return the pair (loss, accuracy) as a tuple.")
    checks.expect(len(result) == 2, f"evaluate should return (loss, accuracy), got {len(result)} values.")
    checks.check_number(result[0], want_loss, "evaluate's loss (batches of 4, 4, 2)", tol=1e-5,
                        hint="weight each batch's mean loss by its size and divide by the number of samples.")
    checks.check_number(result[1], want_acc, "evaluate's accuracy", tol=1e-6,
                        hint=accuracy_hint(result[1], logits, labels))
    summed = checks.call(evaluate, table_model(logits), DataLoader(TensorDataset(torch.eye(10), labels), batch_size=4),
                         nn.CrossEntropyLoss(reduction="sum"))
    checks.check_number(summed[0], want_loss, "evaluate's loss with loss_fn=CrossEntropyLoss(reduction='sum') "
                        "(batches of 4, 4, 2)", tol=1e-5, hint=SUMMED_HINT)


def check_fit(fit, namespace: dict) -> None:
    """Exercise 3: train_one_epoch then evaluate, once per epoch, with the right loaders and objects; the history.

    ``train_one_epoch`` and ``evaluate`` in ``namespace`` are replaced by a :class:`FitSpy`'s stand-ins while
    ``fit`` runs.
    """
    from torch.utils.data import DataLoader, TensorDataset

    from autograder.kernel import checks

    torch.manual_seed(5)
    fake_model = nn.Linear(2, 2)
    fake_train_loader = DataLoader(TensorDataset(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long)), batch_size=2)
    fake_val_loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.ones(4, dtype=torch.long)), batch_size=2)
    fake_optimizer, fake_loss = torch.optim.SGD(fake_model.parameters(), lr=0.1), nn.CrossEntropyLoss()
    spy = FitSpy(fake_model, fake_train_loader, fake_val_loader, fake_optimizer, fake_loss)
    with spy.installed(namespace):   # train_one_epoch and evaluate are stand-ins that record their calls
        history = checks.call(fit, fake_model, fake_train_loader, fake_val_loader, 3, fake_optimizer, fake_loss)
    checks.check_type(history, dict, "fit(...)", hint="return the history dict.")
    checks.expect(set(history) == {"train_loss", "val_loss", "val_acc"},
                  f"the history's keys are {sorted(history)}; expected exactly 'train_loss', 'val_loss', 'val_acc'.")
    names = [name for name, _, _ in spy.calls]
    checks.expect(names == ["train_one_epoch", "evaluate"] * 3,
                  f"with epochs=3, fit made the calls {names}; expected train_one_epoch then evaluate, three times "
                  "(fit must use your train_one_epoch and evaluate).")
    checks.expect(all(loader == ("train_loader" if name == "train_one_epoch" else "val_loader")
                      for name, loader, _ in spy.calls),
                  "train_one_epoch must get train_loader and evaluate must get val_loader: evaluating on the "
                  "training data measures memorisation, not generalisation.")
    checks.expect(all(same for _, _, same in spy.calls),
                  "fit must hand the model, loss_fn and optimizer it was given to train_one_epoch and evaluate "
                  "(train that model in place, not a copy).")
    # What the stand-ins returned, call by call (see FitSpy): epoch e is calls 2e - 1 and 2e.
    want = {"train_loss": [1.0 + (2 * e - 1) / 100 for e in (1, 2, 3)],
            "val_loss": [2.0 + 2 * e / 100 for e in (1, 2, 3)], "val_acc": [0.5 + 2 * e / 100 for e in (1, 2, 3)]}
    for key, values in want.items():
        checks.check_type(history[key], list, f"history['{key}']")
        checks.expect(len(history[key]) == 3, f"history['{key}'] has {len(history[key])} entries for 3 epochs: "
                      "append every epoch's values, not only the last.")
        for epoch, (got, expected) in enumerate(zip(history[key], values), start=1):
            checks.check_number(got, expected, f"history['{key}'][{epoch - 1}] (epoch {epoch})", tol=1e-9,
                                hint="record each epoch's values in order: train_loss from train_one_epoch, "
                                     "(val_loss, val_acc) from evaluate, in that order.")


def check_saliency(saliency) -> None:
    """Exercise 4: eval mode, gradients on (even under no_grad); the caller's mode, x and parameters' .grad kept."""
    from autograder.kernel import checks

    torch.manual_seed(11)
    snet = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)).train()  # as training leaves it
    xs, ys = torch.randn(5, 3), torch.tensor([0, 1, 1, 0, 1])
    snet.eval()
    xr = xs.clone().requires_grad_(True)
    want = torch.autograd.grad(snet(xr).gather(1, ys.view(-1, 1)).sum(), xr)[0]
    nn.functional.cross_entropy(snet(xs), ys).backward()   # the caller is accumulating gradients in .grad
    accumulated = [p.grad.clone() for p in snet.parameters()]
    snet.train()
    no_graph = {r"does not require grad|inference": (
        "autograd recorded nothing, so there is no gradient to take: torch.no_grad() (or inference_mode) turns "
        "recording off, and this evaluation needs it on. Eval mode is a separate switch: call model.eval(), and "
        "compute under `with torch.enable_grad():`.")}
    with record_modes(snet) as seen:
        got = checks.call(saliency, snet, xs, ys, hints=no_graph)
    checks.expect(bool(seen.training) and not any(seen.training),
                  "the model ran in training mode, so dropout zeroed part of the hidden units and the gradient "
                  "depends on a random mask: call model.eval() before the forward pass (and restore the mode "
                  "afterwards).")
    checks.check_type(got, torch.Tensor, "saliency(...)", hint="return the gradient with respect to x, a tensor.")
    checks.check_tensor(got, want, "saliency(model, x, target)", atol=1e-6, rtol=1e-5,
                        hints={"values": "the gradient with respect to x of model(x)[i, target[i]], summed over i "
                                         "(torch.autograd.grad(score, inputs)), in eval mode."})
    checks.expect(all(p.grad is not None and p.grad.any() for p in snet.parameters()),
                  "saliency wiped the gradients the caller was accumulating in the parameters' .grad: zero_grad() "
                  "after your backward() clears everything in .grad, the caller's part too. Leave .grad alone: "
                  "torch.autograd.grad(score, inputs) gives the input's gradient and writes no .grad.")
    checks.expect(all(torch.equal(p.grad, a) for p, a in zip(snet.parameters(), accumulated)),
                  "saliency added to the gradients the caller was accumulating in the parameters' .grad: backward() "
                  "adds into every parameter that requires grad, and the caller's next optimizer.step() would use "
                  "them. Take the gradient with torch.autograd.grad(score, inputs), which writes no .grad.")
    checks.expect(snet.training, "the model came in training mode and left in eval mode: put it back with "
                                 "model.train(was_training), or the training loop around it stops using dropout.")
    checks.expect(xs.grad is None and not xs.requires_grad,
                  "saliency changed the caller's x (it now requires grad or holds a .grad): differentiate a copy, "
                  "x.detach().clone().requires_grad_(True).")
