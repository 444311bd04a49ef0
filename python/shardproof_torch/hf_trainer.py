"""ShardproofCallback: records a Hugging Face `Trainer` run (transformers 5, torch 2.x) for `shardproof judge`.

    trainer = Trainer(model=LlamaForCausalLM(config), args=TrainingArguments(...), train_dataset=...)
    ShardproofCallback.attach(trainer, out, steps=args.max_steps)
    trainer.train()

A thin adapter onto the one Recorder (Recorder.attach on the model the Trainer prepared: DDP under accelerate),
through the Trainer's own seams, never a copy of its loop:
- the step: on_step_begin begins it with the optimizer's learning rate; on_optimizer_step ends it (the parameters
  after the update, before the scheduler and zero_grad); on_train_end seals the recording;
- each micro-batch: `trainer.compute_loss` is wrapped (phase forward): its inputs give the token ids (labels -100
  become -1, which the recording's token format allows only as a suffix of a row: a masked prompt is refused), its
  outputs the loss sum recomputed from the logits (Σ of the token cross entropies over labels[:, 1:]), and the value
  it returns is the scalar backpropagated — after the Trainer's own division by the accumulation steps when it
  does not scale by `num_items_in_batch` (transformers#34191's class: the judge's loss view names such a run's
  reduction a per-micro-batch mean); `accelerator.backward` is wrapped (phase backward);
- the gradients before clipping: `accelerator.clip_grad_norm_` is wrapped, so the recorder reads them when the
  Trainer is about to clip (synchronized: the last micro-batch's backward has reduced them) and records the norm
  clipping used; without clipping (max_grad_norm 0) on_pre_optimizer_step reads them.
The recording's contract names the Trainer's reduction: `token_mean` when it divides by num_items_in_batch
(summed over ranks: average_tokens_across_devices), `micro_batch_mean` otherwise, and the gradient divisor is the
number of processes (DDP's mean). Global micro-batch j·world + rank is this rank's j-th of the step.
"""
import torch
import torch.nn.functional as F

from .recorder import Recorder

try:
    from transformers import TrainerCallback
except ImportError:  # the recorder's core does not need transformers
    TrainerCallback = object


def _token_rows(inputs):
    """The recording's token rows (rows, T + 1) of one Trainer batch: input ids, -1 where labels are -100."""
    ids, labels = inputs["input_ids"].detach().cpu(), inputs.get("labels", inputs["input_ids"]).detach().cpu()
    masked = labels == -100
    # -1 must be a suffix of every row: once a row is padding it stays padding
    if bool((masked[:, :-1] & ~masked[:, 1:]).any()):
        raise ValueError("a batch masks labels (-100) before real targets (a masked prompt?): the recording's token "
                         "format has -1 only as a padding suffix\nhint: judge runs whose labels are the input ids "
                         "with padding at the end")
    return torch.where(masked, torch.full_like(ids, -1), ids)


