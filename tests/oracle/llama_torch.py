"""Independent PyTorch implementation of the shardproof model, for oracle tests only.

The math is Hugging Face LLaMA's (LlamaRMSNorm, LlamaRotaryEmbedding with rotate_half,
scaled-dot-product causal attention with grouped-query heads, SwiGLU MLP, no biases, optional
tied embeddings), written from the definitions, not from shardproof's code. Weights use the HF
names and (out_features, in_features) layout. Works in float32 or float64.
"""
import json
import math
import struct

import numpy as np
import torch


# ---------------------------------------------------------------- safetensors (written from the spec)
def write_safetensors(path, tensors, metadata=None):
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy().astype(np.float32))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", e
        b, end = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[8 + n + b:8 + n + end], dtype=np.float32).reshape(e["shape"]).copy())
    return out, meta


def write_token_batch(path, tokens):
    tokens = np.ascontiguousarray(np.asarray(tokens, dtype=np.int32))
    rows, cols = tokens.shape
    with open(path, "wb") as f:
        f.write(b"SPTOKBAT" + struct.pack("<IIII", 1, rows, cols, 0))
        f.write(tokens.tobytes())


# ---------------------------------------------------------------- model
def weight_shapes(cfg):
    C, H, KV, F, V = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["ffn_dim"], cfg["vocab_size"]
    D = C // H
    shapes = {"model.embed_tokens.weight": (V, C)}
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (C,)
        shapes[p + "self_attn.q_proj.weight"] = (H * D, C)
        shapes[p + "self_attn.k_proj.weight"] = (KV * D, C)
        shapes[p + "self_attn.v_proj.weight"] = (KV * D, C)
        shapes[p + "self_attn.o_proj.weight"] = (C, H * D)
        shapes[p + "post_attention_layernorm.weight"] = (C,)
        shapes[p + "mlp.gate_proj.weight"] = (F, C)
        shapes[p + "mlp.up_proj.weight"] = (F, C)
        shapes[p + "mlp.down_proj.weight"] = (C, F)
    shapes["model.norm.weight"] = (C,)
    if not cfg.get("tie_embeddings", False):
        shapes["lm_head.weight"] = (V, C)
    return shapes


def random_weights(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in weight_shapes(cfg).items():
        if len(shape) == 1:  # norm weights: around 1 so that their gradients are exercised
            w[name] = 1.0 + 0.1 * torch.randn(shape, generator=g)
        else:
            w[name] = 0.05 * torch.randn(shape, generator=g)
    return w


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(T, D, theta, dtype):
    # angle(t, i) = t * theta^(-2i/D) in float64, rounded once (as docs/kernels.md specifies)
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).float(), torch.sin(ang).float()
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    return cos.to(dtype), sin.to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def forward_loss(cfg, w, tokens):
    """Mean cross-entropy over non-ignored targets; tokens (B, T+1) int, -1 = ignored target."""
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    x_ids, y = tokens[:, :-1], tokens[:, 1:]
    B, T = x_ids.shape
    C, H, KV = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    D = C // H
    eps = cfg.get("norm_eps", 1e-5)
    dtype = w["model.embed_tokens.weight"].dtype
    cos, sin = rope_tables(T, D, cfg.get("rope_theta", 10000.0), dtype)
    # -1 is padding: a zero embedding as input, ignored as a target
    h = w["model.embed_tokens.weight"][x_ids.clamp(min=0)] * (x_ids >= 0).unsqueeze(-1).to(dtype)
    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        xn = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = (xn @ w[p + "self_attn.q_proj.weight"].T).view(B, T, H, D).transpose(1, 2)
        k = (xn @ w[p + "self_attn.k_proj.weight"].T).view(B, T, KV, D).transpose(1, 2)
        v = (xn @ w[p + "self_attn.v_proj.weight"].T).view(B, T, KV, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, H * D)
        h = h + o @ w[p + "self_attn.o_proj.weight"].T
        xn = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate = xn @ w[p + "mlp.gate_proj.weight"].T
        up = xn @ w[p + "mlp.up_proj.weight"].T
        h = h + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_embeddings", False) else w["lm_head.weight"]
    logits = h @ head.T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-1)


def loss_and_grads(cfg, weights, tokens, dtype):
    w = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in weights.items()}
    loss = forward_loss(cfg, w, tokens)
    loss.backward()
    return loss.item(), {k: v.grad.detach() for k, v in w.items()}


def lr_at(step, tr):
    lr, min_lr, warm, total = tr["lr"], tr["min_lr"], tr["warmup_steps"], tr["steps"]
    if step < warm:
        return lr * (step + 1) / warm
    span = max(1, total - warm)
    prog = min(1.0, (step - warm) / span)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * prog))


