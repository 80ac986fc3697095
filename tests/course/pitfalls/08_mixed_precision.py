"""Wrong answers for lesson 08_mixed_precision: each embodies one pitfall (exercise -> pitfall -> answer cell).

The curriculum lists the pitfalls of amp_train_step; those of autocast_output_dtypes come from
the issue; those of param_memory_bytes and max_params_that_fit are the lesson's own.
"""
from coursekit import FORGED_OBSERVE

PITFALLS = {
    "amp_train_step": {
        "backward on the unscaled loss": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
        "optimizer.step() instead of scaler.step(optimizer)": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    optimizer.step()
    scaler.update()
    return loss.item()
''',
        "no scaler.update()": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss.item()
''',
        "the forward pass outside autocast": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    output = model(xb)
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(output, yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
        "returns the scaled loss": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    return scaled.item()
''',
        "no zero_grad (gradients accumulate)": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
    },
    "autocast_output_dtypes": {
        "forgets to remove the hooks": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype))
    with torch.autocast(device_type=device_type, dtype=dtype):
        model(x)
    return found
''',
        "runs the model outside autocast": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = [module.register_forward_hook(
                   lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype))
               for name, module in model.named_modules() if name]
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
        "a fixed dtype instead of the dtype argument": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = [module.register_forward_hook(
                   lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype))
               for name, module in model.named_modules() if name]
    try:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
    },
    "param_memory_bytes": {
        "sums state_dict(): buffers included, tied weight twice": '''
def param_memory_bytes(model, dtype):
    return sum(t.numel() for t in model.state_dict().values()) * dtype.itemsize
''',
        "counts a tied weight twice": '''
def param_memory_bytes(model, dtype):
    return sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False)) * dtype.itemsize
''',
        "counts only trainable parameters": '''
def param_memory_bytes(model, dtype):
    return sum(p.numel() for p in model.parameters() if p.requires_grad) * dtype.itemsize
''',
        "ignores the dtype (4 bytes each)": '''
def param_memory_bytes(model, dtype):
    return sum(p.numel() for p in model.parameters()) * 4
''',
    },
    "max_params_that_fit": {
        "ignores the margin": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return budget_bytes // dtype.itemsize
''',
        "keeps only the margin": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return int(budget_bytes * margin) // dtype.itemsize
''',
        "returns a float": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return budget_bytes * (1 - margin) / dtype.itemsize
''',
        "ignores the dtype (4 bytes each)": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return int(budget_bytes * (1 - margin)) // 4
''',
        "no ValueError for a margin outside [0, 1)": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    return int(budget_bytes * (1 - margin)) // dtype.itemsize
''',
    },
}

# Wrong answers that pass every visible check and fail only the hidden ones (other inputs).
HIDDEN_ONLY = {
    "autocast_output_dtypes": {
        "direct children only (named_children): nested modules are missing": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = [module.register_forward_hook(
                   lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype))
               for name, module in model.named_children()]
    try:
        with torch.autocast(device_type=device_type, dtype=dtype):
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
    },
    "max_params_that_fit": {
        "rounds to the nearest whole number instead of down": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return round(budget_bytes * (1 - margin) / dtype.itemsize)
''',
        "bytes per element from torch.finfo, which only knows floating-point dtypes": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return int(budget_bytes * (1 - margin)) // (torch.finfo(dtype).bits // 8)
''',
    },
}

# Mistakes students make that the spec's pitfall list does not name; the hidden checks reject each on values.
PLAUSIBLE = {
    "amp_train_step": {
        "clips the gradients before scaler.unscale_ (the threshold meets scaled gradients)": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
        "device_type hard-coded to 'cuda' (on a CPU autocast then disables itself)": '''
import warnings


def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("cuda", dtype=dtype):
            loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
        "dtype hard-coded to float16 (the dtype argument ignored)": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=torch.float16):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
        "zero_grad after the step instead of before (stale gradients enter the first step)": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    return loss.item()
''',
        "returns the loss tensor, not a Python float": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
''',
    },
    "autocast_output_dtypes": {
        "records output.dtype without checking that the output is a tensor": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = [module.register_forward_hook(
                   lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype))
               for name, module in model.named_modules() if name]
    try:
        with torch.autocast(device_type=device_type, dtype=dtype), torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
        "removes the hooks only when the forward pass succeeds (no finally)": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = []
    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_hook(
                lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype)
                if torch.is_tensor(output) else None))
    with torch.autocast(device_type=device_type, dtype=dtype):
        model(x)
    for handle in handles:
        handle.remove()
    return found
''',
        "a mutable default dict shared between calls": '''
