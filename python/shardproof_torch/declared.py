"""What a run declares, checked when the Recorder starts, so that a recording the judge cannot judge is refused
by name at the first step instead of being FAILed as the user's bug (docs/judge.md §6, "refused up front").

Checked here: the hyper-parameters (finite, in range, the no-decay names are the model's), the learning-rate
schedule when it is declared as data (schedule.py), the strategy's name against its grid (the same vocabulary
as the judge's, src/judge/records.cc), the gradient divisor (an integer), the step count, the optimizer (AdamW in
one of the two CPU arithmetics the engine reproduces bit for bit, kernels/adamw.h), the model's parameters
(fp32 on the CPU, no bias the config lacks). Not the recording itself (recorder.py).
"""
import math
import re

import torch

from . import schedule

MAX_STEPS = 1 << 30
# A token of a strategy's name (split on - _ + . / and spaces) and what it says the run is: a grid axis that must
# be > 1, a ZeRO stage, or one process. The judge reads the same table (src/judge/records.cc, strategy_name_rule).
NAME_TOKENS = {
    "single": ("world", 1), "ddp": ("dp", None), "dp": ("dp", None), "tp": ("tp", None), "megatron": ("tp", None),
    "pp": ("pp", None), "pipeline": ("pp", None), "gpipe": ("pp", None), "1f1b": ("pp", None),
    "zero1": ("zero", 1), "zero2": ("zero", 2), "zero3": ("zero", 3), "full": ("zero", 3),
    # FSDP shards the parameters (ZeRO-3) or keeps them gathered after forward (reshard_after_forward=False: ZeRO-2)
    "fsdp": ("sharded", 2), "fsdp2": ("sharded", 2), "hsdp": ("sharded", 2),
}


class Refused(ValueError):
    """A run the judge could not judge: raised by the Recorder naming the declaration, the tensor or the call."""


def strategy_name_problem(name, dp, tp, pp, zero):
    """None, or what is wrong with a strategy's name given its grid ("fsdp" on a run that declares ZeRO 0)."""
    if not isinstance(name, str) or not name.strip():
        return f"strategy name {name!r} must be a non-empty string"
    world = dp * tp * pp
    for token in re.split(r"[-_+./ ]+", name.lower()):
        rule = NAME_TOKENS.get(token)
        if rule is None:
            continue
        what, value = rule
        if what == "world" and world != 1:
            return f"strategy name {name!r} says '{token}' (one process), but the grid has {world} ranks"
        if what in ("dp", "tp", "pp") and {"dp": dp, "tp": tp, "pp": pp}[what] < 2:
            return f"strategy name {name!r} says '{token}', but the grid declares {what} = 1"
        if what == "zero" and zero != value:
            return (f"strategy name {name!r} says '{token}' (ZeRO stage {value}), but the strategy declares "
                    f"zero = {zero}")
        if what == "sharded" and zero < 2:
            return (f"strategy name {name!r} says '{token}' (ZeRO stage 2 or 3), but the strategy declares "
                    f"zero = {zero}")
    return None


def check_strategy(strategy):
    problem = strategy_name_problem(strategy.get("name"), strategy["dp"], strategy["tp"], strategy["pp"],
                                    int(strategy.get("zero", 0)))
    if problem:
        raise Refused(problem + ": name the strategy the run uses (docs/formats/torch_recording.md §strategy names)")


def check_integers(steps, gradient_divisor, checksum_every, every_step):
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise Refused(f"steps = {steps!r}: an integer in [1, 2^30]")
    if isinstance(gradient_divisor, bool) or not isinstance(gradient_divisor, int) or gradient_divisor < 1:
        raise Refused(f"gradient_divisor = {gradient_divisor!r}: an integer >= 1, what the framework divides the "
                      f"gradients by when it synchronizes them (DDP and FSDP average: dp; 1 if it sums)")
    if every_step and checksum_every != 1:
        raise Refused(f"checksum_every = {checksum_every!r}: the every-step recording checks every step's parameters "
                      f"(their checksums are the update's evidence); leave it at 1")


def _finite(name, v, lo, hi, lo_open=False, hi_open=False):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise Refused(f"hyper {name} = {v!r}: a finite number")
    if v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
        raise Refused(f"hyper {name} = {v!r}: must be in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}")
    return float(v)


