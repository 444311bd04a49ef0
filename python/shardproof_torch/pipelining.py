"""torch.distributed.pipelining (GPipe, 1F1B) recorded for `shardproof judge`: a Hugging Face LlamaForCausalLM
split into pipeline stages, trained by torch's own schedules, recorded through the schedule's seams.

    stage_model = pipelining.split_llama(model, pp_rank, pp_size)      # this stage's layers, HF names kept
    stage = pipelining.stage(stage_model, pp_rank, pp_size, pp_group, micro_batch=b, seq_len=T)
    schedule = ScheduleGPipe(stage, n_microbatches=M, loss_fn=my_loss)   # or Schedule1F1B; scale_grads as you like
    pipe = pipelining.attach(schedule, optimizer, out, steps=S, hyper={...}, script=__file__)
    for step in range(S):
        pipe.recorder.begin_step(step, lr)
        pipe.step(tokens)                    # the step's (M·b, T + 1) ids; the schedule's step on every stage
        pipe.recorder.gradients(); ... clip (statistics) ...; opt.step(); pipe.recorder.end_step()

What it reads instead of asking: the stage's parameters and their Hugging Face names (every rank holds its stage's
tensors whole: a subset of the config's, which the ranks together must cover), the pipeline group (pp), the
micro-batch count and `scale_grads` (the schedule divides the gradients by M when set: the recording's gradient
divisor), each micro-batch's loss from the user's own loss_fn (the scalar it returns is the objective; its loss sum
and targets are recomputed from the logits and the targets the schedule hands it). The trace names each p2p by
the phase and micro-batch the schedule is in (the stage's get_fwd_*/get_bwd_* ops and forward/backward chunks).
The stages are built with their input and output shapes, so no shape exchange runs on the wire.
Not a pipeline framework: split_llama only removes what another stage holds and gives the module its stage's
forward (HF LLaMA's own: embed, rotary embeddings, decoder layers with HF's causal mask, norm, lm_head).
"""
import types

import torch
import torch.nn.functional as F

from .recorder import Recorder


def layer_range(layers, stage_index, stages):
    """The decoder layers [first, last) of stage `stage_index` of `stages`: an even split, earlier stages one more
    when it does not divide."""
    if not 1 <= stages <= layers:
        raise ValueError(f"{stages} pipeline stages for {layers} decoder layers: each stage needs at least one layer")
    return layers * stage_index // stages, layers * (stage_index + 1) // stages


def _stage_forward(self, x):
    """One stage of LlamaForCausalLM.forward: ids (B, T) on the first stage, hidden states (B, T, C) after;
    logits (B, T, V) from the last stage, hidden states before."""
    inner = self.model
    h = inner.embed_tokens(x) if inner.embed_tokens is not None else x
    from transformers.masking_utils import create_causal_mask
    position_ids = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
    mask = create_causal_mask(config=self.config, inputs_embeds=h, attention_mask=None, cache=None,
                              position_ids=position_ids)
    position_embeddings = inner.rotary_emb(h, position_ids=position_ids)
    for layer in inner.layers.values():
        h = layer(h, attention_mask=mask, position_embeddings=position_embeddings, position_ids=position_ids)
    if self.lm_head is None:
        return h
    return self.lm_head(inner.norm(h))


def split_llama(model, stage_index, stages):
    """`model` (a LlamaForCausalLM) reduced to pipeline stage `stage_index` of `stages`, in place: the other
    stages' decoder layers removed (the rest kept under their own indices: model.layers.{i} stays its HF name),
    embed_tokens only on the first stage, norm and lm_head only on the last; its forward is the stage's."""
    if model.config.tie_word_embeddings and stages > 1:
        raise ValueError("tied embeddings across pipeline stages are not split here (embed_tokens and lm_head "
                         "would live on two stages): untie them, or keep one stage")
    first, last = layer_range(len(model.model.layers), stage_index, stages)
    model.model.layers = torch.nn.ModuleDict({str(i): model.model.layers[i] for i in range(first, last)})
    if stage_index > 0:
        model.model.embed_tokens = None
    if stage_index < stages - 1:
        model.model.norm = None
        model.lm_head = None
    model.forward = types.MethodType(_stage_forward, model)
    return model


def stage(stage_model, stage_index, stages, group, *, micro_batch, seq_len):
    """A PipelineStage with its input and output given (ids or hidden states of one micro-batch, hidden states
    or logits; hidden states require gradients, so that their gradients flow back), so that the schedule
    exchanges no shapes at its first step (torch's static mode)."""
    from torch.distributed.pipelining import PipelineStage
    c = stage_model.config
    hidden = torch.empty(micro_batch, seq_len, c.hidden_size, requires_grad=True)  # activations carry gradients
    x = torch.zeros(micro_batch, seq_len, dtype=torch.long) if stage_index == 0 else hidden
    y = torch.empty(micro_batch, seq_len, c.vocab_size) if stage_index == stages - 1 else hidden
    st = PipelineStage(stage_model, stage_index, stages, torch.device("cpu"), group=group, input_args=x,
                       output_args=y)
    st.shardproof_micro_batch = (micro_batch, seq_len)  # what attach() declares as the batch
    return st


