"""Learning-rate schedules as data (docs/formats/torch_recording.md §lr_schedule): a run that declares its
schedule this way has every step's recorded lr, and the lr its optimizer's groups held, checked against it by the
judge (src/judge/schedule.cc computes the same factors). The formulas are Hugging Face's (transformers
optimization.py: get_constant_schedule_with_warmup, get_linear_schedule_with_warmup,
get_cosine_schedule_with_warmup, get_cosine_with_min_lr_schedule_with_warmup), lr(s) = lr * factor(s) as
torch's LambdaLR multiplies, with one addition: warmup_start 1 counts the warmup from 1 ((s + 1) / W), as many
hand-written loops do.

    {"kind": "constant" | "linear" | "cosine", "lr": 3e-4, "warmup_steps": 100, "total_steps": 1000,
     "min_ratio": 0.0, "warmup_start": 0}
"""
import math

KINDS = ("constant", "linear", "cosine")
KEYS = ("kind", "lr", "warmup_steps", "total_steps", "min_ratio", "warmup_start")
# |lr - schedule| <= RTOL * schedule: a few double roundings apart (the same formula in another order).
RTOL = 2.0 ** -40


def problem(spec, steps):
    """None, or what is wrong with a schedule spec for a run of `steps` steps."""
    if sorted(spec) != sorted(KEYS):
        return f"a schedule has exactly the keys {', '.join(KEYS)}; got {', '.join(sorted(spec))}"
    if spec["kind"] not in KINDS:
        return f"kind {spec['kind']!r} is not one of {', '.join(KINDS)}"
    lr = spec["lr"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr < 0:
        return f"lr = {lr!r}: a finite number >= 0"
    for key, lo, hi in (("warmup_steps", 0, 1 << 30), ("total_steps", 1, 1 << 30), ("warmup_start", 0, 1)):
        v = spec[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            return f"{key} = {v!r}: an integer in [{lo}, {hi}]"
    r = spec["min_ratio"]
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1:
        return f"min_ratio = {r!r}: a number in [0, 1]"
    return None


def factor(spec, step):
    """The multiplier of spec['lr'] at optimizer step `step` (0-based)."""
    w, total, r = spec["warmup_steps"], spec["total_steps"], float(spec["min_ratio"])
    if step < w:
        return float(step + spec["warmup_start"]) / float(max(1, w))
    if spec["kind"] == "constant":
        return 1.0
    if spec["kind"] == "linear":
        f = max(0.0, float(total - step) / float(max(1, total - w)))
        return f if r == 0 else f * (1.0 - r) + r
    progress = float(step - w) / float(max(1, total - w))
    f = 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress))
    return max(0.0, f if r == 0 else f * (1.0 - r) + r)


def lr_at(spec, step):
    return spec["lr"] * factor(spec, step)
