"""The trace of torch 2.x collectives (python/shardproof_torch/trace.py) on gloo, against closed forms: FSDP2-style
all_gather_single / reduce_scatter_single and a functional all-reduce (DTensor's path) with their counts and bytes
on the recorder's groups; torch.distributed.pipelining's GPipe and 1F1B schedules, whose p2p name the peer as a rank
of the group (group_dst / group_src, batch_isend_irecv): every send has its receive, with the same count, tag and
peers; and an all_to_all refused by name."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_gloo  # noqa: E402

from shardproof_torch.trace import Group, TraceRecorder, UnsupportedCollective  # noqa: E402


def traced(tmp, rank, world, body):
    import torch.distributed as dist
    path = os.path.join(tmp, f"trace-{rank}.jsonl")
    tr = TraceRecorder(path, rank, {None: Group("world", list(range(world)), rank)})
    tr.install()
    try:
        body(dist)
    finally:
        tr.close()
        tr.uninstall()
    import json
    with open(path) as f:
        return [json.loads(line) for line in f]


def collectives(rank, world, tmp):
    def body(dist):
        import torch.distributed._functional_collectives as funcol
        out = torch.empty(6 * world)
        dist.all_gather_single(out, torch.full((6,), float(rank)))
        assert out.tolist() == [float(r) for r in range(world) for _ in range(6)]
        rs = torch.empty(3)
        dist.reduce_scatter_single(rs, torch.ones(3 * world))
        assert rs.tolist() == [float(world)] * 3
        y = funcol.all_reduce(torch.full((5,), float(rank + 1)), "sum", dist.group.WORLD)
        assert y.tolist() == [world * (world + 1) / 2] * 5
        try:
            dist.all_to_all_single(torch.empty(world), torch.zeros(world))
        except UnsupportedCollective as e:
            assert "all_to_all_single" in str(e)
        else:
            raise AssertionError("all_to_all_single was not refused")
    return traced(tmp, rank, world, body)


def test_fsdp2_and_functional_collectives(tmp_path):
    for recs in sp_gloo.run(2, collectives, str(tmp_path)):
        assert [(r["op"], r["count"], r["bytes"], r.get("counts"), r.get("reduce")) for r in recs] == [
            ("all_gather", 12, 48, [6, 6], None), ("reduce_scatter", 6, 24, [3, 3], "sum"),
            ("all_reduce", 5, 20, None, "sum")]


def pipeline(rank, world, tmp, schedule):
    def body(dist):
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
        torch.manual_seed(0)
        layers = [torch.nn.Linear(8, 8) for _ in range(2 * world)]
        stage = PipelineStage(torch.nn.Sequential(*layers[2 * rank:2 * rank + 2]), rank, world, torch.device("cpu"))
        sched = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule](
            stage, n_microbatches=4, loss_fn=lambda out, target: ((out - target) ** 2).sum())
        x, y = torch.randn(8, 8), torch.randn(8, 8)
        sched.step(x) if rank == 0 else sched.step(target=y, losses=[])
    return traced(tmp, rank, world, body)


@pytest.mark.parametrize("schedule", ["gpipe", pytest.param("1f1b", marks=pytest.mark.long)])
def test_pipelining_p2p_pairs(tmp_path, schedule):
    r0, r1 = sp_gloo.run(2, pipeline, str(tmp_path), schedule)
    p2p = lambda recs, op: sorted((r["dtype"], r["count"], r["tag"]) for r in recs if r["op"] == op)  # noqa: E731
    # every send has its receive (the first step also sends the stages' shapes as objects: I32, U8, I64)
    assert p2p(r0, "isend") == p2p(r1, "irecv") and p2p(r1, "isend") == p2p(r0, "irecv")
    # 4 micro-batches: activations 0 -> 1 (2 x 8 floats each), their gradients 1 -> 0
    assert [x for x in p2p(r0, "isend") if x[0] == "F32"] == [("F32", 16, 0)] * 4
    assert [x for x in p2p(r1, "isend") if x[0] == "F32"] == [("F32", 16, 0)] * 4
    assert all(r["peer_world"] == 1 - i for i, recs in enumerate((r0, r1)) for r in recs if "peer_world" in r)
