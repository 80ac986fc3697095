"""Wrong answers for lesson 08_mixed_precision: each embodies one pitfall (exercise -> pitfall -> answer cell).

The curriculum lists the pitfalls of amp_train_step; those of autocast_output_dtypes come from
the issue; those of param_memory_bytes and max_params_that_fit are the lesson's own.
"""

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
