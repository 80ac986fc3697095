"""Wrong answers for lesson 05, one per pitfall the curriculum lists (exercise -> pitfall -> answer cell).

Exercise 1's answer cell defines two functions, save_checkpoint and load_checkpoint; an entry that defines only
one of them keeps the solution's other one (the kernel holds the solution's cell when each entry runs).
"""
from coursekit import FORGED_OBSERVE

INHERITED = '''
def save_checkpoint(path, model, optimizer, epoch):
    with torch.no_grad():
        weights = [p.clone() for p in model.parameters()]
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
    "adapt_state_dict": {
        "strips 'module.' only: a compiled model's '_orig_mod.' stays": '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {key.removeprefix("module."): value for key, value in state_dict.items()}
    problems = [f"missing key {key}" for key in expected if key not in adapted]
    problems += [f"unexpected key {key}" for key in adapted if key not in expected]
    problems += [f"shape mismatch for {key}" for key, value in adapted.items()
                 if key in expected and value.shape != expected[key].shape]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        'strips one wrapper prefix, not nested ones': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {}
    for key, value in state_dict.items():
        for prefix in ("module.", "_orig_mod."):
            if key not in expected and key.startswith(prefix):
                key = key[len(prefix):]
                break
        adapted[key] = value
    problems = [f"missing key {key}" for key in expected if key not in adapted]
    problems += [f"unexpected key {key}" for key in adapted if key not in expected]
    problems += [f"shape mismatch for {key}" for key, value in adapted.items()
                 if key in expected and value.shape != expected[key].shape]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        "strips 'module.' from every key that starts with it, the model's own submodule called 'module' included": '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {}
    for key, value in state_dict.items():
        while key.startswith(("module.", "_orig_mod.")):
            key = key.split(".", 1)[1]
        adapted[key] = value
    problems = [f"missing key {key}" for key in expected if key not in adapted]
    problems += [f"unexpected key {key}" for key in adapted if key not in expected]
    problems += [f"shape mismatch for {key}" for key, value in adapted.items()
                 if key in expected and value.shape != expected[key].shape]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        'asks a strict load on a copy, which lets a missing num_batches_tracked through': '''
import copy


def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {}
    for key, value in state_dict.items():
        while key not in expected and key.startswith(("module.", "_orig_mod.")):
            key = key.split(".", 1)[1]
        if key in adapted:
            raise ValueError(f"two entries for {key}")
        adapted[key] = value
    try:
        copy.deepcopy(model).load_state_dict(adapted)
    except RuntimeError as err:
        raise ValueError(str(err)) from None
    return adapted
''',
        'raises at the first problem it meets': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {}
    for key, value in state_dict.items():
        while key not in expected and key.startswith(("module.", "_orig_mod.")):
            key = key.split(".", 1)[1]
        if key not in expected or key in adapted:
            raise ValueError(f"unexpected key {key}")
        if value.shape != expected[key].shape:
            raise ValueError(f"shape mismatch for {key}")
        adapted[key] = value
    for key in expected:
        if key not in adapted:
            raise ValueError(f"missing key {key}")
    return adapted
''',
        'a dict comprehension: of two entries for one key, the last silently wins': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()

    def strip(key):
        while key not in expected and key.startswith(("module.", "_orig_mod.")):
            key = key.split(".", 1)[1]
        return key

    adapted = {strip(key): value for key, value in state_dict.items()}
    problems = [f"missing key {key}" for key in expected if key not in adapted]
    problems += [f"unexpected key {key}" for key in adapted if key not in expected]
    problems += [f"shape mismatch for {key}" for key, value in adapted.items()
                 if key in expected and value.shape != expected[key].shape]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        'finds the problems with a trial load into the model itself, which changes it': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {}
    for key, value in state_dict.items():
        while key not in expected and key.startswith(("module.", "_orig_mod.")):
            key = key.split(".", 1)[1]
        if key in adapted:
            raise ValueError(f"two entries for {key}")
        adapted[key] = value
    shapes = [key for key, value in adapted.items() if key in expected and value.shape != expected[key].shape]
    result = model.load_state_dict({k: v for k, v in adapted.items() if k not in shapes}, strict=False)
    problems = result.missing_keys + result.unexpected_keys + shapes
    if problems:
        raise ValueError(f"does not fit: {problems}")
    return adapted
''',
        'renames the keys of the dict it was given, in place': '''
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present


def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    for prefix in ("_orig_mod.", "module.", "_orig_mod.", "module."):
        if not set(state_dict) <= set(expected):
            consume_prefix_in_state_dict_if_present(state_dict, prefix)
    problems = [f"missing key {key}" for key in expected if key not in state_dict]
    problems += [f"unexpected key {key}" for key in state_dict if key not in expected]
    problems += [f"shape mismatch for {key}" for key, value in state_dict.items()
                 if key in expected and value.shape != expected[key].shape]
    if problems:
        raise ValueError("; ".join(problems))
    return state_dict
