"""Wrong answers for lesson 08_mixed_precision: each embodies one pitfall (exercise -> pitfall -> answer cell).

The curriculum lists the pitfalls of amp_train_step; those of autocast_output_dtypes come from
the issue; those of param_memory_bytes are the lesson's own (max_params_that_fit became an ungraded
warm-up in the fifth edition).
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
        "unscale_ then optimizer.step(): a finite step is right, an overflowing one writes inf into the weights": '''
def amp_train_step(model, xb, yb, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    optimizer.step()
    scaler.update()
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
        "this batch only": PITFALLS["amp_train_step"]["no zero_grad (gradients accumulate)"],
        "under autocast": PITFALLS["amp_train_step"]["the forward pass outside autocast"],
        "the autocast asked for":
            PLAUSIBLE["amp_train_step"]["dtype hard-coded to float16 (the dtype argument ignored)"],
        "scaled gradients": PITFALLS["amp_train_step"]["backward on the unscaled loss"],
        "a finite step is a float32 step": PLAUSIBLE["amp_train_step"][
            "clips the gradients before scaler.unscale_ (the threshold meets scaled gradients)"],
        "an overflow changes nothing": PLAUSIBLE["amp_train_step"][
            "unscale_ then optimizer.step(): a finite step is right, an overflowing one writes inf into the weights"],
        "the scale adapts": PITFALLS["amp_train_step"]["no scaler.update()"],
        "the batch's loss": PITFALLS["amp_train_step"]["returns the scaled loss"],
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
    },
}
