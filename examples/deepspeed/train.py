#!/usr/bin/env python3
"""Hugging Face `LlamaForCausalLM` trained by DeepSpeed's engine — ZeRO-1, 2 or 3 on its CPU accelerator (gloo),
fp32, torch.optim.AdamW as the client optimizer, DeepSpeed's gradient accumulation and clipping — recorded through
the engine's seams (python/shardproof_torch/deepspeed_engine.py) so that `shardproof judge DIR` proves it:

    .venv/bin/python examples/deepspeed/train.py --zero 2 --steps 20 --out runs/ds-zero2
    build/bin/shardproof judge runs/ds-zero2      # PASS (exit 0), traffic compared; --zero 3: UNVERIFIED (exit 3)

(The other files here, config.json and ds_config.json, are the engine's own DeepSpeed-config example:
docs/deepspeed.md.) Each rank trains gradient_accumulation_steps = M / dp micro-batches per step: global
micro-batches [dp_rank·k, (dp_rank+1)·k) of the step's M, and gives engine.backward Σ token losses / (targets of
the global batch) · dp · k, which DeepSpeed's division by the accumulation steps and its mean over dp turn into the
single-device per-token mean. The batches and the schedule are examples/torch/train_llama.py's. The first run on a
machine builds DeepSpeed's CPU communication op with the C++ compiler and Python's headers (python3-dev).
--manual-accumulation accumulates in the loop instead (the config's gradient_accumulation_steps 1, k backward calls,
one engine.step()): under ZeRO-2 every backward is then an accumulation boundary and only the last micro-batch's
gradient reaches the step, as DeepSpeed 0.19.8 ships it (allenai/open-instruct#1498); the judge FAILs it at
gradients, step 0 (tests/python/test_deepspeed.py).
--module-branch sends each micro-batch's first row through the engine and the others through engine.module, one
loss from both (DeepSpeed#8224's pattern; examples/zoo's deepspeed-8224 re-plants the bug it met).
--bug ds-bucket-skipped (ZeRO-1/2) plants a traffic bug in DeepSpeed's own reduction path: from step 1 on, the last
gradient slice of every bucket DeepSpeed's allreduce_and_scatter is handed is dropped, never all-reduced (a parameter
fragment left out of the reduction); the judge's traffic view FAILs at step 1, grad_sync on dp[tp0.pp0] (the bytes
of that slice short of DeepSpeed's modelled reduction).
"""
import argparse
import datetime
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from hf_common import (adamw, build_model, check_micro_batches, common_flags, finish, gloo_env, launch,  # noqa: E402
                       loss_sum, lr_at, progress, step_batches, targets)

from shardproof_torch import deepspeed_engine  # noqa: E402


def ds_config(args, world):
    return {"train_micro_batch_size_per_gpu": args.micro_batch,
            "gradient_accumulation_steps": 1 if args.manual_accumulation else args.micro_batches // world,
            "gradient_clipping": args.clip,
            # ZeRO-3 keeps a parameter under stage3_param_persistence_threshold elements whole (1e5 by default:
            # every tensor of a small model); 0 partitions them all, as a large model's are
            "zero_optimization": {"stage": args.zero, "stage3_param_persistence_threshold": 0},
            "steps_per_print": 1 << 30, "wall_clock_breakdown": False}


def skip_last_bucket_slice(engine):
    """The planted ds-bucket-skipped: from step 1, DeepSpeed's ZeRO-1/2 allreduce_and_scatter gets its bucket
    without the last (copy ranks, gradient slice, output) entry, so that slice is never all-reduced."""
    z = engine.optimizer
    reduce = z.allreduce_and_scatter

    def skipping(bucket, *args, **kwargs):
        if engine.global_steps >= 1 and len(bucket) > 0:
            bucket = bucket[:-1]
        return reduce(bucket, *args, **kwargs)

    z.allreduce_and_scatter = skipping


def worker(rank, args, world, port):
    gloo_env(rank, world, port, launcher_vars=True)
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo", timeout=datetime.timedelta(seconds=300))
    model = build_model(args)
    opt, hyper = adamw(model, args)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(args, world))
    if args.bug == "ds-bucket-skipped":
        skip_last_bucket_slice(engine)
    ds = deepspeed_engine.attach(engine, args.out, steps=args.steps, hyper=hyper, seq_len=args.seq,
                                 script=os.path.abspath(__file__), micro_batches=args.micro_batches)
    k = args.micro_batches // world
    gas = engine.gradient_accumulation_steps()  # what engine.backward divides the loss by
    for step in range(args.steps):
        lr = lr_at(args, step)
        for g in engine.optimizer.param_groups:
            g["lr"] = lr
        batches, n_global = step_batches(args, step)
        for i in range(rank * k, (rank + 1) * k):
            ds.micro_batch(i, batches[i])
            s = loss_sum(engine, batches[i]) if not args.module_branch else \
                loss_sum(engine, batches[i][:1]) + loss_sum(engine.module, batches[i][1:])
            objective = s / n_global * world * gas
            ds.loss(i, s.item(), targets(batches[i]), objective.item())
            engine.backward(objective)
            if not args.manual_accumulation or i == (rank + 1) * k - 1:
                engine.step()
        progress(args, rank, step, lr, engine.get_global_grad_norm())
    finish(ds)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_flags(ap)
    ap.add_argument("--zero", type=int, default=2, choices=[1, 2, 3], help="DeepSpeed's ZeRO stage")
    ap.add_argument("--manual-accumulation", action="store_true",
                    help="gradient_accumulation_steps 1 in the config, k backward calls and one engine.step() per "
                         "step (open-instruct#1498's loop)")
    ap.add_argument("--module-branch", action="store_true",
                    help="each micro-batch's first row through the engine, the others through engine.module: the "
                         "model used twice in one loss (engine(x) + engine.module(y), as DeepSpeed#8224's fix tests "
                         "it; the zoo's deepspeed-8224 entry)")
    ap.add_argument("--bug", default=None, choices=["ds-bucket-skipped"],
                    help="plant a bug in DeepSpeed's path (ZeRO-1/2): ds-bucket-skipped drops the last gradient "
                         "slice of every reduction bucket from step 1 on")
    args = ap.parse_args(argv)
    if args.bug and args.zero == 3:
        ap.error("--bug ds-bucket-skipped patches ZeRO-1/2's allreduce_and_scatter (not ZeRO-3's reduce-scatter)")
    check_micro_batches(ap, args)
    return args


def main(argv=None):
    launch(worker, parse_args(argv))


if __name__ == "__main__":
    main()
