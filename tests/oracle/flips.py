"""The 16-bit roundings an fp32 computation can flip, and whether a result is explained by them (test_oracle.py
mixed; the derivation is docs/equivalence.md §5, "Flips").

Two computations with the same casts (llama_torch.loss_and_grads_mixed) round the same values to 16 bits,
except where their values before a rounding straddle a rounding boundary, the midpoint between two 16-bit
neighbours: there one of them lands a whole 16-bit ulp away (a flip). An fp32 computation differs from the
float64 one by its arithmetic error, at most e = beta * (|x| + rms) per value with beta = 2 * K * 2^-24 (K the
longest sum of the configuration: the gamma_K bound of a K-term dot product, the rms term for cancellation),
so it can flip only the roundings whose float64 value lies within e of a boundary: the candidates, listed by
the float64 computation itself, and tried closest to their boundary first (at most MAX_EVALUATED: a bound on
the work; GIVE_UP when none of the first ones removes any of the distance). Each candidate's effect on the loss and on every gradient is computed exactly:
the float64 computation again with that one rounding flipped, the later casts (its cascade) included.
A result is explained when at most MAX_FLIPS of those effects, added to float64 (first order: each flip moves
one value by one ulp), leave every tensor within fp32 arithmetic of float64. A misplaced or missing cast moves
every value of a tensor and is explained by no handful of single flips.
Not a proof of the engine: the check says which flips would explain the distance, never that they happened.
"""
import math

import torch

import llama_torch as L

MAX_FLIPS = 32        # picks of the greedy explanation
CHUNK = 64            # candidates whose effect is computed at once, the closest to their boundary first
MAX_EVALUATED = 1024  # the candidates tried at most, in that order: the work is bounded, not the candidates
GIVE_UP = 256         # tried without a single flip that removes 10 % of the distance: no flip explains it


def _neighbour(r, x, half):
    """The 16-bit neighbour of r (a 16-bit value, widened) on x's side: the magnitude's bits one up when moving
    away from zero, one down towards it; from a zero, the smallest subnormal of x's side."""
    bits = r.to(half).view(torch.int16).to(torch.int32)
    up = x > r
    out = bits + torch.where(up == (r > 0), 1, -1)
    out = torch.where(r == 0, torch.where(up, 1, -32767), out)  # 0x0001 and 0x8001
    return out.to(torch.int16).view(half).to(x.dtype)


class CastLog:
    """Observes every 16-bit rounding of one computation (llama_torch.CAST_OBSERVER), numbered in the order the
    computation makes them. record: keep each rounding's candidates (flat index, margin / band); flip (k, i):
    round element i of rounding k to its other neighbour."""

    def __init__(self, beta=None, flip=None):
        self.beta, self.flip, self.count, self.candidates = beta, flip, 0, []

    def visit(self, x, r, half):
        k = self.count
        self.count += 1
        if self.beta is not None and x.numel():
            margin = (x - (r + _neighbour(r, x, half)) / 2).abs()
            band = self.beta * (x.abs() + x.pow(2).mean().sqrt())
            score = (margin / band).reshape(-1)
            for i in torch.nonzero(score <= 1).reshape(-1).tolist():
                self.candidates.append((score[i].item(), k, i))
        if self.flip is not None and self.flip[0] == k:
            flat = r.reshape(-1).clone()
            flat[self.flip[1]] = _neighbour(r, x, half).reshape(-1)[self.flip[1]]
            r = flat.reshape(r.shape)
        return r


def _observed(log, compute):
    L.CAST_OBSERVER = log
    try:
        return compute()
    finally:
        L.CAST_OBSERVER = None


def longest_sum(c):
    """K: the longest sum of the configuration's products (dim, ffn, vocabulary, tokens of the batch)."""
    return max(c["dim"], c["ffn_dim"], c["vocab_size"], c["B"] * c["T"])


def explain(compute64, loss64, g64, loss_ours, g_ours, allowed, K):
    """compute64() -> (loss, grads) in float64 with the engine's casts. allowed: name -> the largest
    relative L2 distance fp32 arithmetic may leave (the loss under "loss"). Returns (explained, text)."""
    names = list(g64)

    def vec(loss, g):
        parts = [torch.tensor([(loss - loss64) / abs(loss64)], dtype=torch.float64)]
        return torch.cat(parts + [((g[n].double() - g64[n]) / g64[n].norm()).reshape(-1) for n in names])

    log = CastLog(beta=2.0 * K * 2.0 ** -24)
    _observed(log, compute64)
    cands = sorted(log.candidates)
    target = vec(loss_ours, g_ours)
    effects, picked, r = [], [], target
    for start in range(0, min(len(cands), MAX_EVALUATED), CHUNK):
        for _, k, i in cands[start:start + CHUNK]:
            lf, gf = _observed(CastLog(flip=(k, i)), compute64)
            effects.append(((k, i), vec(lf, gf)))
        V = torch.stack([v for _, v in effects])
        picked, r, used = [], target.clone(), set()
        for _ in range(MAX_FLIPS):  # greedy: the flip that removes most of what is left, while it removes 10 %
            d2 = (r * r).sum() - 2 * (V @ r) + (V * V).sum(1)
            for j in used:
                d2[j] = math.inf
            j = int(torch.argmin(d2))
            if not d2[j] < 0.81 * (r * r).sum():
                break
            used.add(j)
            picked.append(effects[j][0])
            r = r - V[j]
        if _within(r, names, g64, allowed)[0] or (not picked and len(effects) >= GIVE_UP):
            break  # explained, or no flip at all resembles the distance (a misplaced cast moves every value)
    ok, worst = _within(r, names, g64, allowed)
    flips = ", ".join(f"#{k}[{i}]" for k, i in picked) or "none"
    return ok, (f"{len(picked)} flip(s) of the {len(effects)} candidates closest to a boundary (of {len(cands)}; "
                f"rounding #[element]: {flips}); "
                f"what is left: {worst}")


def _within(r, names, g64, allowed):
    """Whether every tensor's (and the loss's) residual is within its fp32 allowance; the worst as text."""
    sizes = [1] + [g64[n].numel() for n in names]
    parts = torch.split(r, sizes)
    worst, ok = (0.0, ""), True
    for n, p in zip(["loss"] + names, parts):
        d = p.norm().item()
        ok = ok and d <= allowed[n]
        if d / allowed[n] > worst[0]:
            worst = (d / allowed[n], f"{n} {d:.3g} against {allowed[n]:.3g}")
    return ok, worst[1]
