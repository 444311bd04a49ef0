"""The judge's clip-norm bound against the norm torch really computes (docs/judge.md §7 "The clip norm").

torch's fp32 norm of a long tensor errs in proportion to its length (each of the kernel's L lanes sums n/L squares
in sequence), which the judge's old bound 2·√Ψ·u did not allow: a correct 105.8 M-parameter run FAILed. The judge
now bounds it by γ_k, k = ⌈n/L⌉ + 2L + T + R + 8 (judge/context.h, clip_norm_tolerance), L being what the recorder
writes as `precision.norm_lanes`. This checks, with the torch installed here, that clip_grad_norm_ of a
24.6 M-element gradient (the embedding of that run) is inside it — the assumption the derivation rests on (at least
L independent accumulators) — and that the tensor is long enough to matter: its error is over 100 times the
unit roundoff. The formula is restated here as docs/judge.md states it; tests/unit/judge_clip_norm_test.cc checks
the C++ function against an emulation of the kernel, including the adversarial case.
"""
import math

import torch

from shardproof_torch import segment

U = 2.0 ** -24


def bound(n, tensors, ranks, lanes):
    k = (n + lanes - 1) // lanes + 2 * lanes + tensors + ranks + 8
    g = k * U / (1 - k * U)
    return g / (1 + math.sqrt(1 - g)) + 2 * U


def test_torch_clip_norm_of_a_long_gradient_is_inside_the_bound():
    n = 24_576_000
    g = torch.Generator().manual_seed(7)
    p = torch.nn.Parameter(torch.zeros(n))
    p.grad = torch.randn(n, generator=g) * 1e-4
    norm = float(torch.nn.utils.clip_grad_norm_([p], max_norm=1.0))
    exact = math.sqrt(float(p.grad.double().square().sum()))
    err = abs(norm - exact) / exact
    lanes = segment.norm_lanes()
    assert err <= bound(n, 1, 1, lanes), (err, lanes)
    assert err > 100 * U, f"rel error {err:.3g}: the tensor no longer exercises the length term"
