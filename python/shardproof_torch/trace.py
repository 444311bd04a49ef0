"""The collective trace of a PyTorch run, in the engine's trace format (docs/formats/trace.md), so that
`shardproof trace check DIR` and the judge read it with the engine's own checker.

Every torch.distributed call made through Python (all_reduce, broadcast, all_gather, send, recv, isend, irecv,
barrier, and what is built on them: broadcast_object_list, ZeroRedundancyOptimizer's parameter broadcasts,
DDP's gradient reduction once PyTorch's own allreduce_hook is registered as its comm hook; on torch 2.x also
all_gather_single / reduce_scatter_single, FSDP2's parameter all-gathers and gradient reduce-scatters, and the
functional collectives DTensor redistributes with — tensor and sequence parallelism) is wrapped while the recorder
is installed: the wrapper writes one record (group, seq, op, dtype, count, bytes, wire_bytes, phase, step,
micro-batch, times) and calls the original. A reduce-scatter issued during the backward pass is phase grad_sync
(FSDP2's gradient reduction, as DDP's buckets). batch_isend_irecv is not wrapped itself: it calls each P2POp's
function, the wrapped isend / irecv when the op was made while the recorder is installed (torch.distributed's
pipelining makes them per step), with the peer given as a rank of the group. Not recorded: collectives PyTorch's C++ side issues
by itself (DDP's initial state broadcast and bucket rebuild: set-up, before step 0). No payload digests
(XXH3 is not in Python's standard library): the checker then skips its payload comparison.
A group must be one the recorder was given (world, or the rank's dp/tp/pp groups); any other is refused.
"""
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import files

_DTYPES = {torch.float64: ("F64", 8), torch.float32: ("F32", 4), torch.float16: ("F16", 2),
           torch.bfloat16: ("BF16", 2), torch.int64: ("I64", 8), torch.int32: ("I32", 4), torch.int16: ("I16", 2),
           torch.int8: ("I8", 1), torch.uint8: ("U8", 1), torch.bool: ("BOOL", 1)}
# The phases of docs/formats/trace.md §Record fields.
PHASES = ("setup", "forward", "backward", "grad_sync", "optimizer", "checkpoint", "eval", "evidence")
_WRAPPED = ("all_reduce", "broadcast", "all_gather", "send", "recv", "isend", "irecv", "barrier",
            "all_gather_single", "reduce_scatter_single", "all_gather_into_tensor", "reduce_scatter_tensor")
_REFUSED = ("reduce_scatter", "_reduce_scatter_base", "_all_gather_base", "all_to_all", "all_to_all_single",
            "reduce", "gather", "scatter", "all_reduce_coalesced")
# torch.distributed._functional_collectives (torch 2.x): what DTensor's redistribution calls, by the trace's op.
_FUNCOL = {"all_reduce": "all_reduce", "all_gather_single": "all_gather", "all_gather_tensor": "all_gather",
           "all_gather_single_autograd": "all_gather", "all_gather_tensor_autograd": "all_gather",
           "reduce_scatter_single": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
           "reduce_scatter_single_autograd": "reduce_scatter", "reduce_scatter_tensor_autograd": "reduce_scatter"}
_FUNCOL_REFUSED = ("all_reduce_coalesced", "all_gather_into_tensor_coalesced", "reduce_scatter_tensor_coalesced",
                   "all_to_all_single", "all_to_all_single_autograd", "broadcast", "permute_tensor")


class UnsupportedCollective(RuntimeError):
    pass


def _functional_collectives():
    """torch.distributed._functional_collectives, or None (torch 1.13 has no DTensor that calls it)."""
    try:
        import torch.distributed._functional_collectives as funcol
    except ImportError:
        return None
    return funcol if hasattr(funcol, "_resolve_group") else None


