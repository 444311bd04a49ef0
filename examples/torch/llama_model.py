"""A small LLaMA in plain PyTorch with Hugging Face parameter names, and its Megatron tensor-parallel split.

The math is Hugging Face LLaMA's (LlamaRMSNorm, rotate-half RoPE with inv_freq in fp32, causal attention with
grouped-query heads, SwiGLU MLP, no biases, untied head). Token id -1 is padding: a zero embedding as an input
and an ignored target. This is the example's own model, written as a user would; shardproof's reference is
its C++ engine, not this file.

Tensor parallelism (Shoeybi et al. 2019, §3): with tp ranks, attention heads, MLP columns and the vocabulary
are split. Y = XA with A = [A_1 .. A_p] split by columns (q, k, v, gate, up, lm_head: rows of the HF
(out, in) weight) needs the conjugate pair f = copy_to_tp (identity forward, all-reduce backward) on its input;
Z = YB with B split by rows (o_proj, down_proj: columns of the HF weight) needs g = reduce_from_tp (all-reduce
forward, identity backward) on its output. The embedding is vocabulary-parallel (each rank its rows, a g on
the output); the loss is the vocabulary-parallel cross entropy (all-reduces of the row max, sum exp and target
logit, N floats each). Per block: 2 all-reduces forward, 2 backward, of (tokens, hidden) each. With
vocab_parallel=False the embedding and the LM head stay whole on every tp rank (no collective for either; their
gradients are the same on every tp rank), as Megatron-style splits that replicate them do.
"""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F


