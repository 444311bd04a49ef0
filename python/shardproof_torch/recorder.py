"""Recorder: what one rank of a PyTorch training run writes so that `shardproof judge DIR` can prove it against
the single-device reference (docs/judge.md; the files: docs/formats/torch_recording.md).

A few calls in the user's own loop, on every rank:

    rec = Recorder(out, rank=r, strategy={"name": "ddp", "dp": 2, "tp": 1, "pp": 1, "zero": 0},
                   groups={"dp": dp_group}, hf_config=config_json, parameters=[(hf_name, param, shard)],
                   optimizer=adamw, hyper=..., batch={"micro_batch": 2, "micro_batches": 8, "seq_len": 32},
                   steps=20)
    rec.attach_ddp(ddp_model)            # DDP's gradient reduction through PyTorch's own allreduce_hook
    for step in range(steps):
        rec.begin_step(step, lr)
        rec.micro_batch(index, tokens)   # the ids of every micro-batch this rank trains on, in order
        ... forward; rec.loss(index, loss_sum, targets, objective) ...
        with rec.phase("backward"): objective.backward()
        rec.gradients()                  # synchronized, before clipping: checksums and the gradients
        with rec.statistics(): norm = ...
        rec.clipped(norm)
        with rec.phase("optimizer"): opt.step()
        rec.end_step()                   # parameters after the update
    rec.finish()                         # seals this rank's files

Every step it writes the synchronized gradients (one writer per piece) and the checksums of the gradients and of
the parameters after the update; at the first step of each segment (step 0, each resume) the full state
(parameters and AdamW's moments): enough for the judge to replay every step's update bit for bit and to recompute
every step's gradient (docs/judge.md §3). anchor_every=N records the earlier form instead (format 1: the full
state around every N-th step only). What the judge cannot judge is refused by name (declared.Refused): an undeclared
autocast or GradScaler, fp16 without its GradScaler, non-fp32 parameters or gradients, a bias the config lacks, an optimizer other
than AdamW's CPU arithmetic.

Not the judge and not a training framework: it never changes a tensor, and it issues no collective of its own
after the set-up exchange of host names (made before the trace starts). Depends on torch only.
"""
import contextlib
import os
import time

import numpy as np
import torch

from . import batches, checksum, declared, discovery, files, layout, native, probe, segment, staging
from . import grad_scaler as scaling
from .step_files import StepFiles, _local
from .pieces import Piece
from .pieces import declared as declared_piece
from .trace import PHASES, TraceRecorder, trace_groups

# The optimizer's declared hyper-parameters: exactly these (docs/formats/torch_recording.md, contract.json).
HYPER_KEYS = ("lr_schedule", "betas", "eps", "weight_decay", "no_decay", "max_grad_norm", "implementation")


