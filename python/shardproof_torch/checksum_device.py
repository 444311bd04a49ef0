"""Device-side partial checksums: checksum.partial_of's Partial, bit for bit, computed with torch ops on the
tensor's own device (a CUDA GPU, or the CPU under tests), so that only a few integers per chunk cross to the host.

The formula is checksum.py's (its constants, read from there; docs/formats/checksums.md §device). Integer
arithmetic in torch's int64 wraps mod 2^64, so the digest lanes are the NumPy uint64 ones; fmix64's logical
right shift by 33 is an arithmetic one masked to its low 31 bits. The exact sums keep checksum._exact_chunk's
decomposition: per chunk of CHUNK elements a window base B = max(E - 24, 1) from the chunk's largest finite
exponent field E, each value of bin b >= B the integer a = mantissa << (b - B) < 2^48 (computed from the bit
pattern, no float arithmetic), and per chunk the int64 sums of a, h*h, h*l, l*l (h = a >> 24, l = a mod 2^24),
each below 2^63. The host combines them into Python integers exactly as checksum.py does. A chunk holding a
nonzero value below its window (smaller than 2^-24 of the chunk's largest; about one chunk in 150 of normal data)
is flagged on the device and summed on the host by checksum._exact_chunk from a copy of just that chunk.

Invariant: no host synchronization between begin() and result(); begin() only enqueues device work and one
asynchronous copy of the per-chunk integers (to pinned memory on CUDA). Not a second formula: a planted
difference from checksum.py fails tests/python/test_checksum_device.py.
"""
import os

import numpy as np
import torch

from . import checksum

CHUNK = checksum.CHUNK
BLOCK = 1 << 22  # elements per device pass (128 chunks): bounds the int64 temporaries to a few 32 MiB buffers


def _signed(v):
    """The int64 of the same 64 bits as the unsigned v (torch has no uint64 arithmetic)."""
    v = int(v) & checksum._MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


_PRIME = _signed(checksum._PRIME)
_SEEDS = [_signed(s) for s in checksum._SEEDS]
_C1, _C2 = _signed(checksum._C1), _signed(checksum._C2)
_S17, _S33 = int(checksum._S17), int(checksum._S33)
_LOW = (1 << (64 - _S33)) - 1  # the bits a logical right shift by 33 keeps
_NONFINITE = 0x7F800000  # |x| bit patterns from here up are Inf (equal) and NaN (above)
_FIELDS = 6  # per chunk: window base, below-window flag, sum a, sum h*h, sum h*l, sum l*l
COMPILE = os.environ.get("SHARDPROOF_DIGEST_COMPILE") == "1"  # fuse each pass into one kernel (torch.compile)
_compiled = []


def _kernels():
    """(lane sums, exact block): the eager functions, or (COMPILE) each torch.compile'd once with dynamic shapes,
    so that a pass reads the tensor once instead of once per elementwise op."""
    if not COMPILE:
        return _lane_sums, _exact_block
    if not _compiled:
        _compiled.extend([torch.compile(_lane_sums, dynamic=True), torch.compile(_exact_block, dynamic=True)])
    return _compiled


def _form(indices):
    """(first, width, full, k0): logical index first + (k // width) * full + k % width of local element k0 + k, for
    checksum.Contiguous (width 2^62, full 0) and checksum.Columns; None for any other index function."""
    if isinstance(indices, checksum.Contiguous):
        return indices.first, 1 << 62, 0, 0
    if isinstance(indices, checksum.Columns):
        return indices.first, indices.width, indices.full, indices.k0
    return None


def _lane_sums(u, first, width, full, k0):
    """_fmix_sums of the fp32 patterns u (int32) at the logical indices of a _form, built on u's device."""
    k = torch.arange(u.numel(), dtype=torch.int64, device=u.device) + k0
    return _fmix_sums(u, first + torch.div(k, width, rounding_mode="floor") * full + k % width)


def _fmix_sums(u, j):
    """Sums (mod 2^64, int64 (2,)) of fmix64(j * prime + s_l xor (b << 17) xor b) for both lanes; u: the fp32
    patterns (int32), j the logical indices (int64, wrapping as uint64)."""
    bits = u.to(torch.int64) & 0xFFFFFFFF
    v = bits ^ (bits << _S17)
    jp = j * _PRIME
    k = torch.stack([jp + s for s in _SEEDS]) ^ v
    for c in (_C1, _C2, None):
        k ^= (k >> _S33) & _LOW
        if c is not None:
            k *= c
    return k.sum(dim=1)


