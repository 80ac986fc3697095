"""Wrong answers for lesson 05, one per pitfall the curriculum lists (exercise -> pitfall -> answer cell).

Exercise 1's answer cell defines two functions, save_checkpoint and load_checkpoint; an entry that defines only
one of them keeps the solution's other one (the kernel holds the solution's cell when each entry runs).
"""
from coursekit import FORGED_OBSERVE

INHERITED = '''
def save_checkpoint(path, model, optimizer, epoch):
    weights = [p.detach().clone() for p in model.parameters()]
    torch.save({"weights": weights, "epoch": epoch}, path)


def load_checkpoint(path, model, optimizer):
    saved = torch.load(path, weights_only=False)
    with torch.no_grad():
        for param, value in zip(model.parameters(), saved["weights"]):
            param.copy_(value)
    return saved["epoch"]
'''

PITFALLS = {
    "save_checkpoint": {
        "the inherited pair, unchanged: parameters copied by hand, no optimizer or RNG state, weights_only=False":
            INHERITED,
        "pickles the whole model and loads it with weights_only=False": '''
def save_checkpoint(path, model, optimizer, epoch):
    torch.save({"model": model, "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state()}, path)


def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(checkpoint["model"].state_dict())
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "no optimizer state: the optimizer restarts from zero moments": '''
def save_checkpoint(path, model, optimizer, epoch):
    torch.save({"model": model.state_dict(), "epoch": epoch, "rng_state": torch.get_rng_state()}, path)

def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "no RNG state: the resumed run draws other shuffles and dropout masks": '''
def save_checkpoint(path, model, optimizer, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, path)

def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return int(checkpoint["epoch"])
''',
        "stores the initial seed and reseeds with it instead of restoring the generator's state": '''
def save_checkpoint(path, model, optimizer, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "seed": torch.initial_seed()}, path)

def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.manual_seed(checkpoint["seed"])
    return int(checkpoint["epoch"])
''',
        "saves the parameters only, so BatchNorm's buffers are lost": '''
def save_checkpoint(path, model, optimizer, epoch):
    weights = {name: p.detach() for name, p in model.named_parameters()}
    torch.save({"model": weights, "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state()}, path)

def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"], strict=False)
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "weights_only=False: runs whatever code the file names": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "falls back to weights_only=False when the safe load fails": '''
def load_checkpoint(path, model, optimizer):
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "returns the next epoch instead of the saved one": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"]) + 1
''',
        "model.load_state_dict(..., strict=False): a file that does not fit loads what matches, silently": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"], strict=False)
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "model.eval() after loading, as if for inference: the caller's mode is lost": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.eval()
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "draws a random run id after taking the generator's state: the run then goes on with other draws": '''
def save_checkpoint(path, model, optimizer, epoch):
    rng_state = torch.get_rng_state()
    run_id = int(torch.randint(0, 10**6, (1,)))
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": rng_state, "run_id": run_id}, path)
''',
    },
    "check_state_dict_compatible": {
        "does not report missing keys": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    problems = [f"unexpected key: {key}" for key in state_dict if key not in expected]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in expected and value.shape != expected[key].shape]
    return problems
''',
        "does not report unexpected keys": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in expected and value.shape != expected[key].shape]
    return problems
''',
        "does not report shape mismatches": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict if key not in expected]
    return problems
''',
        "compares with named_parameters(), so missing buffers go unreported": '''
def check_state_dict_compatible(model, state_dict):
    expected = dict(model.named_parameters())
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict
                 if key not in expected and key not in dict(model.named_buffers())]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in expected and value.shape != expected[key].shape]
    return problems
''',
        "finds missing and unexpected keys with a trial load, which changes the model": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    mismatched = [key for key, value in state_dict.items()
                  if key in expected and value.shape != expected[key].shape]
    result = model.load_state_dict({k: v for k, v in state_dict.items() if k not in mismatched}, strict=False)
    return ([f"missing key: {key}" for key in result.missing_keys]
            + [f"unexpected key: {key}" for key in result.unexpected_keys]
            + [f"shape mismatch: {key}" for key in mismatched])
''',
        "asks a strict load on a copy, which lets a missing num_batches_tracked through": '''
def check_state_dict_compatible(model, state_dict):
    import copy
    expected = model.state_dict()
    mismatched = [key for key, value in state_dict.items()
                  if key in expected and value.shape != expected[key].shape]
    result = copy.deepcopy(model).load_state_dict({k: v for k, v in state_dict.items() if k not in mismatched},
                                                  strict=False)
    return ([f"missing key: {key}" for key in result.missing_keys]
            + [f"unexpected key: {key}" for key in result.unexpected_keys]
            + [f"shape mismatch: {key}" for key in mismatched])
''',
        "checks the shapes of parameters only, not of buffers": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    params = dict(model.named_parameters())
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict if key not in expected]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in params and value.shape != params[key].shape]
    return problems
''',
    },
}

