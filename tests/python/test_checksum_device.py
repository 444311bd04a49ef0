"""The device-side digest (python/shardproof_torch/checksum_device.py) equals checksum.partial_of, NumPy's, bit for
bit in every field of the Partial, run here on CPU tensors (the same torch ops a GPU runs; bench/gpu_digest_check.py
checks a CUDA device against the same NumPy code): random normals, huge and tiny ranges, denormals, zeros and -0,
NaN and Inf, values below a chunk's window, sizes that are not whole chunks, several device blocks, the empty
tensor, column shards and boxes, the shared vectors. Planted bugs (an arithmetic right shift in fmix64, the
below-window chunks dropped) must make the comparison fail: the test can fail."""
import json
import os

import numpy as np
import pytest
import torch

from shardproof_torch import checksum
from shardproof_torch import checksum_device as cd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHUNK = checksum.CHUNK


def fields(p):
    return {k: getattr(p, k) for k in checksum.Partial.__slots__}


def both(x, indices):
    """(NumPy's Partial, the device path's) of the fp32 array x, as dicts of every field."""
    return fields(checksum.partial_of(x, indices)), fields(cd.partial_of_tensor(torch.from_numpy(x), indices))


def bits(b):
    return np.asarray(b, np.uint32).view(np.float32)


def values(kind, n, rng):
    if kind == "normal":
        return rng.standard_normal(n).astype(np.float32)
    if kind == "huge-range":  # every exponent from denormal to near the largest, both signs
        return (rng.standard_normal(n) * 2.0 ** rng.integers(-149, 127, n)).astype(np.float32)
    if kind == "tiny":  # denormals and the smallest normals only
        return bits(rng.integers(0, 0x01000000, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31))
    if kind == "zeros":
        x = np.zeros(n, np.float32)
        x[::3] = -0.0
        return x
    if kind == "nonfinite":
        x = rng.standard_normal(n).astype(np.float32)
        x[::7], x[3::11], x[5::13] = np.nan, np.inf, -np.inf
        x[CHUNK:2 * CHUNK] = np.nan  # a chunk of nothing but NaN
        x[17:18] = bits(0x7FC12345)  # a NaN with a payload
        return x
    if kind == "below-window":  # tiny values beside a large one in the same chunks
        x = (rng.standard_normal(n) * 1e-3).astype(np.float32)
        x[::CHUNK // 2] = 1e6
        x[5::997] = rng.standard_normal(x[5::997].size).astype(np.float32) * np.float32(1e-20)
        x[9:10] = bits(1)  # the smallest denormal
        x[11:12] = -bits(0x00400001)
        return x
    raise ValueError(kind)


KINDS = ["normal", "huge-range", "tiny", "zeros", "nonfinite", "below-window"]


@pytest.mark.parametrize("n", [0, 1, 7, CHUNK, CHUNK + 1, 3 * CHUNK - 5])
@pytest.mark.parametrize("kind", KINDS)
def test_contiguous_equals_numpy(kind, n):
    x = values(kind, n, np.random.default_rng(n + len(kind)))
    want, got = both(x, checksum.contiguous_indices(12345))
    assert got == want


@pytest.mark.parametrize("kind", KINDS)
def test_several_device_blocks(kind, monkeypatch):
    monkeypatch.setattr(cd, "BLOCK", 2 * CHUNK)  # 5 blocks, the last partial: the per-block tails and rows combine
    x = values(kind, 9 * CHUNK + 3, np.random.default_rng(7))
    want, got = both(x, checksum.contiguous_indices(1 << 40))  # a first index whose j * prime wraps
    assert got == want


@pytest.mark.parametrize("shape,shard,k0", [((48, 4096), (1, 1, 4), 0), ((48, 4096), (1, 3, 4), 5000),
                                            ((96, 1024), (0, 1, 2), 7), ((6000, 22), (1, 0, 2), 0)])
def test_shards_equal_numpy(shape, shard, k0):
    index_of = checksum.shard_indices(shape, shard, k0)
    numel = shape[0] * shape[1] // shard[2] - k0
    want, got = both(values("normal", numel, np.random.default_rng(3)), index_of)
    assert got == want


@pytest.mark.parametrize("shape,offsets,sizes", [((50, 3000), (7, 1000), (40, 1500)),
                                                 ((50, 3000), (10, 0), (20, 3000)), ((4096,), (1000,), (2000,))])
def test_boxes_equal_numpy(shape, offsets, sizes):
    numel = int(np.prod(sizes))
    for k0 in (0, 333):
        index_of = checksum.box_indices(shape, offsets, sizes, k0)
        want, got = both(values("huge-range", numel - k0, np.random.default_rng(k0)), index_of)
        assert got == want


def test_any_index_function_is_built_on_the_host():
    def reversed_indices(c0, c1):
        return np.arange(10 ** 6 - c0, 10 ** 6 - c1, -1, dtype=np.uint64)
    want, got = both(values("normal", CHUNK + 9, np.random.default_rng(1)), reversed_indices)
    assert got == want


def test_shared_vectors():
    with open(os.path.join(ROOT, "tests", "fixtures", "shared_vectors", "vectors.json")) as f:
        cases = json.load(f)["digest"]
    for case in cases:
        if "formula" in case:
            j = np.arange(case["formula"], dtype=np.uint64)
            b = (np.uint64(0x3C000000) + (j * np.uint64(2654435761)) % np.uint64(1 << 24)).astype(np.uint32)
            x = np.where(j % np.uint64(3) == 0, b | np.uint32(0x80000000), b).view(np.float32)
        else:
            x = bits([int(v, 16) for v in case["bits"]])
        index_of = checksum.shard_indices(case["shape"], tuple(case["shard"]) if case["shard"] else None, case["k0"])
        p = cd.partial_of_tensor(torch.from_numpy(x), index_of)
        assert p.digest() == checksum.partial_of(x, index_of).digest(), case["name"]
        assert fields(p) == fields(checksum.partial_of(x, index_of)), case["name"]


def test_refuses_other_dtypes():
    with pytest.raises(ValueError, match="float32"):
        cd.begin(torch.zeros(4, dtype=torch.bfloat16), checksum.contiguous_indices(0))


def test_planted_arithmetic_shift_fails(monkeypatch):
    """fmix64 with an arithmetic right shift (no mask): the lanes differ from NumPy's; the comparison sees it."""
    monkeypatch.setattr(cd, "_LOW", -1)
    want, got = both(values("normal", 1000, np.random.default_rng(0)), checksum.contiguous_indices(0))
    assert got["lane0"] != want["lane0"] and got["lane1"] != want["lane1"]


def test_planted_below_window_dropped_fails(monkeypatch):
    """Chunks flagged below their window left out of the sums: sum and sq differ from NumPy's."""
    monkeypatch.setattr(cd, "_add_below", lambda t, flagged, s, q: (s, q))
    want, got = both(values("below-window", 2 * CHUNK, np.random.default_rng(0)), checksum.contiguous_indices(0))
    assert got["sum"] != want["sum"] and got["sq"] != want["sq"]
    assert {k: v for k, v in got.items() if k not in ("sum", "sq")} == \
        {k: v for k, v in want.items() if k not in ("sum", "sq")}