class ShardproofCallback(TrainerCallback):
    """The Trainer side of a recording; build it with ShardproofCallback.attach(trainer, out, ...)."""

    def __init__(self, trainer, out, steps, **options):
        self.trainer, self.out, self.steps, self.options = trainer, out, steps, options
        self.rec = None
        self.micro = 0
        self.grads_taken = False

    @classmethod
    def attach(cls, trainer, out, *, steps, **options):
        """Adds the callback to `trainer` and wraps its compute_loss, backward and clipping. options: the
        Recorder's (anchor_every, checksum_every, script, name)."""
        cb = cls(trainer, out, steps, **options)
        trainer.add_callback(cb)
        cb._wrap_compute_loss()
        return cb

    # ---------------------------------------------------------------- set-up, when the Trainer has prepared
    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):
        t = self.trainer
        wrapped = getattr(t, "model_wrapped", None) or model
        world = args.world_size
        decay = set(t.get_decay_parameter_names(t.model))
        no_decay = [n for n, _ in t.model.named_parameters() if n not in decay]
        group = t.optimizer.param_groups[0]
        hyper = {"lr_schedule": f"transformers {args.lr_scheduler_type}, warmup {args.warmup_steps} steps",
                 "betas": list(group["betas"]), "eps": group["eps"], "weight_decay": args.weight_decay,
                 "no_decay": no_decay, "max_grad_norm": args.max_grad_norm,
                 "implementation": f"Trainer optim={args.optim}"}
        self.world, self.rank = world, args.process_index
        self.ga = args.gradient_accumulation_steps
        self.scaled_by_items = self._scales_by_items()
        batch = {"micro_batch": args.per_device_train_batch_size, "micro_batches": self.ga * world,
                 "seq_len": self.options.pop("seq_len")}
        self.rec = Recorder.attach(wrapped, self._local_optimizer(t.optimizer), self.out, hyper=hyper, batch=batch,
                                   steps=self.steps, name=self.options.pop("name", "hf-trainer"),
                                   loss_reduction="token_mean" if self.scaled_by_items else "micro_batch_mean",
                                   gradient_divisor=world, **self.options)
        self._wrap_backward_and_clip()

    @staticmethod
    def _local_optimizer(opt):
        """The torch optimizer under accelerate's AcceleratedOptimizer."""
        return getattr(opt, "optimizer", opt)

    def _scales_by_items(self):
        t = self.trainer
        return bool(t.model_accepts_loss_kwargs or t.compute_loss_func is not None)

    # ---------------------------------------------------------------- the seams
    def _wrap_compute_loss(self):
        t, cb = self.trainer, self
        original = t.compute_loss

        def compute_loss(model, inputs, return_outputs=False, num_items_in_batch=None):
            if cb.rec is None:
                return original(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
            index = cb.micro * cb.world + cb.rank
            rows = _token_rows(inputs)
            cb.rec.micro_batch(index, rows)
            with cb.rec.phase("forward"):
                loss, outputs = original(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
                logits = outputs["logits"] if isinstance(outputs, dict) else outputs.logits
                targets = rows[:, 1:].to(logits.device)
                loss_sum = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float().detach(),
                                           targets.reshape(-1), ignore_index=-1, reduction="sum")
                objective = loss.detach().float()
                if not (cb.scaled_by_items and num_items_in_batch is not None):
                    objective = objective / t.current_gradient_accumulation_steps  # the Trainer divides later
                cb.rec.loss(index, loss_sum.item(), int((targets >= 0).sum()), objective.item())
            cb.micro += 1
            return (loss, outputs) if return_outputs else loss

        t.compute_loss = compute_loss

    def _wrap_backward_and_clip(self):
        acc, cb = self.trainer.accelerator, self
        backward, clip = acc.backward, acc.clip_grad_norm_

        def traced_backward(loss, **kwargs):
            with cb.rec.phase("backward"):
                return backward(loss, **kwargs)

        def recorded_clip(parameters, max_norm, norm_type=2):
            cb._take_gradients()
            with cb.rec.statistics():
                norm = clip(parameters, max_norm, norm_type=norm_type)
            cb.rec.clipped(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))
            return norm

        acc.backward, acc.clip_grad_norm_ = traced_backward, recorded_clip

    def _take_gradients(self):
        if not self.grads_taken:
            self.rec.gradients()
            self.grads_taken = True

    # ---------------------------------------------------------------- the step
    def on_step_begin(self, args, state, control, optimizer=None, **kw):
        self.micro, self.grads_taken = 0, False
        self.rec.begin_step(state.global_step, self.trainer.optimizer.param_groups[0]["lr"])

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self._take_gradients()  # max_grad_norm 0: nothing was clipped, the gradients are as synchronized

    def on_optimizer_step(self, args, state, control, **kw):
        self.rec.end_step()

    def on_train_end(self, args, state, control, **kw):
        self.rec.finish()