class Pipeline:
    """A schedule and its recorder; build it with attach()."""

    def __init__(self, schedule, recorder, pp_rank, pp_size, micro_batches):
        self.schedule, self.recorder = schedule, recorder
        self.pp_rank, self.pp_size, self.M = pp_rank, pp_size, micro_batches
        self.first = 0  # the global index of the schedule call's first micro-batch
        self.forward_chunk = 0
        self._wrap()

    def _wrap(self):
        st, rec = self.schedule._stage, self.recorder

        def in_phase(f, phase):
            def wrapped(chunk, *args, **kwargs):
                rec.trace.phase, rec.trace.micro_batch = phase, self.first + chunk
                if phase == "forward":
                    self.forward_chunk = self.first + chunk
                out = f(chunk, *args, **kwargs)
                # get_*_ops: P2POps the schedule may run later, batched with another phase's (1F1B): each carries
                # its own phase and micro-batch to the trace
                if isinstance(out, list):
                    for op in out:
                        if hasattr(op, "tensor") and hasattr(op, "op"):
                            rec.trace.tensor_phases[id(op.tensor)] = (phase, self.first + chunk)
                return out
            return wrapped

        for name in ("get_fwd_recv_ops", "get_fwd_send_ops", "forward_one_chunk"):
            setattr(st, name, in_phase(getattr(st, name), "forward"))
        for name in ("get_bwd_recv_ops", "get_bwd_send_ops", "backward_one_chunk"):
            setattr(st, name, in_phase(getattr(st, name), "backward"))
        user_loss = self.schedule._loss_fn
        if user_loss is None:
            raise ValueError("the schedule has no loss_fn: a recorded pipeline trains (ScheduleGPipe(stage, n, "
                             "loss_fn=...))")

        def recorded_loss(output, target, **kwargs):
            objective = user_loss(output, target, **kwargs)
            with torch.no_grad():
                logits = output.float()
                loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                           ignore_index=-1, reduction="sum")
            rec.loss(self.forward_chunk, loss_sum.item(), int((target >= 0).sum()), objective.item())
            return objective

        self.schedule._loss_fn = recorded_loss

    def step(self, tokens, first=0):
        """Runs the schedule's step on this stage for M micro-batches' tokens (M·b rows of T + 1 ids, -1 padding at
        the end of a row), global micro-batches first.. of the step (a step accumulated over several schedule calls
        gives each call its first index): the first stage feeds the ids (padding as id 0, which only feeds padded
        targets) and records each micro-batch's rows, the last takes the targets; the schedule splits both."""
        tokens = torch.as_tensor(tokens)
        if tokens.shape[0] % self.M:
            raise ValueError(f"{tokens.shape[0]} rows do not split into {self.M} micro-batches")
        b = tokens.shape[0] // self.M
        self.first = first
        if self.pp_rank == 0:
            for i in range(self.M):
                self.recorder.micro_batch(first + i, tokens[i * b:(i + 1) * b])
        ids, targets = tokens[:, :-1].clamp(min=0), tokens[:, 1:].long()
        first, last = self.pp_rank == 0, self.pp_rank == self.pp_size - 1
        args = (ids,) if first else ()
        kwargs = {"target": targets, "losses": []} if last else {}
        # the schedule's first step agrees on its mode with small collectives before any micro-batch: set-up
        self.recorder.trace.phase, self.recorder.trace.micro_batch = "setup", -1
        out = self.schedule.step(*args, **kwargs)
        self.recorder.trace.phase, self.recorder.trace.micro_batch = "optimizer", -1
        return out


def attach(schedule, optimizer, out, *, steps, hyper, script=None, name=None, accumulate=1, **options):
    """A Pipeline recording `schedule` (torch.distributed.pipelining's ScheduleGPipe or Schedule1F1B over a stage
    built by stage()): a Recorder (Recorder.attach on the stage's module, the stage's group as the pp axis) whose
    batch and gradient divisor are the schedule's; accumulate: schedule calls per optimizer step (the step's
    micro-batches are accumulate x the schedule's). Every rank calls it."""
    st = schedule._stage
    if type(schedule).__name__ not in ("ScheduleGPipe", "Schedule1F1B"):
        raise ValueError(f"{type(schedule).__name__}: the recorded schedules are ScheduleGPipe and Schedule1F1B")
    import torch.distributed as dist
    M = schedule._n_microbatches
    if not hasattr(st, "shardproof_micro_batch"):
        raise ValueError("build the stage with pipelining.stage(...): its input and output shapes given, so that "
                         "no shape exchange runs inside the recorded steps")
    b, T = st.shardproof_micro_batch
    pp_rank, pp_size = st.stage_index, st.num_stages
    if dist.get_world_size() != pp_size:
        raise ValueError(f"a pipeline of {pp_size} stages on {dist.get_world_size()} ranks: the recorded pipeline "
                         f"is the whole world (one stage per rank)")
    kind = "gpipe" if type(schedule).__name__ == "ScheduleGPipe" else "1f1b"
    # Every rank declares the model's no-decay set (the recorder checks they agree), not its own stage's.
    stages = [None] * pp_size
    dist.all_gather_object(stages, sorted(hyper.get("no_decay", [])), group=st.group)
    hyper = dict(hyper, no_decay=sorted(set().union(*stages)))
    rec = Recorder.attach(st.submod, optimizer, out, hyper=hyper, steps=steps, script=script,
                          batch={"micro_batch": b, "micro_batches": M * accumulate, "seq_len": T},
                          gradient_divisor=M if schedule.scale_grads else 1, groups={"pp": st.group},
                          name=name or f"pp{pp_size}-{kind}", **options)
    return Pipeline(schedule, rec, pp_rank, pp_size, M)
