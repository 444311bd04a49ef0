#!/usr/bin/env python3
"""Hugging Face `Trainer` training `LlamaForCausalLM` (built from a config examples/hf_common.py writes) with DDP over gloo
processes, recorded by `ShardproofCallback.attach(trainer, out, ...)` (python/shardproof_torch/hf_trainer.py) and
judged by `shardproof judge DIR`:

    .venv/bin/python examples/hf_trainer/train.py --world 2 --steps 20 --out runs/hf-trainer
    build/bin/shardproof judge runs/hf-trainer

The dataset is examples/torch/train_llama.py's rows (ids with a padding suffix; labels = ids, -100 on padding),
enough for --steps steps of M micro-batches; the Trainer shuffles and shards it as it always does. Defaults of
transformers 5 otherwise: the loss divided by num_items_in_batch summed over ranks (average_tokens_across_devices),
so the judge's loss view names the reduction a per-token mean over the global batch; --no-items turns
num_items_in_batch off (the model no longer accepts loss kwargs), and the Trainer divides each micro-batch's mean by
the accumulation steps instead: the per-micro-batch mean of transformers#34191, which the judge names and FAILs;
--no-average-tokens turns average_tokens_across_devices off: each rank divides its loss by its own targets and DDP
averages the ranks' gradients (transformers#34242, the zoo's `transformers-34242`), which the judge FAILs at the loss
view too.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from hf_common import build_model, check_micro_batches, common_flags, init_gloo, launch, micro_batch_tokens  # noqa: E402

from shardproof_torch.hf_trainer import ShardproofCallback  # noqa: E402


class Rows(torch.utils.data.Dataset):
    """The torch example's micro-batch rows, one sample each: input_ids (padding id 0) and labels (-100)."""

    def __init__(self, args):
        rows = [r for s in range(args.steps) for i in range(args.micro_batches)
                for r in micro_batch_tokens(args, s, i)]
        self.rows = torch.stack(rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, k):
        r = self.rows[k]
        return {"input_ids": r.clamp(min=0), "labels": torch.where(r < 0, torch.full_like(r, -100), r)}


def worker(rank, args, world, port):
    init_gloo(rank, world, port, launcher_vars=True)
    from transformers import Trainer, TrainingArguments
    model = build_model(args)
    targs = TrainingArguments(output_dir=os.path.join(args.out + ".trainer"), use_cpu=True, ddp_backend="gloo",
                              per_device_train_batch_size=args.micro_batch,
                              gradient_accumulation_steps=args.micro_batches // world, max_steps=args.steps,
                              learning_rate=args.lr, weight_decay=args.wd, adam_beta1=0.9, adam_beta2=0.95,
                              adam_epsilon=1e-8, max_grad_norm=args.clip, warmup_steps=4, lr_scheduler_type="cosine",
                              optim="adamw_torch", seed=args.seed, report_to=[], save_strategy="no",
                              logging_steps=5, dataloader_drop_last=True, disable_tqdm=True,
                              ddp_broadcast_buffers=False,
                              average_tokens_across_devices=not args.no_average_tokens)
    trainer = Trainer(model=model, args=targs, train_dataset=Rows(args))
    if args.no_items:
        trainer.model_accepts_loss_kwargs = False
    ShardproofCallback.attach(trainer, args.out, steps=args.steps, seq_len=args.seq, name="hf-trainer",
                              script=os.path.abspath(__file__))
    trainer.train()
    dist.barrier()
    dist.destroy_process_group()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_flags(ap)
    ap.add_argument("--no-items", action="store_true", help="no num_items_in_batch: the per-micro-batch mean")
    ap.add_argument("--no-average-tokens", action="store_true",
                    help="average_tokens_across_devices=False: each rank divides by its own token count")
    args = ap.parse_args(argv)
    check_micro_batches(ap, args)
    return args


def main(argv=None):
    launch(worker, parse_args(argv))


if __name__ == "__main__":
    main()
