#!/usr/bin/env python3
"""The recorder's device digest on a GPU (issue 44 item 2; docs/performance.md §device digest): checks that
checksum_device's Partial of CUDA tensors equals checksum.py's NumPy Partial bit for bit (every field), and measures
what the digest costs as a share of a training step (target <= 5 %).

    bench/gpu_digest_check.py [--device cuda|cpu] [--compile] [--preset small|hf100m] [--steps 4]
                              [--micro-batch B] [--seq T]

1. Tensors: random fp32 tensors on the device (normals, every exponent, denormals, +-0, NaN/Inf, values below a
   chunk's window, sizes that are not whole chunks, several device blocks, column shards, boxes, an index function
   built on the host), and the recorder's staging (pinned asynchronous copies, one synchronization): every field
   and every copied byte equal to the host's.
2. A step: Hugging Face's LlamaForCausalLM (built from a config, fp32, no TF32) on the device, AdamW, B x T
   random tokens; the step (forward, backward, optimizer) timed over --steps steps after a warm-up; then, on
   the same tensors, the digest of every gradient and every parameter (all enqueued, one synchronization, the
   host combination), the recorder's whole staging per step (the digests, the gradients copied for the step files
   and the parameters copied for their SHA-256s, the SHA-256s) and NumPy's digest of the host copies. Step 0's
   gradients and the parameters after it are checked against NumPy bit for bit.
Prints a table; exits 1 on any mismatch, 0 otherwise (the share is reported against the target, never asserted:
it depends on the tokens per step, the digest's cost on the parameter count only). --compile fuses each pass with
torch.compile (SHARDPROOF_DIGEST_COMPILE=1), its first call compiling. --device cpu runs the same on the CPU (the
small preset), as done where no GPU is lent. Runs in well under 5 minutes on one H100 (hf100m, eager or compiled).
"""
import argparse
import hashlib
import os
import statistics
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from shardproof_torch import checksum, checksum_device, staging  # noqa: E402

CHUNK = checksum.CHUNK
PRESETS = {  # (vocab, hidden, MLP, layers, heads, kv heads, micro-batch, seq)
    "small": (2048, 256, 688, 4, 8, 4, 4, 128),
    # issue 42's size: 105.8 M parameters; 8 x 512 = 4,096 tokens per step
    "hf100m": (32000, 768, 2048, 8, 12, 12, 8, 512),
}


def fields(p):
    return {k: getattr(p, k) for k in checksum.Partial.__slots__}


