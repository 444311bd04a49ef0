"""Discovery: what `Recorder.attach(model, optimizer, ...)` reads off a model instead of asking the user for it.

For every parameter: its Hugging Face name (through DDP, torch.compile, FSDP2 and activation-checkpoint wrappers),
the box of the logical tensor this rank holds — offsets and sizes per dim, the form torch's distributed checkpoint
uses (a DTensor's from `compute_local_shape_and_global_offset`, the function DCP calls; a plain tensor's is the
whole) — and the replicas: the world ranks that hold the same box (a DTensor's Replicate mesh dims, DDP's group).
For the run: the process groups its collectives use (each mesh dim's, DDP's) named by their axis (dp, tp, pp), and
the grid and ZeRO stage those imply. What it cannot judge it refuses by name: a Partial placement (a pending sum),
a mesh dim it cannot place on an axis, a parameter without a Hugging Face name, a box that is not one.
Not the recorder: it reads, and never changes a module, a tensor or an optimizer. Torch 2.x only (DTensor).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .pieces import Piece, is_dtensor

# Prefixes wrappers add to parameter names: torch.compile, DDP / DeepSpeed engine, FSDP1, activation checkpointing.
_WRAPPER_PREFIXES = ("_orig_mod.", "module.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")
# Mesh dim names, as torchtitan and the FSDP2 / TP tutorials spell them, to the engine's axes.
_AXIS_OF_DIM = {"dp": "dp", "dp_shard": "dp", "fsdp": "dp", "shard": "dp", "dp_shard_cp": "dp", "data": "dp",
                "tp": "tp", "tensor": "tp", "pp": "pp", "pipeline": "pp"}


class RefusedModel(ValueError):
    """The model holds something the judge cannot prove as it is; the message names it and the fix."""


def wrappers(model):
    """The chain from `model` down to the module under the wrappers (DDP's and DeepSpeed's `.module`,
    torch.compile's `._orig_mod`), outermost first."""
    chain = [model]
    while len(chain) < 16:
        m = chain[-1]
        inner = getattr(m, "_orig_mod", None)
        if inner is None and type(m).__name__ in ("DistributedDataParallel", "DeepSpeedEngine", "PipelineEngine"):
            inner = m.module
        if inner is None:
            break
        chain.append(inner)
    return chain


def unwrap(model):
    """The module under the wrappers."""
    return wrappers(model)[-1]


def ddp_group(model):
    """The process group of a DistributedDataParallel wrapper in the chain, or None."""
    for m in wrappers(model):
        if type(m).__name__ == "DistributedDataParallel":
            return m.process_group
    return None


def hf_name(name):
    """A parameter name without the prefixes wrappers insert (at any depth)."""
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def _box_of_dtensor(name, p):
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    mesh, placements = p.device_mesh, p.placements
    names = mesh.mesh_dim_names or tuple(f"dim{i}" for i in range(mesh.ndim))
    for i, pl in enumerate(placements):
        if pl.is_partial():
            raise RefusedModel(f"parameter {name!r} has placement Partial ({pl}) on mesh dim {names[i]!r}: a pending sum, not a "
                               f"value; the judge proves parameters that are Shard or Replicate on every mesh dim\n"
                               f"hint: redistribute it to Replicate() (or shard it) before training")
    sizes, offsets = compute_local_shape_and_global_offset(tuple(p.shape), mesh, placements)
    local = tuple(p.to_local().shape)
    if tuple(sizes) != local:
        raise RefusedModel(f"parameter {name!r}: its local tensor has shape {list(local)}, but its placements "
                           f"{list(placements)} on mesh {list(mesh.mesh.shape)} give {list(sizes)}: not a box of the "
                           f"logical tensor the recording can describe")
    return tuple(int(o) for o in offsets), tuple(int(s) for s in sizes)


def _holders(boxes):
    """{(name, offsets, sizes): sorted world ranks} from every rank's boxes, exchanged once (set-up: before the
    recorder's trace starts, so the exchange is not part of the recorded run)."""
    everyone = [None] * dist.get_world_size() if dist.is_initialized() else [boxes]
    if dist.is_initialized():
        dist.all_gather_object(everyone, boxes)
    holders = {}
    for r, theirs in enumerate(everyone):
        for key in theirs:
            holders.setdefault(key, []).append(r)
    return holders


def exchange(found, shapes, flat=False, sources=None):
    """The Piece of every tensor this rank holds, in the order of `shapes`, from found = {HF name: (parameter,
    offsets, sizes)}: the boxes (fragments with `flat`) are exchanged once and each piece's replicas are the ranks
    holding the same one. A rank may hold a subset of the tensors (a pipeline stage, a ZeRO partition); every tensor
    of the config must be held by some rank, which every rank checks alike. sources: {name: Piece.source}."""
    holders = _holders([(n, o, s) for n, (_, o, s) in found.items()])
    held = {key[0] for key in holders}
    missing = [n for n in shapes if n not in held]
    if missing:
        raise RefusedModel(f"no rank holds {missing[0]!r} (of {len(missing)} tensors of the config no rank holds)\n"
                           f"hint: tie_word_embeddings in the config must match the model")
    sources = sources or {}
    return [Piece(n, found[n][0], found[n][1], found[n][2], tuple(holders[(n, found[n][1], found[n][2])]), flat,
                  sources.get(n)) for n in shapes if n in found]


def pieces(model, shapes):
    """Piece of every parameter of `model` (wrapped or not) in the order of `shapes` (HF name -> logical shape,
    layout.logical_shapes). Every rank of the world must call it (it exchanges the boxes once)."""
    found = {}
    for raw, p in unwrap(model).named_parameters():
        name = hf_name(raw)
        if name not in shapes:
            raise RefusedModel(f"parameter {raw!r} (as {name!r}) is not a tensor of the LLaMA model its config "
                               f"describes (names are Hugging Face's: {', '.join(list(shapes)[:3])}, ...)\n"
                               f"hint: record a LlamaForCausalLM, or map the names (integrations: torchtitan)")
        if list(p.shape) != list(shapes[name]):
            raise RefusedModel(f"parameter {name!r} has logical shape {list(p.shape)}; the config gives "
                               f"{list(shapes[name])}")
        offsets, sizes = _box_of_dtensor(name, p) if is_dtensor(p) else ((0,) * p.dim(), tuple(p.shape))
        found[name] = (p, offsets, sizes)
    return exchange(found, shapes)


def hf_config_of(model):
    """The model's config.json as save_pretrained writes it (transformers' diff form: the keys that differ from the
    defaults, with model_type and transformers_version), with `architectures` naming the model's class."""
    inner = unwrap(model)
    config = getattr(inner, "config", None)
    if config is None or not hasattr(config, "to_diff_dict"):
        raise RefusedModel(f"the model ({type(inner).__name__}) has no Hugging Face config to read\n"
                           f"hint: Recorder.attach(..., hf_config=<its config.json as a dict>)")
    doc = config.to_diff_dict()
    # FSDP2 makes the module's class a subclass named FSDP<class>: the model's own class is the first other one
    doc["architectures"] = [next(c.__name__ for c in type(inner).__mro__ if not c.__name__.startswith("FSDP"))]
    return doc


def _axis(name, i):
    axis = _AXIS_OF_DIM.get(name or "")
    if axis is None:
        raise RefusedModel(f"mesh dim {i} is named {name!r}: shardproof_torch places mesh dims on the axes dp, tp "
                           f"and pp by name ({', '.join(sorted(_AXIS_OF_DIM))})\n"
                           f"hint: init_device_mesh(..., mesh_dim_names=(\"dp\", \"tp\"))")
    return axis


def meshes(model):
    """The device meshes of the model's DTensor parameters, each once."""
    out = []
    for p in unwrap(model).parameters():
        if is_dtensor(p) and all(p.device_mesh is not m for m in out):
            out.append(p.device_mesh)
    return out


def process_groups(model, data_parallel_group=None):
    """{axis: process group} of the groups the run's collectives use: every mesh dim's, DDP's."""
    data_parallel_group = data_parallel_group or ddp_group(model)
    groups = {}
    for mesh in meshes(model):
        names = mesh.mesh_dim_names or tuple(None for _ in range(mesh.ndim))
        for i, name in enumerate(names):
            axis = _axis(name, i)
            pg = mesh.get_group(i)
            if axis in groups and groups[axis] is not pg and \
                    dist.get_process_group_ranks(groups[axis]) != dist.get_process_group_ranks(pg):
                raise RefusedModel(f"two {axis} groups hold different ranks: the engine's grid has one {axis} axis")
            groups.setdefault(axis, pg)
    if data_parallel_group is not None:
        groups.setdefault("dp", data_parallel_group)
    return groups


def grid_sizes(groups):
    """(dp, tp, pp) the groups imply (an axis without a group has size 1)."""
    size = {a: (dist.get_world_size(g) if g is not None else 1) for a, g in groups.items()}
    return size.get("dp", 1), size.get("tp", 1), size.get("pp", 1)


def _fsdp2_states(model):
    """(module, FSDP2 state) of every fully_shard'ed module under `model`'s wrappers."""
    for m in unwrap(model).modules():
        get_state = getattr(m, "_get_fsdp_state", None)
        if get_state is not None:
            yield m, get_state()


def zero_stage(model):
    """The ZeRO stage FSDP2 implements: 3 when it reshards parameters after forward (the default), 2 when not
    (`reshard_after_forward=False`), 0 without FSDP2."""
    stages = set()
    for _, state in _fsdp2_states(model):
        group = getattr(state, "_fsdp_param_group", None)
        if group is not None:
            stages.add(2 if group.post_forward_mesh_info is None else 3)
    if len(stages) > 1:
        raise RefusedModel("FSDP2 units disagree on reshard_after_forward: one ZeRO stage per run is declared")
    return stages.pop() if stages else 0


def fsdp2_units(model):
    """FSDP2's fully_shard units, as the judge's traffic model reads them (contract strategy.units): for each unit
    the HF names of the parameters it shards together and whether it reshards them after forward. None without
    FSDP2. Read before the first forward: the root unit of reshard_after_forward=None (auto) keeps its parameters
    after forward (FSDP2's lazy init clears its post-forward mesh), every other unit as it was built."""
    root = unwrap(model)
    names = {id(p): hf_name(raw) for raw, p in root.named_parameters()}
    units = []
    for m, state in _fsdp2_states(root):
        groups = getattr(state, "_fsdp_param_groups", None)
        if groups is None:
            groups = [g for g in [getattr(state, "_fsdp_param_group", None)] if g is not None]
        for g in groups:
            keep = m is root and getattr(state, "_auto_reshard_after_forward", False)
            units.append({"tensors": [names[id(fp.sharded_param)] for fp in g.fsdp_params],
                          "reshard_after_forward": g.post_forward_mesh_info is not None and not keep})
    return units or None


def fsdp2_param_dtype(model):
    """FSDP2's MixedPrecisionPolicy as the contract's precision.param_dtype: "bfloat16" when every unit computes with
    bf16 parameters and reduces gradients in fp32, None without one (fp32). Any other policy is refused by name: a
    bf16 or unset reduce_dtype (the gradients reduced in bf16), fp16, units that disagree."""
    found = set()
    for _, state in _fsdp2_states(model):
        policy = getattr(state, "_mp_policy", None)
        param, reduce = getattr(policy, "param_dtype", None), getattr(policy, "reduce_dtype", None)
        if param in (None, torch.float32) and reduce in (None, torch.float32):
            found.add(None)
        elif param == torch.bfloat16 and reduce == torch.float32:
            found.add("bfloat16")
        else:
            raise RefusedModel(f"FSDP2's MixedPrecisionPolicy(param_dtype={param}, reduce_dtype={reduce}): the judge "
                               f"judges bf16 parameters with fp32 gradient reduction (reduce_dtype=torch.float32) "
                               f"and fp32 (docs/judge.md §1d)")
    if len(found) > 1:
        raise RefusedModel("FSDP2 units disagree on MixedPrecisionPolicy: one parameter dtype per run is declared")
    return found.pop() if found else None


def _strategy_name(dp, tp, pp, zero):
    parts = [f"{a}{n}" for a, n in (("dp", dp), ("tp", tp), ("pp", pp)) if n > 1] + ([f"zero{zero}"] if zero else [])
    return "-".join(parts) or "single"


def tp_plan(model):
    """contract strategy.tp_plan: "dtensor" when DTensor tensor parallelism (parallelize_module's ColwiseParallel /
    RowwiseParallel) splits a parameter on a mesh with a tp dim, "dtensor-sequence-parallel" when a norm weight is
    on the tp dim too (SequenceParallel replicates it there); None without DTensor tensor parallelism."""
    on_tp = [hf_name(raw) for raw, p in unwrap(model).named_parameters()
             if is_dtensor(p) and any(_AXIS_OF_DIM.get(n or "") == "tp" for n in (p.device_mesh.mesh_dim_names or ()))]
    if not on_tp:
        return None
    return "dtensor-sequence-parallel" if any(n.endswith("norm.weight") for n in on_tp) else "dtensor"


def discover(model, optimizer, hf_config=None, name=None, groups=None):
    """What Recorder.attach passes to the Recorder: {rank, strategy, hf_config, pieces, groups, optimizer (the one
    holding AdamW's state), ddp (a DDP wrapper in the chain, or None)}. groups: {axis: process group} given besides
    the model's own (a pipeline's). Every rank calls it."""
    hf_config = hf_config or hf_config_of(model)
    from .layout import logical_shapes
    found = pieces(model, logical_shapes(hf_config))
    groups = dict(process_groups(model), **(groups or {}))
    dp, tp, pp = grid_sizes(groups)
    world = dist.get_world_size() if dist.is_initialized() else 1
    if dp * tp * pp != world:
        raise RefusedModel(f"the model's groups give dp {dp} x tp {tp} x pp {pp} = {dp * tp * pp} ranks, the world "
                           f"has {world}\nhint: every rank must be on the mesh (mesh_dim_names dp, tp, pp)")
    zero, local = zero_stage(model), optimizer
    if type(optimizer).__name__ == "ZeroRedundancyOptimizer":
        zero, local = max(zero, 1), optimizer.optim
    ddp = next((m for m in wrappers(model) if type(m).__name__ == "DistributedDataParallel"), None)
    strategy = {"name": name or _strategy_name(dp, tp, pp, zero), "dp": dp, "tp": tp, "pp": pp, "zero": zero}
    units = fsdp2_units(model) if zero >= 2 else None
    if units:
        strategy["units"] = units
    plan = tp_plan(model) if tp > 1 else None
    if plan:
        strategy["tp_plan"] = plan
    return {"rank": dist.get_rank() if dist.is_initialized() else 0, "hf_config": hf_config, "pieces": found,
            "groups": groups, "optimizer": local, "ddp": ddp, "strategy": strategy,
            "param_dtype": fsdp2_param_dtype(model) if zero >= 2 else None}