def _reduce_name(op):
    if isinstance(op, str):  # functional collectives name the op: "sum", "avg", ...
        if op.lower() in ("sum", "max", "min"):
            return op.lower()
        raise UnsupportedCollective(f"reduce op {op!r} is not sum, max or min: the trace format cannot hold it")
    for name, value in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN)):
        if op == value:
            return name
    if hasattr(dist.ReduceOp, "AVG") and op == dist.ReduceOp.AVG:
        return "sum"  # an average is a sum whose result is divided: the same bytes on the wire
    raise UnsupportedCollective(f"reduce op {op} is not sum, max or min: the trace format cannot hold it")


def _wire_bytes(op, nbytes, n):
    if op == "all_reduce":
        return 2 * (n - 1) * nbytes // n
    if op in ("send", "recv", "isend", "irecv"):
        return nbytes
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) * nbytes // n
    if op == "barrier":
        return 0
    return (n - 1) * nbytes // n


class Group:
    """One process group as the trace names it: `world`, `dp[tp0.pp1]`, ... with its members (world ranks,
    group-rank order) and this rank's position in it."""

    def __init__(self, name, members, rank):
        self.name = name
        self.members = list(members)
        self.size = len(self.members)
        self.rank = self.members.index(rank)
        self.seq = 0
        self.announced = False


def trace_groups(grid, rank, given):
    """{process group: Group} of this rank: the world (key None) and each of `given` ({axis: process group}), whose
    members must be the ones the declared grid (layout.Grid) puts in that axis's group with `rank`."""
    groups = {None: Group("world", list(range(grid.world)), rank)}
    for axis, pg in given.items():
        if pg is None:
            continue
        members = grid.members(axis, rank)
        actual = dist.get_process_group_ranks(pg) if hasattr(dist, "get_process_group_ranks") else members
        if list(actual) != members:
            raise ValueError(f"the {axis} group of rank {rank} holds ranks {list(actual)}, but the declared "
                             f"grid puts {members} in it (rank = tp + tp_size * (dp + dp_size * pp))")
        groups[pg] = Group(grid.group_name(axis, rank), members, rank)
    return groups