class CopyToTp(torch.autograd.Function):
    """f: identity forward, all-reduce of the input gradient over tp backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, dy):
        dy = dy.contiguous()
        dist.all_reduce(dy, group=ctx.group)
        return dy, None


class ReduceFromTp(torch.autograd.Function):
    """g: all-reduce over tp forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, dy):
        return dy, None


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Sum over tokens of -log softmax(logits)[target] with the vocabulary split over tp: logits (N, V/tp) of
    vocabulary rows [v0, v0 + V/tp); targets (N,), -1 ignored. Backward: softmax - onehot, locally."""

    @staticmethod
    def forward(ctx, logits, targets, v0, group):
        m = logits.max(dim=-1).values.contiguous()
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - m[:, None]
        e = shifted.exp()
        s = e.sum(dim=-1).contiguous()
        dist.all_reduce(s, group=group)
        local = (targets >= v0) & (targets < v0 + logits.shape[1])
        idx = (targets - v0).clamp(0, logits.shape[1] - 1)
        t = torch.where(local, shifted.gather(1, idx[:, None])[:, 0], torch.zeros_like(s)).contiguous()
        dist.all_reduce(t, group=group)
        valid = targets >= 0
        loss = torch.where(valid, s.log() - t, torch.zeros_like(s))
        ctx.save_for_backward(e / s[:, None], idx, local, valid)
        return loss.sum()

    @staticmethod
    def backward(ctx, dloss):
        p, idx, local, valid = ctx.saved_tensors
        g = p.clone()
        g[torch.arange(g.shape[0]), idx] -= local.to(g.dtype)
        g *= valid.to(g.dtype)[:, None] * dloss
        return g, None, None, None


def rope(T, D, theta):
    """cos, sin (T, D) as HF's LlamaRotaryEmbedding computes them (inv_freq and angles in fp32)."""
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rope_interleaved(x, cos, sin):
    """The planted bug rope-interleaved: GPT-J's RoPE, rotating pairs (2i, 2i + 1) by angle i, where Hugging Face
    LLaMA rotates (i, i + D/2)."""
    D = x.shape[-1]
    c, s = cos[..., : D // 2], sin[..., : D // 2]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)


class Llama(torch.nn.Module):
    """The layers [first_layer, last_layer) of a LLaMA, with the embedding on the first stage and the final norm
    and head on the last; tp > 1 splits it as the module docstring says. Parameters are registered under their
    HF names (dots become '__' inside torch; hf_parameters() gives the names back)."""

    def __init__(self, cfg, first_layer, last_layer, tp=1, tp_rank=0, tp_group=None, norm_before_copy=False,
                 vocab_parallel=True, rope_interleaved=False):
        super().__init__()
        self.cfg, self.tp, self.tp_rank, self.tp_group = cfg, tp, tp_rank, tp_group
        self.vocab_parallel = vocab_parallel or tp == 1
        self.rope_interleaved = rope_interleaved
        self.first_layer, self.last_layer = first_layer, last_layer
        self.first = first_layer == 0
        self.last = last_layer == cfg["num_hidden_layers"]
        # The planted bug tp-norm-unreduced: f (copy_to_tp) before the input norm instead of after it, so the
        # norm's weight gradient is a partial sum on every tp rank that nobody reduces.
        self.norm_before_copy = norm_before_copy
        C, V, Fd = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
        H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        D = C // H
        self.C, self.D, self.H, self.KV = C, D, H // tp, KV // tp
        self.shards = {}
        self._p = {}

        def add(name, shape, shard=None, init="normal"):
            p = torch.nn.Parameter(torch.ones(shape) if init == "ones" else torch.empty(shape))
            self.register_parameter(name.replace(".", "__"), p)
            self._p[name] = p
            self.shards[name] = (shard, tp_rank, tp) if (shard is not None and tp > 1) else None

        vocab = V // tp if self.vocab_parallel else V
        if self.first:
            add("model.embed_tokens.weight", (vocab, C), 0 if self.vocab_parallel else None)
        for i in range(first_layer, last_layer):
            p = f"model.layers.{i}."
            add(p + "input_layernorm.weight", (C,), init="ones")
            add(p + "self_attn.q_proj.weight", (self.H * D, C), 0)
            add(p + "self_attn.k_proj.weight", (self.KV * D, C), 0)
            add(p + "self_attn.v_proj.weight", (self.KV * D, C), 0)
            add(p + "self_attn.o_proj.weight", (C, self.H * D), 1)
            add(p + "post_attention_layernorm.weight", (C,), init="ones")
            add(p + "mlp.gate_proj.weight", (Fd // tp, C), 0)
            add(p + "mlp.up_proj.weight", (Fd // tp, C), 0)
            add(p + "mlp.down_proj.weight", (C, Fd // tp), 1)
        if self.last:
            add("model.norm.weight", (C,), init="ones")
            add("lm_head.weight", (vocab, C), 0 if self.vocab_parallel else None)

    def hf_parameters(self):
        """[(HF name, parameter, shard)] in canonical order; shard = (dim, tp rank, tp) or None."""
        return [(n, p, self.shards[n]) for n, p in self._p.items()]

    def load_logical(self, full):
        """Copies this rank's part of full logical tensors {HF name: tensor}."""
        with torch.no_grad():
            for n, p in self._p.items():
                t = full[n]
                s = self.shards[n]
                if s is not None:
                    dim, r, parts = s
                    t = t.chunk(parts, dim=dim)[r]
                p.copy_(t)

    # ---------------------------------------------------------------- forward pieces
    def _f(self, x):
        return CopyToTp.apply(x, self.tp_group) if self.tp > 1 else x

    def _g(self, x):
        return ReduceFromTp.apply(x, self.tp_group) if self.tp > 1 else x

    def _norm(self, x, name):
        eps = self.cfg.get("rms_norm_eps", 1e-6)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self._p[name]

    def embed(self, ids):
        w = self._p["model.embed_tokens.weight"]
        v0 = self.tp_rank * w.shape[0] if self.vocab_parallel else 0
        local = (ids >= v0) & (ids < v0 + w.shape[0])
        h = F.embedding((ids - v0).clamp(0, w.shape[0] - 1), w) * local.unsqueeze(-1).to(w.dtype)
        return self._g(h) if self.vocab_parallel else h

    def block(self, i, x, cos, sin):
        p = f"model.layers.{i}."
        B, T, _ = x.shape
        if self.norm_before_copy:
            xn = self._norm(self._f(x), p + "input_layernorm.weight")
        else:
            xn = self._f(self._norm(x, p + "input_layernorm.weight"))
        q = (xn @ self._p[p + "self_attn.q_proj.weight"].t()).view(B, T, self.H, self.D).transpose(1, 2)
        k = (xn @ self._p[p + "self_attn.k_proj.weight"].t()).view(B, T, self.KV, self.D).transpose(1, 2)
        v = (xn @ self._p[p + "self_attn.v_proj.weight"].t()).view(B, T, self.KV, self.D).transpose(1, 2)
        if self.rope_interleaved:
            q, k = rope_interleaved(q, cos, sin), rope_interleaved(k, cos, sin)
        else:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        rep = self.H // self.KV
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        a = s.masked_fill(mask, float("-inf")).softmax(-1) @ v
        a = a.transpose(1, 2).reshape(B, T, self.H * self.D)
        x = x + self._g(a @ self._p[p + "self_attn.o_proj.weight"].t())
        xn = self._f(self._norm(x, p + "post_attention_layernorm.weight"))
        h = F.silu(xn @ self._p[p + "mlp.gate_proj.weight"].t()) * (xn @ self._p[p + "mlp.up_proj.weight"].t())
        return x + self._g(h @ self._p[p + "mlp.down_proj.weight"].t())

    def forward(self, x):
        """First stage: x = token ids (B, T); else hidden states (B, T, C). Returns hidden states, or on the
        last stage the logits (B, T, V/tp)."""
        if self.first:
            x = self.embed(x)
        T = x.shape[1]
        cos, sin = rope(T, self.D, self.cfg.get("rope_theta", 10000.0))
        for i in range(self.first_layer, self.last_layer):
            x = self.block(i, x, cos, sin)
        if not self.last:
            return x
        xn = self._norm(x, "model.norm.weight")
        return (self._f(xn) if self.vocab_parallel else xn) @ self._p["lm_head.weight"].t()

    def loss_sum(self, logits, targets):
        """Sum of the per-token cross entropy over the targets that are not -1."""
        V = logits.shape[-1]
        if self.tp == 1 or not self.vocab_parallel:
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1, reduction="sum")
        return VocabParallelCrossEntropy.apply(logits.reshape(-1, V), targets.reshape(-1), self.tp_rank * V,
                                               self.tp_group)


def init_weights(cfg, seed):
    """Logical weights {HF name: tensor}: normal(0, initializer_range), norms 1 — the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    from shardproof_torch import logical_shapes
    out = {}
    std = cfg.get("initializer_range", 0.02)
    for name, shape in logical_shapes(cfg).items():
        out[name] = torch.ones(shape) if len(shape) == 1 else torch.randn(shape, generator=g) * std
    return out