def _exact_block(u):
    """Per-chunk integers (int64 (chunks, _FIELDS)) and the block's [nan, inf, absmax bits] (int64 (3,)) of the
    fp32 bit patterns u (int32, padded with +0 to whole chunks: a zero adds nothing and is never below a window)."""
    m = u.numel()
    chunks = -(-m // CHUNK)
    ab = torch.zeros(chunks * CHUNK, dtype=torch.int32, device=u.device)
    ab[:m] = u & 0x7FFFFFFF
    neg = torch.zeros(chunks * CHUNK, dtype=torch.bool, device=u.device)
    neg[:m] = u < 0
    ab, neg = ab.view(chunks, CHUNK), neg.view(chunks, CHUNK)
    counts = torch.stack([(ab > _NONFINITE).sum(), (ab == _NONFINITE).sum()])
    ab = torch.where(ab >= _NONFINITE, 0, ab)  # NaN and Inf are counted, never summed
    top = ab.amax(dim=1)
    base = torch.clamp((top >> 23) - 24, min=1)
    e = ab >> 23
    mant = torch.where(e > 0, (ab & 0x7FFFFF) | 0x800000, ab & 0x7FFFFF).to(torch.int64)
    shift = torch.clamp(e, min=1) - base[:, None]  # <= 24: a < 2^48
    below = ((shift < 0) & (mant != 0)).any(dim=1)
    a = torch.where(shift >= 0, mant << torch.clamp(shift, min=0).to(torch.int64), 0)
    a = torch.where(neg, -a, a)
    h, low = a >> 24, a & 0xFFFFFF
    per_chunk = torch.stack([base.to(torch.int64), below.to(torch.int64), a.sum(dim=1), (h * h).sum(dim=1),
                             (h * low).sum(dim=1), (low * low).sum(dim=1)], dim=1)
    return per_chunk, torch.cat([counts, top.amax().to(torch.int64).view(1)])


class Pending:
    """A partial being computed on the device: begin() enqueued it, result() (after the device finished, or it
    waits) combines its integers on the host."""

    def __init__(self, t, packed, blocks):
        self.t, self.blocks, self.cuda = t, blocks, packed.is_cuda
        if self.cuda:
            self.host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
            self.host.copy_(packed, non_blocking=True)
        else:
            self.host = packed

    def result(self):
        p = checksum.Partial()
        p.count = self.t.numel()
        if p.count == 0:
            return p
        if self.cuda:
            torch.cuda.current_stream(self.t.device).synchronize()  # a no-op after the recorder's one sync
        h = self.host.numpy()
        lanes, tail, rows = h[:2], h[2:2 + 3 * self.blocks], h[2 + 3 * self.blocks:].reshape(-1, _FIELDS)
        p.lane0, p.lane1 = (int(x) & checksum._MASK64 for x in lanes)
        tail = tail.reshape(-1, 3)
        p.nan, p.inf, p.absmax_bits = int(tail[:, 0].sum()), int(tail[:, 1].sum()), int(tail[:, 2].max())
        p.sum, p.sq = _combine(rows[~rows[:, 1].astype(bool)])
        flagged = np.nonzero(rows[:, 1])[0]
        if flagged.size:
            p.sum, p.sq = _add_below(self.t, flagged, p.sum, p.sq)
        return p


def _exact_int(v):
    """The exact sum of an int64 array as a Python integer (halves of 32 bits: no int64 overflow)."""
    return (int((v >> 32).sum()) << 32) + int((v & 0xFFFFFFFF).sum())


def _combine(rows):
    """sum and sq (Python integers, units 2^-149 and 2^-298) of per-chunk rows, grouped by window base."""
    s = q = 0
    for base in np.unique(rows[:, 0]).tolist():
        r = rows[rows[:, 0] == base]
        s += _exact_int(r[:, 2]) << (base - 1)
        q += ((_exact_int(r[:, 3]) << 48) + (_exact_int(r[:, 4]) << 25) + _exact_int(r[:, 5])) << (2 * base - 2)
    return s, q


def _add_below(t, flagged, s, q):
    """Adds the exact sums of the flagged chunks, copied to the host and summed by checksum._exact_chunk."""
    n = t.numel()
    for c in flagged.tolist():
        x = t[c * CHUNK:min(n, (c + 1) * CHUNK)].cpu().numpy()
        acc = {"sum": 0, "sq": 0, "nan": 0, "inf": 0, "absmax": 0}
        buf = (np.empty(x.size, np.uint32), np.empty(x.size, np.uint32), np.empty(x.size, np.float64),
               np.empty(x.size, np.int64))
        checksum._exact_chunk(x, x.view(np.uint32), acc, buf)
        s, q = s + acc["sum"], q + acc["sq"]
    return s, q


def begin(t, indices):
    """Enqueues the partial of the float32 values t (1-D tensor, any device) whose logical indices are
    indices(c0, c1) (checksum.Contiguous, checksum.Columns, or any checksum index function)."""
    if t.dtype != torch.float32 or t.dim() != 1:
        raise ValueError(f"a device partial takes a 1-D float32 tensor, not {t.dtype} of shape {list(t.shape)}")
    t = t.contiguous()
    n = t.numel()
    lane_sums, exact_block = _kernels()
    form = _form(indices)
    lanes = torch.zeros(2, dtype=torch.int64, device=t.device)
    tails, rows = [], []
    for b0 in range(0, n, BLOCK):
        b1 = min(n, b0 + BLOCK)
        u = t[b0:b1].view(torch.int32)
        if form is None:  # any other index function: its indices built on the host
            j = np.ascontiguousarray(indices(b0, b1), dtype=np.uint64).view(np.int64)
            lanes += _fmix_sums(u, torch.from_numpy(j).to(t.device))
        else:
            lanes += lane_sums(u, *form[:3], form[3] + b0)
        per_chunk, tail = exact_block(u)
        rows.append(per_chunk.view(-1))
        tails.append(tail)
    return Pending(t, torch.cat([lanes] + tails + rows), len(tails))


def partial_of_tensor(t, indices):
    """checksum.partial_of(t's values, indices), computed on t's device: the same Partial, every field."""
    return begin(t, indices).result()
