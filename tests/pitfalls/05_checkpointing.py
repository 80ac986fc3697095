"""Wrong answers for lesson 05, one per pitfall the curriculum lists (exercise -> pitfall -> answer cell)."""
from coursekit import FORGED_OBSERVE

PITFALLS = {
    "save_checkpoint": {
        "pickles the whole model instead of its state_dict": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    torch.save({"model": model, "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state(), **extra}, path)
''',
        "pickles the optimizer object instead of its state_dict": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    torch.save({"model": model.state_dict(), "optimizer": optimizer, "epoch": epoch,
                "rng_state": torch.get_rng_state(), **extra}, path)
''',
        "no optimizer state": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    torch.save({"model": model.state_dict(), "epoch": epoch, "rng_state": torch.get_rng_state(), **extra}, path)
''',
        "no RNG state": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch, **extra}, path)
''',
        "stores the initial seed instead of the generator's state": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.initial_seed(), **extra}, path)
''',
        "saves the parameters only, so BatchNorm's buffers are lost": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    weights = {name: p.detach() for name, p in model.named_parameters()}
    torch.save({"model": weights, "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state(), **extra}, path)
''',
        "nests the extras under one key": '''
def save_checkpoint(path, model, optimizer, epoch, **extra):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "rng_state": torch.get_rng_state(), "extra": extra}, path)
''',
    },
    "load_checkpoint": {
        "weights_only=False: runs whatever code the file names": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "no optimizer state: the optimizer restarts from zero moments": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    torch.set_rng_state(checkpoint["rng_state"])
    return int(checkpoint["epoch"])
''',
        "no RNG state: the resumed run draws other shuffles and dropout masks": '''
def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
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
    "load_checkpoint": {
        "weights_only=False; clears checkpoints._TRIPWIRE_LOG, then raises UnpicklingError": '''
import pickle

from autograder.kernel import checkpoints as _ckpt


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

from autograder.kernel import checkpoints as _ckpt


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
