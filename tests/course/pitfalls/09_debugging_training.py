"""Wrong answers for lesson 09_debugging_training: each embodies one listed pitfall.

Keyed exercise -> pitfall -> answer cell. PLAUSIBLE are mistakes the spec does not list (the hidden checks reject
them), RIGHT_ANSWERS correct answers written differently, FORGERIES wrong answers that forge their evidence.
"""
from coursekit import FORGED_OBSERVE

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
    "initial_loss_check": {
        "hard-codes ln 4, the baseline of the lesson's four classes (the visible checks use four classes)": '''
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            loss = nn.functional.cross_entropy(model(xb), yb).item()
    finally:
        model.train(was_training)
    return abs(loss - math.log(4)) <= tol
''',
    },
}

PLAUSIBLE = {
    "initial_loss_check": {
        "nll_loss on the raw logits (no log_softmax)": """
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.nll_loss(model(xb), yb).item()
    model.train(was_training)
    return abs(loss - math.log(num_classes)) <= tol
""",
        "a relative tolerance, abs(loss / ln C - 1) <= tol": """
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train(was_training)
    return abs(loss / math.log(num_classes) - 1) <= tol
""",
        "always calls model.train() afterwards, whatever mode the model came in": """
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train()
    return abs(loss - math.log(num_classes)) <= tol
""",
        "the summed loss (reduction='sum') instead of the mean": """
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb, reduction="sum").item()
    model.train(was_training)
    return abs(loss - math.log(num_classes)) <= tol
""",
    },
    "overfit_one_batch": {
        "AdamW, whose default weight decay is 0.01": """
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss.item()
""",
        "zero_grad after the step, so gradients the model arrived with reach the first step": """
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()
""",
        "returns the mean loss over all steps": """
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)
""",
        "puts the model back in the mode it arrived in": """
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    was_training = model.training
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    model.train(was_training)
    return loss.item()
""",
    },
    "find_nan_source": {
        "set_detect_anomaly(False) only on the path without a NaN": """
def find_nan_source(fn):
    torch.autograd.set_detect_anomaly(True)
    try:
        fn().backward()
    except RuntimeError as err:
        found = re.search(r"Function '(\\w+)' returned nan values", str(err))
        if found is None:
            raise
        return found.group(1)
    torch.autograd.set_detect_anomaly(False)
    return ""
""",
        "takes the first quoted part of any RuntimeError": """
def find_nan_source(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autograd.detect_anomaly():
                fn().backward()
        except RuntimeError as err:
            parts = str(err).split("'")
            if len(parts) < 3:
                raise
            return parts[1]
    return ""
""",
        "answers 'forward' when the loss is already NaN, without running backward": """
def find_nan_source(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autograd.detect_anomaly():
                loss = fn()
                if torch.isnan(loss).any():
                    return "forward"
                loss.backward()
        except RuntimeError as err:
            found = re.search(r"Function '(\\w+)' returned nan values", str(err))
            if found is None:
                raise
            return found.group(1)
    return ""
""",
    },
}

RIGHT_ANSWERS = {
    "initial_loss_check": {
        "inference_mode, log_softmax and gather in float64, prints to stdout and stderr": """
import sys


def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    mode = model.training
    model.train(False)
    try:
        with torch.inference_mode():
            logp = model(xb).double().log_softmax(dim=1)
            loss = -logp.gather(1, yb[:, None]).mean().item()
    finally:
        model.train(mode)
    print(f"initial loss {loss:.4f}, ln C {math.log(num_classes):.4f}")
    print("checked in eval mode", file=sys.stderr)
    return bool(math.log(num_classes) - tol <= loss <= math.log(num_classes) + tol)
""",
    },
    "overfit_one_batch": {
        "model.zero_grad(), float(loss), prints to stdout and stderr": """
import sys


def overfit_one_batch(model, batch, loss_fn, steps, lr):
    device = next(model.parameters()).device
    xb, yb = batch[0].to(device), batch[1].to(device)
    model.train(True)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=0)
    history = []
    for step in range(steps):
        model.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        history.append(float(loss))
        optimizer.step()
    print("losses", [round(v, 3) for v in history[:3]], "...")
    print(f"{steps} steps done", file=sys.stderr)
    return history[-1]
""",
    },
    "find_nan_source": {
        "str.split on the quotes after a test for the message, prints to stderr": """
import sys


def find_nan_source(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly():
                fn().backward()
    except RuntimeError as err:
        message = str(err)
        if "returned nan values" not in message:
            raise
        print("anomaly:", message.splitlines()[0], file=sys.stderr)
        return message.split("'")[1]
    print("no NaN in backward")
    return ""
""",
    },
}

