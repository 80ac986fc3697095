"""Wrong answers for lesson 09_debugging_training: each embodies one listed pitfall.

Keyed exercise -> pitfall -> answer cell. PLAUSIBLE are mistakes the spec does not list (the hidden checks reject
them), RIGHT_ANSWERS correct answers written differently, FORGERIES wrong answers that forge their evidence.
"""
from coursekit import FORGED_OBSERVE

# The solution's find_nan_source, with its parts swappable: each wrong answer below changes one of them.
NAN_TOOL = '''
def find_nan_source(model, batch, loss_fn):
    xb, yb = batch
    trouble = []

    def bad(tensors):
        return any(t is not None and not bool(FINITE(t).all()) for t in tensors)

    def fwd(name):
        return lambda m, a, out: trouble.append(name) if bad(out if isinstance(out, tuple) else (out,)) else None

    def bwd(name):
        return lambda m, gin, gout: trouble.append(name) if bad(GRAD_SEEN) else None

    def par(name):
        return lambda g: trouble.append(name) if bad((g,)) else None

    old = SAVE
    CLEAR
    handles = []
    try:
        for name, module in model.named_modules():
            handles.append(module.register_forward_hook(fwd(name)))
            handles.append(module.register_full_backward_hook(bwd(name)))
            if PARAMS:
                handles += [p.register_hook(par(name)) for p in module.parameters(recurse=False) if p.requires_grad]
        output = model(xb)
        if trouble:
            return trouble[PICK]
        if LOSS_CASE:
            output.register_hook(lambda g: trouble.append("loss") if bad((g,)) else None)
        loss = loss_fn(output, yb)
        if LOSS_CASE and bad((loss,)):
            return "loss"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss.backward()
        return trouble[PICK] if trouble else NONE
    finally:
        if REMOVE:
            for handle in handles:
                handle.remove()
        RESTORE
'''
NAN_PARTS = dict(FINITE="torch.isfinite", GRAD_SEEN="gin", SAVE="[p.grad for p in model.parameters()]",
                 CLEAR="for p in model.parameters():\n        p.grad = None", PARAMS="True", PICK="0",
                 LOSS_CASE="True", NONE="None", REMOVE="True",
                 RESTORE="for p, g in zip(model.parameters(), old):\n            p.grad = g")


def nan_tool(**changes):
    source = NAN_TOOL
    for key, value in {**NAN_PARTS, **changes}.items():
        source = source.replace(key, value)
    return source


# The solution's diagnose_run, with its parts swappable.
DIAGNOSE = '''
def diagnose_run(model, batch, num_classes, steps, lr):
    xb, yb = batch
    net = COPY
    EVAL
    with torch.no_grad():
        first = nn.functional.cross_entropy(net(xb), yb).item()
    if FIRST_CHECK:
        return "non-finite"
    net.train()
    optimizer = OPTIMIZER
    for _ in range(steps):
        CLEAR
        loss = nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        if LOOP_CHECK:
            return "non-finite"
        optimizer.step()
    ORDER
    return "ok"
'''
DIAGNOSE_PARTS = dict(
    COPY="copy.deepcopy(model)", EVAL="net.eval()", FIRST_CHECK="not math.isfinite(first)",
    OPTIMIZER="torch.optim.Adam(net.parameters(), lr=lr)", CLEAR="optimizer.zero_grad()",
    LOOP_CHECK="not torch.isfinite(loss) or not all(bool(torch.isfinite(g).all()) for g in grads)",
    ORDER=("if FAR:\n        return \"initial loss\"\n    if loss.item() > 0.1:\n        return \"cannot fit\""),
    FAR="abs(first - math.log(num_classes)) > 0.5")


def diagnose(**changes):
    parts = {**DIAGNOSE_PARTS, **changes}
    source = DIAGNOSE.replace("ORDER", parts.pop("ORDER"))
    for key, value in parts.items():
        source = source.replace(key, value)
    return source