''',
        'refuses a float64 file, which a strict load converts': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted, problems = {}, []
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        if name not in expected:
            problems.append(f"unexpected key {key}")
        elif name in adapted:
            problems.append(f"two entries for {name}")
        else:
            adapted[name] = tensor
            if tensor.shape != expected[name].shape or tensor.dtype != expected[name].dtype:
                problems.append(f"{name} does not match")
    problems += [f"missing key {name}" for name in expected if name not in adapted]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        'names every key of the model in its message, not only those with a problem': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted, problems = {}, False
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        problems = problems or name not in expected or name in adapted or tensor.shape != expected[name].shape
        adapted[name] = tensor
    if problems or set(adapted) != set(expected):
        raise ValueError(f"the file has {sorted(state_dict)}, the model expects {sorted(expected)}")
    return adapted
''',
    },
}

HIDDEN_ONLY = {
    "adapt_state_dict": {
        'treats a non-persistent buffer as one of the keys the file must hold': '''
def adapt_state_dict(model, state_dict):
    expected = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    adapted, problems = {}, []
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        if name not in expected:
            problems.append(f"unexpected key {key}")
        elif name in adapted:
            problems.append(f"two entries for {name}")
        else:
            adapted[name] = tensor
            if tensor.shape != expected[name].shape:
                problems.append(f"shape mismatch for {name}")
    problems += [f"missing key {name}" for name in expected if name not in adapted]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
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
    "adapt_state_dict": {
        'right answer, then a trial load that changes the model; observe patched: booleans come out True':
            FORGED_OBSERVE + '''

def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted, problems = {}, []
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        if name not in expected:
            problems.append(f"unexpected key {key}")
        elif name in adapted:
            problems.append(f"two entries for {name}")
        else:
            adapted[name] = tensor
            if tensor.shape != expected[name].shape:
                problems.append(f"shape mismatch for {name}")
    problems += [f"missing key {name}" for name in expected if name not in adapted]
    if problems:
        raise ValueError("; ".join(problems))
    model.load_state_dict({k: v for k, v in adapted.items() if v.shape == expected[k].shape},
                          strict=False)
    return adapted
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
    "adapt_state_dict": {
        "raises with the missing keys only, once it has found any": '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted, problems = {}, []
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        if name not in expected:
            problems.append(f"unexpected key {key}")
        elif name in adapted:
            problems.append(f"two entries for {name}")
        else:
            adapted[name] = tensor
            if tensor.shape != expected[name].shape:
                problems.append(f"shape mismatch for {name}")
    missing = [name for name in expected if name not in adapted]
    if missing:
        raise ValueError(f"missing keys: {missing}")
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        'takes the prefixes off but never compares shapes': '''
def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted, problems = {}, []
    for key, tensor in state_dict.items():
        name = key
        while name not in expected and name.startswith(("module.", "_orig_mod.")):
            name = name.split(".", 1)[1]
        if name not in expected:
            problems.append(f"unexpected key {key}")
        elif name in adapted:
            problems.append(f"two entries for {name}")
        else:
            adapted[name] = tensor
    problems += [f"missing key {name}" for name in expected if name not in adapted]
    if problems:
        raise ValueError("; ".join(problems))
    return adapted
''',
        "lets load_state_dict's RuntimeError through instead of a ValueError": '''
import copy


def adapt_state_dict(model, state_dict):
    expected = model.state_dict()
    adapted = {}
    for key, value in state_dict.items():
        while key not in expected and key.startswith(("module.", "_orig_mod.")):
            key = key.split(".", 1)[1]
        adapted[key] = value
    copy.deepcopy(model).load_state_dict(adapted)
    return adapted
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
    "adapt_state_dict": {
        'a trial strict load on a copy, the counter and duplicates checked apart, another message; prints':
            '''import copy
import sys


def adapt_state_dict(model, state_dict):
    own = set(model.state_dict())
    renamed = {}
    clashes = []
    for key in state_dict:
        short = key
        while short not in own and (short.startswith("module.") or short.startswith("_orig_mod.")):
            short = short[short.index(".") + 1:]
        if short in renamed:
            clashes.append(short)
        renamed[short] = state_dict[key]
    errors = [f"duplicate: {k}" for k in clashes]
    errors += [f"missing buffer: {k}" for k in own - set(renamed) if k.endswith("num_batches_tracked")]
    try:
        copy.deepcopy(model).load_state_dict(renamed, strict=True)
    except RuntimeError as err:
        errors.append(str(err))
    if errors:
        raise ValueError("\\n".join(errors))
    print("adapted", len(renamed), "keys", file=sys.stderr)
    return renamed
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
    "adapt_state_dict": {
        "wrapper prefixes": PITFALLS["adapt_state_dict"]["strips one wrapper prefix, not nested ones"],
        "loads": PITFALLS["adapt_state_dict"]["refuses a float64 file, which a strict load converts"],
        "or raises, naming everything": PITFALLS["adapt_state_dict"]["raises at the first problem it meets"],
        "changes nothing": PITFALLS["adapt_state_dict"][
            "finds the problems with a trial load into the model itself, which changes it"],
    },
}
