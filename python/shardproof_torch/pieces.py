"""Piece: one parameter as a rank holds it, the unit the recorder summarizes, compares and anchors.

A piece is a box of the logical tensor — offsets and sizes per dim, the form torch's distributed checkpoint uses
(ChunkStorageMetadata) — or a fragment: elements [start, start + numel) of the row-major flattened tensor, the
form DeepSpeed's ZeRO partitions take (its `fragment_address`); and the replicas: the world ranks that hold the
same piece. The old declared form (dim, index, parts) is the box of piece `index` of an even split along `dim`;
the recording writes that form when a box is one (docs/formats/torch_recording.md §Shards). Replica i of R
summarizes local elements [n·i/R, n·(i+1)/R) and the first replica writes the piece's anchors. Its values live in
the parameter, its gradient and the optimizer's state of it, or where a `source` says (a DeepSpeed partition).
Runs on torch 1.13 (no DTensor import): a DTensor is recognized by its attributes.
"""
import dataclasses

import torch

from . import checksum


def is_dtensor(t):
    """A torch.distributed.tensor.DTensor (recognized without importing it: torch 1.13 has none)."""
    return t is not None and hasattr(t, "to_local") and hasattr(t, "placements") and hasattr(t, "device_mesh")


@dataclasses.dataclass(frozen=True)
class Piece:
    """`param` is the module's parameter (a DTensor under FSDP2 or TP), `offsets` / `sizes` this rank's box of
    the logical tensor (with `flat`: the one-element (start,) / (numel,) of a fragment of the flattened tensor),
    `replicas` the sorted world ranks holding the same piece (this rank among them). `source`, when given, is
    where the piece's values live instead of param / param.grad / optimizer.state[param]: an object with
    value(), grad() and moments() -> (held, {exp_avg, exp_avg_sq}, AdamW step) (deepspeed_engine.py)."""
    name: str
    param: torch.Tensor
    offsets: tuple
    sizes: tuple
    replicas: tuple
    flat: bool = False
    source: object = None

    def local(self, t):
        """This rank's values of t (the parameter, its gradient or an optimizer state of it), a plain tensor."""
        return t.to_local() if is_dtensor(t) else t

    def value(self):
        """This rank's values of the parameter (the piece's elements)."""
        return self.source.value() if self.source is not None else self.local(self.param)

    def grad(self):
        """This rank's gradient of the piece, or None."""
        if self.source is not None:
            return self.source.grad()
        return None if self.param.grad is None else self.local(self.param.grad)

    def moments(self, optimizer):
        """(held, {state name: tensor}, AdamW step count): whether `optimizer` holds this piece's moments, the
        moments (local values) and the step count."""
        if self.source is not None:
            return self.source.moments()
        held = optimizer is not None and any(self.param is q for g in optimizer.param_groups for q in g["params"])
        st = optimizer.state.get(self.param, {}) if optimizer is not None else {}
        step = st.get("step", 0)
        step = step.to_local() if is_dtensor(step) else step
        return held, {k: self.local(v) for k, v in st.items() if k in ("exp_avg", "exp_avg_sq")}, \
            int(step.item() if torch.is_tensor(step) else step)

    def indices(self, shape, k0):
        """The logical-index function of local elements k0.. (checksum.partial_of's second argument)."""
        if self.flat:
            return checksum.contiguous_indices(self.offsets[0] + k0)
        return checksum.box_indices(shape, self.offsets, self.sizes, k0)

    def numel(self):
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def shard(self, shape):
        """The recording's shard field: None for the whole tensor, [dim, index, parts] when the box is piece
        `index` of an even split along one dim, {"start", "numel"} for a fragment, else {"offsets", "sizes"}."""
        shape, sizes, offsets = tuple(shape), tuple(self.sizes), tuple(self.offsets)
        total = 1
        for s in shape:
            total *= s
        if self.flat:
            return None if sizes[0] == total else {"start": offsets[0], "numel": sizes[0]}
        if sizes == shape:
            return None
        cut = [d for d in range(len(shape)) if sizes[d] != shape[d]]
        if len(cut) == 1:
            d = cut[0]
            n = sizes[d]
            if n > 0 and shape[d] % n == 0 and offsets[d] % n == 0:
                return [d, offsets[d] // n, shape[d] // n]
        return {"offsets": list(offsets), "sizes": list(sizes)}


def declared(grid, rank, shapes, name, p, shard):
    """The piece of a declared (name, parameter, shard) on `rank` of `grid` (layout.Grid): its box, and as
    replicas the ranks the grid gives the same piece: the dp replicas, and for a whole tensor under tensor
    parallelism every tp rank too."""
    if name not in shapes:
        raise ValueError(f"parameter {name!r} is not a tensor of a LLaMA model with this config.json "
                         f"(names are Hugging Face's: {', '.join(list(shapes)[:3])}, ...)")
    shape = list(shapes[name])
    offsets, sizes = [0] * len(shape), list(shape)
    if shard is not None:
        dim, index, parts = shard
        sizes[dim] //= parts
        offsets[dim] = index * sizes[dim]
    if list(p.shape) != sizes:
        raise ValueError(f"parameter {name!r} on rank {rank} has shape {list(p.shape)}; the config and its "
                         f"shard {shard} give {sizes}")
    c = grid.coords_of(rank)
    tps = range(grid.tp) if shard is None else [c["tp"]]
    replicas = sorted(grid.rank_of(d, t, c["pp"]) for d in range(grid.dp) for t in tps)
    return Piece(name, p, tuple(offsets), tuple(sizes), tuple(replicas))
