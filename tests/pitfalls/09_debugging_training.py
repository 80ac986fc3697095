"""Wrong answers for lesson 09_debugging_training: each embodies one listed pitfall.

Keyed exercise -> pitfall -> answer cell.
"""

PITFALLS = {
    "initial_loss_check": {
        "compares with log10(C) instead of ln C": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train(was_training)
    return abs(loss - math.log10(num_classes)) <= tol
''',
        "compares with 1/C instead of -log(1/C)": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train(was_training)
    return abs(loss - 1 / num_classes) <= tol
''',
        "runs the model in training mode, dropout on": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    return abs(loss - math.log(num_classes)) <= tol
''',
        "returns a tensor instead of a bool": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb)
    model.train(was_training)
    return (loss - math.log(num_classes)).abs() <= tol
''',
        "one-sided comparison accepts a loss far below ln C": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train(was_training)
    return loss - math.log(num_classes) <= tol
''',
        "leaves the model in eval mode": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    return abs(loss - math.log(num_classes)) <= tol
''',
        "builds a graph: no torch.no_grad()": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train(was_training)
    return abs(loss - math.log(num_classes)) <= tol
''',
    },
    "overfit_one_batch": {
        "forgets zero_grad": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss.item()
''',
        "returns the loss tensor": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss
''',
        "never calls model.train()": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss.item()
''',
        "a new Adam optimizer on every step": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    for _ in range(steps):
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss.item()
''',
        "returns a loss computed again after the loop": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return loss_fn(model(xb), yb).item()
''',
    },
    "grad_norm": {
        "adds the per-parameter norms": '''
def grad_norm(model):
    return float(sum(p.grad.norm().item() for p in model.parameters() if p.grad is not None))
''',
        "crashes on parameters whose grad is None": '''
def grad_norm(model):
    return torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters())).item()
''',
        "clips with a finite max_norm, which rescales the gradients": '''
def grad_norm(model):
    return nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
''',
        "returns a tensor": '''
def grad_norm(model):
    return nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
''',
    },
    "find_nan_source": {
        "returns the whole error message": '''
def find_nan_source(fn):
    try:
        with torch.autograd.detect_anomaly():
            fn().backward()
    except RuntimeError as err:
        if "returned nan values" not in str(err):
            raise
        return str(err)
    return ""
''',
        "returns the forward operation's name": '''
def find_nan_source(fn):
    try:
        with torch.autograd.detect_anomaly():
            fn().backward()
    except RuntimeError as err:
        found = re.search(r"Function '(\\w+)' returned nan values", str(err))
        if found is None:
            raise
        return found.group(1).replace("Backward0", "").lower()
    return ""
''',
        "returns None when there is no NaN": '''
def find_nan_source(fn):
    try:
        with torch.autograd.detect_anomaly():
            fn().backward()
    except RuntimeError as err:
        found = re.search(r"Function '(\\w+)' returned nan values", str(err))
        if found is None:
            raise
        return found.group(1)
    return None
''',
        "swallows errors that are not NaNs": '''
def find_nan_source(fn):
    try:
        with torch.autograd.detect_anomaly():
            fn().backward()
    except Exception as err:
        found = re.search(r"Function '(\\w+)' returned nan values", str(err))
        return found.group(1) if found else ""
    return ""
''',
        "leaves anomaly mode on": '''
def find_nan_source(fn):
    torch.autograd.set_detect_anomaly(True)
    try:
        fn().backward()
    except RuntimeError as err:
        found = re.search(r"Function '(\\w+)' returned nan values", str(err))
        if found is None:
            raise
        return found.group(1)
    return ""
''',
    },
}

# Wrong answers that pass every visible check and fail only the hidden ones (edge cases the hidden tests add).
HIDDEN_ONLY = {
    "grad_norm": {
        "crashes when no parameter has a gradient (torch.stack of an empty list)": '''
def grad_norm(model):
    norms = [p.grad.norm() for p in model.parameters() if p.grad is not None]
    return torch.stack(norms).norm().item()
''',
    },
}
