"""DeepSpeed's engine (ZeRO-1, 2 and 3, its CPU accelerator, fp32) recorded for `shardproof judge`.

    engine, zero_opt, _, _ = deepspeed.initialize(model=LlamaForCausalLM(config), optimizer=torch_adamw, config=...)
    ds = deepspeed_engine.attach(engine, out, steps=S, hyper={...}, seq_len=T, script=__file__)
    for step in range(S):
        for i in my_micro_batches:                 # gradient_accumulation_steps of them per rank and step
            ds.micro_batch(i, tokens)              # the first of a step begins it (lr: the optimizer's)
            ... loss_sum = Σ token losses; objective = loss_sum / targets_of_the_global_batch · dp · gas ...
            ds.loss(i, loss_sum, targets, objective)
            engine.backward(objective); engine.step()
    ds.finish()

What it reads instead of asking (DeepSpeed's own metadata, never a copy of its arithmetic):
- the pieces: each rank records what its ZeRO optimizer owns, as DeepSpeed partitions it: a flat fragment of each
  parameter (elements [start, start + numel) of the row-major tensor; the recording's {"start", "numel"} shard).
  ZeRO-1/2: a parameter's `_hp_mapping` (DeepSpeed's `tensor_fragment`, what its universal checkpoint reads): the
  fp32 master fragment, the reduced gradient fragment (`get_lp_grad_fragment`) and the AdamW moments'
  fragments. ZeRO-3: a parameter's partition (rank r holds [r·p, r·p + p) of the flat tensor, p =
  ds_tensor.ds_numel) through DeepSpeed's local API (safe_get_local_fp32_param, safe_get_local_grad, the moments
  of the fp32 partition); padding is not a piece;
- the seams: the engine's forward (phase forward) and backward (backward; its gradient reduction grad_sync); its
  ZeRO optimizer's step, entered with the reduced gradients before its clipping (the recorder reads them there),
  its norm (a statistic: phase evidence) and the norm it clipped with (`_global_grad_norm`); the engine's step at an
  accumulation boundary ends the recorded step (the parameters after the update and DeepSpeed's all-gather);
- the strategy: dp (the data-parallel group's size), ZeRO stage, and the gradient divisor dp · gradient accumulation
  steps (engine.backward divides the loss by the accumulation steps, the reduction averages over dp);
- what DeepSpeed's traffic depends on (contract strategy.deepspeed, read by the judge's traffic model): its ZeRO
  config values (bucket sizes, overlap_comm, contiguous_gradients, reduce_scatter, the multi-rank bucket all-reduce,
  allgather_partitions, parameter_alignment, ZeRO-3's prefetch and persistence thresholds) and, ZeRO-1/2, its
  parameter groups (each one flat buffer, gathered after the step) as lists of HF names.
Refused by name: fp16/bf16, CPU offload, ZeRO++ (quantized or hierarchical collectives), a non-default
gradient_predivide_factor, a client optimizer that is not torch's AdamW, backward(scale_wrt_gas=False). Not
DeepSpeed's pipeline engine.
"""
import torch
import torch.distributed as dist

from . import discovery, layout
from .recorder import Recorder


class Refused(ValueError):
    """A DeepSpeed configuration the recording does not describe, named with the fix."""


class _Fragment:
    """ZeRO-1/2: one parameter's fragment in this rank's partition (DeepSpeed's tensor_fragment)."""

    def __init__(self, zero_opt, p):
        self.zero_opt, self.p, self.m = zero_opt, p, p._hp_mapping
        self.start, self.numel = self.m.lp_fragment_address.start, self.m.lp_fragment_address.numel

    def value(self):
        return self.m.hp_fragment

    def grad(self):
        g = self.m.get_lp_grad_fragment(self.p._index_in_param_group).reshape(-1)
        if g.numel() == self.p.numel() and self.numel != g.numel():  # a whole accumulation buffer: our part
            g = g.narrow(0, self.start, self.numel)
        return g

    def moments(self):
        flat = self.zero_opt.single_partition_of_fp32_groups[self.m.param_group_index]
        st = self.zero_opt.optimizer.state.get(flat, {})
        frags = self.m.optim_fragment or {}
        step = st.get("step", 0)
        return True, {k: frags[k] for k in ("exp_avg", "exp_avg_sq") if k in frags}, \
            int(step.item() if torch.is_tensor(step) else step)


class _Partition:
    """ZeRO-3: this rank's partition of one parameter, through DeepSpeed's local API (padding cut off)."""

    def __init__(self, zero_opt, p, start, numel):
        self.zero_opt, self.p, self.start, self.numel = zero_opt, p, start, numel

    def _flat(self):
        group = self.zero_opt.grad_position[self.zero_opt.get_param_id(self.p)][0]
        return self.zero_opt.fp32_partitioned_groups_flat[group]

    def value(self):
        from deepspeed.utils import safe_get_local_fp32_param
        return safe_get_local_fp32_param(self.p).reshape(-1)[:self.numel]

    def grad(self):
        from deepspeed.utils import safe_get_local_grad
        g = safe_get_local_grad(self.p)
        return None if g is None else g.reshape(-1)[:self.numel]

    def moments(self):
        from deepspeed.utils import safe_get_local_optimizer_state
        st = self.zero_opt.optimizer.state.get(self._flat(), {})
        step = st.get("step", 0)
        return True, {k: safe_get_local_optimizer_state(self.p, k).reshape(-1)[:self.numel]
                      for k in ("exp_avg", "exp_avg_sq") if k in st}, int(step.item() if torch.is_tensor(step) else step)


