"""Wrong answers for lesson 08_mixed_precision: each embodies one pitfall (exercise -> pitfall -> answer cell).

The curriculum lists the pitfalls of the scaler (backward on the unscaled loss, optimizer.step() instead of
scaler.step(optimizer), no scaler.update()): in the sixth edition they belong to scaled_update, the end of a
mixed-precision step (the loop around it is lesson 04's), which the student repairs from the lesson's
scaled_update_draft (DRAFT below, the lesson's cell word for word but for the name: tests/unit/test_amp.py); the
curriculum's "forward pass outside autocast" is autocast_output_dtypes' "runs the model outside autocast".
param_memory_bytes became an ungraded warm-up.
"""

# The lesson's scaled_update_draft, handed over: it clips the scaled gradients, steps the optimizer through an
# overflow, and reports a step after which the scale grew as skipped. Right with a disabled scaler.
DRAFT = '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    scale = scaler.get_scale()
    scaler.scale(loss).backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if max_norm is not None:
        nn.utils.clip_grad_norm_(params, max_norm)
    scaler.unscale_(optimizer)
    optimizer.step()
    scaler.update()
    return scaler.get_scale() == scale
'''


PITFALLS = {
    "scaled_update": {
        "the draft as handed over (three lines wrong)": DRAFT,
        "the draft with its result fixed, still clipping the scaled gradients and stepping through overflows":
            DRAFT.replace("return scaler.get_scale() == scale", "return scaler.get_scale() >= scale"),
        "backward on the unscaled loss": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    loss.backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], max_norm)
    scaler.step(optimizer)
    scaler.update()
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
        "optimizer.step() instead of scaler.step(optimizer)": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], max_norm)
    optimizer.step()
    scaler.update()
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
        "no scaler.update()": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], max_norm)
    scaler.step(optimizer)
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
        "clips before scaler.unscale_ (max_norm meets scaled gradients)": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    scaler.scale(loss).backward()
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], max_norm)
    scaler.step(optimizer)
    scaler.update()
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
        "always returns True (a skipped step reported as taken)": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], max_norm)
    scaler.step(optimizer)
    scaler.update()
    return True
''',
    },
    "autocast_output_dtypes": {
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
        "one name for every entry: the recorder reads the loop's variable after the loop has ended": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = []
    for name, module in model.named_modules():
        if name:
            def record(mod, inputs, output):
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
        "direct children only (named_children): nested modules are missing": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = []
    for name, module in model.named_children():
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
}