def kinds(rng, n):
    """The value kinds of the bit-for-bit check, n fp32 values each."""
    normal = rng.standard_normal(n).astype(np.float32)
    wide = (rng.standard_normal(n) * 2.0 ** rng.integers(-149, 120, n)).astype(np.float32)
    tiny = (rng.integers(0, 0x01000000, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31))
    zeros = np.zeros(n, np.float32)
    zeros[::3] = -0.0
    bad = normal.copy()
    bad[::7], bad[3::11], bad[5::13] = np.nan, np.inf, -np.inf
    below = normal * np.float32(1e-3)
    below[::CHUNK // 2] = 1e6
    below[5::997] = np.float32(1e-20)
    return {"normal": normal, "every-exponent": wide, "denormal": tiny.view(np.float32), "zeros": zeros,
            "nan-inf": bad, "below-window": below}


def check_tensors(device, rng):
    """(cases, mismatches): device partials and staged copies against NumPy."""
    cases, bad = 0, []
    sizes = [1, CHUNK + 1, 3 * CHUNK - 5, checksum_device.BLOCK + 3 * CHUNK + 7]
    for n in sizes:
        for name, x in kinds(rng, n).items():
            for label, idx in (("contiguous", checksum.contiguous_indices(1 << 40)),
                               ("column", checksum.Columns(n // 3 or 1, 4 * (n // 3 or 1), 17, 5))):
                cases += 1
                got = checksum_device.partial_of_tensor(torch.from_numpy(x).to(device), idx)
                if fields(got) != fields(checksum.partial_of(x, idx)):
                    bad.append(f"{name} n={n} {label}")
    shape, offsets, sizes_ = (64, 3000), (7, 1000), (40, 1500)
    x = kinds(rng, 40 * 1500)["every-exponent"]
    host_built = lambda c0, c1: np.arange(10 ** 6 - c0, 10 ** 6 - c1, -1, dtype=np.int64).astype(np.uint64)  # noqa
    for idx in (checksum.box_indices(shape, offsets, sizes_, 0), host_built):
        cases += 1
        if fields(checksum_device.partial_of_tensor(torch.from_numpy(x).to(device), idx)) != \
                fields(checksum.partial_of(x, idx)):
            bad.append("box / host-built indices")
    ts = [torch.from_numpy(v).to(device) for v in kinds(rng, 5000).values()]
    st = staging.Staged(ts, "auto")
    parts = [st.partial(i, 0, 5000, checksum.contiguous_indices(0)) for i in range(len(ts))]
    for t, h, p in zip(ts, st.arrays(), parts):
        cases += 1
        x = t.cpu().numpy()
        if h.tobytes() != x.tobytes() or fields(p()) != fields(checksum.partial_of(x, checksum.contiguous_indices(0))):
            bad.append("staged copy")
    return cases, bad


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def digest_all(tensors):
    """Partials of every tensor: all enqueued, then the results (their first waits for the device once)."""
    pend = [checksum_device.begin(t.detach().reshape(-1), checksum.contiguous_indices(0)) for t in tensors]
    return [p.result() for p in pend]


def staged_step(grads, params):
    """What the recorder does per step on the device path: digests and copies of every gradient (the step file)
    and parameter (their SHA-256s), one wait each, then the SHA-256s."""
    out = []
    for ts in (grads, params):
        st = staging.Staged(ts, "device")
        parts = [st.partial(i, 0, st.numel(i), checksum.contiguous_indices(0)) for i in range(len(ts))]
        out += [hashlib.sha256(a.data).hexdigest() for a in st.arrays()] + [p().digest() for p in parts]
    return out


def timed(f, device):
    sync(device)
    t0 = time.perf_counter()
    r = f()
    sync(device)
    return time.perf_counter() - t0, r


def model_and_batch(args, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    vocab, dim, ffn, layers, heads, kv, mb, seq = PRESETS[args.preset]
    mb, seq = args.micro_batch or mb, args.seq or seq
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=seq,
                      tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=torch.float32)
    ids = torch.randint(0, vocab, (mb, seq), device=device)
    return model, ids


def check_step(args, device):
    """(rows, mismatches) of the training-step measurement."""
    torch.backends.cuda.matmul.allow_tf32 = False
    model, ids = model_and_batch(args, device)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    step_s, digest_s, staged_s, numpy_s, bad = [], [], [], [], []
    for step in range(args.steps + 1):
        def train():
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        t_fb, _ = timed(train, device)
        grads = [p.grad for p in params]
        t_dig, got = timed(lambda: digest_all(grads), device)
        if step == 0:
            bad += [f"grad {i}" for i, (g, p) in enumerate(zip(grads, got))
                    if fields(p) != fields(checksum.partial_of(g.detach().reshape(-1).cpu().numpy(),
                                                               checksum.contiguous_indices(0)))]
        t_opt, _ = timed(opt.step, device)
        t_dig2, got = timed(lambda: digest_all(params), device)
        if step == 0:
            bad += [f"param {i}" for i, (q, p) in enumerate(zip(params, got))
                    if fields(p) != fields(checksum.partial_of(q.detach().reshape(-1).cpu().numpy(),
                                                               checksum.contiguous_indices(0)))]
        t_staged, _ = timed(lambda: staged_step(grads, params), device)
        host = [t.detach().reshape(-1).cpu().numpy() for t in grads + params]
        t_np, _ = timed(lambda: [checksum.partial_of(x, checksum.contiguous_indices(0)) for x in host], device)
        opt.zero_grad(set_to_none=False)
        if step > 0:  # step 0 warms up (allocations, cuBLAS, a first compile)
            step_s.append(t_fb + t_opt)
            digest_s.append(t_dig + t_dig2)
            staged_s.append(t_staged)
            numpy_s.append(t_np)
    n_params = sum(p.numel() for p in params)
    med = statistics.median
    step = med(step_s)
    rows = [("parameters", f"{n_params / 1e6:.1f} M"), ("tokens per step", f"{ids.numel()}"),
            ("step (forward, backward, AdamW)", f"{step * 1e3:.1f} ms"),
            ("device digest, grads + params", f"{med(digest_s) * 1e3:.1f} ms = {100 * med(digest_s) / step:.1f} % "
                                              f"of the step (target <= 5 %)"),
            ("recorder staging per step (digests, copies, SHA-256)",
             f"{med(staged_s) * 1e3:.1f} ms = {100 * med(staged_s) / step:.1f} %"),
            ("NumPy digest of the host copies", f"{med(numpy_s) * 1e3:.1f} ms = {100 * med(numpy_s) / step:.1f} %")]
    return rows, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--compile", action="store_true", help="torch.compile each pass (SHARDPROOF_DIGEST_COMPILE)")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="default: hf100m on cuda, small on cpu")
    ap.add_argument("--steps", type=int, default=4, help="timed steps after one warm-up step")
    ap.add_argument("--micro-batch", type=int)
    ap.add_argument("--seq", type=int)
    args = ap.parse_args()
    device = torch.device(args.device)
    args.preset = args.preset or ("small" if device.type == "cpu" else "hf100m")
    checksum_device.COMPILE = args.compile
    t0 = time.perf_counter()
    cases, bad = check_tensors(device, np.random.default_rng(0))
    rows = [("device", torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
            ("torch", torch.__version__), ("mode", "compiled" if args.compile else "eager"),
            ("bit-for-bit tensor cases", f"{cases - len(bad)} of {cases} equal")]
    step_rows, step_bad = check_step(args, device)
    bad += step_bad
    rows += step_rows + [("step tensors bit for bit", "all equal" if not step_bad else f"{len(step_bad)} differ"),
                         ("wall time of this check", f"{time.perf_counter() - t0:.0f} s")]
    width = max(len(k) for k, _ in rows)
    print(f"| {'what':<{width}} | figure |\n|{'-' * (width + 2)}|---|")
    for k, v in rows:
        print(f"| {k:<{width}} | {v} |")
    if bad:
        print("MISMATCH: " + "; ".join(bad[:20]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
