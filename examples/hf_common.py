"""What the Hugging Face examples share (examples/hf_ddp, fsdp2, deepspeed, hf_trainer, pipelining): the model built
from a config.json this file writes (nothing is downloaded), its loss, the optimizer and its declaration, the flags,
the gloo processes and the step's bookkeeping around the recorder. Not the recorder (python/shardproof_torch) and not a
training loop: each example keeps its own loop, so that it reads top to bottom.

Each example imports this file from its parent folder (examples/), and this file the batches and the lr schedule of
examples/torch/train_llama.py (a pure function of seed, step and micro-batch: every rank can make any micro-batch).
"""
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "torch"))
from train_llama import NullRecorder, lr_at, micro_batch_tokens, skip_bucket_hook  # noqa: E402,F401  (re-exported)


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


def targets(tokens):
    """The target tokens of a micro-batch (rows, T + 1): every position after the first that is not padding (-1)."""
    return int((tokens[:, 1:] >= 0).sum())


def step_batches(args, step):
    """The step's M micro-batches (every rank makes all of them) and the target tokens of the global batch."""
    batches = [micro_batch_tokens(args, step, i) for i in range(args.micro_batches)]
    return batches, sum(targets(b) for b in batches)


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


def common_flags(ap):
    """The flags every Hugging Face example shares: the run, the model, the batches."""
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


def check_micro_batches(ap, args):
    """Each of the --world data-parallel ranks trains M / world micro-batches of a step: M must be a multiple."""
    if args.micro_batches % args.world:
        ap.error(f"--micro-batches {args.micro_batches} must be a multiple of --world {args.world}")


def gloo_env(rank, world, port, launcher_vars=False):
    """One thread per process, and the rendezvous on this machine; with launcher_vars also RANK, WORLD_SIZE and the
    local ones, as torchrun would set them (accelerate and DeepSpeed read them)."""
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if launcher_vars:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                          LOCAL_SIZE=str(world))


def init_gloo(rank, world, port, launcher_vars=False):
    """gloo_env, then the default process group (120 s before a missing peer is an error)."""
    gloo_env(rank, world, port, launcher_vars)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))


def optimizer_step(rec, opt, lr, scaler=None):
    """The step's update as the recorder sees it: the lr on every group, opt.step() (scaler.step(opt) and
    scaler.update() with a GradScaler) in the optimizer phase, the step closed."""
    for g in opt.param_groups:
        g["lr"] = lr
    with rec.phase("optimizer"):
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
    rec.end_step()


def progress(args, rank, step, lr, norm):
    """Rank 0's line every 5 steps and at the last (not with --quiet)."""
    if rank == 0 and not args.quiet and (step % 5 == 0 or step == args.steps - 1):
        print(f"step {step} lr {lr:.2e} grad_norm {float(norm):.4f}", flush=True)


def finish(rec):
    """The recording closed on every rank, then the process group."""
    rec.finish()
    dist.barrier()
    dist.destroy_process_group()


def launch(worker, args):
    """Starts worker(rank, args, world, port) on --world forked gloo processes, into a new --out; --plant's bug is
    applied first in each (examples/zoo/plants.py)."""
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit(f"train.py: --out {args.out} is not empty: record into a new directory")
    os.makedirs(args.out, exist_ok=True)
    if getattr(args, "plant", None):
        sys.path.insert(0, os.path.join(HERE, "zoo"))
        import plants
        plants.apply(args.plant)  # before the fork: every process inherits the patched function
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(worker, args=(args, args.world, port), nprocs=args.world, join=True, start_method="fork")