def adamw(params, tr):
    """torch.optim.AdamW (foreach=False) over `params` (name -> tensor); weight decay on matrices only (shardproof's
    rule)."""
    decay = [v for k, v in params.items() if v.dim() == 2]
    no_decay = [v for k, v in params.items() if v.dim() == 1]
    return torch.optim.AdamW([{"params": decay, "weight_decay": tr["weight_decay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"], foreach=False)


def train(cfg, tr, weights, batches, dtype):
    """AdamW (torch.optim.AdamW, foreach=False) with linear warmup + cosine, global-norm clipping.
    Weight decay applies to matrices only (shardproof's rule). batches: (steps*global_batch, T+1)."""
    w = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in weights.items()}
    opt = adamw(w, tr)
    G = tr["global_batch"]
    losses, norms = [], []
    for s in range(tr["steps"]):
        for grp in opt.param_groups:
            grp["lr"] = lr_at(s, tr)
        opt.zero_grad()
        loss = forward_loss(cfg, w, batches[s * G:(s + 1) * G])
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(w.values()), tr["grad_clip"])
        opt.step()
        losses.append(loss.item())
        norms.append(float(norm))
    return losses, norms, {k: v.detach() for k, v in w.items()}


# ---------------------------------------------------------------- mixed precision (bf16 / fp16)
# The engine's casts (docs/kernels.md §"Every cast"), emulated in float64: the computation between rounding
# points is exact-ish (float64), and every point where the engine stores a 16-bit value rounds there,
# float64 -> float32 -> 16 bits, as the engine rounds its fp32 result. Gradients are rounded where the
# engine rounds the gradient that enters a GEMM's backward. Three autograd pieces make the casts exact:
#   R(x)       forward: round to 16 bits; backward: identity (a stored value; its gradient is not cast)
#   G(x)       forward: identity; backward: round the incoming gradient (the GEMM backward reads 16 bits)
#   softmax16  forward: round(softmax); backward: dS = round(P16 * (g - sum(P16 * g))) with the stored P16
def _round16(x, half):
    return x.to(torch.float32).to(half).to(x.dtype)


# The model's casts go through _cast16, which hands each rounding, in the order the computation makes them, to
# the active observer (flips.CastLog: record the values next to a rounding boundary, or flip one rounding);
# none is active outside tests/oracle/flips.py.
CAST_OBSERVER = None


def _cast16(x, half):
    r = _round16(x, half)
    return r if CAST_OBSERVER is None else CAST_OBSERVER.visit(x, r, half)


class _R(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, half):
        return _cast16(x, half)

    @staticmethod
    def backward(ctx, g):
        return g, None


class _G(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, half):
        ctx.half = half
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return _cast16(g, ctx.half), None


class _Softmax16(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, half):
        p16 = _cast16(torch.softmax(s, dim=-1), half)
        ctx.half = half
        ctx.save_for_backward(p16)
        return p16

    @staticmethod
    def backward(ctx, g):
        (p16,) = ctx.saved_tensors
        return _cast16(p16 * (g - (p16 * g).sum(-1, keepdim=True)), ctx.half), None


def _within_rounding(computed, given, half, bound):
    """Elementwise: is `given` the 16-bit rounding of some value within `bound` of `computed`? (Rounding to
    nearest is monotonic, so the admissible values are those between the roundings of the two ends.) Returns
    (all admissible, how many differ from the rounding of `computed` itself: the flips)."""
    lo, hi = _round16(computed - bound, half), _round16(computed + bound, half)
    ok = bool(((lo <= given) & (given <= hi)).all())
    return ok, int((given != _round16(computed, half)).sum())


def logits_within_gemm_bound(xf, head, logits, half):
    """The engine's 16-bit logits against float64 on the engine's own 16-bit input xf (N, C) and head (V, C):
    each must be the rounding of a value within the fp32 GEMM's bound gamma_K * sum_k |xf_k w_k| (K = C) of the
    exact product. Returns (all within, flips)."""
    xf, head = xf.double(), head.double()
    return _within_rounding(xf @ head.T, logits.double(), half, xf.shape[-1] * 2.0 ** -24 * (xf.abs() @ head.abs().T))


class _Given16(torch.autograd.Function):
    """The engine's 16-bit logits and dlogits stand in for the computed ones. Why: an fp32 value and its
    float64 twin that straddle a 16-bit rounding boundary round one 16-bit ulp apart; at the head, where the
    rounded logits repeat the same values across a row, one such flip moves many elements at once and the casts
    downstream amplify it, so comparing the gradients after it would measure luck, not the engine. Instead each
    engine value is checked locally, against float64 on the engine's own inputs (the logits:
    logits_within_gemm_bound; dlogits here, against the float64 gradient of the given logits: exp_fast's 2 ulp on
    each term and on the sum and four roundings, 2^-19 |g| plus 2^-20 * scale on the target's entry, which alone
    is negative), and the computation continues from the engine's values."""
    @staticmethod
    def forward(ctx, x, given, given_grad, half, scale, stats):
        ctx.save_for_backward(given_grad)
        ctx.half, ctx.scale, ctx.stats = half, scale, stats
        return given.to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (given_grad,) = ctx.saved_tensors
        if ctx.stats is not None:
            bound = 2.0 ** -19 * g.abs() + 2.0 ** -20 * ctx.scale * (g < 0).to(g.dtype)
            ok, flips = _within_rounding(g, given_grad, ctx.half, bound)
            ctx.stats["dlogits_ok"], ctx.stats["dlogits_flips"] = ok, flips
        return given_grad.to(g.dtype), None, None, None, None, None


