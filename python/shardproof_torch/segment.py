"""The recording's files around a segment of training (docs/formats/torch_recording.md): the contract a
Recorder freezes when it starts, starting a new recording or resuming one at step K (each rank keeps what it
recorded before K), and the seal it writes when it finishes. Used by recorder.py only.
"""
import hashlib
import json
import math
import os
import platform
import socket
import sys

import torch
import torch.distributed as dist

from . import declared, files, layout, probe

# The files a rank writes whole (tokens, gradients, states, anchors): sealed as written, even if a judge
# following the run (`judge --follow`) has judged and discarded them before the seal.
WHOLE_DIRS = (layout.TOKENS_DIR, layout.ANCHORS_DIR, layout.GRADS_DIR, layout.STATE_DIR, layout.SQRT_DIR,
              layout.PROBE_DIR)


def _sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def norm_lanes():
    """The fp32 accumulators of torch's CPU norm kernel (one ATen Vectorized<float>): 32 bytes on x86-64 at every
    capability (DEFAULT and AVX2: 8 lanes; AVX-512: 16, so 8 is the fewer), 16 bytes on aarch64's NEON (4).
    The judge bounds a clip norm's fp32 error by the length each lane sums (judge/context.cc)."""
    return 8 if platform.machine().lower() in ("x86_64", "amd64") else 4


def contract(rec, strategy, hf_config, hyper, batch, loss_reduction, gradient_divisor, script):
    """contract.json: format 2 (every step) or 1 (anchors), hashed as the judge recomputes it."""
    script_doc = None
    if script:
        with open(script, "rb") as f:
            script_doc = {"file": os.path.basename(script), "sha256": _sha256_bytes(f.read())}
    doc = {"format": layout.FORMAT, "format_version": layout.FORMAT_VERSION,
           "torch": torch.__version__, "python": sys.version.split()[0], "script": script_doc,
           "model": hf_config, "world_size": rec.grid.world,
           "strategy": {"name": strategy["name"], "dp": rec.grid.dp, "tp": rec.grid.tp, "pp": rec.grid.pp,
                        "zero": rec.zero, **{k: strategy[k] for k in ("units", "deepspeed", "tp_plan")
                                         if strategy.get(k)}},
           "batch": {"micro_batch": int(batch["micro_batch"]), "micro_batches": int(batch["micro_batches"]),
                     "seq_len": int(batch["seq_len"])},
           "steps": rec.steps, "checksum_every": rec.checksum_every,
           "optimizer": dict(hyper, name="adamw"),
           "loss": {"reduction": loss_reduction, "gradient_divisor": gradient_divisor}}
    if rec.trace_source == layout.TRACE_FLIGHT_RECORDER:  # absent: the recorder's own trace (earlier hashes kept)
        doc["trace"] = rec.trace_source
    if rec.every_step:
        doc["optimizer"]["arithmetic"] = rec.arithmetic
        doc["optimizer"]["sqrt"] = "recorded" if rec.record_sqrt else "correctly-rounded"
        doc["precision"] = {"params": "float32", "grads": "float32", "device": "cpu", "autocast": rec.autocast or False,
                            "grad_scaler": rec.scaler_contract, "norm_lanes": norm_lanes()}
        if rec.param_dtype:  # absent in fp32: earlier contracts' hashes unchanged
            doc["precision"]["param_dtype"] = rec.param_dtype
        if probe.declared(rec.autocast, rec.grid):
            doc["precision"]["probe"] = probe.declared(rec.autocast, rec.grid)
    else:
        doc["format_version"] = layout.ANCHORS_FORMAT_VERSION
        doc["anchors"] = rec.anchor_steps
    # The judge recomputes it from the parsed document (UTF-8 as it is, keys sorted, no spaces).
    body = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    doc["hash"] = _sha256_bytes(body.encode())
    return doc


def _size(b):
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else f"{b / 1e6:.1f} MB"


def announce_cost(rec):
    """What the every-step evidence costs on disk, printed when the run starts (all ranks together)."""
    psi = sum(int(math.prod(s)) for s in rec.shapes.values())
    if not rec.every_step:
        per = 5 * 4 * psi
        print(f"shardproof_torch: recording {rec.out}: {len(rec.anchor_steps)} anchors of {_size(per)} "
              f"(5 floats per parameter); steps between anchors are not judged", file=sys.stderr, flush=True)
        return
    print(f"shardproof_torch: recording every step into {rec.out}: gradients {_size(4 * psi)} per step "
          f"(one float per parameter, {psi} parameters), the full state {_size(12 * psi)} once (and at each "
          f"resume); {rec.steps} steps: {_size(4 * psi * rec.steps + 12 * psi)}. `shardproof judge "
          f"--follow {rec.out}` judges each step as it is written and discards its gradients",
          file=sys.stderr, flush=True)


def _step_of(rel):
    """The step of a whole file's relative path (".../step-000004..."), or None."""
    for part in rel.replace(os.sep, "/").split("/"):
        if part.startswith("step-"):
            try:
                return int(part[5:11])
            except ValueError:
                return None
    return None


def _is_mine(rec, rel):
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] == layout.TOKENS_DIR:
        return len(parts) > 1 and parts[1] == f"rank-{rec.rank:05d}"
    return parts[0] in WHOLE_DIRS and parts[-1] == layout.rank_file(rec.rank, "safetensors")


