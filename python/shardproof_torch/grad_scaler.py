"""fp16 with torch's GradScaler, as the recorder reads it (docs/judge.md §"fp16 with a GradScaler").

The run declares its scaler with its autocast: Recorder.attach(..., autocast=torch.float16, grad_scaler=scaler), and
its loop calls scaler.unscale_(optimizer) before rec.gradients() (the judge compares unscaled gradients) and
scaler.update() before rec.end_step():

    scaler.scale(objective).backward()
    scaler.unscale_(opt)
    rec.gradients()
    norm = clip_grad_norm_(...); rec.clipped(norm)
    scaler.step(opt); scaler.update()
    rec.end_step()

Each step's record gets {"scale", "growth_tracker", "found_inf", "next_scale", "next_growth_tracker"}: the scale and
growth tracker the backward ran with, whether unscale_ found a non-finite gradient (GradScaler then skips the
optimizer's step), and both after update(). The judge checks those decisions with the engine's loss scaler, whose
rule is GradScaler's for growth_factor 2 and backoff_factor 1/2: other factors are refused here, by name. Read
through GradScaler's accessors and, after unscale_, its per-optimizer state (stage, found_inf_per_device), as torch
1.13 to 2.15 keep them. Changes nothing.
"""
import math

from . import declared


def contract_of(scaler, autocast):
    """The contract's precision.grad_scaler: False without a scaler, else its constants. fp16 autocast needs an
    enabled scaler and a scaler needs fp16 autocast; factors other than 2 and 1/2 and a scale that is not a power of
    two are refused."""
    if scaler is None:
        if autocast == "float16":
            raise declared.Refused("autocast=torch.float16 without its GradScaler: pass grad_scaler=scaler to the "
                                   "Recorder (fp16 gradients are judged with the scaler's decisions)")
        return False
    if autocast != "float16":
        raise declared.Refused(f"grad_scaler= with autocast {autocast!r}: a GradScaler is judged with fp16 autocast "
                               f"only (autocast=torch.float16); bf16 and fp32 need no loss scale")
    if not scaler.is_enabled():
        raise declared.Refused("grad_scaler is disabled (enabled=False): record the run without it")
    growth, backoff = float(scaler.get_growth_factor()), float(scaler.get_backoff_factor())
    if growth != 2.0 or backoff != 0.5:
        raise declared.Refused(f"GradScaler(growth_factor={growth}, backoff_factor={backoff}): the judge checks "
                               f"the defaults 2.0 and 0.5 (the engine's loss scaler's rule)")
    init = float(scaler.get_scale())
    if math.frexp(init)[0] != 0.5 or not 1.0 <= init <= 2.0 ** 64:
        raise declared.Refused(f"GradScaler scale {init}: the judge checks a power of two in [1, 2^64] "
                               f"(init_scale=2.**16, say)")
    return {"init_scale": init, "growth_factor": growth, "backoff_factor": backoff,
            "growth_interval": int(scaler.get_growth_interval())}


def _optimizer_states(scaler):
    return [s for s in getattr(scaler, "_per_optimizer_states", {}).values() if s.get("found_inf_per_device")]


def after_unscale(scaler, where):
    """At rec.gradients(): the scale and tracker the step's backward ran with and unscale_'s verdict. Refuses
    gradients that were not unscaled (the judge compares them with the engine's, unscaled)."""
    states = _optimizer_states(scaler)
    stages = [getattr(s.get("stage"), "name", str(s.get("stage"))) for s in states]
    if not states or any(stage != "UNSCALED" for stage in stages):
        raise declared.Refused(f"{where}: call scaler.unscale_(optimizer) before rec.gradients() (stage "
                               f"{stages or 'READY'}): the judge compares unscaled gradients")
    found = any(float(v.sum()) > 0 for s in states for v in s["found_inf_per_device"].values())
    return {"scale": float(scaler.get_scale()), "growth_tracker": int(scaler._get_growth_tracker()),
            "found_inf": bool(found)}


def after_update(scaler, record):
    """At rec.end_step(): `record` (after_unscale's) with the scale and tracker after scaler.update()."""
    return dict(record, next_scale=float(scaler.get_scale()), next_growth_tracker=int(scaler._get_growth_tracker()))