def check_hyper(hyper, names, steps):
    """hyper: {lr_schedule, betas, eps, weight_decay, no_decay, max_grad_norm, implementation}."""
    betas = hyper["betas"]
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise Refused(f"hyper betas = {betas!r}: [beta1, beta2]")
    for i, b in enumerate(betas):
        _finite(f"betas[{i}]", b, 0.0, 1.0, hi_open=True)
    _finite("eps", hyper["eps"], 0.0, 1.0, lo_open=True)
    _finite("weight_decay", hyper["weight_decay"], 0.0, 1e6)
    _finite("max_grad_norm", hyper["max_grad_norm"], 0.0, 1e30)
    nd = hyper["no_decay"]
    if not isinstance(nd, (list, tuple)) or not all(isinstance(n, str) for n in nd):
        raise Refused("hyper no_decay must list tensor names (Hugging Face's)")
    unknown = [n for n in nd if n not in names]
    if unknown:
        raise Refused(f"hyper no_decay names {unknown[0]!r}, not a tensor of this model")
    if not isinstance(hyper["implementation"], str):
        raise Refused("hyper implementation must be text (e.g. 'torch.optim.AdamW(foreach=False)')")
    sched = hyper["lr_schedule"]
    if isinstance(sched, dict):
        problem = schedule.problem(sched, steps)
        if problem:
            raise Refused(f"hyper lr_schedule: {problem}")
    elif not isinstance(sched, str):
        raise Refused("hyper lr_schedule: text, or a schedule as data (schedule.py: constant, warmup_cosine, ...)")


def _optimizers(optimizer):
    """The torch optimizer that steps (a ZeroRedundancyOptimizer's .optim)."""
    inner = getattr(optimizer, "optim", None)
    return inner if isinstance(inner, torch.optim.Optimizer) else optimizer


def adamw_arithmetic(optimizer):
    """The element order of this optimizer's update (kernels/adamw.h): 'torch1-mul-add' or 'torch2-lerp'; refuses
    what the engine does not reproduce, naming the option."""
    if optimizer is None:
        return "torch2-lerp" if int(torch.__version__.split(".")[0]) >= 2 else "torch1-mul-add"
    opt = _optimizers(optimizer)
    kind = type(opt).__name__
    decoupled = kind == "AdamW" or (kind == "Adam" and opt.defaults.get("decoupled_weight_decay", False))
    if not decoupled:
        raise Refused(f"optimizer {kind}: the judge replays AdamW (torch.optim.AdamW) only")
    for i, g in enumerate(opt.param_groups):
        for key, bad in (("amsgrad", True), ("maximize", True), ("capturable", True), ("differentiable", True),
                         ("fused", True), ("foreach", True)):
            if g.get(key) is bad:
                raise Refused(f"optimizer group {i}: {key}={bad}: the engine reproduces torch's single-tensor CPU "
                              f"AdamW (foreach=False or None on CPU, not fused, amsgrad=False, maximize=False)")
        if torch.is_tensor(g.get("lr")) and g["lr"].numel() != 1:
            raise Refused(f"optimizer group {i}: a tensor lr of {g['lr'].numel()} elements")
    return "torch2-lerp" if int(torch.__version__.split(".")[0]) >= 2 else "torch1-mul-add"


def sqrt_correctly_rounded():
    """Whether this torch's Tensor.sqrt is IEEE's correctly rounded square root (a build without MKL's vector
    math). Where it is not, the recorder writes the square roots AdamW took that differ from it (within 1 ulp), so
    that the judge replays the update bit for bit (docs/formats/torch_recording.md §sqrt)."""
    import numpy as np
    x = np.random.default_rng(0).random(1 << 16).astype(np.float32) * np.float32(1e-3)
    return bool(np.array_equal(torch.sqrt(torch.from_numpy(x)).numpy().view(np.uint32), np.sqrt(x).view(np.uint32)))


def check_parameter(name, p, rank):
    """A parameter the recorder records: fp32 on the CPU (bf16, fp16 and GPU tensors: not judgeable yet)."""
    if p.device.type != "cpu":
        raise Refused(f"parameter {name!r} on rank {rank} is on {p.device}: the recorder reads CPU tensors "
                      f"(GPU runs are not judgeable yet: issue 44)")
    if p.dtype != torch.float32:
        raise Refused(f"parameter {name!r} on rank {rank} is {p.dtype}: the judge reads fp32 parameters and "
                      f"gradients (bf16/fp16 runs are not judgeable yet: issue 44)")


