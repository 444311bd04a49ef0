"""Recorder.attach's discovery (python/shardproof_torch/discovery.py) on real wrappers and placements, on gloo:
Hugging Face names through DDP and torch.compile; every DTensor box (FSDP2 ZeRO-3 and ZeRO-2, uneven torch.chunk
shards; FSDP2 + tensor parallelism on a 2 x 2 mesh) equal to the slice of the gathered tensor that rank holds; the
replicas (DDP's group, TP-replicated norms); the groups and grid; a Partial parameter refused by name; FSDP2's
MixedPrecisionPolicy read (bf16 parameters, fp32 reduction) or refused by name (a bf16 reduction)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_gloo  # noqa: E402

from shardproof_torch import discovery, layout  # noqa: E402
from shardproof_torch.pieces import Piece, is_dtensor  # noqa: E402

CONFIG = dict(vocab_size=101, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=16, rms_norm_eps=1e-5, tie_word_embeddings=False)


def hf_model(**over):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**dict(CONFIG, **over)))


def shapes(model):
    return layout.logical_shapes(discovery.unwrap(model).config.to_dict())


def boxes_match(pieces):
    """Every piece's box, cut from the gathered tensor, is the rank's local tensor, bit for bit."""
    out = []
    for pc in pieces:
        full = pc.param.full_tensor() if is_dtensor(pc.param) else pc.param
        box = full[tuple(slice(o, o + s) for o, s in zip(pc.offsets, pc.sizes))]
        out.append(torch.equal(box, pc.local(pc.param).detach()))
    return all(out)


def ddp_compiled(rank, world):
    from torch.nn.parallel import DistributedDataParallel
    model = torch.compile(DistributedDataParallel(hf_model()), backend="eager")
    pcs = discovery.pieces(model, shapes(model))
    groups = discovery.process_groups(model)
    return ([(p.name, p.offsets, p.sizes, p.replicas) for p in pcs], discovery.grid_sizes(groups),
            discovery.zero_stage(model), [p.shard(p.param.shape) for p in pcs])


def test_ddp_and_compile_names_and_replicas():
    (names, grid, zero, shards), _ = sp_gloo.run(2, ddp_compiled)
    assert [n for n, *_ in names] == list(layout.logical_shapes(hf_model().config.to_dict()))
    assert all(rep == (0, 1) and all(o == 0 for o in off) for _, off, _, rep in names)
    assert grid == (2, 1, 1) and zero == 0 and shards == [None] * len(names)


def fsdp(rank, world, reshard):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    model = hf_model()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    pcs = discovery.pieces(model, shapes(model))
    groups = discovery.process_groups(model)
    return (boxes_match(pcs), {p.name: (p.offsets, p.sizes, p.replicas, p.shard(p.param.shape)) for p in pcs},
            discovery.grid_sizes(groups), discovery.zero_stage(model))


@pytest.mark.parametrize("reshard,stage", [(True, 3), (False, 2)])
def test_fsdp2_boxes_are_torch_chunk(reshard, stage):
    ranks = sp_gloo.run(3, fsdp, reshard)
    for rank, (ok, boxes, grid, zero) in enumerate(ranks):
        assert ok and grid == (3, 1, 1) and zero == stage
        assert boxes["model.embed_tokens.weight"][:3] == ((34 * rank, 0), (34 if rank < 2 else 33, 32), (rank,))
        # 101 rows in 3: 34, 34, 33 (torch.chunk) is not an even split: the (offsets, sizes) form
        assert boxes["model.embed_tokens.weight"][3] == {"offsets": [34 * rank, 0],
                                                         "sizes": [34 if rank < 2 else 33, 32]}
        # 64 rows of gate_proj in 3: 22, 22, 20
        assert boxes["model.layers.0.mlp.gate_proj.weight"][1][0] == (22 if rank < 2 else 20)


def fsdp_tp(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    model = hf_model(vocab_size=128)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    plan = {}
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{i}."
        plan.update({p + "self_attn.q_proj": ColwiseParallel(), p + "self_attn.k_proj": ColwiseParallel(),
                     p + "self_attn.v_proj": ColwiseParallel(), p + "self_attn.o_proj": RowwiseParallel(),
                     p + "mlp.gate_proj": ColwiseParallel(), p + "mlp.up_proj": ColwiseParallel(),
                     p + "mlp.down_proj": RowwiseParallel()})
    parallelize_module(model, mesh["tp"], plan)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    pcs = discovery.pieces(model, shapes(model))
    groups = discovery.process_groups(model)
    return (boxes_match(pcs), {p.name: (p.offsets, p.sizes, p.replicas) for p in pcs},
            discovery.grid_sizes(groups))


def test_fsdp2_with_tensor_parallel_on_a_2x2_mesh():
    ranks = sp_gloo.run(4, fsdp_tp)
    for rank, (ok, boxes, grid) in enumerate(ranks):
        dp, tp = rank // 2, rank % 2
        assert ok and grid == (2, 2, 1)
        # q_proj (32, 32): rows cut in tp 2, each cut in dp 2: the rank's 8 rows at 16 tp + 8 dp
        assert boxes["model.layers.0.self_attn.q_proj.weight"] == ((16 * tp + 8 * dp, 0), (8, 32), (rank,))
        # o_proj (32, 32): columns cut in tp, rows in dp
        assert boxes["model.layers.0.self_attn.o_proj.weight"] == ((16 * dp, 16 * tp), (16, 16), (rank,))
        # a norm weight: rows cut in dp, replicated over tp
        assert boxes["model.norm.weight"] == ((16 * dp,), (16,), (2 * dp, 2 * dp + 1))


def partial(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial
    model = hf_model()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    w = model.model.norm.weight
    model.model.norm.weight = torch.nn.Parameter(DTensor.from_local(w.detach(), mesh, [Partial()]))
    try:
        discovery.pieces(model, shapes(model))
    except discovery.RefusedModel as e:
        return str(e)
    return None


def test_partial_parameter_is_refused_by_name():
    msg = sp_gloo.run(2, partial)[0]
    assert msg and "'model.norm.weight'" in msg and "Partial" in msg and "hint:" in msg


def mixed_precision_fsdp2(rank, world, reduce):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    model = hf_model()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    fully_shard(model, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce))
    try:
        return discovery.fsdp2_param_dtype(model)
    except discovery.RefusedModel as e:
        return "refused: " + str(e)


def test_fsdp2_mixed_precision_policy_read_or_refused_by_name():
    assert sp_gloo.run(2, mixed_precision_fsdp2, torch.float32) == ["bfloat16", "bfloat16"]
    msg = sp_gloo.run(2, mixed_precision_fsdp2, torch.bfloat16)[0]
    assert msg.startswith("refused: ") and "reduce_dtype=torch.bfloat16" in msg and "§1d" in msg, msg


def test_shard_field_forms():
    pc = Piece("w", None, (8, 0), (8, 32), (0,))
    assert pc.shard((32, 32)) == [0, 1, 4]
    assert Piece("w", None, (0, 16), (32, 16), (0,)).shard((32, 32)) == [1, 1, 2]
    assert Piece("w", None, (0,), (32,), (0,)).shard((32,)) is None
    assert Piece("w", None, (32, 0), (0, 32), (0,)).shard((32, 32)) == {"offsets": [32, 0],
                                                                                  "sizes": [0, 32]}
    assert Piece("w", None, (16, 16), (16, 16), (0,)).shard((32, 32)) == {"offsets": [16, 16],
                                                                                    "sizes": [16, 16]}