PITFALLS = {
    "find_nan_source": {
        "names the outermost module: the last forward hook to fire": nan_tool(PICK="-1"),
        "torch.isnan: misses an infinity": nan_tool(FINITE="(lambda t: ~torch.isnan(t))"),
        "tests grad_output, so it names the module that received the NaN": nan_tool(GRAD_SEEN="gout"),
        "no 'loss' case: blames the last module for the loss's NaN": nan_tool(LOSS_CASE="False"),
        "returns '' when nothing is non-finite": nan_tool(NONE='""'),
        "leaves its hooks on the model": nan_tool(REMOVE="False"),
        "keeps references to .grad, which backward adds into in place": nan_tool(CLEAR="pass"),
    },
    "diagnose_run": {
        "compares with log10(C) instead of ln C": diagnose(FAR="abs(first - math.log10(num_classes)) > 0.5"),
        "compares with 1/C instead of -log(1/C)": diagnose(FAR="abs(first - 1 / num_classes) > 0.5"),
        "one-sided: accepts a first loss far below ln C": diagnose(FAR="first - math.log(num_classes) > 0.5"),
        "first loss in training mode, dropout on": diagnose(EVAL="net.train()"),
        "forgets zero_grad in the fit": diagnose(CLEAR="pass"),
        "never tests for NaN: every comparison with NaN is False": diagnose(FIRST_CHECK="False",
                                                                           LOOP_CHECK="False"),
        "tests the loss but not the gradients": diagnose(LOOP_CHECK="not torch.isfinite(loss)"),
        "trains the caller's model": diagnose(COPY="model"),
        "returns 'initial loss' before the fit has looked for NaN": diagnose().replace(
            "    net.train()\n", "    if abs(first - math.log(num_classes)) > 0.5:\n        return \"initial loss\"\n"
            "    net.train()\n"),
    },
}

# Wrong answers that pass every visible check and fail only the hidden ones (edge cases the hidden tests add).
HIDDEN_ONLY = {
    "diagnose_run": {
        "hard-codes ln 4, the baseline of the visible checks' four classes":
            diagnose(FAR="abs(first - math.log(4)) > 0.5"),
    },
}

PLAUSIBLE = {
    "find_nan_source": {
        "watches module inputs' gradients only, not parameters'": nan_tool(PARAMS="False"),
        "removes its hooks only when the forward pass succeeds": nan_tool(REMOVE="succeeded").replace(
            "    handles = []\n", "    handles = []\n    succeeded = False\n").replace(
            "        output = model(xb)\n", "        output = model(xb)\n        succeeded = True\n"),
        "names the node anomaly mode reports, not the module": """
def find_nan_source(model, batch, loss_fn):
    xb, yb = batch
    old = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly():
                loss_fn(model(xb), yb).backward()
    except RuntimeError as err:
        found = re.search(r"Function '(\\w+)' returned nan values", str(err))
        if found is None:
            raise
        return found.group(1)
    finally:
        for p, g in zip(model.parameters(), old):
            p.grad = g
    return None
""",
    },
    "diagnose_run": {
        "checks 'cannot fit' before 'initial loss'": diagnose(ORDER=(
            "if loss.item() > 0.1:\n        return \"cannot fit\"\n    if FAR:\n        return \"initial loss\"")),
        "SGD at lr instead of Adam": diagnose(OPTIMIZER="torch.optim.SGD(net.parameters(), lr=lr)"),
        "measures on the caller's model, then copies it: left in training mode": diagnose(COPY="model").replace(
            "    net.train()\n", "    net.train()\n    net = copy.deepcopy(model)\n"),
    },
}

