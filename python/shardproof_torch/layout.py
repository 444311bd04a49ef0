"""The recording's directory layout and format versions (docs/formats/torch_recording.md), in one place, and the
process grid arithmetic the recording shares with the engine (docs/formats/topology.md):
rank = tp + tp_size * (dp + dp_size * pp), axis order tp-dp-pp.
"""
import os

FORMAT = "shardproof-torch"
FORMAT_VERSION = 2  # every step: gradients per step, the full state at each segment's first step
ANCHORS_FORMAT_VERSION = 1  # the earlier form: full state at anchor steps only (anchor_every=N)
CONTRACT = "contract.json"
TOPOLOGY = "topology.json"
TRACE_DIR = "trace"
RECORDS_DIR = "records"
TOKENS_DIR = "tokens"
ANCHORS_DIR = "anchors"
GRADS_DIR = "grads"
STATE_DIR = "state"
SQRT_DIR = "sqrt"
PROBE_DIR = "probe"
SEAL_DIR = "seal"
# A run traced by PyTorch's Flight Recorder (Recorder(trace="flight-recorder")): each rank's dump and step windows.
FR_DIR = "flight_recorder"
TRACE_RECORDER, TRACE_FLIGHT_RECORDER = "recorder", "flight-recorder"
# `shardproof judge` writes only under this folder of the recording (never sealed, never a recorder's file).
JUDGE_DIR = "judge"
AXIS_ORDER = "tp-dp-pp"


def rank_file(rank, ext):
    return f"rank-{rank:05d}.{ext}"


def trace_path(root, rank):
    return os.path.join(root, TRACE_DIR, rank_file(rank, "jsonl"))


def records_path(root, rank):
    return os.path.join(root, RECORDS_DIR, rank_file(rank, "jsonl"))


def tokens_path(root, rank, step):
    return os.path.join(root, TOKENS_DIR, f"rank-{rank:05d}", f"step-{step:06d}.bin")


def anchor_path(root, step, rank):
    return os.path.join(root, ANCHORS_DIR, f"step-{step:06d}", rank_file(rank, "safetensors"))


def grads_path(root, step, rank):
    return os.path.join(root, GRADS_DIR, f"step-{step:06d}", rank_file(rank, "safetensors"))


def state_path(root, step, rank):
    return os.path.join(root, STATE_DIR, f"step-{step:06d}", rank_file(rank, "safetensors"))


def sqrt_path(root, step, rank):
    return os.path.join(root, SQRT_DIR, f"step-{step:06d}", rank_file(rank, "safetensors"))


def probe_path(root, step, rank):
    return os.path.join(root, PROBE_DIR, f"step-{step:06d}", rank_file(rank, "safetensors"))


def fr_dump_path(root, rank):
    return os.path.join(root, FR_DIR, rank_file(rank, "pkl"))


def fr_steps_path(root, rank):
    return os.path.join(root, FR_DIR, rank_file(rank, "json"))


def seal_path(root, rank):
    return os.path.join(root, SEAL_DIR, rank_file(rank, "json"))


class Grid:
    """dp x tp x pp ranks in the engine's default axis order (src/comm/process_grid.h)."""

    def __init__(self, dp, tp, pp):
        for name, v in (("dp", dp), ("tp", tp), ("pp", pp)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"strategy {name} = {v!r}: an axis size is an integer >= 1")
        self.dp, self.tp, self.pp = dp, tp, pp
        self.world = dp * tp * pp

    def rank_of(self, dp, tp, pp):
        return tp + self.tp * (dp + self.dp * pp)

    def coords_of(self, rank):
        return {"tp": rank % self.tp, "dp": (rank // self.tp) % self.dp, "pp": rank // (self.tp * self.dp)}

    def members(self, axis, rank):
        c = self.coords_of(rank)
        size = getattr(self, axis)
        out = []
        for i in range(size):
            d = dict(c)
            d[axis] = i
            out.append(self.rank_of(d["dp"], d["tp"], d["pp"]))
        return out

    def group_name(self, axis, rank):
        c = self.coords_of(rank)
        fixed = ".".join(f"{a}{c[a]}" for a in ("dp", "tp", "pp") if a != axis)
        return f"{axis}[{fixed}]"

    def all_groups(self, axis):
        seen, out = set(), []
        for r in range(self.world):
            m = tuple(self.members(axis, r))
            if m not in seen:
                seen.add(m)
                out.append(list(m))
        return sorted(out, key=lambda g: g[0])

    def topology(self, entries):
        """topology.json (docs/formats/topology.md) from every rank's {host, pid, cpu_affinity}."""
        return {"format_version": 1, "world_size": self.world, "axis_order": AXIS_ORDER, "dp": self.dp,
                "tp": self.tp, "pp": self.pp,
                "ranks": [dict(world_rank=r, coords=self.coords_of(r), **entries[r]) for r in range(self.world)],
                "groups": {a: self.all_groups(a) for a in ("dp", "tp", "pp")}}


def logical_shapes(hf):
    """HF name -> logical (out, in) shape of every tensor of the LLaMA model a config.json describes, in the
    canonical order (docs/architecture.md §4)."""
    C, V, F = hf["hidden_size"], hf["vocab_size"], hf["intermediate_size"]
    H = hf["num_attention_heads"]
    KV = hf.get("num_key_value_heads") or H
    D = hf.get("head_dim") or C // H
    shapes = {"model.embed_tokens.weight": [V, C]}
    for i in range(hf["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [C], p + "self_attn.q_proj.weight": [H * D, C],
                       p + "self_attn.k_proj.weight": [KV * D, C], p + "self_attn.v_proj.weight": [KV * D, C],
                       p + "self_attn.o_proj.weight": [C, H * D], p + "post_attention_layernorm.weight": [C],
                       p + "mlp.gate_proj.weight": [F, C], p + "mlp.up_proj.weight": [F, C],
                       p + "mlp.down_proj.weight": [C, F]})
    shapes["model.norm.weight"] = [C]
    if not hf.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [V, C]
    return shapes
