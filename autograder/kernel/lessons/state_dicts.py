"""The visible checks of lesson 05's ``adapt_state_dict`` and the models they use.

A key is *named* in an error message when some word of the message (a run of letters, digits, ``_`` and
``.``) is that key, with or without wrapper prefixes (``module.``, ``_orig_mod.``) in front of it. Each
check builds its own models and files after a seed of its own.
"""
from __future__ import annotations

import copy
import re

import torch
from torch import nn

__all__ = ["WRAPPERS", "named_keys", "Holder", "check_adapt_state_dict"]

WRAPPERS = ("module.", "_orig_mod.")
_WORD = re.compile(r"[A-Za-z0-9_.]+")


def _forms(word: str) -> set[str]:
    """A word of a message and what remains of it as its wrapper prefixes come off, one by one."""
    word = word.strip(".")
    forms = {word}
    while word.startswith(WRAPPERS):
        word = word.split(".", 1)[1]
        forms.add(word)
    return forms


def named_keys(message: str, keys) -> list[str]:
    """The ``keys`` that ``message`` names (each with or without wrapper prefixes), sorted."""
    said: set[str] = set()
    for word in _WORD.findall(message):
        said |= _forms(word)
    return sorted(key for key in set(keys) if key in said)


class Holder(nn.Module):
    """A model whose own submodule is called ``module``: its keys start with ``module.``, put there by no wrapper."""

    def __init__(self):
        super().__init__()
        self.module = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.norm(self.module(x)))


def _net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def _snapshot(mapping) -> list:
    return [(key, value.clone() if isinstance(value, torch.Tensor) else value) for key, value in mapping.items()]


def _same(before: list, mapping) -> bool:
    after = list(mapping.items())
    return len(after) == len(before) and all(
        k1 == k2 and (torch.equal(v1, v2) if isinstance(v1, torch.Tensor) else v1 == v2)
        for (k1, v1), (k2, v2) in zip(before, after))


def _call(fn, model, state_dict, label: str):
    """``fn(model, state_dict)``, failing if it changed either. Returns ("returned", value) or ("raised", error)."""
    from autograder.kernel import checks

    model_before, given_before = _snapshot(model.state_dict()), _snapshot(state_dict)
    try:
        outcome = ("returned", fn(model, state_dict))
    except checks.CheckFailed:
        raise
    except NotImplementedError:
        checks.fail("adapt_state_dict", "is not implemented yet: replace the `raise NotImplementedError()` line "
                                        "with your code.")
    except Exception as exc:   # what it raised is judged by the caller
        outcome = ("raised", exc)
    checks.expect(_same(model_before, model.state_dict()),
                  f"adapt_state_dict(model, {label}) changed the model: it must only read it (a trial "
                  "load_state_dict into the model writes every tensor that fits).")
    checks.expect(_same(given_before, state_dict),
                  f"adapt_state_dict(model, {label}) changed the dict it was given (its keys or its tensors): build "
                  "a new dict and leave the caller's as it was.")
    return outcome


def _expect_loads(fn, model, state_dict, label: str, values: dict, why: str) -> None:
    """The result must load strictly into a copy of ``model`` and give it ``values`` (key -> tensor)."""
    from autograder.kernel import checks

    kind, result = _call(fn, model, state_dict, label)
    if kind == "raised":
        checks.fail(f"adapt_state_dict(model, {label})", f"raised {type(result).__name__}: {result}", why)
    checks.check_type(result, dict, f"adapt_state_dict(model, {label})", hint="return a new dict.")
    probe = copy.deepcopy(model)
    try:
        probe.load_state_dict(result)
    except RuntimeError as err:
        checks.fail(f"adapt_state_dict(model, {label})",
                    "returned a dict that a strict load_state_dict refuses: " + " ".join(str(err).split()), why)
    wrong = sorted(key for key, value in probe.state_dict().items()
                   if not torch.equal(value, values[key].to(value.dtype)))
    checks.expect(not wrong, f"adapt_state_dict(model, {label}): a strict load of what it returned leaves {wrong} "
                             "without the file's values.")


def _expect_raises(fn, model, state_dict, label: str, problems: list[str], why: str) -> None:
    """The call must raise a ValueError whose message names exactly the keys ``problems``."""
    from autograder.kernel import checks

    kind, result = _call(fn, model, state_dict, label)
    if kind == "returned":
        checks.fail(f"adapt_state_dict(model, {label})", "returned instead of raising a ValueError", why)
    checks.expect(isinstance(result, ValueError), f"adapt_state_dict(model, {label}) raised "
                                                  f"{type(result).__name__}: {result}; expected a ValueError. {why}")
    keys = set(model.state_dict()) | {min(_forms(key), key=len) for key in state_dict}
    named = named_keys(str(result), keys)
    checks.expect(named == sorted(problems), f"adapt_state_dict(model, {label}) raised a ValueError that names "
                                             f"{named}; it should name {sorted(problems)}, and no other key. {why}")


def check_adapt_state_dict(fn) -> None:
    """Visible checks of exercise 2: wrapped files that load, files that do not fit, nothing changed."""
    torch.manual_seed(8)
    model, source = _net(), _net()
    plain = source.state_dict()
    _expect_loads(fn, model, plain, "a state_dict of the same architecture", plain,
                  "A file with the model's own keys needs nothing done to it.")
    for prefix, wrapper in [("module.", "DistributedDataParallel"), ("_orig_mod.", "torch.compile"),
                            ("_orig_mod.module.", "torch.compile around DistributedDataParallel")]:
        _expect_loads(fn, model, {prefix + key: value for key, value in plain.items()}, f"keys under '{prefix}'",
                      plain, f"{wrapper} puts '{prefix}' before every key; the file is the model's all the same.")
    _expect_loads(fn, model, {key: value.double() if value.is_floating_point() else value
                              for key, value in plain.items()}, "every floating-point tensor in float64", plain,
                  "A strict load converts a tensor to the dtype of the one it replaces: dtypes are not a problem.")
    holder = Holder()
    own = Holder().state_dict()
    _expect_loads(fn, holder, own, "the state_dict of a model whose submodule is called 'module'", own,
                  "Here 'module.' is part of the model's own keys (its submodule is called module): a key that is "
                  "one of the model's keys stands for itself.")
    _expect_loads(fn, holder, {"module." + key: value for key, value in own.items()},
                  "the same model's state_dict under 'module.'", own,
                  "The wrapper's 'module.' comes off; the model's own 'module.' stays.")
    broken = {key: value for key, value in plain.items() if key != "3.bias"}
    broken = {"module." + key: value for key, value in broken.items()}
    broken["module.1.running_mean"] = torch.zeros(5)
    broken["module.4.weight"] = torch.zeros(2, 2)
    _expect_raises(fn, model, broken, "'3.bias' missing, '1.running_mean' of shape (5,), an extra '4.weight'",
                   ["1.running_mean", "3.bias", "4.weight"],
                   "Name every problem at once: the caller fixes them all before the next try.")
    _expect_raises(fn, model, {key: value for key, value in plain.items() if key != "1.num_batches_tracked"},
                   "a plain dict without '1.num_batches_tracked'", ["1.num_batches_tracked"],
                   "A strict load lets this one key pass and keeps the model's own counter, not the file's.")
    _expect_raises(fn, model, {**plain, "module.0.weight": plain["0.weight"] + 1}, "'0.weight' and 'module.0.weight'",
                   ["0.weight"], "Two entries stand for one key: which one the file means is not yours to guess.")