RIGHT_ANSWERS = {
    "find_nan_source": {
        "torch.autograd.grad instead of backward, pre-hooks on inputs, prints to stderr": """
import sys


def find_nan_source(model, batch, loss_fn):
    xb, yb = batch
    order = []
    finite = lambda t: t is None or bool(torch.isfinite(t).all())
    hooks = []
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        for name, m in model.named_modules():
            hooks.append(m.register_forward_hook(
                lambda m, a, o, name=name: order.append(name) if not finite(o) else None))
            hooks.append(m.register_full_backward_hook(
                lambda m, gi, go, name=name: order.append(name) if not all(finite(g) for g in gi) else None))
            for p in m.parameters(recurse=False):
                if p.requires_grad:
                    hooks.append(p.register_hook(lambda g, name=name: order.append(name) if not finite(g) else None))
        out = model(xb)
        if order:
            return order[0]
        loss = loss_fn(out, yb)
        if not finite(loss):
            return "loss"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grad_out, = torch.autograd.grad(loss, [out], retain_graph=True)
            if not finite(grad_out):
                return "loss"
            torch.autograd.grad(loss, params, allow_unused=True)
        print("trouble at", order[:1], file=sys.stderr)
        return order[0] if order else None
    finally:
        for h in hooks:
            h.remove()
""",
    },
    "diagnose_run": {
        "trains the caller's model and puts back its state, grads and mode; loss after the loop; prints": """
import sys


def diagnose_run(model, batch, num_classes, steps, lr):
    xb, yb = batch
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad for p in model.parameters()]
    mode = model.training
    try:
        model.eval()
        with torch.no_grad():
            first = nn.functional.cross_entropy(model(xb), yb).item()
        verdict = None if math.isfinite(first) else "non-finite"
        model.train()
        for p in model.parameters():
            p.grad = None
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        for step in range(steps if verdict is None else 0):
            opt.zero_grad(set_to_none=False)
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            if not math.isfinite(loss.item()) or any(not torch.isfinite(p.grad).all() for p in model.parameters()
                                                     if p.grad is not None):
                verdict = "non-finite"
                break
            opt.step()
        if verdict is None:
            with torch.no_grad():
                after = nn.functional.cross_entropy(model(xb), yb).item()
            verdict = ("initial loss" if abs(first - math.log(num_classes)) > 0.5 else
                       "cannot fit" if after > 0.1 else "ok")
        print("verdict", verdict, file=sys.stderr)
        return verdict
    finally:
        model.load_state_dict(state)
        for p, g in zip(model.parameters(), grads):
            p.grad = g
        model.train(mode)
""",
    },
}

# One wrong answer per rule bullet of each spec, breaking that rule alone.
RULES = {
    "find_nan_source": {
        "forward first": PITFALLS["find_nan_source"]["names the outermost module: the last forward hook to fire"],
        "the loss": PITFALLS["find_nan_source"]["no 'loss' case: blames the last module for the loss's NaN"],
        "then backward": PITFALLS["find_nan_source"]["tests grad_output, so it names the module that received the NaN"],
        "`None`": PITFALLS["find_nan_source"]["returns '' when nothing is non-finite"],
        "leave no trace": PITFALLS["find_nan_source"]["leaves its hooks on the model"],
    },
    "diagnose_run": {
        '`"non-finite"`': PITFALLS["diagnose_run"]["never tests for NaN: every comparison with NaN is False"],
        '`"initial loss"`': PITFALLS["diagnose_run"]["one-sided: accepts a first loss far below ln C"],
        '`"cannot fit"`': PITFALLS["diagnose_run"]["forgets zero_grad in the fit"],
        '`"ok"`': diagnose().replace('    return "ok"\n', '    return "fine"\n'),
        "the caller's model untouched": PITFALLS["diagnose_run"]["trains the caller's model"],
    },
}

# Wrong answers that forge their evidence. count_hooks is the kernel package's, so a forger can patch it: the hidden
# test counts the hooks itself.
FORGERIES = {
    "find_nan_source": {
        "leaves its hooks on the model; debugging_checks.count_hooks patched to answer 0": """
from autograder.kernel.lessons import debugging_checks as _dc

_dc.count_hooks = lambda model: 0
""" + PITFALLS["find_nan_source"]["leaves its hooks on the model"],
        "names the outermost module; observe patched so that booleans come out True":
            FORGED_OBSERVE + PITFALLS["find_nan_source"]["names the outermost module: the last forward hook to fire"],
    },
    "diagnose_run": {
        "compares with log10(C); observe patched so that booleans come out True":
            FORGED_OBSERVE + PITFALLS["diagnose_run"]["compares with log10(C) instead of ln C"],
    },
}