def _timed(f):
    """Adds the call's wall time to Recorder.seconds and its CPU time to Recorder.cpu_seconds: what recording
    costs this rank, step by step."""
    def wrapped(self, *args, **kwargs):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return f(self, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.process_time() - c0
    wrapped.__doc__ = f.__doc__
    return wrapped


class Recorder(StepFiles):
    def __init__(self, out, *, rank, strategy, hf_config, parameters, optimizer, hyper, batch, steps,
                 groups=None, loss_reduction="token_mean", gradient_divisor=1, anchor_every=None,
                 checksum_every=1, script=None, resume_step=None, model=None, quiet=False, trace="recorder",
                 digest=None, autocast=None, param_dtype=None, grad_scaler=None):
        """parameters: [(HF name, torch parameter, shard)] of this rank's model, shard = None (the whole
        logical tensor) or (dim, index, parts): an even split along dim 0 or 1 — or the pieces
        Recorder.attach discovers (discovery.Piece: any box, its replicas found). optimizer: the torch optimizer
        that holds this rank's AdamW state (for ZeroRedundancyOptimizer: its .optim). hyper: {lr_schedule
        (text, or a schedule as data: schedule.py), betas, eps, weight_decay, no_decay: [HF names],
        max_grad_norm, implementation}. model: the module, if given, is searched for parameters the engine does
        not have (a bias). anchor_every: record the earlier anchored form (format 1) instead of every step.
        trace: "recorder" (torch.distributed's Python calls wrapped, trace.py) or "flight-recorder" (PyTorch's
        Flight Recorder is the trace: nothing is wrapped; finish() writes this rank's dump and step windows to
        flight_recorder/, which `python -m shardproof_torch.flight_recorder DIR` converts into trace/).
        digest: where checksums are computed (staging.py): "auto" (on a tensor's own device: NumPy for CPU
        tensors), "device" (checksum_device's torch ops for every tensor, the GPU path run on the CPU), "numpy";
        default SHARDPROOF_DIGEST or auto. autocast: torch.bfloat16 if the forward runs under
        torch.autocast(dtype=torch.bfloat16) (parameters, gradients and the optimizer fp32): the judge's reference
        then runs the engine's bf16 casts, within the derived 16-bit envelope (docs/judge.md §"bf16 autocast"); every
        forward of `model` and every micro_batch/loss call is checked against it; torch.float16 with grad_scaler=the run's
        GradScaler (grad_scaler.py: its decisions recorded and judged). param_dtype: "bfloat16" when FSDP2's
        MixedPrecisionPolicy computes with bf16 parameters and reduces in fp32 (attach finds it)."""
        self.out, self.rank, self.steps = out, rank, steps
        from . import flight_recorder  # not at the top: `python -m shardproof_torch.flight_recorder` runs it
        self.trace_source = flight_recorder.check_mode(trace, anchor_every, resume_step)
        self.fr_steps = []  # Flight Recorder mode: [step, begin ns, end ns] (time.time_ns, FR's clock)
        self.every_step = anchor_every is None
        self.digest = staging.digest_mode(digest)
        self.autocast = declared.autocast_declared(autocast)
        self.param_dtype = declared.param_dtype_declared(param_dtype, self.autocast)
        self.grad_scaler, self.scaler_contract = grad_scaler, scaling.contract_of(grad_scaler, self.autocast)
        declared.check_integers(steps, gradient_divisor, checksum_every, self.every_step)
        declared.check_config(hf_config)
        self.grid = layout.Grid(strategy["dp"], strategy["tp"], strategy["pp"])
        if not 0 <= rank < self.grid.world:
            raise ValueError(f"rank {rank} is outside the declared world of {self.grid.world}")
        self.coords = self.grid.coords_of(rank)
        self.zero = int(strategy.get("zero", 0))
        self.shapes = layout.logical_shapes(hf_config)
        self.pieces = [p if isinstance(p, Piece) else declared_piece(self.grid, rank, self.shapes, *p)
                       for p in parameters]
        self.params = [(pc.name, pc.param, pc.shard(self.shapes[pc.name])) for pc in self.pieces]
        if sorted(hyper) != sorted(HYPER_KEYS):
            raise ValueError(f"hyper must give exactly {', '.join(HYPER_KEYS)}; missing "
                             f"{sorted(set(HYPER_KEYS) - set(hyper))}, unknown {sorted(set(hyper) - set(HYPER_KEYS))}")
        declared.check_hyper(hyper, self.shapes, steps)
        declared.check_strategy(dict(strategy, zero=self.zero))
        for n, p, _ in self.params:
            declared.check_parameter(n, p, rank)
        if model is not None:
            declared.check_model(model, self.shapes)
            self.watch_forward(model)
        self.arithmetic = declared.adamw_arithmetic(optimizer)
        self.record_sqrt = anchor_every is None and not declared.sqrt_correctly_rounded()
        self.optimizer = optimizer
        self.checksum_every = checksum_every
        self.anchor_steps = []
        if not self.every_step:  # the earlier form: anchors every anchor_every steps and at the last
            self.anchor_steps = [s for s in range(steps) if anchor_every > 0 and s % anchor_every == 0]
            if anchor_every > 0 and steps - 1 not in self.anchor_steps:
                self.anchor_steps.append(steps - 1)
        self.contract = segment.contract(self, strategy, hf_config, hyper, batch, loss_reduction, gradient_divisor,
                                         script)
        for d in (layout.TRACE_DIR, layout.RECORDS_DIR, layout.SEAL_DIR,
                  os.path.join(layout.TOKENS_DIR, f"rank-{rank:05d}")):
            os.makedirs(os.path.join(out, d), exist_ok=True)
        self.written = {}  # path -> (bytes, SHA-256) of the whole files this rank wrote (the seal's entries)
        self.segment_start = resume_step or 0
        self.group_lr = None
        self._watch_optimizer()
        self.scaler_checked = False
        first_seq = segment.start(self, resume_step)
        fr = self.trace_source == layout.TRACE_FLIGHT_RECORDER
        self.trace = TraceRecorder(None if fr else layout.trace_path(out, rank), rank, trace_groups(self.grid, rank, groups or {}),
                                   first_seq)
        self.records = files.JsonlFile(layout.records_path(out, rank))
        if not fr:
            self.trace.install()
        self.step = -1
        self.step_doc = None
        self.anchor = None
        self.seconds = 0.0  # wall time spent in the recorder's per-step calls
        self.cpu_seconds = 0.0  # and the CPU time (the process's: the recorder runs on the training thread)
        if rank == 0 and not quiet:
            segment.announce_cost(self)

    @classmethod
    def attach(cls, model, optimizer, out, *, hyper, batch, steps, hf_config=None, name=None,
               gradient_divisor=None, groups=None, ddp_hook=None, **options):
        """A Recorder for `model` (a Hugging Face LLaMA, wrapped or not: DDP, torch.compile, FSDP2, DTensor tensor
        parallelism) that finds what the constructor asks for (discovery.discover: every parameter's HF name, box
        and replicas, the process groups and the grid they imply, the ZeRO stage, the model's config) and
        registers DDP's traced comm hook. optimizer: the torch optimizer (a ZeroRedundancyOptimizer is read
        through its .optim). gradient_divisor: what the framework divides gradients by when it reduces them
        (default: dp, as DDP and FSDP2 average). Every rank calls it. Other keyword options are the constructor's
        (anchor_every, checksum_every, script, resume_step, loss_reduction, quiet, trace); the recording is format 2
        (every step) unless anchor_every is given. Refuses (RefusedModel, declared.Refused) what it cannot judge,
        by name. groups: {axis: process group} the model does not show (a pipeline's pp group). ddp_hook: the DDP
        comm hook the run uses (default_hooks.bf16_compress_hook, say): registered inside the recorder's traced one.
        autocast=torch.bfloat16: the forward runs under bf16 autocast (checked at every forward of `model`);
        autocast=torch.float16 with grad_scaler=the run's GradScaler."""
        found = discovery.discover(model, optimizer, hf_config, name, groups)
        dp = found["strategy"]["dp"]
        rec = cls(out, rank=found["rank"], strategy=found["strategy"], hf_config=found["hf_config"],
                  parameters=found["pieces"], optimizer=found["optimizer"], hyper=hyper, batch=batch, steps=steps,
                  groups=found["groups"], gradient_divisor=dp if gradient_divisor is None else gradient_divisor,
                  param_dtype=found["param_dtype"], **options)
        rec.watch_forward(model)
        if found["ddp"] is not None:
            rec.attach_ddp(found["ddp"], ddp_hook)
        return rec

    # ---------------------------------------------------------------- set-up
    def _watch_optimizer(self):
        """Records the lr the optimizer's groups hold when it steps (those holding this rank's parameters): the
        judge checks it against the step's recorded lr and the declared schedule. The instance's step is wrapped
        (an lr scheduler wraps it the same way); a ZeroRedundancyOptimizer's local optimizer is the one that steps."""
        opt = declared._optimizers(self.optimizer)
        if opt is None or not hasattr(opt, "step"):
            return
        mine = {id(p) for _, p, _ in self.params}
        inner, rec = opt.step, self

        def step(*args, **kwargs):
            lrs = {float(g["lr"]) for g in opt.param_groups if any(id(p) in mine for p in g["params"])}
            rec.group_lr = sorted(lrs)
            return inner(*args, **kwargs)

        opt.step = step

    def _write(self, path, data):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.written[path] = files.write_atomic(path, data)

    def attach_ddp(self, ddp_model, hook=None):
        """Registers PyTorch's own allreduce_hook (or `hook`, same signature) as DDP's comm hook, so that its
        bucket reductions go through torch.distributed.all_reduce (traced, phase grad_sync). With a Flight
        Recorder trace nothing is registered: DDP's own reductions are in the dump."""
        if self.trace_source == layout.TRACE_FLIGHT_RECORDER:
            if hook is not None:
                ddp_model.register_comm_hook(ddp_model.process_group, hook)
            return
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        inner = hook or default_hooks.allreduce_hook
        rec = self

        def traced_hook(state, bucket):
            saved = rec.trace.phase
            rec.trace.phase = "grad_sync"
            try:
                return inner(state, bucket)
            finally:
                rec.trace.phase = saved

        ddp_model.register_comm_hook(ddp_model.process_group, traced_hook)

    # ---------------------------------------------------------------- the step
    @contextlib.contextmanager
    def phase(self, name):
        if name not in PHASES:
            raise ValueError(f"phase {name!r} is not one of {', '.join(PHASES)}")
        saved = self.trace.phase
        self.trace.phase = name
        try:
            yield
        finally:
            self.trace.phase = saved

    def statistics(self):
        """Collectives of statistics rather than model state (the loss for logging, the gradient norm for
        clipping): phase `evidence`, reported by the traffic view and not compared with the model."""
        return self.phase("evidence")

    def begin_step(self, step, lr):
        if self.trace_source == layout.TRACE_FLIGHT_RECORDER:
            self.fr_steps.append([step, time.time_ns(), None])
        self.step = step
        self.trace.step, self.trace.phase, self.trace.micro_batch = step, "forward", -1
        self.step_doc = {"kind": "step", "step": step, "lr": files.finite_or_text(lr), "grad_norm": None,
                         "tokens": [], "losses": []}
        self.token_rows = []
        self.group_lr = None

    def watch_forward(self, model):
        """Checks the autocast state at every forward of `model` (a forward pre-hook; it changes nothing); under bf16
        autocast, probes layer 0's q_proj (probe.py)."""
        if probe.declared(self.autocast, self.grid) and self.every_step:
            probe.Probe(self, model)
        model.register_forward_pre_hook(
            lambda module, args: declared.check_autocast(self.autocast, f"step {self.step}: the model's forward", True))

    @_timed
    def micro_batch(self, index, tokens):
        """The ids (rows, seq_len + 1) of global micro-batch `index`, in the order this rank trains them;
        -1 is padding. Written by the ranks that feed the model (tp 0 of the first pipeline stage)."""
        declared.check_autocast(self.autocast, f"step {self.step}: micro_batch({index})")
        self.trace.micro_batch = index
        if self.coords["tp"] == 0 and self.coords["pp"] == 0:
            self.step_doc["tokens"].append(int(index))
            self.token_rows.append(torch.as_tensor(tokens).to(torch.int32).numpy())

    def hf_micro_batch(self, index, input_ids, labels=None, attention_mask=None, position_ids=None):
        """Micro-batch `index` as a Hugging Face batch: input_ids (rows, T), labels with -100, attention_mask,
        position_ids (batches.engine_rows says what is refused); the recording's seq_len is T - 1."""
        rows = batches.engine_rows(input_ids, labels, attention_mask, position_ids,
                                   where=f"step {self.step} micro-batch {index}")
        self.micro_batch(index, rows)

    def at_micro_batch(self, index):
        """The global micro-batch the collectives that follow belong to (a pipeline's backward pass)."""
        self.trace.micro_batch = index

    @_timed
    def loss(self, index, loss_sum, targets, objective):
        """Micro-batch `index`: the sum of its per-token losses, its target count and the scalar this rank
        backpropagates for it (before any division the framework applies, e.g. DDP's 1/dp)."""
        declared.check_autocast(self.autocast, f"step {self.step}: loss({index})")
        if self.coords["tp"] == 0 and self.coords["pp"] == self.grid.pp - 1:
            self.step_doc["losses"].append({"index": int(index), "targets": int(targets),
                                            "loss_sum": files.finite_or_text(loss_sum),
                                            "objective": files.finite_or_text(objective)})

    def _checksums_due(self):
        return self.checksum_every > 0 and self.step % self.checksum_every == 0

    def _cover(self, n, piece):
        """The local elements this rank summarizes: its share of the replicas of its piece (replica i of R
        summarizes [n·i/R, n·(i+1)/R))."""
        i, count = piece.replicas.index(self.rank), len(piece.replicas)
        return n * i // count, n * (i + 1) // count

    def _tensor_records(self, phase, staged):
        """The records of a staging.Staged's tensors: every partial enqueued, then one wait, then each piece's
        identity for its replicas: the digest lanes of the whole piece from the C pass that takes its partial
        (`bits`), else its SHA-256."""
        parts = []
        for i, (pc, (name, _, _)) in enumerate(zip(self.pieces, self.params)):
            k0, k1 = self._cover(staged.numel(i), pc)
            indices = pc.indices(self.shapes[name], k0)
            parts.append((k0, k1, indices, None if staged.native(i, indices) else staged.partial(i, k0, k1, indices)))
        docs = []
        for (name, p, shard), x, (k0, k1, indices, part) in zip(self.params, staged.arrays(), parts):
            if part is None:
                partial, ident = native.piece(x, indices.first - k0, k0, k1, checksum.Partial())
                ident = {"bits": ident}
            else:
                partial, ident = part(), {"sha256": checksum.bytes_digest(x)}
            docs.append(dict(partial.fields(), kind="tensor", step=self.step, phase=phase, tensor=name,
                             shard=shard, numel=int(np.prod(self.shapes[name])),
                             local=int(x.size), cover=[k0, k1], **ident))
        return docs

    def _writes_anchor(self, piece, state):
        """One writer per logical piece: the first of its replicas (dp 0, and tp 0 for TP-replicated tensors);
        the optimizer's moments of a ZeRO-sharded optimizer from the rank that owns them."""
        if state and self.zero == 1:
            return True
        return piece.replicas[0] == self.rank

    def _opt_state(self, pc):
        return pc.moments(self.optimizer)

    @_timed
    def gradients(self):
        """The gradients as the optimizer will see them (synchronized, before clipping)."""
        self.trace.phase = "optimizer"
        if self.grad_scaler is not None:
            self.step_doc["scaler"] = scaling.after_unscale(self.grad_scaler, f"step {self.step}")
        elif not self.scaler_checked:
            self.scaler_checked = True
            if declared.grad_scaler_active():
                raise declared.Refused("an enabled GradScaler the Recorder was not given exists in this process: "
                                       "pass grad_scaler=scaler (with autocast=torch.float16)")
        grads = []
        for pc in self.pieces:
            g = pc.grad()
            if g is None:
                raise ValueError(f"step {self.step}: {pc.name} has no gradient on rank {self.rank}")
            if g.dtype != torch.float32 or g.device.type != "cpu":
                raise declared.Refused(f"step {self.step}: the gradient of {pc.name!r} on rank {self.rank} is "
                                       f"{g.dtype} on {g.device}: the judge reads fp32 CPU gradients")
            grads.append(g)
        due = self._checksums_due()
        staged = staging.Staged(grads, self.digest, [due or self._writes_anchor(pc, False) for pc in self.pieces])
        if due:
            self.records.write_many(self._tensor_records("grad", staged))
        grads = staged.arrays()
        if self.every_step:
            self._write_step_files(grads)
        elif self.step in self.anchor_steps:
            a, meta = [], {}
            for pc, g in zip(self.pieces, grads):
                if self._writes_anchor(pc, False):
                    a += [("param/" + pc.name, _local(pc.value()).reshape(pc.sizes).copy()),
                          ("grad/" + pc.name, g.reshape(pc.sizes).copy())]
                a += self._moments(pc, meta)
            self.anchor = (a, meta)

    def clipped(self, total_norm):
        """The gradient norm this rank's clipping used (torch.nn.utils.clip_grad_norm_'s return value)."""
        self.step_doc["grad_norm"] = files.finite_or_text(total_norm)

    @_timed
    def end_step(self):
        self.trace.phase = "optimizer"
        due = self._checksums_due()
        if due or self.anchor is not None:
            staged = staging.Staged([pc.value() for pc in self.pieces], self.digest,
                                    [due or self._writes_anchor(pc, False) for pc in self.pieces])
            if due:
                self.records.write_many(self._tensor_records("param", staged))
            values = staged.arrays()
        if self.anchor is not None:
            a, meta = self.anchor
            for pc, x in zip(self.pieces, values):
                if self._writes_anchor(pc, False):
                    a.append(("param_after/" + pc.name, x.reshape(pc.sizes).copy()))
            if a:  # a rank that holds no piece any other rank does not write first writes nothing
                self._write(layout.anchor_path(self.out, self.step, self.rank),
                            files.safetensors_bytes(a, self._file_metadata("shardproof-torch-anchor", meta)))
            self.anchor = None
        if self.every_step and self.record_sqrt:
            self._write_sqrt()
        if self.token_rows:
            self._write(layout.tokens_path(self.out, self.rank, self.step),
                        files.token_batch_bytes(np.concatenate(self.token_rows)))
        if "scaler" in self.step_doc:
            self.step_doc["scaler"] = scaling.after_update(self.grad_scaler, self.step_doc["scaler"])
        if self.every_step:
            self.step_doc["group_lr"] = None if self.group_lr is None else [files.finite_or_text(x)
                                                                            for x in self.group_lr]
        self.records.write(self.step_doc)
        self.trace.flush()
        self.trace.step, self.trace.phase, self.trace.micro_batch = -1, "setup", -1
        if self.fr_steps:
            self.fr_steps[-1][2] = time.time_ns()

    # ---------------------------------------------------------------- checkpoints
    def saved(self, step):
        """After this rank saved a checkpoint from which training resumes at `step`."""
        self.records.write({"kind": "save", "step": step, "states": self._state_digests()})

    def resumed(self, step):
        """After this rank loaded the checkpoint it resumes from at `step`."""
        self.records.write({"kind": "resume", "step": step, "states": self._state_digests()})

    # ---------------------------------------------------------------- the end
    def finish(self):
        """Closes the files and seals them: seal/rank-NNNNN.json lists every file this rank wrote with its
        size and SHA-256 (the judge refuses a recording whose files do not match their seal)."""
        self.trace.close()
        self.trace.uninstall()
        if self.trace_source == layout.TRACE_FLIGHT_RECORDER:
            from . import flight_recorder
            dump, steps = flight_recorder.rank_files(self)
            self._write(layout.fr_dump_path(self.out, self.rank), dump)
            self._write(layout.fr_steps_path(self.out, self.rank), steps)
        self.records.close()
        segment.seal(self)