def autocast_output_dtypes(model, x, device_type, dtype, found={}):
    handles = []
    for name, module in model.named_modules():
        if name:
            def record(mod, inputs, output, name=name):
                if torch.is_tensor(output):
                    found[name] = output.dtype
            handles.append(module.register_forward_hook(record))
    try:
        with torch.autocast(device_type=device_type, dtype=dtype):
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
        "forward pre-hooks: records the dtype of each module's input, not its output": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = []
    for name, module in model.named_modules():
        if name:
            def record(mod, args, name=name):
                if args and torch.is_tensor(args[0]):
                    found[name] = args[0].dtype
            handles.append(module.register_forward_pre_hook(record))
    try:
        with torch.autocast(device_type=device_type, dtype=dtype):
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
    },
    "param_memory_bytes": {
        "deduplicates by element count (a set of numel values), not by identity": '''
def param_memory_bytes(model, dtype):
    return sum({p.numel() for p in model.parameters()}) * dtype.itemsize
''',
        "deduplicates by data_ptr(), which is 0 for every parameter on the meta device": '''
def param_memory_bytes(model, dtype):
    sizes = {p.data_ptr(): p.numel() for p in model.parameters()}
    return sum(sizes.values()) * dtype.itemsize
''',
        "bytes per element from torch.finfo(dtype).bits / 8: a float, not an int": '''
def param_memory_bytes(model, dtype):
    return sum(p.numel() for p in model.parameters()) * torch.finfo(dtype).bits / 8
''',
        "each parameter's own element_size(), not the dtype asked for": '''
def param_memory_bytes(model, dtype):
    return sum(p.numel() * p.element_size() for p in model.parameters())
''',
    },
    "max_params_that_fit": {
        "rejects margin=0 (0 < margin instead of 0 <= margin)": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 < margin < 1:
        raise ValueError("margin must be in (0, 1)")
    return int(budget_bytes * (1 - margin)) // dtype.itemsize
''',
        "accepts margin=1 (margin <= 1 instead of margin < 1)": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if margin < 0 or margin > 1:
        raise ValueError("margin must be in [0, 1]")
    return int(budget_bytes * (1 - margin)) // dtype.itemsize
''',
        "applies the margin after dividing by the element size (rounds down twice)": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return int(budget_bytes // dtype.itemsize * (1 - margin))
''',
    },
}

# Correct answers written differently: they keep full marks.
RIGHT_ANSWERS = {
    "amp_train_step": {
        "set_to_none=False, unscale_ then a clip that never bites, float(); prints to stdout and stderr": '''
import sys


def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad(set_to_none=False)
    with torch.autocast(device_type=device_type, dtype=dtype):
        output = model(xb)
        loss = loss_fn(output, yb)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e6)
    scaler.step(optimizer)
    scaler.update()
    value = float(loss.detach())
    print(f"loss {value:.4f}")
    print(f"scale now {scaler.get_scale()}", file=sys.stderr)
    return value
''',
    },
    "autocast_output_dtypes": {
        "hooks kept in an ExitStack, autocast entered through it; prints and warns": '''
import contextlib
import sys
import warnings


def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    with contextlib.ExitStack() as stack:
        for name, module in list(model.named_modules())[1:]:
            def record(mod, inputs, output, name=name):
                if isinstance(output, torch.Tensor):
                    found[name] = output.dtype
            stack.callback(module.register_forward_hook(record).remove)
        stack.enter_context(torch.autocast(device_type, dtype=dtype))
        model(x)
    print(f"{len(found)} modules recorded")
    print("hooks removed", file=sys.stderr)
    warnings.warn("a warning from a correct answer")
    return found
''',
    },
    "param_memory_bytes": {
        "deduplicated by identity, element_size of an empty tensor; prints to stderr": '''
import sys


def param_memory_bytes(model, dtype):
    unique = {id(p): p for p in model.parameters()}
    size = torch.empty(0, dtype=dtype).element_size()
    total = sum(p.nelement() for p in unique.values()) * size
    print(f"{len(unique)} parameter tensors", file=sys.stderr)
    return int(total)
''',
    },
    "max_params_that_fit": {
        "math.floor of the division, the check written as two comparisons; prints": '''
import math
import sys


def max_params_that_fit(budget_bytes, dtype, margin=0.2):
    if margin < 0 or margin >= 1:
        raise ValueError(f"margin {margin} is outside [0, 1)")
    count = math.floor(budget_bytes * (1 - margin) / dtype.itemsize)
    print(count)
    print("computed", file=sys.stderr)
    return count
''',
    },
}

# Wrong answers that also forge the evidence; each runs in a kernel of its own.
FORGERIES = {
    "amp_train_step": {
        "forward outside autocast; rewrites watch_autocast's record; observe patched: booleans come out True":
            FORGED_OBSERVE + '''

def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    output = model(xb)
    for hook in model._forward_pre_hooks.values():
        for cell in getattr(hook, "__closure__", None) or ():
            if isinstance(cell.cell_contents, list) and cell.cell_contents:
                cell.cell_contents[-1] = (True, dtype)
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(output, yb)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
        "unscale_ then optimizer.step() (steps through an overflow); writes 'step' into the spy's record": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    real = getattr(scaler, "scaler", scaler)
    real.unscale_(optimizer)
    optimizer.step()
    if hasattr(scaler, "calls"):
        scaler.calls.append("step")
    scaler.update()
    return loss.item()
''',
    },
    "autocast_output_dtypes": {
        "forgets to remove the hooks; rebinds forward_hook_count to report none": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype)
                                         if torch.is_tensor(output) else None)
    with torch.autocast(device_type=device_type, dtype=dtype):
        model(x)
    return found


forward_hook_count = lambda model: 0
''',
    },
}

