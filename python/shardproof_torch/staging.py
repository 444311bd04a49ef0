"""Staging: a step's local tensors as the recorder reads them — host arrays for the files and SHA-256s, partial
checksums on the tensor's own device or in NumPy — with one synchronization before anything is written.

The NumPy path (a CPU tensor, digest "auto" or "numpy") reads the tensor's memory in place, as the recorder always
did. The device path (a CUDA tensor, or any tensor with digest "device") enqueues checksum_device partials and,
only for the tensors whose bytes the recording needs (a file, a SHA-256), an asynchronous copy to pinned host
memory (non_blocking); arrays() waits once for all of them, never per tensor. Both paths give the same bytes and
the same Partial (tests/python/test_recorder_device.py); the choice is the Recorder's `digest` argument or the
environment variable SHARDPROOF_DIGEST (auto | device | numpy; the argument wins), so a CPU run can exercise the
device path. Not a copy of the training state: what it holds lives until the recorder's call returns.
"""
import os

import torch

from . import checksum, checksum_device, native

MODES = ("auto", "device", "numpy")


def digest_mode(given=None):
    """The digest path: the Recorder's argument, else SHARDPROOF_DIGEST, else auto (device path for non-CPU
    tensors only)."""
    mode = given or os.environ.get("SHARDPROOF_DIGEST") or "auto"
    if mode not in MODES:
        raise ValueError(f"digest {mode!r} is not one of {', '.join(MODES)} (the Recorder's digest argument or "
                         f"SHARDPROOF_DIGEST)")
    return mode


class Staged:
    """tensors: this rank's local tensors of one kind (gradients, parameters), in piece order; host[i]: whether
    tensor i's bytes are read on the host (a file or a SHA-256 takes them)."""

    def __init__(self, tensors, mode, host=None):
        self.mode = mode
        self.flat = [t.detach().contiguous().view(-1) for t in tensors]
        self.on_device = [mode == "device" or (mode == "auto" and f.device.type != "cpu") for f in self.flat]
        if mode == "numpy" and any(f.device.type != "cpu" for f in self.flat):
            raise ValueError("digest 'numpy' reads CPU tensors only; a tensor here is on "
                             + next(str(f.device) for f in self.flat if f.device.type != "cpu"))
        host = [True] * len(self.flat) if host is None else host
        self.host = [(_copy(f) if dev else f) if keep else None
                     for f, dev, keep in zip(self.flat, self.on_device, host)]
        self.synced = False

    def numel(self, i):
        return self.flat[i].numel()

    def partial(self, i, k0, k1, indices):
        """The partial of local elements [k0, k1) of tensor i (logical indices `indices`), as a function that
        returns the Partial once arrays() has synchronized (a device partial) or at once (NumPy's)."""
        if self.on_device[i]:
            return checksum_device.begin(self.flat[i][k0:k1], indices).result
        p = checksum.partial_of(self.flat[i].numpy()[k0:k1], indices)
        return lambda: p

    def native(self, i, indices):
        """Whether tensor i's partial and identity are one C pass over its host array (native.piece): digest
        "auto" ("numpy" keeps the SHA-256 the device path also writes), a CPU tensor, contiguous logical indices, the
        C partial built."""
        return (self.mode == "auto" and not self.on_device[i] and self.host[i] is not None
                and isinstance(indices, checksum.Contiguous) and native.available())

    def arrays(self):
        """The host arrays (NumPy, flat; None where not kept), after the one wait for every copy and partial."""
        if not self.synced:
            if any(f.is_cuda for f in self.flat):
                torch.cuda.synchronize()
            self.synced = True
        return [None if h is None else h.numpy() for h in self.host]


def _copy(f):
    """An asynchronous copy of f to host memory: pinned for a CUDA tensor (the copy overlaps what follows)."""
    h = torch.empty(f.shape, dtype=f.dtype, pin_memory=f.is_cuda)
    h.copy_(f, non_blocking=True)
    return h