HIDDEN_ONLY = {
    "check_state_dict_compatible": {
        "expects every buffer, including non-persistent ones that state_dict() never holds": '''
def check_state_dict_compatible(model, state_dict):
    expected = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict if key not in expected]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in expected and value.shape != expected[key].shape]
    return problems
''',
    },
}

FORGERIES = {
    "save_checkpoint": {
        "weights_only=False; clears checkpoints._TRIPWIRE_LOG, then raises UnpicklingError": '''
import pickle

from autograder.kernel.lessons import checkpoints as _ckpt


def load_checkpoint(path, model, optimizer):
    fired = len(_ckpt._TRIPWIRE_LOG)
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    if len(_ckpt._TRIPWIRE_LOG) > fired:
        del _ckpt._TRIPWIRE_LOG[fired:]
        raise pickle.UnpicklingError("Weights only load failed: Unsupported global")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "weights_only=False; for a file with unsafe globals, undoes the tripwire and the RNG, then raises": '''
import pickle

from autograder.kernel.lessons import checkpoints as _ckpt


def load_checkpoint(path, model, optimizer):
    fired, rng = len(_ckpt._TRIPWIRE_LOG), torch.get_rng_state()
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    if torch.serialization.get_unsafe_globals_in_checkpoint(path):
        del _ckpt._TRIPWIRE_LOG[fired:]
        torch.set_rng_state(rng)
        raise pickle.UnpicklingError("Weights only load failed: Unsupported global")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
    },
    "check_state_dict_compatible": {
        "right problems, then a trial load that changes the model; observe patched: booleans come out True":
            FORGED_OBSERVE + '''

def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict if key not in expected]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in expected and value.shape != expected[key].shape]
    fitting = {key: value for key, value in state_dict.items()
               if key in expected and value.shape == expected[key].shape}
    model.load_state_dict(fitting, strict=False)
    return problems
''',
    },
}

