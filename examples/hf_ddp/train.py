#!/usr/bin/env python3
"""Hugging Face `LlamaForCausalLM` (the transformers class, built from a config this script writes: nothing is
downloaded) trained by a plain torch 2.x DistributedDataParallel loop on gloo, recorded with one call —
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
"""
import argparse
import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
from train_llama import NullRecorder, lr_at, micro_batch_tokens, skip_bucket_hook  # noqa: E402  (the torch example's)

from shardproof_torch import Recorder  # noqa: E402


def hf_config(args):
    """The model's config.json as transformers 5 writes it (rope_parameters, not rope_theta)."""
    return dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=args.vocab, hidden_size=args.dim,
                intermediate_size=args.ffn, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                num_key_value_heads=args.kv_heads, max_position_embeddings=args.seq, rms_norm_eps=1e-5,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False,
                hidden_act="silu", initializer_range=0.02, attention_bias=False, mlp_bias=False)


def build_model(args):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(args.seed)  # every rank builds the same weights (DDP broadcasts rank 0's anyway)
    return LlamaForCausalLM(LlamaConfig(**hf_config(args), attn_implementation=args.attention))


def loss_sum(model, tokens):
    """Σ of the token cross entropies of a micro-batch (rows, T + 1); padding (-1) is no target. A padded input
    position feeds only padded targets (padding is a suffix, attention is causal), so its id (0) changes nothing."""
    ids, targets = tokens[:, :-1].clamp(min=0), tokens[:, 1:]
    logits = model(input_ids=ids).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-1,
                           reduction="sum")


def adamw(model, args):
    """torch.optim.AdamW without weight decay on the 1-D tensors (the norm weights), and its declaration."""
    no_decay = [n for n, p in model.named_parameters() if p.dim() == 1]
    opt = torch.optim.AdamW([{"params": [p for n, p in model.named_parameters() if n not in no_decay],
                              "weight_decay": args.wd},
                             {"params": [p for n, p in model.named_parameters() if n in no_decay],
                              "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    return opt, {"lr_schedule": "linear warmup 4 steps, cosine to 0.1 lr", "betas": [0.9, 0.95], "eps": 1e-8,
                 "weight_decay": args.wd, "no_decay": no_decay, "max_grad_norm": args.clip,
                 "implementation": "torch.optim.AdamW(foreach=False)"}


def worker(rank, args, world, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
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
    rec = NullRecorder() if args.no_record else Recorder.attach(
        net, opt, args.out, steps=args.steps, name="hf-ddp", script=os.path.abspath(__file__),
        batch={"micro_batch": args.micro_batch, "micro_batches": args.micro_batches, "seq_len": args.seq},
        hyper=hyper, **options)
    if args.bug == "ddp-bucket-skipped":  # the recorder registered no hook of its own (Flight Recorder trace)
        ddp.register_comm_hook(None, skip_bucket_hook)
    M, k, dp_rank = args.micro_batches, args.micro_batches // world, rank
    for step in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        lr = lr_at(args, step)
        rec.begin_step(step, lr)
        batches = [micro_batch_tokens(args, step, i) for i in range(M)]
        n_global = sum(int((b[:, 1:] >= 0).sum()) for b in batches)
        opt.zero_grad(set_to_none=True)
        for j, i in enumerate(range(dp_rank * k, (dp_rank + 1) * k)):
            rec.micro_batch(i, batches[i])
            with (ddp.no_sync() if j < k - 1 else _nothing()):
                with rec.phase("forward"):
                    s = loss_sum(net, batches[i])
                    objective = s / n_global * world
                    rec.loss(i, s.item(), int((batches[i][:, 1:] >= 0).sum()), objective.item())
                with rec.phase("backward"):
                    objective.backward()
        rec.gradients()
        with rec.statistics():
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip, foreach=False)
        rec.clipped(norm.item())
        for g in opt.param_groups:
            g["lr"] = lr
        with rec.phase("optimizer"):
            opt.step()
        rec.end_step()
        if rank == 0 and args.timing:  # the step's wall and CPU time, and the recorder's share of them
            with open(args.timing, "a") as f:
                f.write(json.dumps({"step": step, "seconds": time.perf_counter() - t0,
                                    "cpu_seconds": time.process_time() - c0, "record": not args.no_record,
                                    "recorder_seconds": rec.seconds, "recorder_cpu_seconds": rec.cpu_seconds}) + "\n")
        if rank == 0 and not args.quiet and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step} lr {lr:.2e} grad_norm {norm.item():.4f}", flush=True)
    rec.finish()
    dist.barrier()
    dist.destroy_process_group()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def common_flags(ap):
    """The flags every Hugging Face example shares (examples/fsdp2 too): the run, the model, the batches."""
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"], help="transformers' attention kernel")
    for name, v in (("seed", 1234), ("vocab", 128), ("dim", 64), ("ffn", 128), ("layers", 2), ("heads", 4),
                    ("kv-heads", 2), ("seq", 16), ("micro-batch", 2), ("micro-batches", 4)):
        ap.add_argument("--" + name, type=int, default=v)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--plant", default=None,
                    help="a re-planted framework bug of the zoo, applied in every process (examples/zoo/plants.py)")


def launch(worker, args):
    """Starts worker(rank, args, world, port) on --world forked gloo processes, into a new --out; --plant's bug is
    applied first in each (examples/zoo/plants.py)."""
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit(f"train.py: --out {args.out} is not empty: record into a new directory")
    os.makedirs(args.out, exist_ok=True)
    if getattr(args, "plant", None):
        sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
        import plants
        plants.apply(args.plant)  # before the fork: every process inherits the patched function
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(worker, args=(args, args.world, port), nprocs=args.world, join=True, start_method="fork")


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
    ap.add_argument("--bug", default=None, choices=["ddp-bucket-skipped"],
                    help="a planted bug (needs --trace flight-recorder: the recorder's own trace holds DDP's hook)")
    args = ap.parse_args(argv)
    if args.bug and args.trace != "flight-recorder":
        ap.error("--bug needs --trace flight-recorder (with the recorder's trace, examples/torch plants it)")
    if args.trace == "flight-recorder":  # read by torch when the first process group is made: set before the fork
        os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "20000")
    if args.micro_batches % args.world:
        ap.error(f"--micro-batches {args.micro_batches} must be a multiple of --world {args.world}")
    return args


def main(argv=None):
    launch(worker, parse_args(argv))


if __name__ == "__main__":
    main()
