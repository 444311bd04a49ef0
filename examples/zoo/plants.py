"""The bug zoo's re-planted bugs: real issues the pinned frameworks have fixed, put back into the one function each
issue names, as the issue describes the code before its fix (examples/zoo/README.md has the table and the
runner). A plant is applied in every process before the model is built (the examples' --plant NAME); it patches one
function of torch or DeepSpeed for that process only. Bugs the pinned versions still have are run as shipped
(the runner's flags), not planted.

Each plant names its issue and the function, and says what the code did before the fix. Nothing else changes.
"""


def _pipelining_scale_grads_missing():
    """pytorch/pytorch#144352 (merged 2025-01): before it, torch.distributed.pipelining did not divide the
    accumulated gradients by the number of micro-batches, so a loss function that averages over its micro-batch
    gave gradients M times too large. Planted: _PipelineStageBase.scale_grads divides by nothing."""
    from torch.distributed.pipelining.stage import _PipelineStageBase

    def scale_grads(self, grad_scale_factor):
        return None

    _PipelineStageBase.scale_grads = scale_grads


def _clip_norm_of_the_local_shard():
    """pytorch/pytorch#170862 (2025-12): under FSDP2, clip_grad_norm_ returned the norm of the rank's own shards
    and clipped with it. Planted: torch.nn.utils.clip_grad._get_total_norm returns the norm of the local pieces
    (each DTensor gradient's to_local()), as a plain tensor, so each rank clips with its own partial norm."""
    import torch
    from torch.nn.utils import clip_grad

    original = clip_grad._get_total_norm.__wrapped__ if hasattr(clip_grad._get_total_norm, "__wrapped__") else None

    @torch.no_grad()
    def _get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
        return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t, norm_type) for t in local]),
                                        norm_type)

    del original
    clip_grad._get_total_norm = _get_total_norm
    torch.nn.utils.get_total_norm = _get_total_norm


def _clip_epsilon_added_per_rank():
    """pytorch/pytorch#149768 (2025-03): with a DTensor total norm (a pending sum over the mesh, _NormPartial),
    `total_norm + 1e-6` in _clip_grads_with_norm_ added 1e-6 on every rank before the reduction, so the clip
    coefficient used norm + world·1e-6. Planted: the coefficient is max_norm / (norm + world·1e-6) again."""
    import torch
    import torch.distributed as dist
    from torch.nn.utils import clip_grad

    original = clip_grad._clip_grads_with_norm_

    @torch.no_grad()
    def _clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
        if hasattr(total_norm, "full_tensor"):
            total_norm = total_norm.full_tensor()
        world = dist.get_world_size() if dist.is_initialized() else 1
        # the eps the partial norm carried once per rank: (norm + w·eps) in place of (norm + eps)
        return original(parameters, max_norm, total_norm + (world - 1) * 1e-6, foreach)

    clip_grad._clip_grads_with_norm_ = _clip_grads_with_norm_
    torch.nn.utils.clip_grads_with_norm_ = _clip_grads_with_norm_


def _sequence_parallel_norms_not_replicated():
    """NVIDIA/Megatron-LM#1446 (2025-03, TP + SP: the final layernorm's gradient differs across TP ranks, never
    all-reduced), planted in torch's own sequence parallelism: SequenceParallel makes a norm's parameters
    Replicate DTensors, whose gradients DTensor then reduces over the TP group; planted, _replicate_module_fn leaves
    them plain tensors, so each TP rank keeps the gradient of its own sequence shard."""
    from torch.distributed.tensor.parallel.style import SequenceParallel

    def _replicate_module_fn(self, name, module, device_mesh):
        return None

    SequenceParallel._replicate_module_fn = _replicate_module_fn


def _engine_backward_leaves_the_loss_undivided():
    """deepspeedai/DeepSpeed#8224 (2026-08, a regression from #7665, reported on 0.19.3; fixed by PR #8245, whose
    graph tracker 0.19.8 ships). The issue names #7665's change, not a function; the fix changed
    DeepSpeedEngine.backward. Before it, backward did not divide the loss by gradient_accumulation_steps: the
    per-tensor hook the engine's forward puts on its outputs (_backward_prologue_per_tensor) divided the gradient
    flowing through them instead. A loss that also uses the module outside the engine's forward (`engine(x) +
    engine.module(y)` in the fix's test: the issue's submodule used more than once per step) sends that branch's
    gradient undivided, gas times too large. Planted: DeepSpeedEngine.backward as the code before the fix wrote it:
    the loss neither divided nor registered with the engine's graph tracker (so the output hooks divide their
    branch, as they did), the division only in the returned value. The issue was reported under bf16; the mechanism
    does not depend on the dtype, and the zoo runs it in fp32 (the recorder refuses DeepSpeed's bf16 section)."""
    from deepspeed.runtime.engine import DeepSpeedEngine, ZeROOptimizer

    def backward(self, loss, retain_graph=False, scale_wrt_gas=True):
        with self._running_engine_backward_lock:
            self._running_engine_backward_count += 1
            self._running_engine_backward = True
        try:
            if not self.managed_gradient_accumulation():
                self._unmanaged_backward_count += 1
            gas_scaled_loss = loss / self.gradient_accumulation_steps() if scale_wrt_gas else loss  # returned only
            if isinstance(self.optimizer, ZeROOptimizer):
                loss = self.optimizer.scale_if_loss(loss)
            loss.backward(retain_graph=retain_graph)
            self._backward_epilogue()
            return gas_scaled_loss
        finally:
            with self._running_engine_backward_lock:
                self._running_engine_backward_count -= 1
                self._running_engine_backward = self._running_engine_backward_count > 0

    DeepSpeedEngine.backward = backward


PLANTS = {
    "pytorch-144352": _pipelining_scale_grads_missing,
    "pytorch-170862": _clip_norm_of_the_local_shard,
    "pytorch-149768": _clip_epsilon_added_per_rank,
    "megatron-1446-sp": _sequence_parallel_norms_not_replicated,
    "deepspeed-8224": _engine_backward_leaves_the_loss_undivided,
}


def apply(name):
    """Applies plant `name` in this process (None: nothing)."""
    if name is None:
        return
    if name not in PLANTS:
        raise SystemExit(f"--plant {name!r}: the plants are {', '.join(sorted(PLANTS))} (examples/zoo/plants.py)")
    PLANTS[name]()
