#!/usr/bin/env python3
"""Hugging Face `LlamaForCausalLM` (the transformers class, built from a config examples/hf_common.py writes:
nothing is downloaded) trained by a plain torch 2.x DistributedDataParallel loop on gloo, recorded with one call —
`Recorder.attach(model, optimizer, ...)` — so that `shardproof judge DIR` proves it (docs/judge.md §"Hugging Face
and torch 2.x"). Runs on the project's .venv:

    .venv/bin/python examples/hf_ddp/train.py --world 2 --steps 20 --out runs/hf-ddp
    build/bin/shardproof judge runs/hf-ddp

The batches are examples/torch/train_llama.py's (the same function of seed, step and micro-batch: rows end in
padding, so micro-batches hold uneven target counts). Each rank trains micro-batches [dp_rank·k, (dp_rank+1)·k) of
the step's M, accumulates with no_sync() on all but its last, and backpropagates Σ token losses / (targets of the
global batch) × dp, which DDP's mean turns into the single-device per-token mean. --compile wraps the model in
torch.compile (eager backend): attach finds the names through it. --trace flight-recorder takes PyTorch's Flight
Recorder as the collective trace (TORCH_FR_BUFFER_SIZE set here before the processes start): convert its dumps with
`python -m shardproof_torch.flight_recorder DIR` before judging (docs/judge.md §"Flight Recorder");
--bug ddp-bucket-skipped (with it) registers examples/torch's hook that never all-reduces DDP's bucket 1.

--autocast bf16 runs every forward under torch.autocast("cpu", dtype=torch.bfloat16) (parameters, gradients and
AdamW fp32) and declares it to the recorder: the judge's reference runs the engine's bf16 casts within the derived
16-bit envelope (docs/judge.md §"bf16 autocast"). Two bugs smaller than that envelope: --bug bf16-compress (DDP's
bf16_compress_hook: the gradients all-reduced in bf16 while the run declares fp32) and --bug bf16-grads (every
gradient rounded to bf16 after the all-reduce, as a bf16 gradient buffer would), and --bug bf16-truncate (every
linear's weight cast to bf16 by dropping its low 16 bits, as a hand-written cast kernel may, where autocast rounds
to nearest: the judge's rounding probe of layer 0's q_proj sees it).

--autocast fp16 runs the forward under autocast to fp16 with a GradScaler (init_scale --init-scale, growth_interval
--growth-interval: a large initial scale overflows the first steps, which GradScaler skips), declared to the recorder
with the scaler (docs/judge.md §"fp16 with a GradScaler"). Its bugs: --bug fp16-step-anyway (opt.step() and
scaler.update() instead of scaler.step(opt): an overflowed step is applied), --bug fp16-scaler-reset (a new GradScaler
at step 3, as a resume that does not load the scaler's state), --bug fp16-clip-scaled (clip_grad_norm_ before
scaler.unscale_: the norm of the scaled gradients, so each step clips by about 1/scale; AdamW hides most of it).
"""
import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from hf_common import (NullRecorder, adamw, build_model, check_micro_batches, common_flags, finish,  # noqa: E402
                       init_gloo, launch, loss_sum, lr_at, optimizer_step, progress, skip_bucket_hook, step_batches,
                       targets)

from shardproof_torch import Recorder  # noqa: E402


def truncating_linear(self, x):
    """nn.Linear.forward under autocast with the weight truncated to bf16 instead of rounded (the gradient passes
    through as autocast's cast passes it)."""
    if not torch.is_autocast_enabled("cpu"):
        return torch.nn.functional.linear(x, self.weight, self.bias)
    w = self.weight.detach().view(torch.int32).bitwise_and(-65536).view(torch.float32)
    w = self.weight + (w - self.weight).detach()
    with torch.autocast("cpu", enabled=False):
        return torch.nn.functional.linear(x.to(torch.bfloat16), w.to(torch.bfloat16))


def new_scaler(args):
    return torch.amp.GradScaler("cpu", init_scale=args.init_scale, growth_interval=args.growth_interval)


