#!/usr/bin/env python3
"""Hugging Face `LlamaForCausalLM` split into pipeline stages and trained by torch.distributed.pipelining's own
schedules (ScheduleGPipe, Schedule1F1B) on gloo, one stage per process, recorded through the schedule's seams
(python/shardproof_torch/pipelining.py) so that `shardproof judge DIR` proves it (docs/judge.md §1b):

    .venv/bin/python examples/pipelining/train.py --schedule gpipe --steps 20 --out runs/pp-gpipe
    .venv/bin/python examples/pipelining/train.py --schedule 1f1b --out runs/pp-1f1b
    build/bin/shardproof judge runs/pp-gpipe

Each stage holds its decoder layers (embed_tokens on the first, norm and lm_head on the last) under their Hugging
Face names. The loss function the schedule calls returns Σ token losses of its micro-batch / (targets of the global
batch) · M, and the schedule's scale_grads divides the gradients by the M micro-batches: the single-device per-token
mean. --scale-grads off with a loss function that does not multiply by M is the same training; --loss mean returns
each micro-batch's own token mean (what most pipeline examples do: a per-micro-batch mean, which the judge names);
--accumulate K accumulates each step's gradient over K schedule calls of M / K micro-batches (under scale_grads,
torch divides what is accumulated at every call: torchtitan#1733, as the pinned torch ships it).
The clipping norm is each stage's squared norm summed over the pipeline group (a statistic). The batches and the
schedule are examples/torch/train_llama.py's.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from hf_common import (adamw, build_model, common_flags, finish, init_gloo, launch, lr_at,  # noqa: E402
                       optimizer_step, progress, step_batches)

from shardproof_torch import pipelining  # noqa: E402


def make_loss(args, n_global):
    """The loss function the schedule calls on the last stage for each micro-batch: (logits, targets) -> the scalar
    it backpropagates. n_global[0] is the step's target count (the loop sets it before each step)."""
    M = args.micro_batches // args.accumulate  # per schedule call

    def loss_fn(logits, targets):
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-1,
                             reduction="sum")
        if args.loss == "mean":  # each micro-batch's own token mean
            return ce / (targets >= 0).sum()
        return ce / n_global[0] * (M if args.scale_grads == "on" else 1)
    return loss_fn


def clip_grad_norm(params, max_norm, group):
    """torch.nn.utils.clip_grad_norm_'s arithmetic over the whole model: each stage's squared norm summed over the
    pipeline group, the coefficient min(1, max_norm / (norm + 1e-6))."""
    grads = [p.grad for p in params if p.grad is not None]
    sq = torch.stack([torch.linalg.vector_norm(g) for g in grads]).square().sum()
    dist.all_reduce(sq, group=group)
    norm = sq.sqrt()
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef)
    return norm


def worker(rank, args, world, port):
    init_gloo(rank, world, port)
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe
    group = dist.new_group(list(range(world)))
    model = pipelining.split_llama(build_model(args), rank, world)
    stage = pipelining.stage(model, rank, world, group, micro_batch=args.micro_batch, seq_len=args.seq)
    n_global = [1]
    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[args.schedule]
    per_call = args.micro_batches // args.accumulate
    schedule = kind(stage, n_microbatches=per_call, loss_fn=make_loss(args, n_global),
                    scale_grads=args.scale_grads == "on")
    opt, hyper = adamw(model, args)
    pipe = pipelining.attach(schedule, opt, args.out, steps=args.steps, hyper=hyper, script=os.path.abspath(__file__),
                             accumulate=args.accumulate)
    rec = pipe.recorder
    for step in range(args.steps):
        lr = lr_at(args, step)
        rec.begin_step(step, lr)
        batches, n_global[0] = step_batches(args, step)
        tokens = torch.cat(batches)
        opt.zero_grad(set_to_none=True)
        rows = tokens.shape[0] // args.accumulate
        for c in range(args.accumulate):  # gradient accumulation over schedule calls (torchtitan#1733's pattern)
            pipe.step(tokens[c * rows:(c + 1) * rows], first=c * per_call)
        rec.gradients()
        with rec.statistics():
            norm = clip_grad_norm(model.parameters(), args.clip, group)
        rec.clipped(norm.item())
        optimizer_step(rec, opt, lr)
        progress(args, rank, step, lr, norm)
    finish(rec)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_flags(ap)
    ap.add_argument("--schedule", default="gpipe", choices=["gpipe", "1f1b"])
    ap.add_argument("--scale-grads", default="on", choices=["on", "off"],
                    help="the schedule's scale_grads (divide the gradients by the micro-batch count)")
    ap.add_argument("--loss", default="token", choices=["token", "mean"],
                    help="token: Σ losses / global targets (· M under scale_grads); mean: each micro-batch's mean")
    ap.add_argument("--accumulate", type=int, default=1,
                    help="schedule calls per optimizer step, each on micro-batches / accumulate micro-batches")
    args = ap.parse_args(argv)
    if args.micro_batches % args.accumulate:
        ap.error(f"--micro-batches {args.micro_batches} must be a multiple of --accumulate {args.accumulate}")
    if args.layers < args.world:
        ap.error(f"--layers {args.layers} must be at least --world {args.world} (one stage per rank)")
    return args


def main(argv=None):
    launch(worker, parse_args(argv))


if __name__ == "__main__":
    main()