# Wrong answers that the spec's pitfall lists do not name: each breaks a rule the spec states. The hidden tests
# reject them on values.
PLAUSIBLE = {
    "save_checkpoint": {
        "model.eval() before taking the state_dict, and the model is left in eval mode": '''
def save_checkpoint(path, model, optimizer, epoch):
    model.eval()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state()}, path)
''',
        "optimizer.zero_grad() before saving, to tidy up: the caller's gradients are gone": '''
def save_checkpoint(path, model, optimizer, epoch):
    optimizer.zero_grad()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state()}, path)
''',
        "catches the error of a file that does not fit and returns 0, to start from scratch": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    try:
        model.load_state_dict(checkpoint["model"])
    except RuntimeError:
        return 0
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "model.train() after loading, ready to resume: a model handed over in eval mode is switched": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.train()
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "freezes the model while saving and never unfreezes it": '''
def save_checkpoint(path, model, optimizer, epoch):
    model.requires_grad_(False)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state()}, path)
''',
    },
    "check_state_dict_compatible": {
        "compares numel() instead of shapes: a transposed weight passes": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict if key not in expected]
    problems += [f"shape mismatch: {key}" for key, value in state_dict.items()
                 if key in expected and value.numel() != expected[key].numel()]
    return problems
''',
        "reports dtype mismatches, which a strict load accepts": '''
def check_state_dict_compatible(model, state_dict):
    expected = model.state_dict()
    problems = [f"missing key: {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key: {key}" for key in state_dict if key not in expected]
    for key, value in state_dict.items():
        if key in expected and value.shape != expected[key].shape:
            problems.append(f"shape mismatch: {key}")
        elif key in expected and value.dtype != expected[key].dtype:
            problems.append(f"dtype mismatch: {key}")
    return problems
''',
        "pops every key it has checked from the state_dict it was given": '''
def check_state_dict_compatible(model, state_dict):
    problems = []
    for key, tensor in model.state_dict().items():
        if key not in state_dict:
            problems.append(f"missing key: {key}")
            continue
        if state_dict.pop(key).shape != tensor.shape:
            problems.append(f"shape mismatch: {key}")
    problems += [f"unexpected key: {key}" for key in state_dict]
    return problems
''',
    },
}

# Correct answers written differently: they keep their points.
RIGHT_ANSWERS = {
    "save_checkpoint": {
        "a tuple instead of a dict, written through an open file, save returns the path; prints": '''
import sys


def save_checkpoint(path, model, optimizer, epoch):
    with open(path, "wb") as f:
        torch.save((int(epoch), torch.random.get_rng_state(), model.state_dict(), optimizer.state_dict()), f)
    print("checkpoint written", file=sys.stderr)
    return path


def load_checkpoint(path, model, optimizer):
    with open(path, "rb") as f:
        epoch, rng, weights, moments = torch.load(f, map_location=torch.device("cpu"), weights_only=True)
    torch.random.set_rng_state(rng)
    optimizer.load_state_dict(moments)
    model.load_state_dict(weights, strict=True)
    print("resuming after epoch", epoch)
    return epoch
''',
        "checks the file for unsafe globals first and refuses it with its own error, then loads it safely": '''
def load_checkpoint(path, model, optimizer):
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    if unsafe:
        raise ValueError(f"refusing {path}: it needs {unsafe}")
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
    },
    "check_state_dict_compatible": {
        "set differences and torch.Size comparisons, sorted output in another format; prints": '''
import sys


def check_state_dict_compatible(model, state_dict):
    own = model.state_dict()
    mine, theirs = set(own), set(state_dict)
    problems = sorted("missing key: " + key for key in mine - theirs)
    problems += sorted("unexpected key: " + key for key in theirs - mine)
    problems += sorted(f"shape mismatch: {key}: {list(own[key].shape)} vs {list(state_dict[key].shape)}"
                       for key in mine & theirs if own[key].size() != state_dict[key].size())
    print(len(problems), "problems")
    print("checked", len(theirs), "keys", file=sys.stderr)
    return problems
''',
    },
}

# One wrong answer per rule bullet of each spec, breaking that rule alone.
RULES = {
    "save_checkpoint": {
        "exact resume": PITFALLS["save_checkpoint"][
            "no RNG state: the resumed run draws other shuffles and dropout masks"],
        "saving leaves no trace": PITFALLS["save_checkpoint"][
            "draws a random run id after taking the generator's state: the run then goes on with other draws"],
        "a tampered file never runs code": PITFALLS["save_checkpoint"][
            "weights_only=False: runs whatever code the file names"],
        "a file that does not fit raises": PITFALLS["save_checkpoint"][
            "model.load_state_dict(..., strict=False): a file that does not fit loads what matches, silently"],
        "the mode stays": PITFALLS["save_checkpoint"][
            "model.eval() after loading, as if for inference: the caller's mode is lost"],
    },
    "check_state_dict_compatible": {
        "missing keys": PITFALLS["check_state_dict_compatible"][
            "compares with named_parameters(), so missing buffers go unreported"],
        "unexpected keys": PITFALLS["check_state_dict_compatible"]["does not report unexpected keys"],
        "shape mismatches":
            PITFALLS["check_state_dict_compatible"]["checks the shapes of parameters only, not of buffers"],
        "nothing else, as a list":
            PLAUSIBLE["check_state_dict_compatible"]["reports dtype mismatches, which a strict load accepts"],
        "nothing changes": PITFALLS["check_state_dict_compatible"][
            "finds missing and unexpected keys with a trial load, which changes the model"],
    },
}
