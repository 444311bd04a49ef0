"""The recorder's native partial checksum (partial.c): checksum.partial_of's Contiguous case in C, the same bits at
about 4 ns an element where NumPy takes 15 (docs/performance.md §"The recorder"). Compiled once per machine and source with the system's C compiler (`cc`, or $CC)
into ~/.cache/shardproof (or $XDG_CACHE_HOME/shardproof), atomically, so that ranks starting together share one
build; loaded with ctypes. Where there is no compiler, the build fails or SHARDPROOF_NATIVE=0, partial() is None and
the recorder computes in NumPy, as it always did (docs/performance.md §"The recorder")."""
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys

import numpy as np

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "partial.c")
_lib = None
_tried = False


def _build():
    with open(_SOURCE, "rb") as f:
        code = f.read()
    key = hashlib.sha256(code + platform.machine().encode()).hexdigest()[:16]
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shardproof")
    path = os.path.join(cache, f"partial-{key}.so")
    if not os.path.exists(path):
        cc = shutil.which(os.environ.get("CC") or "cc")
        if cc is None:
            return None
        os.makedirs(cache, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, _SOURCE], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            print(f"shardproof_torch: the native checksum did not build ({done.stderr.strip()[:200]}); "
                  f"NumPy computes it", file=sys.stderr)
            return None
        os.replace(tmp, path)
    lib = ctypes.CDLL(path)
    f = lib.sp_partial_contiguous
    f.restype = None
    f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64] + [ctypes.c_void_p] * 4
    g = lib.sp_partial_piece
    g.restype = None
    g.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64] + \
        [ctypes.c_void_p] * 5
    return lib


def available():
    global _lib, _tried
    if not _tried:
        _tried = True
        if os.environ.get("SHARDPROOF_NATIVE", "1") != "0":
            try:
                _lib = _build()
            except (OSError, subprocess.SubprocessError) as e:
                print(f"shardproof_torch: the native checksum is not available ({e}); NumPy computes it",
                      file=sys.stderr)
                _lib = None
    return _lib is not None


def _fill(out, size, lanes, sums, squares, counts):
    out.lane0, out.lane1 = int(lanes[0]), int(lanes[1])
    out.sum = sum(int(sums[e]) << (e - 1) for e in np.flatnonzero(sums).tolist())
    out.sq = sum((int(squares[2 * e]) | int(squares[2 * e + 1]) << 64) << (2 * e - 2)
                 for e in range(256) if squares[2 * e] or squares[2 * e + 1])
    out.count = size
    out.nan, out.inf, out.absmax_bits = int(counts[0]), int(counts[1]), int(counts[2])
    return out


def _buffers():
    return np.zeros(2, np.uint64), np.zeros(256, np.int64), np.zeros(512, np.uint64), np.zeros(3, np.uint64)


def partial(x, first, out):
    """Fills `out` (a checksum.Partial) with the partial of the fp32 values x (1-D, contiguous) whose logical
    indices are first, first + 1, ...; returns it."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    lanes, sums, squares, counts = _buffers()
    _lib.sp_partial_contiguous(x.ctypes.data, x.size, first & ((1 << 64) - 1), lanes.ctypes.data, sums.ctypes.data,
                               squares.ctypes.data, counts.ctypes.data)
    return _fill(out, x.size, lanes, sums, squares, counts)


def piece(x, first, k0, k1, out):
    """One pass over a whole local piece x (logical indices first, first + 1, ...): `out` filled with the partial of
    its elements [k0, k1), and the piece's identity — the digest lanes of all its elements, 32 hex digits — which
    its replicas compare in place of a SHA-256 (docs/formats/torch_recording.md, `bits`)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    lanes, sums, squares, counts = _buffers()
    whole = np.zeros(2, np.uint64)
    _lib.sp_partial_piece(x.ctypes.data, x.size, first & ((1 << 64) - 1), k0, k1, lanes.ctypes.data,
                          sums.ctypes.data, squares.ctypes.data, counts.ctypes.data, whole.ctypes.data)
    return _fill(out, k1 - k0, lanes, sums, squares, counts), f"{int(whole[0]):016x}{int(whole[1]):016x}"
