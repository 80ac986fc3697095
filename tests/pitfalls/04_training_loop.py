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
    "fit": {
        "evaluates on the training loader": '''
def fit(model, train_loader, val_loader, epochs, optimizer, loss_fn):
    history = {"train_loss": [], "val_loss": [], "val_acc": []}
    for _ in range(epochs):
        history["train_loss"].append(train_one_epoch(model, train_loader, loss_fn, optimizer))
        val_loss, val_acc = evaluate(model, train_loader, loss_fn)
        history["val_loss"].append(val_loss)
        history["val_acc"].append(val_acc)
    return history
''',
        "keeps only the last epoch's values": '''
def fit(model, train_loader, val_loader, epochs, optimizer, loss_fn):
    for _ in range(epochs):
        train_loss = train_one_epoch(model, train_loader, loss_fn, optimizer)
        val_loss, val_acc = evaluate(model, val_loader, loss_fn)
    return {"train_loss": [train_loss], "val_loss": [val_loss], "val_acc": [val_acc]}
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
    "fit": {
        "evaluates on the training loader; rewrites the stand-ins' record of the loaders they got": '''
def fit(model, train_loader, val_loader, epochs, optimizer, loss_fn):
    history = {"train_loss": [], "val_loss": [], "val_acc": []}
    for _ in range(epochs):
        history["train_loss"].append(train_one_epoch(model, train_loader, loss_fn, optimizer))
        val_loss, val_acc = evaluate(model, train_loader, loss_fn)
        history["val_loss"].append(val_loss)
        history["val_acc"].append(val_acc)
    spy = getattr(evaluate, "__self__", None)
    if isinstance(getattr(spy, "calls", None), list):
        spy.calls[:] = [(name, "train_loader" if name == "train_one_epoch" else "val_loader", same)
                        for name, _, same in spy.calls]
    return history
''',
    },
}