# One wrong answer per rule of each spec's rules list: it breaks that rule alone, and loses the exercise's points.
RULES = {
    "autocast_output_dtypes": {
        "every submodule, nested ones too": HIDDEN_ONLY["autocast_output_dtypes"][
            "direct children only (named_children): nested modules are missing"],
        "inside autocast": PITFALLS["autocast_output_dtypes"]["runs the model outside autocast"],
        "the `dtype` asked for": PITFALLS["autocast_output_dtypes"]["a fixed dtype instead of the dtype argument"],
        "the output's dtype": PLAUSIBLE["autocast_output_dtypes"][
            "forward pre-hooks: records the dtype of each module's input, not its output"],
        "tensor outputs only": PLAUSIBLE["autocast_output_dtypes"][
            "records output.dtype without checking that the output is a tensor"],
        "a new dict each call": PLAUSIBLE["autocast_output_dtypes"]["a mutable default dict shared between calls"],
        "no hook left": PITFALLS["autocast_output_dtypes"]["forgets to remove the hooks"],
        "also when the forward pass raises": PLAUSIBLE["autocast_output_dtypes"][
            "removes the hooks only when the forward pass succeeds (no finally)"],
    },
    "amp_train_step": {
        "gradients cleared first": PITFALLS["amp_train_step"]["no zero_grad (gradients accumulate)"],
        "forward inside autocast": PITFALLS["amp_train_step"]["the forward pass outside autocast"],
        "the autocast asked for":
            PLAUSIBLE["amp_train_step"]["dtype hard-coded to float16 (the dtype argument ignored)"],
        "backward on the scaled loss": PITFALLS["amp_train_step"]["backward on the unscaled loss"],
        "the scaler steps": PITFALLS["amp_train_step"]["optimizer.step() instead of scaler.step(optimizer)"],
        "then it updates": PITFALLS["amp_train_step"]["no scaler.update()"],
        "no clipping": PLAUSIBLE["amp_train_step"][
            "clips the gradients before scaler.unscale_ (the threshold meets scaled gradients)"],
        "the unscaled loss": PITFALLS["amp_train_step"]["returns the scaled loss"],
        "a Python `float`": PLAUSIBLE["amp_train_step"]["returns the loss tensor, not a Python float"],
    },
    "param_memory_bytes": {
        "frozen ones too": PITFALLS["param_memory_bytes"]["counts only trainable parameters"],
        "a tied weight once": PITFALLS["param_memory_bytes"]["counts a tied weight twice"],
        "no buffers": '''
def param_memory_bytes(model, dtype):
    # each Parameter once, but the buffers are added as if they were parameters
    elements = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    return elements * dtype.itemsize
''',
        "bytes of `dtype`":
            PLAUSIBLE["param_memory_bytes"]["each parameter's own element_size(), not the dtype asked for"],
        "a Python `int`": PLAUSIBLE["param_memory_bytes"][
            "bytes per element from torch.finfo(dtype).bits / 8: a float, not an int"],
    },
    "max_params_that_fit": {
        "the margin is kept free": PITFALLS["max_params_that_fit"]["ignores the margin"],
        "default `margin=0.2`": '''
def max_params_that_fit(budget_bytes, dtype, margin=0.1):
    if not 0 <= margin < 1:
        raise ValueError("margin must be in [0, 1)")
    return int(budget_bytes * (1 - margin)) // dtype.itemsize
''',
        "bytes of `dtype`": PITFALLS["max_params_that_fit"]["ignores the dtype (4 bytes each)"],
        "round down": HIDDEN_ONLY["max_params_that_fit"]["rounds to the nearest whole number instead of down"],
        "`margin=0` is allowed":
            PLAUSIBLE["max_params_that_fit"]["rejects margin=0 (0 < margin instead of 0 <= margin)"],
        "`ValueError` outside `[0, 1)`": PITFALLS["max_params_that_fit"]["no ValueError for a margin outside [0, 1)"],
        "a Python `int`": PITFALLS["max_params_that_fit"]["returns a float"],
    },
}