def worker(rank, args, world, port):
    init_gloo(rank, world, port)
    if args.bug == "bf16-truncate":
        torch.nn.Linear.forward = truncating_linear
    from torch.nn.parallel import DistributedDataParallel
    model = build_model(args)
    # Small buckets, as a large model has them; the first one no larger (torch.compile's DDP optimizer requires it).
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_mb * 1024 * 1024)
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb, broadcast_buffers=False)
    net = torch.compile(ddp, backend="eager") if args.compile else ddp
    opt, hyper = adamw(model, args)
    options = {} if args.anchor_every is None else {"anchor_every": args.anchor_every}
    if args.trace != "recorder":
        options["trace"] = args.trace
    if args.autocast == "bf16":
        options["autocast"] = torch.bfloat16
    scaler = None
    if args.autocast == "fp16":
        scaler = new_scaler(args)
        options.update(autocast=torch.float16, grad_scaler=scaler)
    hook = None
    if args.bug == "bf16-compress":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        hook = default_hooks.bf16_compress_hook
    rec = NullRecorder() if args.no_record else Recorder.attach(
        net, opt, args.out, steps=args.steps, name="hf-ddp", script=os.path.abspath(__file__),
        batch={"micro_batch": args.micro_batch, "micro_batches": args.micro_batches, "seq_len": args.seq},
        hyper=hyper, ddp_hook=hook, **options)
    autocast = torch.autocast("cpu", dtype=torch.float16 if args.autocast == "fp16" else torch.bfloat16,
                              enabled=args.autocast != "none")
    if args.bug == "ddp-bucket-skipped":  # the recorder registered no hook of its own (Flight Recorder trace)
        ddp.register_comm_hook(None, skip_bucket_hook)
    k, dp_rank = args.micro_batches // world, rank
    for step in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        lr = lr_at(args, step)
        rec.begin_step(step, lr)
        if args.bug == "fp16-scaler-reset" and step == 3:
            scaler = rec.grad_scaler = new_scaler(args)  # what a resume that forgets the scaler's state_dict does
        batches, n_global = step_batches(args, step)
        opt.zero_grad(set_to_none=True)
        for j, i in enumerate(range(dp_rank * k, (dp_rank + 1) * k)):
            rec.micro_batch(i, batches[i])
            with (ddp.no_sync() if j < k - 1 else contextlib.nullcontext()):
                with rec.phase("forward"), autocast:
                    s = loss_sum(net, batches[i])
                    objective = s / n_global * world
                    rec.loss(i, s.item(), targets(batches[i]), objective.item())
                with rec.phase("backward"):
                    (objective if scaler is None else scaler.scale(objective)).backward()
        if args.bug == "bf16-grads":
            for p in model.parameters():
                p.grad.copy_(p.grad.to(torch.bfloat16))
        if args.bug == "fp16-clip-scaled":
            with rec.statistics():
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip, foreach=False)
        if scaler is not None:
            scaler.unscale_(opt)
        rec.gradients()
        if args.bug != "fp16-clip-scaled":
            with rec.statistics():
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip, foreach=False)
        rec.clipped(norm.item())
        if args.bug == "fp16-step-anyway":
            for g in opt.param_groups:
                g["lr"] = lr
            with rec.phase("optimizer"):
                opt.step()
                scaler.update()
            rec.end_step()
        else:
            optimizer_step(rec, opt, lr, scaler)
        if rank == 0 and args.timing:  # the step's wall and CPU time, and the recorder's share of them
            with open(args.timing, "a") as f:
                f.write(json.dumps({"step": step, "seconds": time.perf_counter() - t0,
                                    "cpu_seconds": time.process_time() - c0, "record": not args.no_record,
                                    "recorder_seconds": rec.seconds, "recorder_cpu_seconds": rec.cpu_seconds}) + "\n")
        progress(args, rank, step, lr, norm)
    finish(rec)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_flags(ap)
    ap.add_argument("--compile", action="store_true", help="wrap the DDP model in torch.compile (eager backend)")
    ap.add_argument("--bucket-mb", type=float, default=0.02)
    ap.add_argument("--no-record", action="store_true", help="train without the recorder (its cost's baseline)")
    ap.add_argument("--timing", help="rank 0 appends each step's wall and CPU time to this JSON Lines file")
    ap.add_argument("--anchor-every", type=int, default=None,
                    help="the recorder's anchor_every (default: the recorder's; 0: checksums only)")
    ap.add_argument("--trace", default="recorder", choices=["recorder", "flight-recorder"],
                    help="the collective trace: the recorder's wrappers, or PyTorch's Flight Recorder (its dumps)")
    ap.add_argument("--autocast", default="none", choices=["none", "bf16", "fp16"],
                    help="every forward under torch.autocast to bf16 (or fp16 with a GradScaler), declared")
    ap.add_argument("--init-scale", type=float, default=2.0 ** 16, help="fp16: GradScaler's init_scale")
    ap.add_argument("--growth-interval", type=int, default=2000, help="fp16: GradScaler's growth_interval")
    ap.add_argument("--bug", default=None, choices=["ddp-bucket-skipped", "bf16-compress", "bf16-grads", "bf16-truncate",
                                                    "fp16-step-anyway", "fp16-scaler-reset", "fp16-clip-scaled"],
                    help="a planted bug (ddp-bucket-skipped needs --trace flight-recorder: the recorder's own trace "
                         "holds DDP's hook)")
    args = ap.parse_args(argv)
    if args.bug and args.bug.startswith("fp16") and args.autocast != "fp16":
        ap.error(f"--bug {args.bug} needs --autocast fp16")
    if args.bug == "ddp-bucket-skipped" and args.trace != "flight-recorder":
        ap.error("--bug needs --trace flight-recorder (with the recorder's trace, examples/torch plants it)")
    if args.trace == "flight-recorder":  # read by torch when the first process group is made: set before the fork
        os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "20000")
    check_micro_batches(ap, args)
    return args


def main(argv=None):
    launch(worker, parse_args(argv))


if __name__ == "__main__":
    main()
