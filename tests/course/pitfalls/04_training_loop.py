"""Wrong answers for lesson 04: one per pitfall the curriculum lists, and a few more (exercise -> pitfall -> answer).

PITFALLS fail a visible check with their message; HIDDEN_ONLY pass every visible check and fail a hidden one;
FORGERIES also forge the evidence that an instrument in the kernel would see.
"""
from coursekit import FORGED_OBSERVE

PITFALLS = {
    "train_one_epoch": {
        "no zero_grad: gradients accumulate across batches": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
''',
        "no model.train(): stays in eval mode after an evaluation": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
''',
        "returns a tensor instead of a float": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total = total + loss * len(yb)
        count += len(yb)
    return total / count
''',
        "adds loss tensors, total = total + loss * len(yb): a float in the end, every batch's graph kept": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total = total + loss * len(yb)
        count += len(yb)
    return total.item() / count
''',
        "moves batches to the notebook's global device instead of the model's": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
''',
        "averages the batch means per batch instead of per sample": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    batch_losses = []
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        batch_losses.append(loss.item())
    return sum(batch_losses) / len(batch_losses)
''',
    },
    "evaluate": {
        "no model.eval(): dropout stays on and results vary": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return total / count, correct / count
''',
        "records a graph (no torch.no_grad)": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        logits = model(xb)
        total += loss_fn(logits, yb).item() * len(yb)
        correct += (logits.argmax(dim=1) == yb).sum().item()
        count += len(yb)
    return total / count, correct / count
''',
        "torch.set_grad_enabled(False) as a statement: grad mode stays off after evaluate": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    torch.set_grad_enabled(False)
    total, correct, count = 0.0, 0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        logits = model(xb)
        total += loss_fn(logits, yb).item() * len(yb)
        correct += (logits.argmax(dim=1) == yb).sum().item()
        count += len(yb)
    return total / count, correct / count
''',
        "moves batches to the notebook's global device instead of the model's": '''
def evaluate(model, loader, loss_fn):
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return total / count, correct / count
''',
        "labels compared in the wrong dtype: float scores from max(...)[0] against long labels": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            predicted = logits.max(dim=1)[0]
            correct += (predicted == yb).sum().item()
            count += len(yb)
    return total / count, correct / count
''',
        "labels compared with the wrong shape: (N, 1) float labels broadcast against (N,) predictions": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            targets = yb.float().unsqueeze(1)
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(yb)
    return total / count, correct / count
''',
    },
}


HIDDEN_ONLY = {
    "evaluate": {
        "ignores the loss_fn it is given (plain cross-entropy; the visible checks use plain cross-entropy)": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += nn.functional.cross_entropy(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return total / count, correct / count
''',
    },
    "train_one_epoch": {
        "ignores the loss_fn it is given (plain cross-entropy; the visible checks use plain cross-entropy)": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
''',
    },
}

# Keeping every batch's loss tensor changes no value the function returns or leaves behind: only an instrument (the
# LossProbe the test hands over as loss_fn) sees it, and a student can reset that. The spec of train_one_epoch says so.
NO_VALUE_SIGNATURE = {
    "train_one_epoch": {
        "adds loss tensors, total = total + loss * len(yb): a float in the end, every batch's graph kept":
            "the returned float and the trained weights are the same; only memory differs while the loop runs",
    },
}

FORGERIES = {
    "train_one_epoch": {
        "no model.train(), every loss tensor kept; resets the loss probe and rewrites what record_modes saw": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total = total + loss * len(yb)
        count += len(yb)
    if hasattr(loss_fn, "_alive"):
        loss_fn._alive.clear()
        loss_fn.max_kept = 0
    for hook in list(model._forward_hooks.values()):
        for cell in hook.__closure__ or ():
            record = cell.cell_contents
            if hasattr(record, "training"):
                record.training[:] = [True] * len(record.training)
    return total.item() / count
''',
        "no model.train(); observe patched so that booleans come out True": FORGED_OBSERVE + '''

def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
''',
    },
    "evaluate": {
        "no torch.no_grad(); rewrites the grad mode that record_modes saw": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        logits = model(xb)
        total += loss_fn(logits, yb).item() * len(yb)
        correct += (logits.argmax(dim=1) == yb).sum().item()
        count += len(yb)
    for hook in list(model._forward_hooks.values()):
        for cell in hook.__closure__ or ():
            record = cell.cell_contents
            if hasattr(record, "grad_enabled"):
                record.grad_enabled[:] = [False] * len(record.grad_enabled)
    return total / count, correct / count
''',
        "no torch.no_grad(); observe patched so that booleans come out True": FORGED_OBSERVE + '''

def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        logits = model(xb)
        total += loss_fn(logits, yb).item() * len(yb)
        correct += (logits.argmax(dim=1) == yb).sum().item()
        count += len(yb)
    return total / count, correct / count
''',
        "torch.set_grad_enabled(False) as a statement; observe patched so that booleans come out True":
            FORGED_OBSERVE + '''

def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    torch.set_grad_enabled(False)
    total, correct, count = 0.0, 0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        logits = model(xb)
        total += loss_fn(logits, yb).item() * len(yb)
        correct += (logits.argmax(dim=1) == yb).sum().item()
        count += len(yb)
    return total / count, correct / count
''',
    },
}

# Exercise 4's listed pitfalls: torch.no_grad() around the computation, no eval mode, gradients left in .grad.
PITFALLS["saliency"] = {
    "wraps the computation in torch.no_grad(): nothing is recorded, there is no gradient to take": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            inputs = x.detach().clone().requires_grad_(True)
            score = model(inputs).gather(1, target.view(-1, 1)).sum()
            (grad,) = torch.autograd.grad(score, inputs)
    finally:
        model.train(was_training)
    return grad
''',
    "no model.eval(): dropout masks part of the gradient": '''
def saliency(model, x, target):
    with torch.enable_grad():
        inputs = x.detach().clone().requires_grad_(True)
        score = model(inputs).gather(1, target.view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(score, inputs)
    return grad
''',
    "backward() on the score: the gradients stay in the parameters' .grad": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            inputs = x.detach().clone().requires_grad_(True)
            model(inputs).gather(1, target.view(-1, 1)).sum().backward()
    finally:
        model.train(was_training)
    return inputs.grad
''',
}

# Wrong answers that the spec's pitfall lists do not name: each breaks a rule the spec states, or passes a weaker
# property than the one asked. The hidden tests reject them on values.
PLAUSIBLE = {
    "train_one_epoch": {
        "zero_grad() after step() instead of before backward(): the first step uses gradients left from before": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
''',
        "logs the loss recomputed after the step, not the one the step was taken from": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
        with torch.no_grad():
            total += loss_fn(model(xb), yb).item() * len(yb)
        count += len(yb)
    return total / count
''',
        "returns the last batch's loss": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss.item()
''',
        "divides by len(loader) * batch_size, as if every batch were full": '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total = 0.0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
    return total / (len(loader) * loader.batch_size)
''',
    },
    "evaluate": {
        "predicts class 1 when its softmax probability passes 0.5 (right for two classes only)": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            predicted = (logits.softmax(dim=1)[:, 1] > 0.5).long()
            correct += (predicted == yb).sum().item()
            count += len(yb)
    return total / count, correct / count
''',
        "return inside the loop: only the first batch is evaluated": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
            return total / count, correct / count
''',
        "averages the batch accuracies instead of counting correct samples": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, count, accuracies = 0.0, 0, []
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            accuracies.append((logits.argmax(dim=1) == yb).float().mean().item())
            count += len(yb)
    return total / count, sum(accuracies) / len(accuracies)
''',
        "divides by len(loader) * batch_size, as if every batch were full": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
    seen = len(loader) * loader.batch_size
    return total / seen, correct / seen
''',
    },
    "saliency": {
        "backward(), then model.zero_grad(): wipes the gradients the caller was accumulating": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            inputs = x.detach().clone().requires_grad_(True)
            model(inputs).gather(1, target.view(-1, 1)).sum().backward()
    finally:
        model.train(was_training)
    model.zero_grad()
    return inputs.grad
''',
        "no torch.enable_grad(): fails when the caller runs it inside torch.no_grad()": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    try:
        inputs = x.detach().clone().requires_grad_(True)
        score = model(inputs).gather(1, target.view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(score, inputs)
    finally:
        model.train(was_training)
    return grad
''',
        "does not put the model back in the mode it came in": '''
def saliency(model, x, target):
    model.eval()
    with torch.enable_grad():
        inputs = x.detach().clone().requires_grad_(True)
        score = model(inputs).gather(1, target.view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(score, inputs)
    return grad
''',
        "restores with model.train(), whatever mode the model came in": '''
def saliency(model, x, target):
    model.eval()
    try:
        with torch.enable_grad():
            inputs = x.detach().clone().requires_grad_(True)
            score = model(inputs).gather(1, target.view(-1, 1)).sum()
            (grad,) = torch.autograd.grad(score, inputs)
    finally:
        model.train()
    return grad
''',
        "restores the mode only when nothing raised (no try/finally)": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    with torch.enable_grad():
        inputs = x.detach().clone().requires_grad_(True)
        score = model(inputs).gather(1, target.view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(score, inputs)
    model.train(was_training)
    return grad
''',
        "differentiates the caller's own x (x.requires_grad_()), leaving it changed": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            x.requires_grad_(True)
            score = model(x).gather(1, target.view(-1, 1)).sum()
            (grad,) = torch.autograd.grad(score, x)
    finally:
        model.train(was_training)
    return grad
''',
    },
}

# Correct answers written differently: they keep their points.
RIGHT_ANSWERS = {
    "train_one_epoch": {
        "model.zero_grad(set_to_none=False), detached float64 accumulation, loss_fn.reduction; prints and warns": '''
import sys
import warnings


def train_one_epoch(model, loader, loss_fn, optimizer):
    model.train()
    device = next(iter(model.parameters())).device
    total, count = torch.zeros((), dtype=torch.float64), 0
    for step, (xb, yb) in enumerate(loader):
        xb, yb = xb.to(device), yb.to(device)
        model.zero_grad(set_to_none=False)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.detach().double() * (1 if loss_fn.reduction == "sum" else xb.shape[0])
        count += xb.shape[0]
        print(f"batch {step}: {loss.item():.4f}")
    print("epoch done", file=sys.stderr)
    warnings.warn("a warning from train_one_epoch")
    return float(total / count)
''',
    },
    "evaluate": {
        "torch.inference_mode(), all logits concatenated, one loss call, loss_fn.reduction; prints to both streams": '''
import sys


def evaluate(model, loader, loss_fn):
    model.eval()
    device = next(model.parameters()).device
    all_logits, all_labels = [], []
    with torch.inference_mode():
        for xb, yb in loader:
            all_logits.append(model(xb.to(device)))
            all_labels.append(yb.to(device))
        logits, labels = torch.cat(all_logits), torch.cat(all_labels)
        loss = loss_fn(logits, labels).item()
        loss /= len(labels) if loss_fn.reduction == "sum" else 1
        accuracy = logits.argmax(dim=1).eq(labels).double().mean().item()
    print("evaluated", len(labels), "samples")
    print("done", file=sys.stderr)
    return float(loss), float(accuracy)
''',
    },
    "saliency": {
        "freezes the parameters and calls backward() on a leaf copy, restoring everything in finally; prints": '''
import sys


def saliency(model, x, target):
    was_training = model.training
    flags = [p.requires_grad for p in model.parameters()]
    model.eval()
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        with torch.set_grad_enabled(True):
            leaf = x.detach().clone()
            leaf.requires_grad = True
            logits = model(leaf)
            logits[torch.arange(len(target)), target].sum().backward()
        print("saliency computed")
        print("no parameter .grad written", file=sys.stderr)
        return leaf.grad.detach()
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)
        model.train(was_training)
''',
    },
}

# Visible pitfalls found by trying the exercises as students would: each passed every visible check before.
PITFALLS["train_one_epoch"]["zero_grad() after step() instead of before backward(): the first step uses gradients "
                            "left from before"] = PLAUSIBLE["train_one_epoch"].pop(
    "zero_grad() after step() instead of before backward(): the first step uses gradients left from before")
PITFALLS["train_one_epoch"]["zero_grad() between backward() and step(): every step sees no gradient"] = '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
'''
PITFALLS["saliency"]["backward(), then model.zero_grad(): wipes the gradients the caller was accumulating"] = \
    PLAUSIBLE["saliency"].pop("backward(), then model.zero_grad(): wipes the gradients the caller was accumulating")

# A loss_fn that sums its batch (reduction='sum'): its value is the batch's total already. The text never names the
# case; the contract's "whether loss_fn averages a batch's losses or sums them" does.
PITFALLS["train_one_epoch"]["multiplies a summed loss by the batch size: reduction='sum' counted len(yb) times"] = '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    device = next(model.parameters()).device
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        count += len(yb)
    return total / count
'''
PITFALLS["evaluate"]["multiplies a summed loss by the batch size: reduction='sum' counted len(yb) times"] = '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return total / count, correct / count
'''
PITFALLS["evaluate"]["the first version as handed over"] = '''
def evaluate(model, loader, loss_fn):
    torch.set_grad_enabled(False)
    losses, accuracies = [], []
    for xb, yb in loader:
        scores = model(xb.to(device))
        losses.append(loss_fn(scores, yb.to(device)).item())
        hits = scores.max(dim=1).values == yb.to(device)
        accuracies.append(hits.float().mean().item())
    return sum(losses) / len(losses), sum(accuracies) / len(accuracies)
'''
PITFALLS["train_one_epoch"]["the first version as handed over"] = '''
def train_one_epoch(model, loader, loss_fn, optimizer):
    losses = []
    for xb, yb in loader:
        outputs = model(xb.to(device))
        loss = loss_fn(outputs, yb.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return sum(losses) / len(losses)
'''

# One wrong answer per rule bullet of each spec, breaking that rule alone.
RULES = {
    "train_one_epoch": {
        "one step per batch, in training mode":
            PITFALLS["train_one_epoch"]["no zero_grad: gradients accumulate across batches"],
        "where the model lives":
            PITFALLS["train_one_epoch"]["moves batches to the notebook's global device instead of the model's"],
        "the mean per sample, as trained":
            PITFALLS["train_one_epoch"]["averages the batch means per batch instead of per sample"],
        "floats, not graphs": PITFALLS["train_one_epoch"][
            "adds loss tensors, total = total + loss * len(yb): a float in the end, every batch's graph kept"],
    },
    "evaluate": {
        "as the model will be used": PITFALLS["evaluate"]["no model.eval(): dropout stays on and results vary"],
        "nothing recorded, nothing left switched": PITFALLS["evaluate"]["records a graph (no torch.no_grad)"],
        "the mean per sample": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    batch_means, correct, count = [], 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            batch_means.append(loss_fn(logits, yb).item())
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return sum(batch_means) / len(batch_means), correct / count
''',
        "accuracy over class indices":
            PITFALLS["evaluate"]["labels compared in the wrong dtype: float scores from max(...)[0] against long "
                                 "labels"],
        "two Python floats": '''
def evaluate(model, loader, loss_fn):
    device = next(model.parameters()).device
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum()   # a tensor count, never turned into a number
            count += len(yb)
    return total / count, correct / count
''',
    },
    "saliency": {
        "the input gradient": '''
def saliency(model, x, target):
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            inputs = x.detach().clone().requires_grad_(True)
            score = model(inputs).gather(1, target.view(-1, 1)).mean()   # the mean, not the sum
            (grad,) = torch.autograd.grad(score, inputs)
    finally:
        model.train(was_training)
    return grad
''',
        "eval mode, gradients on":
            PLAUSIBLE["saliency"]["no torch.enable_grad(): fails when the caller runs it inside torch.no_grad()"],
        "leaves no trace": PITFALLS["saliency"][
            "backward(), then model.zero_grad(): wipes the gradients the caller was accumulating"],
    },
}