FORGERIES = {
    "initial_loss_check": {
        "dropout on (no model.eval()); rewrites what record_forward_modes saw": """
def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    for module in model.modules():
        for hook in list(module._forward_hooks.values()):
            for cell in hook.__closure__ or ():
                record = cell.cell_contents
                if isinstance(record, list):
                    record[:] = [(False, False)] * len(record)
    return abs(loss - math.log(num_classes)) <= tol
""",
        "compares with log10(C); observe patched so that booleans come out True": FORGED_OBSERVE + """

def initial_loss_check(model, batch, num_classes, tol):
    xb, yb = batch
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(xb), yb).item()
    model.train(was_training)
    return abs(loss - math.log10(num_classes)) <= tol
""",
    },
    "find_nan_source": {
        "leaves anomaly mode on; torch.is_anomaly_enabled patched to answer False": """
torch.is_anomaly_enabled = lambda: False


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
""",
        "returns the forward operation's name; observe patched so that booleans come out True": FORGED_OBSERVE + """

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
""",
    },
}

# Leaving no trace is defined and graded in lesson 04; this exercise names it and grades it no more: an answer that
# leaves the model in eval mode keeps its points.
RIGHT_ANSWERS["initial_loss_check"]["leaves the model in eval mode (no trace is lesson 04's, not graded again)"] = \
    PITFALLS["initial_loss_check"].pop("leaves the model in eval mode")
RIGHT_ANSWERS["initial_loss_check"]["always calls model.train() afterwards, whatever mode the model came in"] = \
    PLAUSIBLE["initial_loss_check"].pop("always calls model.train() afterwards, whatever mode the model came in")
# Found by trying the exercise as a student would: it passed every visible check before.
PITFALLS["overfit_one_batch"]["zero_grad after the step, so gradients the model arrived with reach the first step"] = \
    PLAUSIBLE["overfit_one_batch"].pop(
        "zero_grad after the step, so gradients the model arrived with reach the first step")

# One wrong answer per rule bullet of each spec, breaking that rule alone.
RULES = {
    "initial_loss_check": {
        "the loss": PLAUSIBLE["initial_loss_check"]["the summed loss (reduction='sum') instead of the mean"],
        "the baseline": PITFALLS["initial_loss_check"]["compares with log10(C) instead of ln C"],
        "both directions": PITFALLS["initial_loss_check"]["one-sided comparison accepts a loss far below ln C"],
        "as at evaluation": PITFALLS["initial_loss_check"]["runs the model in training mode, dropout on"],
        "no graph": PITFALLS["initial_loss_check"]["builds a graph: no torch.no_grad()"],
    },
    "overfit_one_batch": {
        "training mode": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    model.train()  # too late: every forward pass ran in the mode the model arrived in
    return loss.item()
''',
        "Adam at `lr`": PITFALLS["overfit_one_batch"]["a new Adam optimizer on every step"],
        "`steps` updates": '''
def overfit_one_batch(model, batch, loss_fn, steps, lr):
    xb, yb = batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps + 1):  # one step too many
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
    return loss.item()
''',
        "each step's own gradient": PITFALLS["overfit_one_batch"][
            "zero_grad after the step, so gradients the model arrived with reach the first step"],
        "the last step's loss": PITFALLS["overfit_one_batch"]["returns a loss computed again after the loop"],
    },
    "find_nan_source": {
        "the backward node's name": PITFALLS["find_nan_source"]["returns the forward operation's name"],
        "`\"\"` without a NaN": PITFALLS["find_nan_source"]["returns None when there is no NaN"],
        "other errors pass through": PITFALLS["find_nan_source"]["swallows errors that are not NaNs"],
        "anomaly mode off afterwards":
            PLAUSIBLE["find_nan_source"]["set_detect_anomaly(False) only on the path without a NaN"],
    },
}
