"""The recorder's native partial checksum (python/shardproof_torch/partial.c, native.py) gives NumPy's partial bit for
bit — lanes, exact sums, counts, absmax — on Gaussian values, on every special kind (zeros of both signs, subnormals,
the largest finite values, NaN, ±Inf) and on a wide range where the exact sums need many bins, at logical offsets
that wrap the index arithmetic; and SHARDPROOF_NATIVE=0 turns it off."""
import os
import subprocess
import sys

import numpy as np
import pytest
from shardproof_torch import checksum, native


def same(a, b):
    return a.fields() == b.fields() and a.absmax_bits == b.absmax_bits and a.sum == b.sum and a.sq == b.sq


@pytest.mark.skipif(not native.available(), reason="no C compiler: the recorder uses NumPy")
@pytest.mark.parametrize("first", [0, 7, (1 << 40) + 3, (1 << 64) - 5])
def test_native_equals_numpy(first):
    rng = np.random.default_rng(first % 1000)
    special = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, -3.4028235e38, np.nan, np.inf,
                        -np.inf, 1.0, -1.0], np.float32)
    wide = (rng.standard_normal(50_000) * np.exp2(rng.uniform(-140, 120, 50_000))).astype(np.float32)
    for x in (rng.standard_normal(70_001).astype(np.float32), special, wide, np.concatenate([wide, special]),
              np.zeros(0, np.float32)):
        got = checksum.partial_of(x, checksum.Contiguous(first))
        want = checksum.partial_numpy(x, checksum.Contiguous(first))
        assert same(got, want), (first, x.size, got.fields(), want.fields())


def test_switched_off():
    code = "from shardproof_torch import native; print(native.available())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, SHARDPROOF_NATIVE="0")).stdout.strip()
    assert out == "False"