# Wrong answers that pass every visible check and fail only the hidden ones (other inputs).
HIDDEN_ONLY = {
    "scaled_update": {
        "clips the first parameter group only (the visible checks' optimizers have one)": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    scale = scaler.get_scale()
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(optimizer.param_groups[0]["params"], max_norm)
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale() >= scale
''',
    },
    "autocast_output_dtypes": {
        "records leaf modules only: a container whose output is a tensor gets no entry": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = []
    for name, module in model.named_modules():
        if name and not list(module.children()):
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
    },
}

# Mistakes students make that the spec's pitfall list does not name; the hidden checks reject each on values.
PLAUSIBLE = {
    "scaled_update": {
        "the draft with its clip and its step fixed, its result still 'the scale did not change'":
            DRAFT.replace("""    params = [p for group in optimizer.param_groups for p in group["params"]]
    if max_norm is not None:
        nn.utils.clip_grad_norm_(params, max_norm)
    scaler.unscale_(optimizer)
    optimizer.step()""", """    params = [p for group in optimizer.param_groups for p in group["params"]]
    scaler.unscale_(optimizer)
    if max_norm is not None:
        nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(optimizer)"""),
        "unscale_ then optimizer.step(): a finite step is right, an overflowing one writes inf into the weights": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    params = [p for g in optimizer.param_groups for p in g["params"]]
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    finite = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in params)
    optimizer.step()
    scaler.update()
    return finite
''',
        "ignores max_norm (no clipping)": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
        "unscale_ twice when clipping (before the clip and again by hand): the update is divided by S twice": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        params = [p for g in optimizer.param_groups for p in g["params"]]
        with torch.no_grad():
            for p in params:
                p.grad /= scaler.get_scale()
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(optimizer)
    scaler.update()
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
    },
    "autocast_output_dtypes": {
        "switches the model to eval() for the inspection and leaves it there": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    handles = []
    for name, module in model.named_modules():
        if name:
            def record(mod, inputs, output, name=name):
                if torch.is_tensor(output):
                    found[name] = output.dtype
            handles.append(module.register_forward_hook(record))
    model.eval()
    try:
        with torch.autocast(device_type=device_type, dtype=dtype), torch.no_grad():
            model(x)
    finally:
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
}

# Correct answers written differently: they keep full marks.
RIGHT_ANSWERS = {
    "scaled_update": {
        "unscale_ always, a skip told by the unscaled gradients (all finite?), inf checked before clipping": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    finite = all(bool(torch.isfinite(p.grad).all()) for p in params)
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(optimizer)
    scaler.update()
    return finite or not scaler.is_enabled()
''',
        "unscale_ always, a skip seen in the parameters (did any move?), clip via parameters(); prints to stderr": '''
import sys


def scaled_update(loss, optimizer, scaler, max_norm=None):
    params = [p for g in optimizer.param_groups for p in g["params"]]
    before = [p.detach().clone() for p in params]
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    if max_norm:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(optimizer)
    scaler.update()
    moved = any(not torch.equal(b, p) for b, p in zip(before, params))
    print(f"stepped: {moved}", file=sys.stderr)
    return moved
''',
    },
    "autocast_output_dtypes": {
        "one global forward hook that looks each module's name up (no hook on any module)": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    names = {module: name for name, module in model.named_modules() if name}
    found = {}

    def record(module, inputs, output):
        if module in names and isinstance(output, torch.Tensor):
            found[names[module]] = output.dtype

    handle = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        with torch.autocast(device_type, dtype=dtype):
            model(x)
    finally:
        handle.remove()
    return found
''',
        "no hooks: each submodule's forward wrapped on the instance, the wrappers deleted afterwards": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found, wrapped = {}, []
    try:
        for name, module in model.named_modules():
            if not name:
                continue

            def spy(*args, _name=name, _forward=module.forward, **kwargs):
                out = _forward(*args, **kwargs)
                if torch.is_tensor(out):
                    found[_name] = out.dtype
                return out

            module.forward = spy
            wrapped.append(module)
        with torch.autocast(device_type, dtype=dtype), torch.no_grad():
            model(x)
    finally:
        for module in wrapped:
            del module.forward
    return found
''',
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
}

# Wrong answers that also forge the evidence; each runs in a kernel of its own.
FORGERIES = {
    "scaled_update": {
        "unscale_ then optimizer.step() (steps through an overflow); writes 'step' into the spy's record": '''
def scaled_update(loss, optimizer, scaler, max_norm=None):
    before = scaler.get_scale()
    scaler.scale(loss).backward()
    real = getattr(scaler, "scaler", scaler)
    real.unscale_(optimizer)
    optimizer.step()
    if hasattr(scaler, "calls"):
        scaler.calls.append("step")
    scaler.update()
    return not scaler.is_enabled() or scaler.get_scale() >= before
''',
    },
    "autocast_output_dtypes": {
        "forgets to remove the hooks; rebinds left_attached to report nothing": '''
def autocast_output_dtypes(model, x, device_type, dtype):
    found = {}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda mod, inputs, output, name=name: found.__setitem__(name, output.dtype)
                                         if torch.is_tensor(output) else None)
    with torch.autocast(device_type=device_type, dtype=dtype):
        model(x)
    return found


left_attached = lambda model: []
''',
    },
}

# scaled_update returns the bool that is observed: for "says whether it stepped" nothing but the answer differs.
BOOLEAN_RESULTS = {"scaled_update"}

# One wrong answer per rule of each spec's rules list: it breaks that rule alone, and loses the exercise's points.
RULES = {
    "autocast_output_dtypes": {
        "every submodule with a tensor output": PITFALLS["autocast_output_dtypes"][
            "direct children only (named_children): nested modules are missing"],
        "its output's dtype, under the autocast asked for":
            PITFALLS["autocast_output_dtypes"]["runs the model outside autocast"],
        "a new dict each call": PLAUSIBLE["autocast_output_dtypes"]["a mutable default dict shared between calls"],
        "leaves no trace": PITFALLS["autocast_output_dtypes"]["forgets to remove the hooks"],
    },
    "scaled_update": {
        "the true update": PITFALLS["scaled_update"]["clips before scaler.unscale_ (max_norm meets scaled gradients)"],
        "small gradients survive": PITFALLS["scaled_update"]["backward on the unscaled loss"],
        "an overflow is skipped": PLAUSIBLE["scaled_update"][
            "unscale_ then optimizer.step(): a finite step is right, an overflowing one writes inf into the weights"],
        "the scale adapts": PITFALLS["scaled_update"]["no scaler.update()"],
        "says whether it stepped": PITFALLS["scaled_update"]["always returns True (a skipped step reported as taken)"],
    },
}