def forward_loss_mixed(cfg, w, tokens, half, given=None):
    """forward_loss with the engine's 16-bit casts; w holds the (already 16-bit) weights in float64. given
    (optional): {"logits", "dlogits": the engine's (B, T, V) 16-bit values widened, "scale": the loss scale over
    the target count, "stats": a dict to fill with _Given16's checks, or None not to check}."""
    R = lambda x: _R.apply(x, half)  # noqa: E731
    G = lambda x: _G.apply(x, half)  # noqa: E731
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    x_ids, y = tokens[:, :-1], tokens[:, 1:]
    B, T = x_ids.shape
    C, H, KV = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    D = C // H
    eps = cfg.get("norm_eps", 1e-5)
    dtype = w["model.embed_tokens.weight"].dtype
    cos, sin = rope_tables(T, D, cfg.get("rope_theta", 10000.0), dtype)
    h = w["model.embed_tokens.weight"][x_ids.clamp(min=0)] * (x_ids >= 0).unsqueeze(-1).to(dtype)  # fp32 residual
    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    q_end, k_end = H * D, (H + KV) * D
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        xn = R(rms_norm(h, w[p + "input_layernorm.weight"], eps))
        wqkv = torch.cat([w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"],
                          w[p + "self_attn.v_proj.weight"]], 0)
        qkv = G(xn @ wqkv.T)  # fp32 product; its gradient (after RoPE's backward) is rounded
        q = qkv[..., :q_end].reshape(B, T, H, D).transpose(1, 2)
        k = qkv[..., q_end:k_end].reshape(B, T, KV, D).transpose(1, 2)
        v = qkv[..., k_end:].reshape(B, T, KV, D).transpose(1, 2)
        q = R(q * cos + rotate_half(q) * sin)
        k = R(k * cos + rotate_half(k) * sin)
        v = R(v)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        att = _Softmax16.apply(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, half)
        o = G(R(att @ v)).transpose(1, 2).reshape(B, T, H * D)
        h = h + G(o @ w[p + "self_attn.o_proj.weight"].T)
        xn = R(rms_norm(h, w[p + "post_attention_layernorm.weight"], eps))
        wgu = torch.cat([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]], 0)
        gu = R(G(xn @ wgu.T))
        F = gu.shape[-1] // 2
        act = R(torch.nn.functional.silu(gu[..., :F]) * gu[..., F:])
        h = h + G(act @ w[p + "mlp.down_proj.weight"].T)
    xf = R(rms_norm(h, w["model.norm.weight"], eps))
    head = w["model.embed_tokens.weight"] if cfg.get("tie_embeddings", False) else w["lm_head.weight"]
    if given is None:
        logits = R(G(xf @ head.T))  # 16-bit logits (their gradient rounded too); the loss is fp32 on them, widened
    else:
        logits = _Given16.apply(xf @ head.T, given["logits"], given["dlogits"], half, given["scale"], given["stats"])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-1)


def loss_and_grads_mixed(cfg, weights16, tokens, half, grad_half=None, loss_scale=1.0, dtype=torch.float64,
                         given=None):
    """Loss and gradients of the mixed-precision model computed in `dtype` between the casts; weights16 are
    16-bit values (any float dtype). The backward starts from loss * loss_scale (fp16 loss scaling: the
    gradient casts see scaled values); grad_half rounds every (scaled) gradient once to that dtype (the
    engine's 16-bit grad_dtype); the gradients are then divided by loss_scale. given: forward_loss_mixed's
    (its "scale" is filled in here)."""
    w = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in weights16.items()}
    if given is not None:
        targets = int((torch.as_tensor(tokens)[:, 1:] >= 0).sum())
        given = dict(given, scale=loss_scale / targets)
    loss = forward_loss_mixed(cfg, w, tokens, half, given)
    (loss * loss_scale).backward()
    grads = {k: v.grad.detach() for k, v in w.items()}
    if grad_half is not None:
        grads = {k: _cast16(g, grad_half) for k, g in grads.items()}
    return loss.item(), {k: g / loss_scale for k, g in grads.items()}


