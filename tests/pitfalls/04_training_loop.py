"""Wrong answers for lesson 04: one per pitfall the curriculum lists, and a few more (exercise -> pitfall -> answer).

PITFALLS fail a visible check with their message; HIDDEN_ONLY pass every visible check and fail a hidden one.
"""

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