class TraceRecorder:
    def __init__(self, path, rank, groups, first_seq=None):
        """groups: {process-group object or None (world): Group}. first_seq: {group name: next seq} when a
        resumed recording continues its trace."""
        self.rank = rank
        self.groups = groups
        for g in groups.values():
            if first_seq and g.name in first_seq:
                g.seq = first_seq[g.name]
                g.announced = True
        self.file = files.JsonlFile(path) if path else None  # None: the state only (a Flight Recorder trace)
        self.step, self.phase, self.micro_batch = -1, "setup", -1
        # p2p tensors whose op runs later than its phase was set (a schedule that batches one micro-batch's forward
        # sends with another's backward receives): id(tensor) -> (phase, micro_batch), taken by the op (pipelining.py)
        self.tensor_phases = {}
        self.pending = []
        self.originals = {}

    # ---------------------------------------------------------------- installing the wrappers
    def install(self):
        for name in _WRAPPED:
            if hasattr(dist, name):
                self.originals[name] = getattr(dist, name)
                wrapped = self._wrapper(name, self.originals[name])
                setattr(dist, name, wrapped)
                setattr(c10d, name, wrapped)
        for name in _REFUSED:
            if hasattr(dist, name):
                self.originals[name] = getattr(dist, name)
                setattr(dist, name, self._refuser(name))
                setattr(c10d, name, self._refuser(name))
        self.funcol = _functional_collectives()
        if self.funcol is not None:
            for name in list(_FUNCOL) + list(_FUNCOL_REFUSED):
                if hasattr(self.funcol, name):
                    self.originals["funcol." + name] = getattr(self.funcol, name)
                    setattr(self.funcol, name, self._funcol_wrapper(name, self.originals["funcol." + name])
                            if name in _FUNCOL else self._refuser("_functional_collectives." + name))

    def uninstall(self):
        for name, f in self.originals.items():
            if name.startswith("funcol."):
                setattr(self.funcol, name[len("funcol."):], f)
            else:
                setattr(dist, name, f)
                setattr(c10d, name, f)
        self.originals = {}

    def _refuser(self, name):
        def refuse(*args, **kwargs):
            raise UnsupportedCollective(f"torch.distributed.{name} is not recorded by shardproof_torch "
                                        f"(recorded: {', '.join(_WRAPPED)}); see docs/judge.md")
        return refuse

    def _group(self, group):
        g = self.groups.get(group if group is not None else None)
        if g is None and group is not None and group is c10d.GroupMember.WORLD:
            g = self.groups.get(None)
        if g is None and group is not None and hasattr(dist, "get_process_group_ranks"):
            # another object for a group the recorder knows (a mesh's, a framework's): the same members
            members = list(dist.get_process_group_ranks(group))
            g = next((x for x in self.groups.values() if x.members == members and x.name != "world"), None) or \
                next((x for x in self.groups.values() if x.members == members), None)
        if g is None:
            raise UnsupportedCollective("a collective on a process group the recorder was not given "
                                        "(give Recorder every group the step uses: world, dp, tp, pp)")
        return g

    def _wrapper(self, name, original):
        rec = self

        def wrapped(*args, **kwargs):
            fields = rec._describe(name, args, kwargs)
            t0 = time.time_ns() // 1000
            result = original(*args, **kwargs)
            rec._record(fields.pop("op", name), fields, t0, time.time_ns() // 1000)
            return result

        wrapped.__wrapped__ = original
        return wrapped

    def _funcol_wrapper(self, name, original):
        """A functional collective (self, [reduceOp,] [dim,] group, tag): recorded when issued (its result is an
        AsyncCollectiveTensor that waits later), with its group resolved from a mesh dim or a group name."""
        rec, op = self, _FUNCOL[name]

        params = {"all_reduce": ("reduceOp", "group"), "all_gather": ("gather_dim", "group"),
                  "reduce_scatter": ("reduceOp", "scatter_dim", "group")}[op]

        def wrapped(tensor, *args, **kwargs):
            given = dict(zip(params, args), **{k: v for k, v in kwargs.items() if k in params})
            group = given["group"]
            pg = rec.funcol._resolve_group(group)
            if isinstance(pg, str):
                pg = c10d._resolve_process_group(pg)
            fields = {"group": rec._group(pg), "tensor": tensor}
            if op != "all_gather":
                fields["reduce"] = _reduce_name(given["reduceOp"])
            if op == "all_gather":
                fields["counts"] = [tensor.numel()] * fields["group"].size
            if op == "reduce_scatter":
                fields["counts"] = [tensor.numel() // fields["group"].size] * fields["group"].size
            t0 = time.time_ns() // 1000
            result = original(tensor, *args, **kwargs)
            rec._record(op, fields, t0, time.time_ns() // 1000)
            return result

        wrapped.__wrapped__ = original
        return wrapped

    @staticmethod
    def _arg(args, kwargs, i, key, default=None):
        if key in kwargs:
            return kwargs[key]
        return args[i] if len(args) > i else default

    def _describe(self, op, args, kwargs):
        a = self._arg
        if op == "barrier":
            return {"group": self._group(a(args, kwargs, 0, "group")), "tensor": None}
        if op == "all_reduce":
            return {"group": self._group(a(args, kwargs, 2, "group")), "tensor": a(args, kwargs, 0, "tensor"),
                    "reduce": _reduce_name(a(args, kwargs, 1, "op", dist.ReduceOp.SUM))}
        if op == "broadcast":
            g = self._group(a(args, kwargs, 2, "group"))
            return {"group": g, "tensor": a(args, kwargs, 0, "tensor"), "root_world": a(args, kwargs, 1, "src")}
        if op == "all_gather":
            g = self._group(a(args, kwargs, 2, "group"))
            return {"group": g, "tensor": a(args, kwargs, 1, "tensor"), "gather": a(args, kwargs, 0, "tensor_list")}
        if op in ("all_gather_single", "all_gather_into_tensor"):  # (output, input, group, async_op)
            g = self._group(a(args, kwargs, 2, "group"))
            t = a(args, kwargs, 1, "input_tensor") if "input_tensor" in kwargs or len(args) > 1 else \
                a(args, kwargs, 1, "input")
            return {"op": "all_gather", "group": g, "tensor": t, "counts": [t.numel()] * g.size}
        if op in ("reduce_scatter_single", "reduce_scatter_tensor"):  # (output, input, op, group, async_op)
            g = self._group(a(args, kwargs, 3, "group"))
            t = a(args, kwargs, 1, "input")
            fields = {"op": "reduce_scatter", "group": g, "tensor": t, "counts": [t.numel() // g.size] * g.size,
                      "reduce": _reduce_name(a(args, kwargs, 2, "op", dist.ReduceOp.SUM))}
            if self.phase == "backward":
                fields["phase"] = "grad_sync"  # a gradient reduction (FSDP2's, ZeRO's), as DDP's buckets
            return fields
        # p2p: send/isend(tensor, dst, group, tag, group_dst), recv/irecv(tensor, src, group, tag, group_src); the
        # peer as a world rank, or (torch 2.x, what pipelining and batch_isend_irecv pass) as a rank of the group
        g = self._group(a(args, kwargs, 2, "group"))
        side = "dst" if op in ("send", "isend") else "src"
        peer = a(args, kwargs, 1, side)
        if peer is None and kwargs.get("group_" + side) is not None:
            peer = g.members[kwargs["group_" + side]]
        if peer is None:
            raise UnsupportedCollective(f"{op} without a source rank cannot be traced (name the peer)")
        t = a(args, kwargs, 0, "tensor")
        fields = {"group": g, "tensor": t, "peer_world": peer, "tag": a(args, kwargs, 3, "tag", 0)}
        tagged = self.tensor_phases.pop(id(t), None)
        if tagged is not None:
            fields["phase"], fields["micro_batch"] = tagged
        return fields

    def _record(self, op, f, t0, t1):
        g = f["group"]
        r = {"group": g.name, "group_size": g.size, "group_rank": g.rank, "seq": g.seq, "op": op,
             "phase": f.get("phase", self.phase), "step": self.step, "micro_batch": f.get("micro_batch", self.micro_batch),
             "t_start_us": t0, "t_end_us": t1}
        g.seq += 1
        if not g.announced:
            r["members"] = g.members
            g.announced = True
        t = f["tensor"]
        if op == "barrier":
            r["count"], r["bytes"], r["wire_bytes"] = 0, 0, 0
        else:
            if t.dtype not in _DTYPES:
                raise UnsupportedCollective(f"{op} of dtype {t.dtype}: not a trace dtype")
            dtype, size = _DTYPES[t.dtype]
            count = t.numel()
            if op == "all_gather" and "gather" in f:
                counts = [x.numel() for x in f["gather"]]
                count = sum(counts)
                r["counts"] = counts
            elif "counts" in f:
                r["counts"] = f["counts"]
                count = sum(f["counts"])
            r["dtype"], r["count"], r["bytes"] = dtype, count, count * size
            r["wire_bytes"] = _wire_bytes(op, count * size, g.size)
        if "reduce" in f:
            r["reduce"] = f["reduce"]
        if "root_world" in f:
            r["root_world"] = f["root_world"]
            r["root"] = g.members.index(f["root_world"])
        if "peer_world" in f:
            r["peer_world"] = f["peer_world"]
            r["peer"] = g.members.index(f["peer_world"])
            r["tag"] = f["tag"]
        self.pending.append(r)
        if self.step < 0:
            self.flush()

    def flush(self):
        """Writes the buffered records (the recorder calls it at the end of every step)."""
        if self.file is not None:
            self.file.write_many(self.pending)
        self.pending = []

    def close(self):
        self.flush()
        if self.file is not None:
            self.file.close()