def _check(engine):
    if engine.fp16_enabled() or engine.bfloat16_enabled():
        raise Refused("DeepSpeed runs in fp16/bf16: the judge reads fp32 runs (mixed precision: issue 44)\n"
                      "hint: leave fp16 and bf16 off in the DeepSpeed config")
    if engine.zero_cpu_offload():
        raise Refused("DeepSpeed offloads the optimizer to the CPU (offload_optimizer): its own Adam kernel and "
                      "buffers are not recorded\nhint: no offload_optimizer on a CPU run")
    if engine.gradient_predivide_factor() != 1.0:
        raise Refused(f"gradient_predivide_factor {engine.gradient_predivide_factor()}: the recording declares "
                      f"DeepSpeed's default mean (1.0)")
    inner = getattr(engine.optimizer, "optimizer", None)
    if type(inner).__name__ != "AdamW" or inner.defaults.get("foreach") or inner.defaults.get("fused"):
        raise Refused(f"the client optimizer is {type(inner).__name__}: the judge replays torch.optim.AdamW "
                      f"(foreach=False)\nhint: deepspeed.initialize(..., optimizer=torch.optim.AdamW(..., "
                      f"foreach=False))")
    if engine.zero_quantized_gradients() or engine.zero_quantized_weights() or engine.zero_hpz_partition_size() > 1:
        raise Refused("DeepSpeed ZeRO++ (zero_quantized_gradients, zero_quantized_weights or zero_hpz_partition_size): "
                      "its quantized or hierarchical collectives are not recorded\nhint: leave ZeRO++ off")
    if engine.zero_optimization_stage() not in (1, 2, 3):
        raise Refused(f"ZeRO stage {engine.zero_optimization_stage()}: the recorded stages are 1, 2 and 3")


def pieces(engine, shapes, rank):
    """Piece of every fragment this rank's ZeRO optimizer owns, in the order of `shapes` (every rank calls it)."""
    zero_opt, stage = engine.optimizer, engine.zero_optimization_stage()
    dp_rank = dist.get_rank(group=zero_opt.dp_process_group)
    found, sources = {}, {}
    for raw, p in engine.module.named_parameters():
        name = discovery.hf_name(raw)
        if name not in shapes:
            raise discovery.RefusedModel(f"parameter {raw!r} is not a tensor of the config's LLaMA model")
        if stage < 3:
            if p._hp_mapping is None:  # none of it in this rank's partition
                continue
            src = _Fragment(zero_opt, p)
        else:
            size = p.ds_tensor.ds_numel
            start = dp_rank * size
            numel = max(0, min(size, p.ds_numel - start))
            if numel == 0:
                continue
            src = _Partition(zero_opt, p, start, numel)
        found[name], sources[name] = (p, (src.start,), (src.numel,)), src
    return discovery.exchange(found, shapes, flat=True, sources=sources)


class DeepSpeedRecording:
    """The engine's seams and its Recorder; build it with attach()."""

    def __init__(self, engine, recorder):
        self.engine, self.recorder = engine, recorder
        self.open = False
        self._wrap()

    def _wrap(self):
        e, z, rec = self.engine, self.engine.optimizer, self.recorder

        def in_phase(f, phase):
            def wrapped(*args, **kwargs):
                with rec.phase(phase):
                    return f(*args, **kwargs)
            return wrapped

        e.forward = in_phase(e.forward, "forward")
        backward = in_phase(e.backward, "backward")

        def checked_backward(loss, *args, **kwargs):
            if kwargs.get("scale_wrt_gas", True) is False:
                raise Refused("engine.backward(scale_wrt_gas=False): the recording declares the engine's division by "
                              "the accumulation steps")
            return backward(loss, *args, **kwargs)

        e.backward = checked_backward
        e.allreduce_gradients = in_phase(e.allreduce_gradients, "grad_sync")
        for name in ("reduce_independent_p_g_buckets_and_remove_grads", "overlapping_partition_gradients_reduce_epilogue",
                     "reduce_ready_partitions_and_remove_grads", "_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads"):
            if hasattr(z, name):
                setattr(z, name, in_phase(getattr(z, name), "grad_sync"))
        for name in ("scaled_global_norm", "_get_norm_groups"):
            if hasattr(z, name):
                setattr(z, name, in_phase(getattr(z, name), "evidence"))
        zero_step, engine_step = z.step, e.step

        def recorded_zero_step(*args, **kwargs):
            rec.gradients()  # the reduced gradients, before DeepSpeed clips them
            with rec.phase("optimizer"):
                out = zero_step(*args, **kwargs)
            norm = getattr(z, "_global_grad_norm", None)
            rec.clipped(float(norm) if norm is not None else float("nan"))
            return out

        def recorded_engine_step(*args, **kwargs):
            boundary = e.is_gradient_accumulation_boundary()
            with rec.phase("optimizer"):
                out = engine_step(*args, **kwargs)
            if boundary and self.open:
                rec.end_step()
                self.open = False
            return out

        z.step, e.step = recorded_zero_step, recorded_engine_step

    def micro_batch(self, index, tokens):
        """Global micro-batch `index`'s ids (rows, seq_len + 1); the first of an accumulation window begins the
        recorded step (engine.global_steps, at the optimizer's learning rate)."""
        if not self.open:
            self.recorder.begin_step(self.engine.global_steps, self.engine.optimizer.param_groups[0]["lr"])
            self.open = True
        self.recorder.micro_batch(index, tokens)

    def loss(self, index, loss_sum, targets, objective):
        """Micro-batch `index`'s Σ token losses, its target count, and the scalar given to engine.backward."""
        self.recorder.loss(index, loss_sum, targets, objective)

    def finish(self):
        self.recorder.finish()