# ---------------------------------------------------------------- mixed-precision training (a trajectory)
class LossScaler:
    """DeepSpeed's DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py), the recipe torch.cuda.amp.GradScaler
    also follows: an overflowing step is skipped; the scale halves once `hysteresis` overflows have been seen
    (never below min_scale), and doubles after `window` clean steps."""

    def __init__(self, initial_scale_power=16, loss_scale_window=1000, hysteresis=2, consecutive_hysteresis=False,
                 min_loss_scale=1.0):
        self.scale, self.window, self.hysteresis = 2.0 ** initial_scale_power, loss_scale_window, hysteresis
        self.cur_hysteresis, self.consecutive, self.min_scale = hysteresis, consecutive_hysteresis, min_loss_scale
        self.iter, self.last_overflow = 0, -1

    def update(self, overflow):
        if overflow:
            if self.hysteresis == 1 or self.cur_hysteresis == 1:
                self.scale = max(self.scale / 2, self.min_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow = self.iter
        else:
            if self.consecutive:
                self.cur_hysteresis = self.hysteresis
            if (self.iter - self.last_overflow) % self.window == 0:
                if not self.consecutive:
                    self.cur_hysteresis = self.hysteresis
                self.scale *= 2
        self.iter += 1
        return overflow


def _tree_sum(parts, grad_half):
    """The canonical reduction tree over micro-batches (docs/equivalence.md §"The canonical tree"): [lo, hi)
    splits at lo + bit_floor(hi - lo - 1); with 16-bit gradients each node is summed widened and rounded once."""
    def node(lo, hi):
        if hi - lo == 1:
            return parts[lo]
        mid = lo + (1 << ((hi - lo - 1).bit_length() - 1))
        a, b = node(lo, mid), node(mid, hi)
        return {k: _round16(a[k] + b[k], grad_half) if grad_half is not None else a[k] + b[k] for k in a}
    return node(0, len(parts))


def train_mixed(cfg, tr, weights, batches, half, grad_half=None, dtype=torch.float64, fp16=None):
    """The mixed-precision recipe (Micikevicius et al. 2018; DeepSpeed's fp16/bf16 optimizers): fp32 master weights
    (held in `dtype`: float64 for the truth, float32 for PyTorch's own computation), each step's 16-bit working
    copy = the masters rounded to `half`, forward and backward with the engine's casts (forward_loss_mixed) on
    every micro-batch with the per-token loss gradient scale / tokens of the step, each micro-batch's gradient
    rounded to `grad_half` (16-bit gradients) and summed over the canonical tree, a non-finite gradient skipping
    the step (fp16: the dynamic loss scaler, `fp16` = its [fp16] settings), the norm unscaled, clipping,
    AdamW (torch.optim.AdamW) on the masters with the gradient × clip / scale. Returns per-step losses, grad
    norms, loss scales, skips, and the final masters."""
    masters = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in weights.items()}
    opt = adamw(masters, tr)
    scaler = LossScaler(**(fp16 or {})) if fp16 is not None else None
    G, B = tr["global_batch"], tr["micro_batch_size"]
    out = {"loss": [], "grad_norm": [], "loss_scale": [], "skipped": []}
    for s in range(tr["steps"]):
        step = torch.as_tensor(batches[s * G:(s + 1) * G], dtype=torch.long)
        tokens = int((step[:, 1:] >= 0).sum())
        scale = scaler.scale if scaler else 1.0
        w16 = {k: _round16(v.detach(), half) for k, v in masters.items()}
        parts, loss_sum = [], 0.0
        for mb in range(G // B):
            tok = step[mb * B:(mb + 1) * B]
            w = {k: v.clone().requires_grad_(True) for k, v in w16.items()}
            loss = forward_loss_mixed(cfg, w, tok, half)
            n = int((tok[:, 1:] >= 0).sum())
            (loss * (scale * n / tokens)).backward()
            parts.append({k: _round16(v.grad, grad_half) if grad_half is not None else v.grad for k, v in w.items()})
            loss_sum += loss.item() * n
        g = _tree_sum(parts, grad_half)
        finite = all(bool(torch.isfinite(x).all()) for x in g.values())
        norm = math.sqrt(sum(float((x.double() ** 2).sum()) for x in g.values())) / scale
        skipped = scaler.update(not finite) if scaler else not finite
        out["loss"].append(loss_sum / tokens)
        out["grad_norm"].append(norm)
        out["loss_scale"].append(scale)
        out["skipped"].append(skipped)
        if skipped:
            continue
        clip = min(1.0, tr["grad_clip"] / (norm + 1e-6))
        for k, v in masters.items():
            v.grad = (g[k] * (clip / scale)).to(dtype)
        for grp in opt.param_groups:
            grp["lr"] = lr_at(s, tr)
        opt.step()
    return out, {k: v.detach() for k, v in masters.items()}