def check_config(hf_config):
    for key in ("attention_bias", "mlp_bias"):
        if hf_config.get(key):
            raise Refused(f"config.json {key} = true: the engine's LLaMA has no biases")


def check_model(model, names):
    """Every parameter of `model` that is not a recorded one (a bias, another head) is refused by name."""
    for name, _ in model.named_parameters():
        if name.split(".")[-1] == "bias":
            raise Refused(f"the model has a parameter {name!r}: a bias the config does not have (the engine's "
                          f"LLaMA has none)")


def param_dtype_declared(param_dtype, autocast):
    """The constructor's param_dtype (None or "bfloat16": FSDP2's bf16 parameters, fp32 reduction) as the contract
    writes it; not with autocast as well (one 16-bit regime per run)."""
    if param_dtype is None:
        return None
    if str(param_dtype).replace("torch.", "") != "bfloat16":
        raise Refused(f"param_dtype={param_dtype!r}: the judge judges bf16 parameters (FSDP2's MixedPrecisionPolicy) "
                      f"or fp32")
    if autocast is not None:
        raise Refused("bf16 parameters and autocast together: declare one 16-bit regime per run")
    return "bfloat16"


def _autocast_on(device):
    """Whether autocast is enabled for `device` on this thread: torch 2.4+ takes the device, older ones don't."""
    for probe in (lambda: torch.is_autocast_enabled(device),
                  lambda: torch.is_autocast_cpu_enabled() if device == "cpu" else torch.is_autocast_enabled()):
        try:
            return bool(probe())
        except (AttributeError, TypeError, RuntimeError):
            continue
    return False


def autocast_dtype():
    """The dtype name of the autocast region open on this thread ("bfloat16", "float16"; CPU first), or None."""
    for device, older in (("cpu", "get_autocast_cpu_dtype"), ("cuda", "get_autocast_gpu_dtype")):
        if not _autocast_on(device):
            continue
        for probe in (lambda: torch.get_autocast_dtype(device), lambda: getattr(torch, older)()):
            try:
                return str(probe()).replace("torch.", "")
            except (AttributeError, TypeError, RuntimeError):
                continue
        return "unknown"
    return None


def check_autocast(declared_dtype, where, forward=False):
    """An open autocast region must be the declared one ("bfloat16", "float16" or None); with forward=True (a forward of the
    model) it must be open when declared."""
    active = autocast_dtype()
    if active is not None and declared_dtype is None:
        raise Refused(f"{where} inside an autocast region ({active}) the recording does not declare: pass "
                      f"autocast=torch.{active} to the Recorder (fp16 with grad_scaler=its GradScaler)")
    if active is not None and active != declared_dtype:
        raise Refused(f"{where} inside autocast to {active}; the recording declares {declared_dtype}")
    if forward and active is None and declared_dtype is not None:
        raise Refused(f"{where} outside autocast; the recording declares every forward under "
                      f"torch.autocast(dtype=torch.{declared_dtype})")


def autocast_declared(autocast):
    """The constructor's autocast (None, torch.bfloat16, torch.float16 or their names) as the contract writes it:
    "bfloat16", "float16" or None (fp16 needs its GradScaler: grad_scaler.contract_of)."""
    if autocast is None or autocast is False:
        return None
    name = str(autocast).replace("torch.", "")
    if name in ("bfloat16", "bf16"):
        return "bfloat16"
    if name in ("float16", "fp16", "half"):
        return "float16"
    raise Refused(f"autocast={autocast!r}: the judge judges autocast to torch.bfloat16 or torch.float16 (with its "
                  f"GradScaler)")


def grad_scaler_active():
    """Whether an enabled GradScaler exists in this process (torch.cuda.amp or torch.amp): its scaled
    gradients and skipped steps are not judgeable yet (issue 44). Looked for once, at the first step."""
    import gc
    import sys
    classes = []
    for mod in ("torch.cuda.amp.grad_scaler", "torch.amp.grad_scaler", "torch.cpu.amp.grad_scaler"):
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, "GradScaler"):
            classes.append(m.GradScaler)
    if not classes:
        return False
    import warnings
    classes = tuple(classes)
    with warnings.catch_warnings():  # isinstance on some of torch's deprecated module objects warns
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            try:
                if not isinstance(o, classes):
                    continue
            except ReferenceError:  # a weakref.proxy whose object is gone (torch.compile, transformers keep some)
                continue
            try:
                if o.is_enabled():
                    return True
            except Exception:  # noqa: BLE001 - a half-built scaler: not one that scales
                continue
    return False
