"""The recorder's half of the shared-format vectors (docs/formats/shared_vectors.md): its partial checksums,
safetensors files and token batches equal tests/fixtures/shared_vectors/vectors.json bit for bit, the file
tests/unit/shared_vectors_test.cc checks the engine against. A change on either side that alters one bit fails."""
import json
import os
import struct

import numpy as np
import pytest

from shardproof_torch import checksum, files

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
with open(os.path.join(ROOT, "tests", "fixtures", "shared_vectors", "vectors.json")) as f:
    VECTORS = json.load(f)


def formula(n):
    """make_vectors.py's long case: bits 0x3c000000 + (j * 2654435761 mod 2^24), sign set where 3 | j."""
    out = np.empty(n, np.uint32)
    for j in range(n):
        b = 0x3C000000 + (j * 2654435761) % (1 << 24)
        out[j] = b | 0x80000000 if j % 3 == 0 else b
    return out


def floats(bits):
    return np.array([int(b, 16) for b in bits], np.uint32).view(np.float32)


@pytest.mark.parametrize("case", VECTORS["digest"], ids=lambda c: c["name"])
def test_partial_checksum(case):
    x = formula(case["formula"]).view(np.float32) if "formula" in case else floats(case["bits"])
    shard = tuple(case["shard"]) if case["shard"] else None
    index_of = checksum.shard_indices(case["shape"], shard, case["k0"])
    if "indices" in case:  # the logical index of every local element, as the C++ side sums them
        got = (np.arange(index_of.first, index_of.first + x.size, dtype=np.uint64)
               if isinstance(index_of, checksum.Contiguous) else index_of(0, x.size))
        assert got.tolist() == case["indices"]
    p = checksum.partial_of(x, index_of)
    fields = p.fields()
    assert fields["lanes"] == case["lanes"]
    assert (fields["sum"], fields["sq"]) == (case["sum"], case["sq"])
    assert (p.count, p.nan, p.inf, f"{p.absmax_bits:08x}") == (case["count"], case["nan"], case["inf"],
                                                                case["absmax_bits"])
    assert struct.pack(">d", p.exact_sum()).hex() == case["sum_double"]
    assert struct.pack(">d", p.exact_l2()).hex() == case["l2_double"]


@pytest.mark.parametrize("case", VECTORS["safetensors"], ids=lambda c: c["name"])
def test_safetensors_bytes(case):
    tensors = [(t["name"], floats(t["bits"]).reshape(t["shape"])) for t in case["tensors"]]
    assert files.safetensors_bytes(tensors, case["metadata"] or None).hex() == case["bytes"]


@pytest.mark.parametrize("case", VECTORS["token_batch"], ids=lambda c: c["name"])
def test_token_batch_bytes(case):
    ids = np.array(case["ids"], np.int32).reshape(case["rows"], case["cols"])
    assert files.token_batch_bytes(ids).hex() == case["bytes"]
    assert int((ids[:, 1:] >= 0).sum()) == case["targets"]