def traffic_config(engine, names):
    """contract strategy.deepspeed: the engine's ZeRO config values its collectives depend on, and (ZeRO-1/2) its
    flat parameter groups in DeepSpeed's order, each as the HF names of its parameters (names: id -> HF name)."""
    z, stage = engine.optimizer, engine.zero_optimization_stage()
    doc = {"gradient_accumulation_steps": int(engine.gradient_accumulation_steps()),
           "reduce_bucket_size": int(engine.zero_reduce_bucket_size()),
           "allgather_bucket_size": int(engine.zero_allgather_bucket_size()),
           "overlap_comm": bool(engine.zero_overlap_comm()),
           "contiguous_gradients": bool(engine.zero_contiguous_gradients()),
           "reduce_scatter": bool(engine.zero_reduce_scatter()),
           "use_multi_rank_bucket_allreduce": bool(engine.zero_multi_rank_bucket_allreduce()),
           "allgather_partitions": bool(engine.zero_allgather_partitions()),
           "parameter_alignment": bool(engine.zero_parameter_alignment())}
    if stage < 3:
        doc["groups"] = [[names[id(p)] for p in group] for group in z.bit16_groups]
    else:
        doc.update(prefetch_bucket_size=int(engine.zero_prefetch_bucket_size()),
                   max_live_parameters=int(engine.zero_max_live_parameters()),
                   max_reuse_distance=int(engine.zero_max_reuse_distance()),
                   param_persistence_threshold=int(engine.zero_param_persistence_threshold()))
    return doc


def attach(engine, out, *, steps, hyper, seq_len, script=None, name=None, micro_batches=None, **options):
    """A DeepSpeedRecording of `engine` (deepspeed.initialize's, ZeRO 1-3, fp32, torch AdamW as its client
    optimizer): its Recorder declares dp, the ZeRO stage, the batch (train_micro_batch_size_per_gpu, dp · the
    accumulation steps micro-batches per step unless micro_batches says how many the loop trains, seq_len) and the
    gradient divisor dp · gas. hyper: as Recorder's; its max_grad_norm must be the engine's gradient_clipping.
    Every rank calls it."""
    _check(engine)
    if float(hyper["max_grad_norm"]) != float(engine.gradient_clipping()):
        raise Refused(f"hyper max_grad_norm {hyper['max_grad_norm']} is not the engine's gradient_clipping "
                      f"{engine.gradient_clipping()}")
    z = engine.optimizer
    hf = discovery.hf_config_of(engine.module)
    shapes = layout.logical_shapes(hf)
    dp, gas, stage = dist.get_world_size(group=z.dp_process_group), engine.gradient_accumulation_steps(), \
        engine.zero_optimization_stage()
    if dp != dist.get_world_size():
        raise Refused(f"a data-parallel group of {dp} in a world of {dist.get_world_size()}: the recorded DeepSpeed "
                      f"run is data parallel over the whole world")
    found = pieces(engine, shapes, dist.get_rank())
    names = {id(p): discovery.hf_name(raw) for raw, p in engine.module.named_parameters()}
    rec = Recorder(out, rank=dist.get_rank(), strategy={"name": name or f"deepspeed-zero{stage}", "dp": dp, "tp": 1,
                                                        "pp": 1, "zero": stage,
                                                        "deepspeed": traffic_config(engine, names)},
                   hf_config=hf, parameters=found, optimizer=z.optimizer, hyper=hyper, steps=steps,
                   batch={"micro_batch": engine.train_micro_batch_size_per_gpu(),
                          "micro_batches": micro_batches or dp * gas,
                          "seq_len": seq_len},
                   groups={"dp": z.dp_process_group}, gradient_divisor=dp * gas, script=script, **options)
    return DeepSpeedRecording(engine, rec)