def start(rec, resume_step):
    """A new recording: rank 0 writes the contract and the topology. A resumed one: the same contract
    must be there; this rank's files keep their records of steps before `resume_step` only, and the seal
    entries of its whole files before it. Returns the trace's next sequence number per group (or None)."""
    contract_path = os.path.join(rec.out, layout.CONTRACT)
    entry = {"host": socket.gethostname(), "pid": os.getpid(), "cpu_affinity": sorted(os.sched_getaffinity(0)),
             "contract": rec.contract["hash"]}
    entries = [None] * rec.grid.world
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_gather_object(entries, entry)  # set-up, before the trace starts (not recorded)
    else:
        entries[rec.rank] = entry
    # Every rank declares the same run: rank 0 writes the contract, so a rank that declares another (its own
    # stage's no-decay names, another schedule) would be judged by rank 0's declaration.
    for r, e in enumerate(entries):
        if e is not None and e.get("contract") != rec.contract["hash"]:
            raise declared.Refused(f"rank {r}'s declarations differ from rank {rec.rank}'s (strategy, hyper, batch, "
                                   f"model): every rank must declare the same run (the model's no-decay names, not "
                                   f"its own stage's or shard's)")
    for e in entries:
        if e is not None:
            e.pop("contract", None)
    rec.inherited = {}
    if resume_step is None:
        if rec.rank == 0:
            files.write_atomic(contract_path, files.json_bytes(rec.contract))
            files.write_atomic(os.path.join(rec.out, layout.TOPOLOGY),
                               files.json_bytes(rec.grid.topology(entries)))
        for path in (layout.trace_path(rec.out, rec.rank), layout.records_path(rec.out, rec.rank)):
            if os.path.exists(path):
                raise FileExistsError(f"{path} exists: record into a new directory (or resume_step=K)")
        return None
    with open(contract_path) as f:
        saved = json.load(f)
    if saved.get("hash") != rec.contract["hash"]:
        diff = [k for k in rec.contract if saved.get(k) != rec.contract[k] and k != "hash"]
        raise ValueError(f"{contract_path}: the recording was made under another contract (differs in "
                         f"{', '.join(diff) or 'hash'}); a resumed run must keep it")
    rec.resume_step = k = resume_step
    old_seal = layout.seal_path(rec.out, rec.rank)
    if os.path.exists(old_seal):
        with open(old_seal) as f:
            rec.inherited = {rel: e for rel, e in json.load(f)["files"].items()
                             if _is_mine(rec, rel) and (_step_of(rel) is not None and _step_of(rel) < k)}
    files.keep_records(layout.records_path(rec.out, rec.rank),
                       lambda r: r.get("step", -1) < k or (r.get("kind") == "save" and r.get("step") == k))
    seen_late = [False]

    def keep_trace(r):
        if r.get("step", -1) >= k:
            seen_late[0] = True
        return r.get("step", -1) < k and not (seen_late[0] and r.get("step") == -1)

    kept = files.keep_records(layout.trace_path(rec.out, rec.rank), keep_trace)
    for s in range(k, rec.steps):
        for path in (layout.tokens_path(rec.out, rec.rank, s), layout.anchor_path(rec.out, s, rec.rank),
                     layout.grads_path(rec.out, s, rec.rank), layout.state_path(rec.out, s, rec.rank),
                     layout.sqrt_path(rec.out, s, rec.rank), layout.probe_path(rec.out, s, rec.rank)):
            if os.path.exists(path):
                os.remove(path)
    next_seq = {}
    for r in kept:
        next_seq[r["group"]] = max(next_seq.get(r["group"], 0), r["seq"] + 1)
    return next_seq


def seal(rec):
    """seal/rank-NNNNN.json: every file this rank wrote with its size and SHA-256. The appended files (trace,
    records; rank 0 the contract and topology) are hashed now; whole files as they were written (by this segment,
    or sealed by the one before the resume), and any other of this rank's whole files still present as they are."""
    mine = [layout.records_path(rec.out, rec.rank)]
    if rec.trace_source == layout.TRACE_RECORDER:  # a Flight Recorder trace is sealed when it is converted
        mine.append(layout.trace_path(rec.out, rec.rank))
    if rec.rank == 0:
        mine += [os.path.join(rec.out, layout.CONTRACT), os.path.join(rec.out, layout.TOPOLOGY)]
    entries = {os.path.relpath(f, rec.out): {"bytes": os.path.getsize(f), "sha256": files.file_sha256(f)}
               for f in mine}
    entries.update(rec.inherited)
    for d in WHOLE_DIRS:
        root = os.path.join(rec.out, d)
        for sub, _, names in (os.walk(root) if os.path.isdir(root) else []):
            for name in names:
                path = os.path.join(sub, name)
                rel = os.path.relpath(path, rec.out)
                if _is_mine(rec, rel) and path not in rec.written and rel not in entries:
                    entries[rel] = {"bytes": os.path.getsize(path), "sha256": files.file_sha256(path)}
    for path, (size, sha) in rec.written.items():
        entries[os.path.relpath(path, rec.out)] = {"bytes": size, "sha256": sha}
    doc = {"format_version": rec.contract["format_version"], "rank": rec.rank, "files": entries}
    files.write_atomic(layout.seal_path(rec.out, rec.rank), files.json_bytes(doc))
